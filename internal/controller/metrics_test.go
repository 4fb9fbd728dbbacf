// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

func TestPolicyStatusCountsExpiriesAheadByHorizon(t *testing.T) {
	now := t0.Add(time.Hour)
	h := newPolicyHarness(t, now,
		fixture.Policy("horizons"),
		newConfigMap("overdue", ttl("10m")),
		newConfigMap("in-half-an-hour", ttl("90m")),
		newConfigMap("in-five-hours", ttl("6h")),
		newConfigMap("in-three-days", ttl("3d")),
		newConfigMap("in-ten-days", ttl("10d")),
		newConfigMap("kept", annotated(expiry.AnnotationKeep, "true")),
	)
	p := &v1alpha1.TimeoutPolicy{}
	if err := h.client.Get(context.Background(), types.NamespacedName{Name: "horizons"}, p); err != nil {
		t.Fatal(err)
	}
	if _, err := h.r.count(context.Background(), p, configMapGVK, true, nil); err != nil {
		t.Fatalf("count: %v", err)
	}
	t.Cleanup(func() { forgetPolicyMetrics("horizons") })
	for _, tt := range []struct {
		within string
		want   float64
	}{
		{"1h", 2}, // the overdue one is due already
		{"1d", 3},
		{"1w", 4}, // never the kept one, nor the one ten days out
	} {
		if got := gaugeValue(t, objectsExpiring.WithLabelValues("horizons", tt.within)); got != tt.want {
			t.Errorf("objects expiring within %s = %v, want %v", tt.within, got, tt.want)
		}
	}

	forgetPolicyMetrics("horizons")
	if n := objectsExpiring.DeletePartialMatch(prometheus.Labels{"policy": "horizons"}); n != 0 {
		t.Errorf("after the policy is forgotten %d series of it remain, want none", n)
	}
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// An alert on increase(...{result="failed"}) cannot see a series born at
// 1; the series of every known label value must exist from the start.
func TestCountersOfKnownOutcomesAreExportedFromTheStart(t *testing.T) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				exported[f.GetName()+"/"+l.GetName()+"="+l.GetValue()] = true
			}
		}
	}
	for _, want := range []string{
		"timeout_controller_deletions_total/result=deleted",
		"timeout_controller_deletions_total/result=failed",
		"timeout_controller_deletions_total/result=conflict",
		"timeout_controller_deletions_total/result=would_delete",
		"timeout_controller_deletions_throttled_total/cap=policy",
		"timeout_controller_deletions_throttled_total/cap=global",
		"timeout_controller_archives_total/result=ok",
		"timeout_controller_archives_total/result=error",
		"timeout_controller_connect_uses_total/result=unverified",
	} {
		if !exported[want] {
			t.Errorf("%s is not exported before anything happened", want)
		}
	}
}
