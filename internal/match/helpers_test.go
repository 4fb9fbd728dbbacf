// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package match

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

var t0 = time.Date(2026, time.March, 1, 9, 0, 0, 0, time.UTC)

var configMapGVK = corev1.SchemeGroupVersion.WithKind("ConfigMap")

func newPolicy(name string, opts ...func(*v1alpha1.TimeoutPolicy)) *v1alpha1.TimeoutPolicy {
	p := &v1alpha1.TimeoutPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: v1alpha1.TimeoutPolicySpec{
			Target:     v1alpha1.Target{APIVersion: "v1", Kind: "ConfigMap"},
			DefaultTTL: "1h",
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func priority(n int32) func(*v1alpha1.TimeoutPolicy) {
	return func(p *v1alpha1.TimeoutPolicy) { p.Spec.Priority = n }
}

func defaultTTL(d v1alpha1.Duration) func(*v1alpha1.TimeoutPolicy) {
	return func(p *v1alpha1.TimeoutPolicy) { p.Spec.DefaultTTL = d }
}

func selecting(l map[string]string) func(*v1alpha1.TimeoutPolicy) {
	return func(p *v1alpha1.TimeoutPolicy) { p.Spec.Selector = &metav1.LabelSelector{MatchLabels: l} }
}

func inNamespaces(l map[string]string) func(*v1alpha1.TimeoutPolicy) {
	return func(p *v1alpha1.TimeoutPolicy) { p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: l} }
}

func target(apiVersion, kind string) func(*v1alpha1.TimeoutPolicy) {
	return func(p *v1alpha1.TimeoutPolicy) { p.Spec.Target = v1alpha1.Target{APIVersion: apiVersion, Kind: kind} }
}
