// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/channelset"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/objectstore"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// fakeController records the sources it is asked to watch. Building a
// source.Kind touches neither the cache nor the API server; only starting
// it would, and a fake controller never starts.
type fakeController struct {
	controller.TypedController[wakeup.Key]

	mu      sync.Mutex
	sources []source.TypedSource[wakeup.Key]
	err     error
}

func (c *fakeController) Watch(src source.TypedSource[wakeup.Key]) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	c.sources = append(c.sources, src)
	return nil
}

func (c *fakeController) watched() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sources)
}

func testRESTMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{corev1.SchemeGroupVersion})
	m.Add(fixture.ConfigMapGVK, meta.RESTScopeNamespace)
	m.Add(fixture.NamespaceGVK, meta.RESTScopeRoot)
	return m
}

type policyHarness struct {
	client client.WithWatch
	rec    *events.FakeRecorder
	ctrl   *fakeController
	r      *PolicyReconciler
}

func newPolicyHarness(t *testing.T, now time.Time, objs ...client.Object) *policyHarness {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(fixture.Scheme(t)).
		WithStatusSubresource(&v1alpha1.TimeoutPolicy{}).
		WithObjects(objs...).Build()
	fc := &fakeController{}
	rec := events.NewFakeRecorder(100)
	return &policyHarness{
		client: c,
		rec:    rec,
		ctrl:   fc,
		r: &PolicyReconciler{
			Client:         c,
			RESTMapper:     testRESTMapper(),
			Recorder:       rec,
			Clock:          clocktesting.NewFakePassiveClock(now),
			StatusInterval: 30 * time.Second,
			Channels:       &channelset.Channels{Clock: clocktesting.NewFakePassiveClock(now)},
			Watches:        objectstore.NewWatches(nil, c, nil, fc, nil),
		},
	}
}

func (h *policyHarness) reconcile(t *testing.T, name string) (ctrl.Result, *v1alpha1.TimeoutPolicy) {
	t.Helper()
	got, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	p := &v1alpha1.TimeoutPolicy{}
	if err := h.client.Get(context.Background(), types.NamespacedName{Name: name}, p); err != nil {
		t.Fatalf("get policy %s: %v", name, err)
	}
	return got, p
}

