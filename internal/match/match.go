// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package match decides which TimeoutPolicy governs an object, and says why the others do not.
package match

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// TargetGVK is the kind a policy governs.
func TargetGVK(p *v1alpha1.TimeoutPolicy) schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(p.Spec.Target.APIVersion, p.Spec.Target.Kind)
}

// Selector parses a label selector; nil selects everything.
func Selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// mightSelect returns a selector for every object s might select once its
// invalid requirements are fixed: the requirements that parse, ANDed.
// Leaving a requirement out only widens a selector, so the objects a
// policy meant to select are all among these.
func mightSelect(s *metav1.LabelSelector) labels.Selector {
	sel := labels.NewSelector()
	for k, v := range s.MatchLabels {
		if r, err := labels.NewRequirement(k, selection.Equals, []string{v}); err == nil {
			sel = sel.Add(*r)
		}
	}
	for _, e := range s.MatchExpressions {
		one, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{e}})
		if err != nil {
			continue
		}
		reqs, _ := one.Requirements()
		sel = sel.Add(reqs...)
	}
	return sel
}

// Candidate is a policy for an object's kind, with its selectors and
// schedule parsed once.
type Candidate struct {
	*v1alpha1.TimeoutPolicy
	// Selector and NamespaceSelector are, when they do not parse, what
	// they might select (their requirements that parse).
	Selector          labels.Selector
	NamespaceSelector labels.Selector
	Schedule          expiry.Schedule
	// SpecErr is set when part of the policy's spec cannot be used: a
	// duration, a selector. Such a policy still governs every object it
	// might select, and does nothing to them, so that a typo in it never
	// hands them to a policy with a shorter lifetime.
	SpecErr error
}

// Reason says why a policy does not govern an object.
type Reason string

// The reasons a policy does not govern an object.
const (
	// OtherKind: the policy targets another group or kind.
	OtherKind Reason = "OtherKind"
	// Deleting: the policy is being deleted.
	Deleting Reason = "Deleting"
	// LabelsNotSelected: the object's labels do not satisfy the selector.
	LabelsNotSelected Reason = "LabelsNotSelected"
	// NamespaceNotSelected: the object's namespace's labels do not satisfy
	// the namespace selector.
	NamespaceNotSelected Reason = "NamespaceNotSelected"
	// Outranked: the policy selects the object, but another one that does
	// too takes precedence.
	Outranked Reason = "Outranked"
)

// Mismatch is why one policy does not govern an object.
type Mismatch struct {
	Reason Reason
	// Detail says it for people: which label, which kind, which policy.
	Detail string
}

// Rejected is a policy left out before matching, with the reason.
type Rejected struct {
	Policy *v1alpha1.TimeoutPolicy
	Mismatch
}

// Candidates returns the policies whose target is gvk's kind, ranked so
// that each takes precedence over those after it: the higher priority
// first, then the name that sorts first. A policy whose spec cannot be
// used is ranked like the others, with SpecErr set.
func Candidates(all []v1alpha1.TimeoutPolicy, gvk schema.GroupVersionKind) []Candidate {
	cs, _ := Rank(all, gvk)
	return cs
}

