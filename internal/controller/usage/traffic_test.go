// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package usage

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/decide"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

func TestParseTraffic(t *testing.T) {
	idle := func(tr v1alpha1.Traffic) v1alpha1.TimeoutPolicySpec {
		return v1alpha1.TimeoutPolicySpec{IdleTTL: "2h", Traffic: &tr}
	}
	for _, tc := range []struct {
		name string
		spec v1alpha1.TimeoutPolicySpec
		want TrafficQuery
		err  string
	}{
		{name: "defaults to a threshold of 0 and an interval of a minute", spec: idle(v1alpha1.Traffic{Query: " up "}),
			want: TrafficQuery{Query: "up", Interval: time.Minute}},
		{name: "reads the threshold, the interval in days and the name label", spec: idle(v1alpha1.Traffic{Query: "up", Threshold: "1e3", Interval: "1d", NameLabel: "playbook"}),
			want: TrafficQuery{Query: "up", threshold: 1000, Interval: 24 * time.Hour, nameLabel: "playbook"}},
		{name: "accepts the minimum interval", spec: idle(v1alpha1.Traffic{Query: "up", Interval: "15s"}),
			want: TrafficQuery{Query: "up", Interval: 15 * time.Second}},
		{name: "refuses a blank query", spec: idle(v1alpha1.Traffic{Query: " \n"}), err: "spec.traffic.query: a PromQL query is required"},
		{name: "refuses an interval under the minimum", spec: idle(v1alpha1.Traffic{Query: "up", Interval: "14s"}), err: `spec.traffic.interval: "14s" is shorter than the minimum, 15s`},
		{name: "refuses an interval that is not a duration", spec: idle(v1alpha1.Traffic{Query: "up", Interval: "soon"}), err: "spec.traffic.interval"},
		{name: "refuses a threshold that is not a number", spec: idle(v1alpha1.Traffic{Query: "up", Threshold: "NaN"}), err: `spec.traffic.threshold: "NaN" is not a decimal number`},
		{name: "refuses an infinite threshold", spec: idle(v1alpha1.Traffic{Query: "up", Threshold: "1e999"}), err: `spec.traffic.threshold: "1e999"`},
		{name: "refuses a threshold that is a word", spec: idle(v1alpha1.Traffic{Query: "up", Threshold: "lots"}), err: `spec.traffic.threshold: "lots" is not a decimal number`},
		{name: "refuses a threshold above 1e300", spec: idle(v1alpha1.Traffic{Query: "up", Threshold: "2e300"}), err: `spec.traffic.threshold: "2e300"`},
		{name: "refuses a threshold below -1e300", spec: idle(v1alpha1.Traffic{Query: "up", Threshold: "-2e300"}), err: `spec.traffic.threshold: "-2e300"`},
		{name: "accepts a threshold of 1e300", spec: idle(v1alpha1.Traffic{Query: "up", Threshold: "1e300"}),
			want: TrafficQuery{Query: "up", threshold: 1e300, Interval: time.Minute}},
		{name: "accepts a threshold of -1e300", spec: idle(v1alpha1.Traffic{Query: "up", Threshold: "-1e300"}),
			want: TrafficQuery{Query: "up", threshold: -1e300, Interval: time.Minute}},
		{name: "refuses a name label Prometheus cannot have", spec: idle(v1alpha1.Traffic{Query: "up", NameLabel: "a-b"}), err: `spec.traffic.nameLabel: "a-b"`},
		{name: "refuses traffic under a policy with neither idleTTL nor sleep", spec: v1alpha1.TimeoutPolicySpec{Traffic: &v1alpha1.Traffic{Query: "up"}},
			err: "spec.traffic: traffic counts as use, which only spec.idleTTL or spec.sleep read"},
		{name: "accepts traffic under a sleep", spec: v1alpha1.TimeoutPolicySpec{Sleep: &v1alpha1.Sleep{After: "1h", DeleteAfter: "1d"}, Traffic: &v1alpha1.Traffic{Query: "up"}},
			want: TrafficQuery{Query: "up", Interval: time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTraffic(tc.spec)
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
		if got := (TrafficQuery{Interval: interval}).timeout(); got != want {
			t.Errorf("timeout of a %s interval: %s; want %s", interval, got, want)
		}
	}
}

func object(namespace, name string, uid types.UID) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid}}
}