func TestPolicyReconcilerReconcile(t *testing.T) {
	tests := []struct {
		name            string
		objects         []client.Object
		policy          *v1alpha1.TimeoutPolicy
		wantResult      ctrl.Result
		wantReady       metav1.ConditionStatus
		wantReason      string
		wantMessage     []string
		wantEvents      []string
		wantWatched     int
		wantOverlapping metav1.ConditionStatus
	}{
		{
			name:        "marks a policy with an invalid default TTL not ready, naming the field, and warns once",
			policy:      fixture.Policy("broken", fixture.DefaultTTL("0s")),
			wantReady:   metav1.ConditionFalse,
			wantReason:  v1alpha1.ReasonInvalidSpec,
			wantMessage: []string{"spec.defaultTTL"},
			wantEvents:  []string{"Warning InvalidPolicy"},
		},
		{
			name:        "marks a policy whose target kind is not served not ready and looks again later",
			policy:      fixture.Policy("widgets", fixture.Target("example.com/v1", "Widget")),
			wantResult:  ctrl.Result{RequeueAfter: targetRetry},
			wantReady:   metav1.ConditionFalse,
			wantReason:  v1alpha1.ReasonTargetNotFound,
			wantMessage: []string{"example.com/v1", "Widget"},
			wantEvents:  []string{"Warning TargetNotFound"},
		},
		{
			name:        "marks a policy that archives not ready when the controller has no archive",
			policy:      fixture.Policy("archiving", func(p *v1alpha1.TimeoutPolicy) { p.Spec.Deletion.Archive = true }),
			wantReady:   metav1.ConditionFalse,
			wantReason:  v1alpha1.ReasonArchiveUnavailable,
			wantMessage: []string{"deletion.archive", "--archive", "nothing is deleted"},
			wantEvents:  []string{"Warning InvalidPolicy"},
		},
		{
			name: "watches the target kind and its namespaces, and reports what it governs",
			objects: []client.Object{
				fixture.NewConfigMap("a", fixture.TTL("10m")),
				fixture.NewConfigMap("b", fixture.Annotated(expiry.AnnotationKeep, "true")),
			},
			policy:          fixture.Policy("configmaps"),
			wantResult:      ctrl.Result{RequeueAfter: 30 * time.Second},
			wantReady:       metav1.ConditionTrue,
			wantReason:      v1alpha1.ReasonActive,
			wantMessage:     []string{"Governing 2 configmaps"},
			wantWatched:     2,
			wantOverlapping: metav1.ConditionFalse,
		},
		{
			name:            "says the namespace selector is ignored for a cluster-scoped kind, and does not watch namespaces for it",
			objects:         []client.Object{fixture.NewNamespace("team-a", nil)},
			policy:          fixture.Policy("namespaces", fixture.Target("v1", "Namespace"), fixture.InNamespaces(map[string]string{"env": "dev"})),
			wantResult:      ctrl.Result{RequeueAfter: 30 * time.Second},
			wantReady:       metav1.ConditionTrue,
			wantReason:      v1alpha1.ReasonActive,
			wantMessage:     []string{"Governing 1 namespaces", "namespaceSelector is ignored because namespaces are cluster-scoped"},
			wantWatched:     1,
			wantOverlapping: metav1.ConditionFalse,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newPolicyHarness(t, fixture.T0.Add(time.Minute), append(tt.objects, tt.policy)...)

			got, p := h.reconcile(t, tt.policy.Name)
			if got != tt.wantResult {
				t.Errorf("Result = %+v, want %+v", got, tt.wantResult)
			}
			ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			if ready == nil {
				t.Fatalf("no Ready condition in %+v", p.Status)
			}
			if ready.Status != tt.wantReady || ready.Reason != tt.wantReason {
				t.Errorf("Ready = %s/%s, want %s/%s", ready.Status, ready.Reason, tt.wantReady, tt.wantReason)
			}
			for _, m := range tt.wantMessage {
				if !strings.Contains(ready.Message, m) {
					t.Errorf("Ready message %q does not contain %q", ready.Message, m)
				}
			}
			if ready.ObservedGeneration != p.Generation || p.Status.ObservedGeneration != p.Generation {
				t.Errorf("observed generation %d/%d, want %d", ready.ObservedGeneration, p.Status.ObservedGeneration, p.Generation)
			}
			overlapping := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionOverlapping)
			switch {
			case tt.wantOverlapping == "" && overlapping != nil:
				t.Errorf("Overlapping = %+v, want none", overlapping)
			case tt.wantOverlapping != "" && (overlapping == nil || overlapping.Status != tt.wantOverlapping):
				t.Errorf("Overlapping = %+v, want %s", overlapping, tt.wantOverlapping)
			}
			if n := h.ctrl.watched(); n != tt.wantWatched {
				t.Errorf("%d watches started, want %d", n, tt.wantWatched)
			}
			if evs := fixture.Kinds(fixture.Drain(h.rec)); !slices.Equal(evs, tt.wantEvents) {
				t.Errorf("Events = %q, want %q", evs, tt.wantEvents)
			}

			// Nothing changed: the second pass writes nothing, warns about
			// nothing and starts no second watch.
			before := p.ResourceVersion
			if again, p := h.reconcile(t, tt.policy.Name); again != tt.wantResult || p.ResourceVersion != before {
				t.Errorf("second pass: Result = %+v, resourceVersion %s -> %s", again, before, p.ResourceVersion)
			}
			if n := h.ctrl.watched(); n != tt.wantWatched {
				t.Errorf("%d watches after a second pass, want %d", n, tt.wantWatched)
			}
			if evs := fixture.Drain(h.rec); len(evs) != 0 {
				t.Errorf("second pass Events = %q, want none", evs)
			}
		})
	}

	t.Run("returns the error when the watch cannot be started", func(t *testing.T) {
		h := newPolicyHarness(t, fixture.T0, fixture.Policy("configmaps"))
		boom := errors.New("no informer for you")
		h.ctrl.err = boom
		_, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "configmaps"}})
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want %v", err, boom)
		}
	})

	t.Run("does nothing for a policy that is gone", func(t *testing.T) {
		h := newPolicyHarness(t, fixture.T0)
		got, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "gone"}})
		if err != nil || got != (ctrl.Result{}) {
			t.Fatalf("Reconcile = %+v, %v; want nothing", got, err)
		}
	})

	t.Run("does not warn again when an edit leaves the same error", func(t *testing.T) {
		h := newPolicyHarness(t, fixture.T0, fixture.Policy("broken", fixture.DefaultTTL("0s")))
		h.reconcile(t, "broken")
		fixture.Drain(h.rec)
		_, p := h.reconcile(t, "broken")
		p.Spec.Priority = 7
		p.Generation++
		if err := h.client.Update(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		_, p = h.reconcile(t, "broken")
		if p.Status.ObservedGeneration != p.Generation || p.Generation < 2 {
			t.Fatalf("observed generation %d of %d; the edit was not seen", p.Status.ObservedGeneration, p.Generation)
		}
		if evs := fixture.Drain(h.rec); len(evs) != 0 {
			t.Fatalf("Events = %q, want none", evs)
		}
	})

	t.Run("warns again when the policy turns invalid in another way", func(t *testing.T) {
		h := newPolicyHarness(t, fixture.T0, fixture.Policy("broken", fixture.DefaultTTL("0s")))
		h.reconcile(t, "broken")
		fixture.Drain(h.rec)
		_, p := h.reconcile(t, "broken")
		p.Spec.DefaultTTL = "1h"
		p.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
		if err := h.client.Update(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		_, p = h.reconcile(t, "broken")
		evs := fixture.Drain(h.rec)
		if len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning InvalidPolicy") || !strings.Contains(evs[0], "spec.selector") {
			t.Fatalf("Events = %q, want one InvalidPolicy naming spec.selector", evs)
		}
		if ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); ready == nil || strings.Contains(ready.Message, "spec.defaultTTL") {
			t.Fatalf("Ready = %+v, want the new error only", ready)
		}
	})
}

