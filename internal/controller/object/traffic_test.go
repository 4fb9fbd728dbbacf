// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/internal/controller/objectstore"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/policy"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/usage"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"

	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

func TestTrafficWritesUseOfTheGovernedObjectsItNames(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	traffic := func(p *v1alpha1.TimeoutPolicy) {
		p.Spec.IdleTTL = "20m" // a window of one minute
		p.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
		p.Spec.Traffic = &v1alpha1.Traffic{Query: "q", Interval: "15s"}
	}
	pol := fixture.Policy("traffic", traffic)
	other := fixture.Policy("other", fixture.Selecting(map[string]string{"team": "b"}), func(p *v1alpha1.TimeoutPolicy) { p.Spec.IdleTTL = "20m" })
	team := func(name string) func(*corev1.ConfigMap) { return fixture.Labelled(map[string]string{"team": name}) }
	busy := fixture.NewConfigMap("busy", fixture.InNamespace("amp-busy"), team("a"), firstGeneration)
	recent := fixture.NewConfigMap("recent", fixture.InNamespace("amp-busy"), team("a"), firstGeneration, fixture.Annotated(expiry.AnnotationLastActive, t0.Add(-30*time.Second).Format(time.RFC3339)))
	kept := fixture.NewConfigMap("kept", fixture.InNamespace("amp-busy"), team("a"), firstGeneration, fixture.Annotated(expiry.AnnotationKeep, "true"))
	othersOwn := fixture.NewConfigMap("others", fixture.InNamespace("amp-busy"), team("b"), firstGeneration)
	quiet := fixture.NewConfigMap("quiet", fixture.InNamespace("amp-quiet"), team("a"), firstGeneration)
	h := newHarness(t, t0, pol, other, busy, recent, kept, othersOwn, quiet,
		fixture.NewNamespace("amp-busy", nil), fixture.NewNamespace("amp-quiet", nil))
	w := &objectstore.Watches{Reader: h.client, Kinds: map[schema.GroupKind]objectstore.Watched{fixture.ConfigMapGVK.GroupKind(): {GVK: fixture.ConfigMapGVK, Namespaced: true}}}
	tr := &usage.Traffic{Client: h.r.Client, Clock: h.clock, Governing: h.r.Governing, Validate: policy.Validate, Watches: w,
		Prometheus: fixture.FakeAPI{Vector: model.Vector{fixture.Sample(2, "namespace", "amp-busy"), fixture.Sample(0, "namespace", "amp-quiet")}}}

	reason, msg := tr.Evaluate(context.Background(), pol, usage.TrafficQuery{Query: "q", Interval: 15 * time.Second}, t0)
	if reason != v1alpha1.ReasonQueried || msg != "The traffic query gave 2 samples; 1 namespaces above 0" {
		t.Fatalf("evaluate: %s %q; want Queried, naming the samples and the namespaces above the threshold", reason, msg)
	}
	u, ok := expiry.LastUse(h.stored(busy).Annotations)
	if !ok || u.Via != expiry.ViaTraffic || !u.At.Equal(t0) {
		t.Fatalf("busy's last use: %+v, %v; want traffic at %s", u, ok, t0)
	}
	for _, cm := range []*corev1.ConfigMap{recent, kept, othersOwn, quiet} {
		if _, ok := h.stored(cm).Annotations[expiry.AnnotationLastUse]; ok {
			t.Errorf("%s: last-use written; want it left alone (%v)", cm.Name, h.stored(cm).Annotations)
		}
	}

	// Within the window, busy is not written again.
	h.clock.Step(20 * time.Second)
	before := h.stored(busy).ResourceVersion
	if _, again := tr.Evaluate(context.Background(), pol, usage.TrafficQuery{Query: "q", Interval: 15 * time.Second}, h.clock.Now()); again != msg {
		t.Fatalf("evaluate within the window: %q; want the same message as before, %q, so that the status is not written again", again, msg)
	}
	if rv := h.stored(busy).ResourceVersion; rv != before {
		t.Fatalf("busy written again within the window (resourceVersion %s, was %s)", rv, before)
	}

	// A failing Prometheus moves nothing.
	h.clock.Step(time.Hour)
	tr.Prometheus = fixture.FakeAPI{Err: errors.New("connection refused")}
	reason, msg = tr.Evaluate(context.Background(), pol, usage.TrafficQuery{Query: "q", Interval: 15 * time.Second}, h.clock.Now())
	if reason != v1alpha1.ReasonQueryFailed || !strings.Contains(msg, "connection refused") {
		t.Fatalf("evaluate with Prometheus down: %s %q", reason, msg)
	}
	if u, _ := expiry.LastUse(h.stored(busy).Annotations); !u.At.Equal(t0) {
		t.Fatalf("busy's last use moved to %s while Prometheus failed", u.At)
	}
}

func TestTrafficUnderASleepByAgeWakesOnlyWhatSleeps(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	pol := fixture.Policy("by-age", func(p *v1alpha1.TimeoutPolicy) {
		p.Spec.Sleep = &v1alpha1.Sleep{After: "1h", DeleteAfter: "1d"}
		p.Spec.Traffic = &v1alpha1.Traffic{Query: "q"}
	})
	asleep := expiry.SleepState{Phase: expiry.PhaseAsleep, Since: t0.Add(-time.Hour)}
	sleeping := fixture.NewConfigMap("sleeping", fixture.InNamespace("amp-a"), firstGeneration, fixture.Annotated(expiry.AnnotationSleep, asleep.String()))
	awake := fixture.NewConfigMap("awake", fixture.InNamespace("amp-a"), firstGeneration)
	h := newHarness(t, t0, pol, sleeping, awake, fixture.NewNamespace("amp-a", nil))
	w := &objectstore.Watches{Reader: h.client, Kinds: map[schema.GroupKind]objectstore.Watched{fixture.ConfigMapGVK.GroupKind(): {GVK: fixture.ConfigMapGVK, Namespaced: true}}}
	tr := &usage.Traffic{Client: h.r.Client, Clock: h.clock, Governing: h.r.Governing, Validate: policy.Validate, Watches: w, Prometheus: fixture.FakeAPI{Vector: model.Vector{fixture.Sample(1, "namespace", "amp-a")}}}

	tr.Evaluate(context.Background(), pol, usage.TrafficQuery{Query: "q", Interval: time.Minute}, t0)
	if u, ok := expiry.LastUse(h.stored(sleeping).Annotations); !ok || u.Via != expiry.ViaTraffic {
		t.Fatalf("sleeping: last use %+v, %v; want traffic, which wakes it", u, ok)
	}
	if _, ok := h.stored(awake).Annotations[expiry.AnnotationLastUse]; ok {
		t.Fatal("awake: last-use written; nothing reads it under a sleep by age")
	}
}
