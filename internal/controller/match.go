// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"cmp"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// targetGVK is the kind a policy governs.
func targetGVK(p *v1alpha1.TimeoutPolicy) schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(p.Spec.Target.APIVersion, p.Spec.Target.Kind)
}

// candidate is a policy with its selectors and schedule parsed once.
type candidate struct {
	*v1alpha1.TimeoutPolicy
	selector    labels.Selector
	nsSelector  labels.Selector
	schedule    expiry.Schedule
	scheduleErr error
}

// candidates returns the policies whose target is gvk's kind, ranked so that each
// takes precedence over those after it: the higher priority first, then
// the name that sorts first. A policy whose selectors do not parse matches
// nothing and is left out; its own status says why.
func candidates(all []v1alpha1.TimeoutPolicy, gvk schema.GroupVersionKind) []candidate {
	var cs []candidate
	for i := range all {
		p := &all[i]
		// By group and kind: policies naming two versions of one kind
		// govern the same objects, and must be ranked against each other.
		if p.DeletionTimestamp != nil || targetGVK(p).GroupKind() != gvk.GroupKind() {
			continue
		}
		c := candidate{TimeoutPolicy: p}
		var err error
		if c.selector, err = selector(p.Spec.Selector); err != nil {
			continue
		}
		if c.nsSelector, err = selector(p.Spec.NamespaceSelector); err != nil {
			continue
		}
		c.schedule, c.scheduleErr = expiry.NewSchedule(p.Spec)
		cs = append(cs, c)
	}
	slices.SortFunc(cs, func(a, b candidate) int {
		if a.Spec.Priority != b.Spec.Priority {
			return cmp.Compare(b.Spec.Priority, a.Spec.Priority)
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return cs
}

func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// object is what matching reads of a governed object.
type object struct {
	labels     map[string]string
	namespaced bool
	// nsLabels returns the labels of the object's namespace; it is called
	// only when a namespace selector needs them.
	nsLabels func() (map[string]string, error)
}

func (c candidate) matches(o object) (bool, error) {
	if !c.selector.Matches(labels.Set(o.labels)) {
		return false, nil
	}
	if !o.namespaced || c.nsSelector.Empty() {
		return true, nil
	}
	nl, err := o.nsLabels()
	if err != nil {
		return false, err
	}
	return c.nsSelector.Matches(labels.Set(nl)), nil
}

// matching returns the candidates that select o, in rank order: the first
// one governs o. A policy with an invalid schedule still governs (and does
// nothing) so that a typo in it never hands its objects to a policy with a
// shorter lifetime.
func matching(ranked []candidate, o object) ([]candidate, error) {
	var out []candidate
	for _, c := range ranked {
		ok, err := c.matches(o)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, c)
		}
	}
	return out, nil
}