// A policy that forbids keep and has no maxTTL bounds nothing: an
// expires-at in 2999 keeps an object as long. Its status says so.
func TestPolicyReconcilerSaysForbiddingKeepWithoutMaxTTLBoundsNothing(t *testing.T) {
	forbidding := func(p *v1alpha1.TimeoutPolicy) { p.Spec.Keep = v1alpha1.KeepForbidden }
	h := newPolicyHarness(t, fixture.T0, fixture.Policy("strict", forbidding), fixture.Policy("lenient"))
	_, p := h.reconcile(t, "strict")
	c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionUnbounded)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonNoMaxTTL ||
		!strings.Contains(c.Message, "spec.maxTTL") || c.ObservedGeneration != p.Generation {
		t.Fatalf("Unbounded = %+v, want True/NoMaxTTL naming spec.maxTTL", c)
	}
	if ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v, want True: the policy works, it only bounds less than it seems", ready)
	}
	p.Spec.MaxTTL = "30d"
	if err := h.client.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	_, p = h.reconcile(t, "strict")
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionUnbounded); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonMaxTTL {
		t.Errorf("Unbounded with a maxTTL = %+v, want False/MaxTTL", c)
	}
	p.Spec.Keep = v1alpha1.KeepAllowed
	if err := h.client.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if _, p = h.reconcile(t, "strict"); meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionUnbounded) != nil {
		t.Errorf("Unbounded on a policy that allows keep: %+v", p.Status.Conditions)
	}
	if _, p = h.reconcile(t, "lenient"); meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionUnbounded) != nil {
		t.Errorf("Unbounded on a policy that allows keep: %+v", p.Status.Conditions)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*v1alpha1.TimeoutPolicy)
		// want are the fields the error names; none for a valid spec.
		want []string
	}{
		{name: "passes a valid spec", mod: func(*v1alpha1.TimeoutPolicy) {}},
		{name: "passes a spec that leaves every default to the server", mod: func(p *v1alpha1.TimeoutPolicy) { p.Spec.DefaultTTL = "" }},
		{name: "names spec.defaultTTL when it is zero", mod: fixture.DefaultTTL("0s"), want: []string{"spec.defaultTTL"}},
		{name: "names spec.defaultTTL when it does not parse", mod: fixture.DefaultTTL("3 days"), want: []string{"spec.defaultTTL"}},
		{name: "names the reminder that does not parse", mod: fixture.Reminders("3d", "soon"), want: []string{"spec.reminders[1]"}},
		{name: "names a zero reminder", mod: fixture.Reminders("0"), want: []string{"spec.reminders[0]"}},
		{name: "names spec.minimumNotice when it does not parse", mod: func(p *v1alpha1.TimeoutPolicy) { p.Spec.MinimumNotice = "a day" }, want: []string{"spec.minimumNotice"}},
		{name: "names spec.selector when it does not parse", mod: fixture.BogusSelector, want: []string{"spec.selector"}},
		{name: "names spec.namespaceSelector when it does not parse", mod: fixture.BogusNamespaceSelector, want: []string{"spec.namespaceSelector"}},
		{name: "names spec.target.apiVersion when it has no version", mod: fixture.Target("", "ConfigMap"), want: []string{"spec.target.apiVersion"}},
		{name: "names spec.target.apiVersion when it does not parse", mod: fixture.Target("a/b/c", "ConfigMap"), want: []string{"spec.target.apiVersion"}},
		{
			name: "names every field that is wrong",
			mod: func(p *v1alpha1.TimeoutPolicy) {
				fixture.DefaultTTL("0s")(p)
				fixture.BogusSelector(p)
				fixture.Target("", "ConfigMap")(p)
			},
			want: []string{"spec.defaultTTL", "spec.selector", "spec.target.apiVersion"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fixture.Policy("p", tt.mod)
			err := Validate(p)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("validate passed, want an error naming %v", tt.want)
			}
			for _, f := range tt.want {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("error %q does not name %s", err, f)
				}
			}
		})
	}
}