func TestTrafficTargets(t *testing.T) {
	vector := model.Vector{
		fixture.Sample(3, "namespace", "amp-busy"),
		fixture.Sample(0, "namespace", "amp-idle"),
		fixture.Sample(5, "namespace", "team", "playbook", "api"),
		fixture.Sample(7, "job", "no-namespace"),
		fixture.Sample(9, "namespace", ""),
		nil,
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
		c := (&Traffic{}).Condition(p)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonTrafficNotConfigured || !strings.Contains(c.Message, "--prometheus-url") {
			t.Fatalf("condition %+v", c)
		}
	})
	t.Run("says traffic is not configured to a policy reconciler without traffic queries", func(t *testing.T) {
		var none *Traffic
		if c := none.Condition(p); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonTrafficNotConfigured {
			t.Fatalf("condition %+v", c)
		}
	})
	t.Run("has no condition for a policy without traffic", func(t *testing.T) {
		if c := (&Traffic{}).Condition(&v1alpha1.TimeoutPolicy{}); c != nil {
			t.Fatalf("condition %+v", c)
		}
	})
	t.Run("is False after a failed query", func(t *testing.T) {
		tr := &Traffic{Prometheus: fixture.FakeAPI{}, Changed: nil}
		tr.record(p, trafficResult{generation: 3, reason: v1alpha1.ReasonQueryFailed, message: "down"})
		c := tr.Condition(p)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonQueryFailed || c.ObservedGeneration != 3 {
			t.Fatalf("condition %+v", c)
		}
	})
}

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
	h := newTrafficHarness(t, t0, pol, other, busy, recent, kept, othersOwn, quiet,
		fixture.NewNamespace("amp-busy", nil), fixture.NewNamespace("amp-quiet", nil))
	tr := h.traffic(fixture.FakeAPI{Vector: model.Vector{fixture.Sample(2, "namespace", "amp-busy"), fixture.Sample(0, "namespace", "amp-quiet"),
		fixture.Sample(5, "job", "no-namespace")}})

	reason, msg := tr.evaluate(context.Background(), pol, TrafficQuery{Query: "q", Interval: 15 * time.Second}, t0)
	if reason != v1alpha1.ReasonQueried || msg != "The traffic query gave 3 samples; 1 namespaces above 0" {
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
	if _, again := tr.evaluate(context.Background(), pol, TrafficQuery{Query: "q", Interval: 15 * time.Second}, h.clock.Now()); again != msg {
		t.Fatalf("evaluate within the window: %q; want the same message as before, %q, so that the status is not written again", again, msg)
	}
	if rv := h.stored(busy).ResourceVersion; rv != before {
		t.Fatalf("busy written again within the window (resourceVersion %s, was %s)", rv, before)
	}

	// A failing Prometheus moves nothing.
	h.clock.Step(time.Hour)
	tr.Prometheus = fixture.FakeAPI{Err: errors.New("connection refused")}
	reason, msg = tr.evaluate(context.Background(), pol, TrafficQuery{Query: "q", Interval: 15 * time.Second}, h.clock.Now())
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
	h := newTrafficHarness(t, t0, pol, sleeping, awake, fixture.NewNamespace("amp-a", nil))
	tr := h.traffic(fixture.FakeAPI{Vector: model.Vector{fixture.Sample(1, "namespace", "amp-a")}})

	tr.evaluate(context.Background(), pol, TrafficQuery{Query: "q", Interval: time.Minute}, t0)
	if u, ok := expiry.LastUse(h.stored(sleeping).Annotations); !ok || u.Via != expiry.ViaTraffic {
		t.Fatalf("sleeping: last use %+v, %v; want traffic, which wakes it", u, ok)
	}
	if _, ok := h.stored(awake).Annotations[expiry.AnnotationLastUse]; ok {
		t.Fatal("awake: last-use written; nothing reads it under a sleep by age")
	}
}

