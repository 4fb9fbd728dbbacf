// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

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