func TestPolicyReconcilerCount(t *testing.T) {
	now := fixture.T0.Add(time.Hour)
	urgent := map[string]string{"tier": "urgent"}
	deleting := func(cm *corev1.ConfigMap) {
		ts := metav1.NewTime(fixture.T0)
		cm.DeletionTimestamp = &ts
		cm.Finalizers = []string{"example.com/hold"}
	}

	tests := []struct {
		name    string
		objects []client.Object
		// policy is the one counted; it is among objects.
		policy           string
		wantTracked      int32
		wantKept         int32
		wantSoon         int32
		wantNext         time.Time
		wantOverlapping  metav1.ConditionStatus
		wantOverlapWords []string
	}{
		{
			name: "counts tracked, kept and expiring-soon objects and the next expiry",
			objects: []client.Object{
				fixture.Policy("configmaps", fixture.Reminders("1d", "3d")),
				fixture.NewConfigMap("in-two-days", fixture.ExpiresAt(now.Add(2*expiry.Day))),
				fixture.NewConfigMap("in-three-days", fixture.ExpiresAt(now.Add(3*expiry.Day))),
				fixture.NewConfigMap("in-five-days", fixture.ExpiresAt(now.Add(5*expiry.Day))),
				fixture.NewConfigMap("kept", fixture.Annotated(expiry.AnnotationKeep, "true")),
				fixture.NewConfigMap("going", deleting),
			},
			policy:          "configmaps",
			wantTracked:     3,
			wantKept:        1,
			wantSoon:        2,
			wantNext:        now.Add(2 * expiry.Day),
			wantOverlapping: metav1.ConditionFalse,
		},
		{
			name: "takes the next expiry from the default TTL when there is no annotation",
			objects: []client.Object{
				fixture.Policy("configmaps", fixture.DefaultTTL("2h")),
				fixture.NewConfigMap("default", fixture.InNamespace("team-b")),
				fixture.NewConfigMap("later", fixture.TTL("1d")),
			},
			policy:          "configmaps",
			wantTracked:     2,
			wantNext:        fixture.T0.Add(2 * time.Hour),
			wantOverlapping: metav1.ConditionFalse,
		},
		{
			name: "reports no next expiry when every object is kept",
			objects: []client.Object{
				fixture.Policy("configmaps"),
				fixture.NewConfigMap("kept", fixture.Annotated(expiry.AnnotationKeep, "true")),
			},
			policy:          "configmaps",
			wantKept:        1,
			wantOverlapping: metav1.ConditionFalse,
		},
		{
			name: "counts only the objects the policy's namespace selector selects",
			objects: []client.Object{
				fixture.Policy("dev", fixture.InNamespaces(map[string]string{"env": "dev"})),
				fixture.NewNamespace("team-a", map[string]string{"env": "dev"}),
				fixture.NewNamespace("team-b", map[string]string{"env": "prod"}),
				fixture.NewConfigMap("a1", fixture.TTL("1d")),
				fixture.NewConfigMap("a2", fixture.TTL("2d")),
				fixture.NewConfigMap("b1", fixture.TTL("1h"), fixture.InNamespace("team-b")),
			},
			policy:          "dev",
			wantTracked:     2,
			wantNext:        fixture.T0.Add(expiry.Day),
			wantOverlapping: metav1.ConditionFalse,
		},
		{
			name: "reports Overlapping, naming the winner, when a higher-priority policy governs some of its objects",
			objects: []client.Object{
				fixture.Policy("configmaps"),
				fixture.Policy("urgent", fixture.Priority(10), fixture.Selecting(urgent), fixture.DefaultTTL("10m")),
				fixture.NewConfigMap("plain", fixture.TTL("1d")),
				fixture.NewConfigMap("urgent-1", fixture.Labelled(urgent)),
				fixture.NewConfigMap("urgent-2", fixture.Labelled(urgent)),
			},
			policy:           "configmaps",
			wantTracked:      1,
			wantNext:         fixture.T0.Add(expiry.Day),
			wantOverlapping:  metav1.ConditionTrue,
			wantOverlapWords: []string{"2 by urgent"},
		},
		{
			name: "reports Overlapping when a policy of the same priority with a name that sorts first governs its objects",
			objects: []client.Object{
				fixture.Policy("beta"),
				fixture.Policy("alpha"),
				fixture.NewConfigMap("shared", fixture.TTL("1d")),
			},
			policy:           "beta",
			wantOverlapping:  metav1.ConditionTrue,
			wantOverlapWords: []string{"1 by alpha"},
		},
		{
			name: "does not report Overlapping for the policy that wins",
			objects: []client.Object{
				fixture.Policy("configmaps"),
				fixture.Policy("urgent", fixture.Priority(10), fixture.Selecting(urgent), fixture.DefaultTTL("2h")),
				fixture.NewConfigMap("plain", fixture.TTL("1d")),
				fixture.NewConfigMap("urgent-1", fixture.Labelled(urgent)),
			},
			policy:          "urgent",
			wantTracked:     1,
			wantNext:        fixture.T0.Add(2 * time.Hour),
			wantOverlapping: metav1.ConditionFalse,
		},
		{
			name: "does not report Overlapping for objects another policy selects that this one does not",
			objects: []client.Object{
				fixture.Policy("plain", fixture.Selecting(map[string]string{"tier": "plain"})),
				fixture.Policy("urgent", fixture.Priority(10), fixture.Selecting(urgent)),
				fixture.NewConfigMap("urgent-1", fixture.Labelled(urgent)),
			},
			policy:          "plain",
			wantOverlapping: metav1.ConditionFalse,
		},
		{
			// ExpiringSoon "is 0 when the policy has no reminders"
			// (api/v1alpha1, TimeoutPolicyStatus.ExpiringSoon).
			name: "counts nothing as expiring soon when the policy has no reminders, even an object past its expiry",
			objects: []client.Object{
				fixture.Policy("careful", fixture.DryRun),
				fixture.NewConfigMap("expired", fixture.TTL("10m")),
				fixture.NewConfigMap("later", fixture.TTL("1d")),
			},
			policy:          "careful",
			wantTracked:     2,
			wantSoon:        0,
			wantNext:        fixture.T0.Add(10 * time.Minute),
			wantOverlapping: metav1.ConditionFalse,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newPolicyHarness(t, now, tt.objects...)
			p := &v1alpha1.TimeoutPolicy{}
			if err := h.client.Get(context.Background(), types.NamespacedName{Name: tt.policy}, p); err != nil {
				t.Fatal(err)
			}
			if _, err := h.r.count(context.Background(), p, fixture.ConfigMapGVK, true, nil); err != nil {
				t.Fatalf("count: %v", err)
			}
			s := p.Status
			if s.Tracked != tt.wantTracked || s.Kept != tt.wantKept || s.ExpiringSoon != tt.wantSoon {
				t.Errorf("tracked/kept/soon = %d/%d/%d, want %d/%d/%d",
					s.Tracked, s.Kept, s.ExpiringSoon, tt.wantTracked, tt.wantKept, tt.wantSoon)
			}
			switch {
			case tt.wantNext.IsZero() && s.NextExpiry != nil:
				t.Errorf("NextExpiry = %s, want none", s.NextExpiry)
			case !tt.wantNext.IsZero() && (s.NextExpiry == nil || !s.NextExpiry.Time.Equal(tt.wantNext)):
				t.Errorf("NextExpiry = %v, want %s", s.NextExpiry, tt.wantNext)
			}
			c := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionOverlapping)
			if c == nil {
				t.Fatalf("no Overlapping condition in %+v", s.Conditions)
			}
			wantReason := v1alpha1.ReasonNoOverlap
			if tt.wantOverlapping == metav1.ConditionTrue {
				wantReason = v1alpha1.ReasonOutranked
			}
			if c.Status != tt.wantOverlapping || c.Reason != wantReason {
				t.Errorf("Overlapping = %s/%s, want %s/%s", c.Status, c.Reason, tt.wantOverlapping, wantReason)
			}
			for _, w := range tt.wantOverlapWords {
				if !strings.Contains(c.Message, w) {
					t.Errorf("Overlapping message %q does not contain %q", c.Message, w)
				}
			}
		})
	}

	t.Run("clears a next expiry that no longer applies", func(t *testing.T) {
		h := newPolicyHarness(t, now, fixture.Policy("configmaps"))
		p := fixture.Policy("configmaps")
		p.Status.NextExpiry = &metav1.Time{Time: fixture.T0}
		p.Status.Tracked = 4
		if _, err := h.r.count(context.Background(), p, fixture.ConfigMapGVK, true, nil); err != nil {
			t.Fatal(err)
		}
		if p.Status.NextExpiry != nil || p.Status.Tracked != 0 {
			t.Fatalf("status = %+v, want it cleared", p.Status)
		}
	})

	t.Run("reads each namespace's labels once", func(t *testing.T) {
		var gets int
		c := fake.NewClientBuilder().WithScheme(fixture.Scheme(t)).WithObjects(
			fixture.Policy("dev", fixture.InNamespaces(map[string]string{"env": "dev"})),
			fixture.NewNamespace("team-a", map[string]string{"env": "dev"}),
			fixture.NewConfigMap("a1"), fixture.NewConfigMap("a2"), fixture.NewConfigMap("a3"),
		).Build()
		counting := countingGets{WithWatch: c, gets: &gets}
		r := &PolicyReconciler{Client: counting, Clock: clocktesting.NewFakePassiveClock(now), Watches: objectstore.NewWatches(nil, counting, nil, nil, nil)}
		p := fixture.Policy("dev", fixture.InNamespaces(map[string]string{"env": "dev"}))
		if _, err := r.count(context.Background(), p, fixture.ConfigMapGVK, true, nil); err != nil {
			t.Fatal(err)
		}
		if p.Status.Tracked != 3 || gets != 1 {
			t.Fatalf("tracked %d with %d namespace reads, want 3 with 1", p.Status.Tracked, gets)
		}
	})
}

type countingGets struct {
	client.WithWatch
	gets *int
}

func (c countingGets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	*c.gets++
	return c.WithWatch.Get(ctx, key, obj, opts...)
}
