// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

func TestParseTraffic(t *testing.T) {
	idle := func(tr v1alpha1.Traffic) v1alpha1.TimeoutPolicySpec {
		return v1alpha1.TimeoutPolicySpec{IdleTTL: "2h", Traffic: &tr}
	}
	for _, tc := range []struct {
		name string
		spec v1alpha1.TimeoutPolicySpec
		want trafficQuery
		err  string
	}{
		{name: "defaults to a threshold of 0 and an interval of a minute", spec: idle(v1alpha1.Traffic{Query: " up "}),
			want: trafficQuery{query: "up", interval: time.Minute}},
		{name: "reads the threshold, the interval in days and the name label", spec: idle(v1alpha1.Traffic{Query: "up", Threshold: "1e3", Interval: "1d", NameLabel: "playbook"}),
			want: trafficQuery{query: "up", threshold: 1000, interval: 24 * time.Hour, nameLabel: "playbook"}},
		{name: "accepts the minimum interval", spec: idle(v1alpha1.Traffic{Query: "up", Interval: "15s"}),
			want: trafficQuery{query: "up", interval: 15 * time.Second}},
		{name: "refuses a blank query", spec: idle(v1alpha1.Traffic{Query: " \n"}), err: "spec.traffic.query: a PromQL query is required"},
		{name: "refuses an interval under the minimum", spec: idle(v1alpha1.Traffic{Query: "up", Interval: "14s"}), err: `spec.traffic.interval: "14s" is shorter than the minimum, 15s`},
		{name: "refuses an interval that is not a duration", spec: idle(v1alpha1.Traffic{Query: "up", Interval: "soon"}), err: "spec.traffic.interval"},
		{name: "refuses a threshold that is not a number", spec: idle(v1alpha1.Traffic{Query: "up", Threshold: "NaN"}), err: `spec.traffic.threshold: "NaN" is not a decimal number`},
		{name: "refuses an infinite threshold", spec: idle(v1alpha1.Traffic{Query: "up", Threshold: "1e999"}), err: `spec.traffic.threshold: "1e999"`},
		{name: "refuses a name label Prometheus cannot have", spec: idle(v1alpha1.Traffic{Query: "up", NameLabel: "a-b"}), err: `spec.traffic.nameLabel: "a-b"`},
		{name: "refuses traffic under a policy with neither idleTTL nor sleep", spec: v1alpha1.TimeoutPolicySpec{Traffic: &v1alpha1.Traffic{Query: "up"}},
			err: "spec.traffic: traffic counts as use, which only spec.idleTTL or spec.sleep read"},
		{name: "accepts traffic under a sleep", spec: v1alpha1.TimeoutPolicySpec{Sleep: &v1alpha1.Sleep{After: "1h", DeleteAfter: "1d"}, Traffic: &v1alpha1.Traffic{Query: "up"}},
			want: trafficQuery{query: "up", interval: time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTraffic(tc.spec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v; want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v; want %+v", got, tc.want)
			}
		})
	}
}

func TestTrafficQueryTimeoutIsWholeSecondsWithinTheInterval(t *testing.T) {
	for interval, want := range map[time.Duration]time.Duration{15 * time.Second: 7 * time.Second, time.Minute: 10 * time.Second, 17 * time.Second: 8 * time.Second} {
		if got := (trafficQuery{interval: interval}).timeout(); got != want {
			t.Errorf("timeout of a %s interval: %s; want %s", interval, got, want)
		}
	}
}

func TestValidateNamesTheTrafficField(t *testing.T) {
	p := &v1alpha1.TimeoutPolicy{Spec: v1alpha1.TimeoutPolicySpec{IdleTTL: "1h", Target: v1alpha1.Target{APIVersion: "amphitheatre.app/v1", Kind: "Playbook"},
		Traffic: &v1alpha1.Traffic{Query: "up", Interval: "1s"}}}
	if err := validate(p); err == nil || !strings.Contains(err.Error(), "spec.traffic.interval") {
		t.Fatalf("validate: %v; want an error about spec.traffic.interval", err)
	}
}

func sample(v float64, labels ...string) *model.Sample {
	m := model.Metric{}
	for i := 0; i+1 < len(labels); i += 2 {
		m[model.LabelName(labels[i])] = model.LabelValue(labels[i+1])
	}
	return &model.Sample{Metric: m, Value: model.SampleValue(v)}
}

