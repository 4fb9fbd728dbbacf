// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

func TestTrafficWritesUseOfTheGovernedObjectsItNames(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	traffic := func(p *v1alpha1.TimeoutPolicy) {
		p.Spec.IdleTTL = "20m" // a window of one minute
		p.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
		p.Spec.Traffic = &v1alpha1.Traffic{Query: "q", Interval: "15s"}
	}
	policy := fixture.Policy("traffic", traffic)
	other := fixture.Policy("other", fixture.Selecting(map[string]string{"team": "b"}), func(p *v1alpha1.TimeoutPolicy) { p.Spec.IdleTTL = "20m" })
	team := func(name string) func(*corev1.ConfigMap) { return labelled(map[string]string{"team": name}) }
	busy := newConfigMap("busy", inNamespace("amp-busy"), team("a"), firstGeneration)
	recent := newConfigMap("recent", inNamespace("amp-busy"), team("a"), firstGeneration, annotated(expiry.AnnotationLastActive, t0.Add(-30*time.Second).Format(time.RFC3339)))
	kept := newConfigMap("kept", inNamespace("amp-busy"), team("a"), firstGeneration, annotated(expiry.AnnotationKeep, "true"))
	othersOwn := newConfigMap("others", inNamespace("amp-busy"), team("b"), firstGeneration)
	quiet := newConfigMap("quiet", inNamespace("amp-quiet"), team("a"), firstGeneration)
	h := newHarness(t, t0, policy, other, busy, recent, kept, othersOwn, quiet,
		newNamespace("amp-busy", nil), newNamespace("amp-quiet", nil))
	w := &watches{reader: h.client, kinds: map[schema.GroupKind]watched{configMapGVK.GroupKind(): {gvk: configMapGVK, namespaced: true}}}
	tr := &Traffic{Client: h.r.Client, Clock: h.clock, governing: h.r.governing, validate: validate, watches: w,
		Prometheus: fakeAPI{vector: model.Vector{sample(2, "namespace", "amp-busy"), sample(0, "namespace", "amp-quiet")}}}

	reason, msg := tr.evaluate(context.Background(), policy, trafficQuery{query: "q", interval: 15 * time.Second}, t0)
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
	if _, again := tr.evaluate(context.Background(), policy, trafficQuery{query: "q", interval: 15 * time.Second}, h.clock.Now()); again != msg {
		t.Fatalf("evaluate within the window: %q; want the same message as before, %q, so that the status is not written again", again, msg)
	}
	if rv := h.stored(busy).ResourceVersion; rv != before {
		t.Fatalf("busy written again within the window (resourceVersion %s, was %s)", rv, before)
	}

	// A failing Prometheus moves nothing.
	h.clock.Step(time.Hour)
	tr.Prometheus = fakeAPI{err: errors.New("connection refused")}
	reason, msg = tr.evaluate(context.Background(), policy, trafficQuery{query: "q", interval: 15 * time.Second}, h.clock.Now())
	if reason != v1alpha1.ReasonQueryFailed || !strings.Contains(msg, "connection refused") {
		t.Fatalf("evaluate with Prometheus down: %s %q", reason, msg)
	}
	if u, _ := expiry.LastUse(h.stored(busy).Annotations); !u.At.Equal(t0) {
		t.Fatalf("busy's last use moved to %s while Prometheus failed", u.At)
	}
}

func TestTrafficUnderASleepByAgeWakesOnlyWhatSleeps(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	policy := fixture.Policy("by-age", func(p *v1alpha1.TimeoutPolicy) {
		p.Spec.Sleep = &v1alpha1.Sleep{After: "1h", DeleteAfter: "1d"}
		p.Spec.Traffic = &v1alpha1.Traffic{Query: "q"}
	})
	asleep := expiry.SleepState{Phase: expiry.PhaseAsleep, Since: t0.Add(-time.Hour)}
	sleeping := newConfigMap("sleeping", inNamespace("amp-a"), firstGeneration, annotated(expiry.AnnotationSleep, asleep.String()))
	awake := newConfigMap("awake", inNamespace("amp-a"), firstGeneration)
	h := newHarness(t, t0, policy, sleeping, awake, newNamespace("amp-a", nil))
	w := &watches{reader: h.client, kinds: map[schema.GroupKind]watched{configMapGVK.GroupKind(): {gvk: configMapGVK, namespaced: true}}}
	tr := &Traffic{Client: h.r.Client, Clock: h.clock, governing: h.r.governing, validate: validate, watches: w, Prometheus: fakeAPI{vector: model.Vector{sample(1, "namespace", "amp-a")}}}

	tr.evaluate(context.Background(), policy, trafficQuery{query: "q", interval: time.Minute}, t0)
	if u, ok := expiry.LastUse(h.stored(sleeping).Annotations); !ok || u.Via != expiry.ViaTraffic {
		t.Fatalf("sleeping: last use %+v, %v; want traffic, which wakes it", u, ok)
	}
	if _, ok := h.stored(awake).Annotations[expiry.AnnotationLastUse]; ok {
		t.Fatal("awake: last-use written; nothing reads it under a sleep by age")
	}
}