// Rank is Candidates, and also returns the policies it leaves out with
// the reason for each, in the order of all.
func Rank(all []v1alpha1.TimeoutPolicy, gvk schema.GroupVersionKind) ([]Candidate, []Rejected) {
	var cs []Candidate
	var out []Rejected
	for i := range all {
		p := &all[i]
		// By group and kind: policies naming two versions of one kind
		// govern the same objects, and must be ranked against each other.
		if t := TargetGVK(p); t.GroupKind() != gvk.GroupKind() {
			out = append(out, Rejected{p, Mismatch{OtherKind, fmt.Sprintf("targets %s %s, not %s", t.GroupVersion(), t.Kind, gvk.Kind)}})
			continue
		}
		if p.DeletionTimestamp != nil {
			out = append(out, Rejected{p, Mismatch{Deleting, "is being deleted"}})
			continue
		}
		c := Candidate{TimeoutPolicy: p}
		var errs []error
		var err error
		c.Schedule, err = expiry.NewSchedule(p.Spec)
		errs = append(errs, err)
		if c.Selector, err = Selector(p.Spec.Selector); err != nil {
			c.Selector = mightSelect(p.Spec.Selector)
			errs = append(errs, fmt.Errorf("spec.selector: %w", err))
		}
		if c.NamespaceSelector, err = Selector(p.Spec.NamespaceSelector); err != nil {
			c.NamespaceSelector = mightSelect(p.Spec.NamespaceSelector)
			errs = append(errs, fmt.Errorf("spec.namespaceSelector: %w", err))
		}
		c.SpecErr = errors.Join(errs...)
		cs = append(cs, c)
	}
	slices.SortFunc(cs, func(a, b Candidate) int {
		if a.Spec.Priority != b.Spec.Priority {
			return cmp.Compare(b.Spec.Priority, a.Spec.Priority)
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return cs, out
}

// Object is what matching reads of a governed object.
type Object struct {
	Labels     map[string]string
	Namespaced bool
	// NamespaceLabels returns the labels of the object's namespace; it is
	// called only when a namespace selector needs them.
	NamespaceLabels func() (map[string]string, error)
}

// Check returns nil when c selects o, or why it does not.
func (c Candidate) Check(o Object) (*Mismatch, error) {
	if !c.Selector.Matches(labels.Set(o.Labels)) {
		return &Mismatch{LabelsNotSelected, fmt.Sprintf("the object's labels do not satisfy spec.selector %q", c.Selector.String())}, nil
	}
	if !o.Namespaced || c.NamespaceSelector.Empty() {
		return nil, nil
	}
	nl, err := o.NamespaceLabels()
	if err != nil {
		return nil, err
	}
	if !c.NamespaceSelector.Matches(labels.Set(nl)) {
		return &Mismatch{NamespaceNotSelected, fmt.Sprintf("the labels of the object's namespace do not satisfy spec.namespaceSelector %q", c.NamespaceSelector.String())}, nil
	}
	return nil, nil
}

// Matches reports whether c selects o.
func (c Candidate) Matches(o Object) (bool, error) {
	m, err := c.Check(o)
	return m == nil && err == nil, err
}

// Matching returns the candidates that select o, in rank order: the first
// one governs o. A policy whose spec cannot be used still governs (and
// does nothing) so that a typo in it never hands its objects to a policy
// with a shorter lifetime.
func Matching(ranked []Candidate, o Object) ([]Candidate, error) {
	var out []Candidate
	for _, c := range ranked {
		ok, err := c.Matches(o)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, c)
		}
	}
	return out, nil
}

// Verdict is what one policy makes of an object.
type Verdict struct {
	Policy *v1alpha1.TimeoutPolicy
	// Candidate is set for the policies of the object's kind that were
	// ranked; it carries the parsed schedule.
	Candidate *Candidate
	// Governs is set on the one policy that governs the object.
	Governs bool
	// Mismatch says why the policy does not govern it; nil when it does.
	Mismatch *Mismatch
}

// Explain says, for every policy in all, whether it governs o (of kind
// gvk) and why not: the governing policy first, then the others that
// select it in rank order, then the ranked ones that do not select it,
// then those left out before ranking.
func Explain(all []v1alpha1.TimeoutPolicy, gvk schema.GroupVersionKind, o Object) ([]Verdict, error) {
	ranked, rejected := Rank(all, gvk)
	var selected, unselected []Verdict
	for i := range ranked {
		c := &ranked[i]
		m, err := c.Check(o)
		if err != nil {
			return nil, err
		}
		v := Verdict{Policy: c.TimeoutPolicy, Candidate: c, Mismatch: m}
		if m != nil {
			unselected = append(unselected, v)
			continue
		}
		if len(selected) == 0 {
			v.Governs = true
		} else {
			first := selected[0].Policy
			v.Mismatch = &Mismatch{Outranked, outrankedBy(c.TimeoutPolicy, first)}
		}
		selected = append(selected, v)
	}
	out := append(selected, unselected...)
	for _, r := range rejected {
		out = append(out, Verdict{Policy: r.Policy, Mismatch: &r.Mismatch})
	}
	return out, nil
}

func outrankedBy(p, winner *v1alpha1.TimeoutPolicy) string {
	if winner.Spec.Priority != p.Spec.Priority {
		return fmt.Sprintf("selects it, but policy %s has a higher priority (%d > %d)", winner.Name, winner.Spec.Priority, p.Spec.Priority)
	}
	return fmt.Sprintf("selects it, but policy %s has the same priority (%d) and a name that sorts first", winner.Name, p.Spec.Priority)
}