func object(namespace, name string, uid types.UID) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid}}
}

func TestTrafficTargets(t *testing.T) {
	vector := model.Vector{
		sample(3, "namespace", "amp-busy"),
		sample(0, "namespace", "amp-idle"),
		sample(5, "namespace", "team", "playbook", "api"),
		sample(7, "job", "no-namespace"),
		sample(9, "namespace", ""),
	}
	owned := map[string][]types.UID{"amp-busy": {"uid-busy"}, "amp-idle": {"uid-idle"}, "team": {"uid-owner"}}
	for _, tc := range []struct {
		name      string
		threshold float64
		nameLabel string
		obj       *metav1.PartialObjectMetadata
		want      bool
	}{
		{name: "a sample above the threshold uses the owner of its namespace", obj: object("", "busy", "uid-busy"), want: true},
		{name: "a sample at the threshold uses nothing", obj: object("", "idle", "uid-idle")},
		{name: "a sample uses an object in its namespace", obj: object("amp-busy", "anything", "uid-other"), want: true},
		{name: "a sample uses nothing in another namespace", obj: object("elsewhere", "busy", "uid-other")},
		{name: "a cluster-scoped object that owns no namespace is not used", obj: object("", "busy", "uid-unrelated")},
		{name: "a sample under the threshold uses nothing", threshold: 3, obj: object("", "busy", "uid-busy")},
		{name: "a negative threshold makes a flat series use", threshold: -1, obj: object("", "idle", "uid-idle"), want: true},
		{name: "with nameLabel, a sample uses the object it names", nameLabel: "playbook", obj: object("team", "api", "uid-api"), want: true},
		{name: "with nameLabel, a sample uses no other object in its namespace", nameLabel: "playbook", obj: object("team", "web", "uid-web")},
		{name: "with nameLabel, the namespace's owner is used only if the label names it", nameLabel: "playbook", obj: object("", "owner", "uid-owner")},
		{name: "with nameLabel, a sample without it uses nothing", nameLabel: "playbook", obj: object("amp-busy", "busy", "uid-x")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := targetsOf(vector, tc.threshold, tc.nameLabel).uses(tc.obj, owned)
			if got != tc.want {
				t.Fatalf("uses %s/%s: %v; want %v", tc.obj.Namespace, tc.obj.Name, got, tc.want)
			}
		})
	}
}

func TestTrafficCondition(t *testing.T) {
	p := &v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 3}, Spec: v1alpha1.TimeoutPolicySpec{Traffic: &v1alpha1.Traffic{Query: "up"}}}
	t.Run("says traffic is not configured without Prometheus", func(t *testing.T) {
		c := (&Traffic{}).condition(p)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonTrafficNotConfigured || !strings.Contains(c.Message, "--prometheus-url") {
			t.Fatalf("condition %+v", c)
		}
	})
	t.Run("has no condition for a policy without traffic", func(t *testing.T) {
		if c := (&Traffic{}).condition(&v1alpha1.TimeoutPolicy{}); c != nil {
			t.Fatalf("condition %+v", c)
		}
	})
	t.Run("is False after a failed query", func(t *testing.T) {
		tr := &Traffic{Prometheus: fakeAPI{}, changed: nil}
		tr.record(p, trafficResult{generation: 3, reason: v1alpha1.ReasonQueryFailed, message: "down"})
		c := tr.condition(p)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonQueryFailed || c.ObservedGeneration != 3 {
			t.Fatalf("condition %+v", c)
		}
	})
}

// fakeAPI is a Prometheus client that answers every query with vector,
// or err.
type fakeAPI struct {
	promv1.API
	vector model.Vector
	err    error
}

func (f fakeAPI) Query(context.Context, string, time.Time, ...promv1.Option) (model.Value, promv1.Warnings, error) {
	if f.err != nil {
		return nil, nil, f.err
	}
	return f.vector, nil, nil
}

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

func TestAPolicyAskingForTrafficWithoutPrometheusSaysSoOnceAndStaysReady(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	p := fixture.Policy("traffic", func(p *v1alpha1.TimeoutPolicy) {
		p.Spec.IdleTTL = "1h"
		p.Spec.Traffic = &v1alpha1.Traffic{Query: "up"}
	})
	h := newPolicyHarness(t, t0, p)
	h.r.Traffic = &Traffic{}
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
	if got := drain(h.rec); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+ReasonTrafficNotConfigured) {
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
