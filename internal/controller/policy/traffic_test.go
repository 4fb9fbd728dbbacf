// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/usage"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

func TestAPolicyAskingForTrafficWithoutPrometheusSaysSoOnceAndStaysReady(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	p := fixture.Policy("traffic", func(p *v1alpha1.TimeoutPolicy) {
		p.Spec.IdleTTL = "1h"
		p.Spec.Traffic = &v1alpha1.Traffic{Query: "up"}
	})
	h := newPolicyHarness(t, t0, p)
	h.r.Traffic = &usage.Traffic{}
	for range 2 {
		_, got := h.reconcile(t, "traffic")
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionTraffic)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonTrafficNotConfigured {
			t.Fatalf("Traffic condition %+v; want False NotConfigured", c)
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) {
			t.Fatalf("Ready %+v; want True: nothing else changes", meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady))
		}
	}
	if got := fixture.Drain(h.rec); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+ReasonTrafficNotConfigured) {
		t.Fatalf("events %q; want one Warning %s", got, ReasonTrafficNotConfigured)
	}

	// Without traffic, the condition goes.
	cur := &v1alpha1.TimeoutPolicy{}
	if err := h.client.Get(context.Background(), types.NamespacedName{Name: "traffic"}, cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Traffic = nil
	if err := h.client.Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	if _, got := h.reconcile(t, "traffic"); meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionTraffic) != nil {
		t.Fatalf("conditions %+v; want no Traffic condition", got.Status.Conditions)
	}
}

func TestValidateNamesTheTrafficField(t *testing.T) {
	p := &v1alpha1.TimeoutPolicy{Spec: v1alpha1.TimeoutPolicySpec{IdleTTL: "1h", Target: v1alpha1.Target{APIVersion: "amphitheatre.app/v1", Kind: "Playbook"},
		Traffic: &v1alpha1.Traffic{Query: "up", Interval: "1s"}}}
	if err := Validate(p); err == nil || !strings.Contains(err.Error(), "spec.traffic.interval") {
		t.Fatalf("validate: %v; want an error about spec.traffic.interval", err)
	}
}
