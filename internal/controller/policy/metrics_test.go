// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/metrics"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

func TestPolicyStatusCountsExpiriesAheadByHorizon(t *testing.T) {
	now := fixture.T0.Add(time.Hour)
	h := newPolicyHarness(t, now,
		fixture.Policy("horizons"),
		fixture.NewConfigMap("overdue", fixture.TTL("10m")),
		fixture.NewConfigMap("in-half-an-hour", fixture.TTL("90m")),
		fixture.NewConfigMap("in-five-hours", fixture.TTL("6h")),
		fixture.NewConfigMap("in-three-days", fixture.TTL("3d")),
		fixture.NewConfigMap("in-ten-days", fixture.TTL("10d")),
		fixture.NewConfigMap("kept", fixture.Annotated(expiry.AnnotationKeep, "true")),
	)
	p := &v1alpha1.TimeoutPolicy{}
	if err := h.client.Get(context.Background(), types.NamespacedName{Name: "horizons"}, p); err != nil {
		t.Fatal(err)
	}
	if _, err := h.r.count(context.Background(), p, fixture.ConfigMapGVK, true, nil); err != nil {
		t.Fatalf("count: %v", err)
	}
	t.Cleanup(func() { metrics.ForgetPolicyMetrics("horizons") })
	for _, tt := range []struct {
		within string
		want   float64
	}{
		{"1h", 2}, // the overdue one is due already
		{"1d", 3},
		{"1w", 4}, // never the kept one, nor the one ten days out
	} {
		if got := fixture.GaugeValue(t, metrics.ObjectsExpiring.WithLabelValues("horizons", tt.within)); got != tt.want {
			t.Errorf("objects expiring within %s = %v, want %v", tt.within, got, tt.want)
		}
	}

	metrics.ForgetPolicyMetrics("horizons")
	if n := metrics.ObjectsExpiring.DeletePartialMatch(prometheus.Labels{"policy": "horizons"}); n != 0 {
		t.Errorf("after the policy is forgotten %d series of it remain, want none", n)
	}
}