// trafficHarness is a fake API server holding policies and the ConfigMaps
// they govern, watched as the object controller's watches hold them. It
// counts the reads it answers, and fails the lists, the patches and the
// reads of namespaces with the errors set.
type trafficHarness struct {
	t      *testing.T
	client client.Client
	clock  *clocktesting.FakeClock

	mu                         sync.Mutex
	listErrV, patchErr, getErr error
	reads                      int
}

func newTrafficHarness(t *testing.T, now time.Time, objs ...client.Object) *trafficHarness {
	t.Helper()
	h := &trafficHarness{t: t, clock: clocktesting.NewFakeClock(now)}
	h.client = interceptor.NewClient(fake.NewClientBuilder().WithScheme(fixture.Scheme(t)).WithObjects(objs...).Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			h.mu.Lock()
			h.reads++
			err := h.getErr
			h.mu.Unlock()
			if err != nil && obj.GetObjectKind().GroupVersionKind().Kind == "Namespace" {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			h.mu.Lock()
			err := h.listErrV
			h.mu.Unlock()
			if err != nil {
				return err
			}
			return c.List(ctx, list, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			h.mu.Lock()
			err := h.patchErr
			h.mu.Unlock()
			if err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	return h
}

func (h *trafficHarness) listErr(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.listErrV = err
}

func (h *trafficHarness) readCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reads
}

// traffic returns the traffic queries answered by prom, with the policy
// that governs an object found as the object reconciler finds it.
func (h *trafficHarness) traffic(prom promv1.API) *Traffic {
	return &Traffic{Client: h.client, Clock: h.clock, Prometheus: prom, Watches: cachedConfigMaps{h.client},
		Validate: func(*v1alpha1.TimeoutPolicy) error { return nil },
		Governing: func(ctx context.Context, gvk schema.GroupVersionKind, obj *metav1.PartialObjectMetadata) (*match.Candidate, error) {
			var policies v1alpha1.TimeoutPolicyList
			if err := h.client.List(ctx, &policies); err != nil {
				return nil, err
			}
			return decide.Governing(policies.Items, gvk, match.Object{Labels: obj.Labels, Namespaced: obj.Namespace != "",
				NamespaceLabels: func() (map[string]string, error) { return kube.NamespaceLabels(ctx, h.client, obj.Namespace) }})
		}}
}

// stored returns the ConfigMap as the fake API server holds it.
func (h *trafficHarness) stored(cm *corev1.ConfigMap) *corev1.ConfigMap {
	h.t.Helper()
	got := &corev1.ConfigMap{}
	if err := h.client.Get(context.Background(), client.ObjectKeyFromObject(cm), got); err != nil {
		h.t.Fatalf("get %s: %v", cm.Name, err)
	}
	return got
}

// cachedConfigMaps are the watches of a controller that watches
// ConfigMaps alone, read through a client.
type cachedConfigMaps struct{ reader client.Reader }

func (c cachedConfigMaps) EachCached(ctx context.Context, gvk schema.GroupVersionKind, namespace string, fn func(*metav1.PartialObjectMetadata) error) error {
	list := kube.NewMetadataList(gvk)
	if err := c.reader.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return err
	}
	for i := range list.Items {
		if err := fn(&list.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

func (c cachedConfigMaps) WatchedKind(gk schema.GroupKind) (schema.GroupVersionKind, bool, bool) {
	return fixture.ConfigMapGVK, true, gk == fixture.ConfigMapGVK.GroupKind()
}

// firstGeneration gives the ConfigMap the generation the API server creates
// objects with.
func firstGeneration(cm *corev1.ConfigMap) { cm.Generation = 1 }
