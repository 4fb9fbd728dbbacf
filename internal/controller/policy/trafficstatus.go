// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
)

// Event reasons on TimeoutPolicies with spec.traffic.
const (
	// ReasonTrafficNotConfigured: the policy asks for traffic but the
	// controller runs without --prometheus-url.
	ReasonTrafficNotConfigured = "TrafficNotConfigured"
	// ReasonTrafficQueryFailed: the policy's traffic query failed; traffic
	// does not count as use until it succeeds again.
	ReasonTrafficQueryFailed = "TrafficQueryFailed"
)

// setTraffic sets p's Traffic condition from the last evaluation of its
// query, and removes it from a policy that asks for no traffic.
func (r *PolicyReconciler) setTraffic(p *v1alpha1.TimeoutPolicy) {
	if p.Spec.Traffic == nil {
		meta.RemoveStatusCondition(&p.Status.Conditions, v1alpha1.ConditionTraffic)
		return
	}
	if c := r.Traffic.Condition(p); c != nil {
		meta.SetStatusCondition(&p.Status.Conditions, *c)
	}
}

// warnTraffic records a Warning when the Traffic condition has just turned
// False, or False for another reason: it is called once the status that
// says so is written.
func (r *PolicyReconciler) warnTraffic(orig, p *v1alpha1.TimeoutPolicy) {
	now := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionTraffic)
	if now == nil || now.Status != metav1.ConditionFalse {
		return
	}
	if was := meta.FindStatusCondition(orig.Status.Conditions, v1alpha1.ConditionTraffic); was != nil && was.Status == now.Status && was.Reason == now.Reason {
		return
	}
	reason := ReasonTrafficQueryFailed
	if now.Reason == v1alpha1.ReasonTrafficNotConfigured {
		reason = ReasonTrafficNotConfigured
	}
	r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, reason, kube.ActionEvaluate, "%s", now.Message)
}
