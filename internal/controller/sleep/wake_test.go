// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package sleep

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// woke is when the tests' wakes began.
var woke = now.Add(-time.Minute)

// A wake scales each workload its sleep scaled down back to the replicas
// it saved, unless someone scaled it up meanwhile, and removes the
// annotation and the label from it; then it says Awake, and announces
// what woke the object.
func TestAWakeRestoresTheWorkloadsTheSleepScaledDown(t *testing.T) {
	asleep := expiry.SleepState{Phase: expiry.PhaseAsleep, Since: since, Generation: 1, Freed: 3}
	waking := asleep
	waking.Phase, waking.Woke, waking.WokeBy = expiry.PhaseWaking, woke, "kubectl"
	for _, tt := range []struct {
		name     string
		st       expiry.SleepState
		wokeBy   string
		external bool
		// stored, when set, is the state the API server has, if the look
		// saw st.
		stored    *expiry.SleepState
		gone      bool
		replaced  bool
		result    ctrl.Result
		want      map[string]workloadState
		patched   []string
		wantState expiry.SleepState
		// event is the Event; empty for none.
		event string
		// counted is the label of the wake counted.
		counted string
	}{{
		name: "each workload goes back to its replicas, or keeps those someone scaled it up to",
		st:   asleep, wokeBy: "use",
		want: map[string]workloadState{
			"Deployment amp-a/web":       {2, "", ""},
			"StatefulSet amp-a/db":       {1, "", ""},
			"Deployment amp-a/api":       {3, "", ""},
			"Deployment amp-a/idle":      {0, "", ""},
			"Deployment amp-a/legacy":    {2, "", ""},
			"Deployment amp-a/unsaved":   {0, "", ""},
			"Deployment amp-b/elsewhere": {1, "", ""},
		},
		patched:   []string{"patch Deployment amp-a/api", "patch Deployment amp-a/legacy", "patch Deployment amp-a/unsaved", "patch Deployment amp-a/web", "patch StatefulSet amp-a/db"},
		wantState: expiry.SleepState{Phase: expiry.PhaseAwake, Since: since, Generation: 1, Woke: now, WokeBy: "use"},
		event:     "Normal Woke Woke: use; what the sleep since 2026-03-01T10:00:01Z changed is restored",
		counted:   "use",
	}, {
		name: "a wake by someone else scaling a workload up is external",
		st:   asleep, wokeBy: "Deployment amp-a/api scaled up to 3 by someone else", external: true,
		want: map[string]workloadState{
			"Deployment amp-a/web": {2, "", ""},
			"Deployment amp-a/api": {3, "", ""},
		},
		patched:   []string{"patch Deployment amp-a/api", "patch Deployment amp-a/legacy", "patch Deployment amp-a/unsaved", "patch Deployment amp-a/web", "patch StatefulSet amp-a/db"},
		wantState: expiry.SleepState{Phase: expiry.PhaseAwake, Since: since, Generation: 1, Woke: now, WokeBy: "Deployment amp-a/api scaled up to 3 by someone else"},
		event:     "Normal WokeExternally Woke: Deployment amp-a/api scaled up to 3 by someone else; what the sleep since 2026-03-01T10:00:01Z changed is restored",
		counted:   "external",
	}, {
		name: "a wake under way is completed as it began",
		st:   waking, wokeBy: "use",
		want: map[string]workloadState{
			"Deployment amp-a/web": {2, "", ""},
			"StatefulSet amp-a/db": {1, "", ""},
		},
		patched:   []string{"patch Deployment amp-a/api", "patch Deployment amp-a/legacy", "patch Deployment amp-a/unsaved", "patch Deployment amp-a/web", "patch StatefulSet amp-a/db"},
		wantState: expiry.SleepState{Phase: expiry.PhaseAwake, Since: since, Generation: 1, Woke: woke, WokeBy: "kubectl"},
		event:     "Normal Woke Woke: kubectl; what the sleep since 2026-03-01T10:00:01Z changed is restored",
		counted:   "use",
	}, {
		name: "a wake under way that another look completed is not done again",
		st:   waking, wokeBy: "use",
		stored: &expiry.SleepState{Phase: expiry.PhaseAwake, Since: since, Generation: 1, Woke: woke, WokeBy: "kubectl"},
		result: requeue,
		want: map[string]workloadState{
			"Deployment amp-a/web": {0, "2", "uid-env"},
		},
		wantState: expiry.SleepState{Phase: expiry.PhaseAwake, Since: since, Generation: 1, Woke: woke, WokeBy: "kubectl"},
	}, {
		name: "a wake under way of an object replaced since is not done",
		st:   waking, wokeBy: "use", replaced: true,
		result: requeue,
		want: map[string]workloadState{
			"Deployment amp-a/web": {0, "2", "uid-env"},
		},
	}, {
		name: "a wake under way of an object gone is not done",
		st:   waking, wokeBy: "use", gone: true,
		result: requeue,
		want: map[string]workloadState{
			"Deployment amp-a/web": {0, "2", "uid-env"},
		},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			cm := env(fixture.Annotated(expiry.AnnotationSleep, tt.st.String()))
			if tt.stored != nil {
				cm.Annotations[expiry.AnnotationSleep] = tt.stored.String()
			}
			marked := []string{expiry.LabelAsleep, "uid-env"}
			objs := []client.Object{
				owned("amp-a", cm), fixture.NewNamespace("amp-b", nil),
				deployment("amp-a", "web", ptr.To[int32](0), append([]string{expiry.AnnotationReplicas, "2"}, marked...)...),
				statefulSet("amp-a", "db", ptr.To[int32](0), append([]string{expiry.AnnotationReplicas, "1"}, marked...)...),
				// Scaled up by someone else since.
				deployment("amp-a", "api", ptr.To[int32](3), append([]string{expiry.AnnotationReplicas, "1"}, marked...)...),
				// At zero before the sleep, which left it alone.
				deployment("amp-a", "idle", ptr.To[int32](0)),
				// Scaled down by an earlier version, which wrote no label.
				deployment("amp-a", "legacy", ptr.To[int32](0), expiry.AnnotationReplicas, "2"),
				// Labelled, without its replicas: a label is removed all
				// the same.
				deployment("amp-a", "unsaved", ptr.To[int32](0), marked...),
				deployment("amp-b", "elsewhere", ptr.To[int32](1)),
			}
			if tt.replaced {
				cm.UID = "uid-another"
			}
			h := newHarness(t, append(objs, cm)...)
			ev := h.ev(fixture.ConfigMapGVK, "env")
			ev.Obj.UID = "uid-env"
			if tt.gone {
				if err := h.client.Delete(context.Background(), cm); err != nil {
					t.Fatal(err)
				}
			}
			if tt.stored != nil {
				ev.Life.Sleep = tt.st
				ev.Obj.Annotations[expiry.AnnotationSleep] = tt.st.String()
			}
			ev.WokeExternally = tt.external
			wakesBefore := count(t, wakes.WithLabelValues(tt.counted))
			h.made("")
			res, err := h.s.Wake(h.ctx(), ev, tt.wokeBy)
			if err != nil || res != tt.result {
				t.Fatalf("Wake = %+v, %v; want %+v, no error", res, err, tt.result)
			}
			h.expectWorkloads(tt.want)
			patched, reads := h.writes()
			if !slices.Equal(patched, tt.patched) {
				t.Errorf("workloads written %q, want %q", patched, tt.patched)
			}
			// A wake under way reads the object once; another needs no
			// read: only its workloads were written since its own write.
			wantReads := 0
			if tt.st.Phase == expiry.PhaseWaking {
				wantReads = 1
			}
			if len(reads) != wantReads {
				t.Errorf("the object read %d times, want %d", len(reads), wantReads)
			}
			if !tt.gone {
				if act := h.meta(fixture.ConfigMapGVK, "team-a", "env").Annotations[expiry.AnnotationActivity]; act != "" {
					t.Errorf("activity annotation %q written: the object changed no generation", act)
				}
			}
			if tt.wantState.Phase != "" {
				if st := h.stateOf(fixture.ConfigMapGVK, "env"); st.String() != tt.wantState.String() {
					t.Errorf("state %s, want %s", st, tt.wantState)
				}
			}
			evs := h.events()
			if tt.event == "" {
				if len(evs) != 0 {
					t.Errorf("Events %q, want none", evs)
				}
				return
			}
			if !slices.Equal(evs, []string{tt.event}) {
				t.Errorf("Events %q, want %q", evs, tt.event)
			}
			if got := count(t, wakes.WithLabelValues(tt.counted)) - wakesBefore; got != 1 {
				t.Errorf("%v wakes counted by %s, want 1", got, tt.counted)
			}
			want := `"external"=false`
			if tt.external {
				want = `"external"=true`
			}
			if got := h.logs.With(`"msg"="woke"`); len(got) != 1 || !strings.Contains(got[0], want) {
				t.Errorf("logged %q, want one woke line with %s", got, want)
			}
		})
	}
}

// An object scaled or patched itself is woken through itself: scaled
// back to the replicas its state kept, unless someone scaled it up, or
// given back the values its patch replaced; its activity annotation takes
// the generation that gave it.
func TestAWakeOfAnObjectScaledOrPatchedItself(t *testing.T) {
	asleepAt := func(n *int32) []string {
		return []string{expiry.AnnotationSleep, expiry.SleepState{Phase: expiry.PhaseAsleep, Since: since, Generation: 1, Replicas: n}.String()}
	}
	patchedAsleep := expiry.SleepState{Phase: expiry.PhaseAsleep, Since: since, Generation: 1, Patch: json.RawMessage(asleepPatch), WakePatch: json.RawMessage(awakePatch)}
	for _, tt := range []struct {
		name       string
		gvk        schema.GroupVersionKind
		obj        client.Object
		requests   []string
		replicas   int32
		generation int64
	}{
		{"an object at zero goes back to the replicas it had", rcGVK, replicationController("rc", 0, asleepAt(ptr.To[int32](1))...),
			[]string{"patch ReplicationController team-a/rc", "get scale ReplicationController team-a/rc",
				`patch scale ReplicationController team-a/rc {"spec":{"replicas":1}}`, "patch ReplicationController team-a/rc"}, 1, 2},
		{"one someone scaled up keeps its replicas", rcGVK, replicationController("rc", 1, asleepAt(ptr.To[int32](2))...),
			[]string{"patch ReplicationController team-a/rc", "get scale ReplicationController team-a/rc", "patch ReplicationController team-a/rc"}, 1, 1},
		{"one that was at zero before its sleep stays there", rcGVK, replicationController("rc", 0, asleepAt(ptr.To[int32](0))...),
			[]string{"patch ReplicationController team-a/rc", "get scale ReplicationController team-a/rc", "patch ReplicationController team-a/rc"}, 0, 1},
		{"one whose state kept no replicas is left as it is, and its scale not read", rcGVK, replicationController("rc", 0, asleepAt(nil)...),
			[]string{"patch ReplicationController team-a/rc", "patch ReplicationController team-a/rc"}, 0, 1},
		{"a patched object is given back what its patch replaced", fixture.ConfigMapGVK, paused(expiry.AnnotationSleep, patchedAsleep.String()),
			[]string{"patch ConfigMap team-a/paused", "patch ConfigMap team-a/paused", "patch ConfigMap team-a/paused"}, -1, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.obj)
			h.bump = true
			ev := h.ev(tt.gvk, tt.obj.GetName())
			h.made("")
			if res, err := h.s.Wake(h.ctx(), ev, "use"); err != nil || res != (ctrl.Result{}) {
				t.Fatalf("Wake = %+v, %v; want done", res, err)
			}
			var reqs []string
			for _, r := range h.made("") {
				if strings.HasPrefix(r, "patch ") || strings.HasPrefix(r, "get scale") {
					reqs = append(reqs, r)
				}
			}
			if !slices.Equal(reqs, tt.requests) {
				t.Errorf("requests %q, want %q", reqs, tt.requests)
			}
			if got := h.replicas(tt.gvk, "team-a", tt.obj.GetName()).replicas; got != tt.replicas {
				t.Errorf("%d replicas, want %d", got, tt.replicas)
			}
			st := h.stateOf(tt.gvk, tt.obj.GetName())
			if st.Phase != expiry.PhaseAwake || st.Replicas != nil || st.Patch != nil || st.WakePatch != nil {
				t.Errorf("state %s, want awake, with nothing kept for a wake", st)
			}
			if got := h.activityGeneration(tt.gvk, tt.obj.GetName()); got != tt.generation {
				t.Errorf("activity at generation %d, want %d", got, tt.generation)
			}
			if tt.gvk == fixture.ConfigMapGVK {
				if got := h.dataOf(tt.obj.GetName())["mode"]; got != "awake" {
					t.Errorf("mode %q, want awake", got)
				}
			}
		})
	}
}

// A sleep and a wake of an object whose kind has a scale subresource, but
// whose sleep began by scaling the workloads of the namespaces it owns (it
// had none then: a CRD given one since), go on as the sleep began: the
// workloads are scaled, and the object itself left at its replicas, which
// no state kept.
func TestASleepAndAWakeGoOnAsTheSleepBegan(t *testing.T) {
	rc := func(st expiry.SleepState) *corev1.ReplicationController {
		return replicationController("rc", 1, expiry.AnnotationSleep, st.String())
	}
	ns := fixture.NewNamespace("amp-r", nil)
	ns.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ReplicationController", Name: "rc", UID: "uid-rc"}}

	// objectLeftAlone checks the object was neither scaled nor its scale
	// read.
	objectLeftAlone := func(t *testing.T, h *harness) {
		t.Helper()
		if got := h.replicas(rcGVK, "team-a", "rc").replicas; got != 1 {
			t.Errorf("the object scaled to %d, want left at 1", got)
		}
		if got := h.made("get scale"); len(got) != 0 {
			t.Errorf("requests %q: the scale of an object whose sleep did not scale it read", got)
		}
	}

	t.Run("a sleep under way", func(t *testing.T) {
		st := expiry.SleepState{Phase: expiry.PhaseSleeping, Since: since, Generation: 1}
		h := newHarness(t, rc(st), ns, deployment("amp-r", "web", ptr.To[int32](2)))
		h.made("")
		if res, err := h.s.Sleep(h.ctx(), h.ev(rcGVK, "rc")); err != nil || res != (ctrl.Result{}) {
			t.Fatalf("Sleep = %+v, %v; want done", res, err)
		}
		h.expectWorkloads(map[string]workloadState{"Deployment amp-r/web": {0, "2", "uid-rc"}})
		objectLeftAlone(t, h)
		if st := h.stateOf(rcGVK, "rc"); st.Phase != expiry.PhaseAsleep || st.Replicas != nil || st.Freed != 2 {
			t.Errorf("state %s, want asleep, 2 replicas freed, none kept for the object", st)
		}
	})
	t.Run("a wake", func(t *testing.T) {
		st := expiry.SleepState{Phase: expiry.PhaseAsleep, Since: since, Generation: 1, Freed: 2}
		h := newHarness(t, rc(st), ns, deployment("amp-r", "web", ptr.To[int32](0), expiry.AnnotationReplicas, "2", expiry.LabelAsleep, "uid-rc"))
		h.made("")
		if res, err := h.s.Wake(h.ctx(), h.ev(rcGVK, "rc"), "use"); err != nil || res != (ctrl.Result{}) {
			t.Fatalf("Wake = %+v, %v; want done", res, err)
		}
		h.expectWorkloads(map[string]workloadState{"Deployment amp-r/web": {2, "", ""}})
		objectLeftAlone(t, h)
		if st := h.stateOf(rcGVK, "rc"); st.Phase != expiry.PhaseAwake {
			t.Errorf("state %s, want awake", st)
		}
	})
}

// A wake of an object its sleep scaled itself, whose kind has no scale
// subresource any more (a CRD changed), scales nothing: it says Awake.
func TestAWakeOfAnObjectWhoseScaleIsGoneScalesNothing(t *testing.T) {
	st := expiry.SleepState{Phase: expiry.PhaseAsleep, Since: since, Generation: 1, Replicas: ptr.To[int32](2)}
	h := newHarness(t, paused(expiry.AnnotationSleep, st.String()))
	h.made("")
	if res, err := h.s.Wake(h.ctx(), h.ev(fixture.ConfigMapGVK, "paused"), "use"); err != nil || res != (ctrl.Result{}) {
		t.Fatalf("Wake = %+v, %v; want done", res, err)
	}
	if got := h.made("patch scale"); len(got) != 0 {
		t.Errorf("requests %q: a scale patched that the kind does not have", got)
	}
	if st := h.stateOf(fixture.ConfigMapGVK, "paused"); st.Phase != expiry.PhaseAwake || st.Replicas != nil {
		t.Errorf("state %s, want awake, nothing kept", st)
	}
}

// A wake that cannot write stops where it is, and says why unless the
// next look is to go on.
func TestAWakeThatCannotWriteStopsWhereItIs(t *testing.T) {
	boom := errors.New("boom")
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "env", boom)
	gone := apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "env")
	asleep := expiry.SleepState{Phase: expiry.PhaseAsleep, Since: since, Generation: 1}
	waking := expiry.SleepState{Phase: expiry.PhaseWaking, Since: since, Generation: 1, Woke: woke, WokeBy: "use"}
	for _, tt := range []struct {
		name string
		gvk  schema.GroupVersionKind
		st   expiry.SleepState
		fail string
		err  error
		// nth fails the nth request of that kind (0: every one).
		nth        int
		wantResult ctrl.Result
		wantErr    string
		wantPhase  string
	}{
		{"the first write conflicts", fixture.ConfigMapGVK, asleep, "patch ConfigMap", conflict, 1, requeue, "", expiry.PhaseAsleep},
		{"the first write finds the object gone", fixture.ConfigMapGVK, asleep, "patch ConfigMap", gone, 1, ctrl.Result{}, "", expiry.PhaseAsleep},
		{"the first write fails", fixture.ConfigMapGVK, asleep, "patch ConfigMap", boom, 1, ctrl.Result{}, "write the sleep state of ConfigMap/team-a/env: boom", expiry.PhaseAsleep},
		{"a wake under way cannot read the object", fixture.ConfigMapGVK, waking, "read ConfigMap", boom, 0, requeue, "get ConfigMap/team-a/env: boom", expiry.PhaseWaking},
		{"the workloads cannot be read", fixture.ConfigMapGVK, asleep, "read Deployment", boom, 0, ctrl.Result{}, "list the deployments in amp-a: boom", expiry.PhaseWaking},
		{"a workload changed since it was read", fixture.ConfigMapGVK, asleep, "patch Deployment", conflict, 0, requeue, "", expiry.PhaseWaking},
		{"a workload cannot be scaled back", fixture.ConfigMapGVK, asleep, "patch Deployment", boom, 0, ctrl.Result{}, "scale Deployment amp-a/web back to 2: boom", expiry.PhaseWaking},
		{"the last write conflicts", fixture.ConfigMapGVK, asleep, "patch ConfigMap", conflict, 2, requeue, "", expiry.PhaseWaking},
		{"the last write fails", fixture.ConfigMapGVK, asleep, "patch ConfigMap", boom, 2, ctrl.Result{}, "write the sleep state of ConfigMap/team-a/env: boom", expiry.PhaseWaking},
		{"the object's scale cannot be read", rcGVK, asleep, "get scale", boom, 0, ctrl.Result{}, "get the scale of ReplicationController/team-a/rc: boom", expiry.PhaseWaking},
		{"the object cannot be scaled back", rcGVK, asleep, "patch scale", boom, 0, ctrl.Result{}, "scale ReplicationController/team-a/rc back to 2: boom", expiry.PhaseWaking},
		{"the object cannot be read after it was scaled back", rcGVK, asleep, "read ReplicationController", boom, 0, ctrl.Result{}, "get ReplicationController/team-a/rc: boom", expiry.PhaseWaking},
		{"the wake patch cannot be applied", fixture.ConfigMapGVK, expiry.SleepState{Phase: expiry.PhaseAsleep, Since: since, Generation: 1, Patch: json.RawMessage(asleepPatch), WakePatch: json.RawMessage(awakePatch)},
			"patch ConfigMap", boom, 2, ctrl.Result{}, "apply the wake patch to ConfigMap/team-a/env: boom", expiry.PhaseWaking},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var h *harness
			name := "env"
			if tt.gvk == rcGVK {
				st := tt.st
				st.Replicas = ptr.To[int32](2)
				h = newHarness(t, replicationController("rc", 0, expiry.AnnotationSleep, st.String()))
				name = "rc"
			} else {
				cm := env(fixture.Annotated(expiry.AnnotationSleep, tt.st.String()))
				h = newHarness(t, cm, owned("amp-a", cm),
					deployment("amp-a", "web", ptr.To[int32](0), expiry.AnnotationReplicas, "2", expiry.LabelAsleep, "uid-env"))
			}
			n := 0
			h.fail = func(req string) error {
				if !strings.HasPrefix(req, tt.fail) {
					return nil
				}
				if n++; tt.nth == 0 || n == tt.nth {
					return tt.err
				}
				return nil
			}
			res, err := h.s.Wake(h.ctx(), h.ev(tt.gvk, name), "use")
			if res != tt.wantResult {
				t.Errorf("result %+v, want %+v", res, tt.wantResult)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr || !errors.Is(err, tt.err)):
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
			h.mu.Lock()
			h.fail = nil
			h.mu.Unlock()
			if got := h.stateOf(tt.gvk, name).Phase; got != tt.wantPhase {
				t.Errorf("phase %q, want %q", got, tt.wantPhase)
			}
			if evs := h.events(); len(evs) != 0 {
				t.Errorf("Events %q, want none", evs)
			}
		})
	}
}

// A wake whose object moved on, or was replaced, since its first write
// says nothing.
func TestAWakeWhoseObjectMovedOnSaysNothing(t *testing.T) {
	for _, tt := range []struct {
		name      string
		meanwhile func(u *unstructured.Unstructured)
		result    ctrl.Result
		wantPhase string
	}{
		{"another look completed the wake", func(u *unstructured.Unstructured) {
			st := expiry.SleepState{Phase: expiry.PhaseAwake, Since: since, Woke: now, WokeBy: "use"}
			u.SetAnnotations(map[string]string{expiry.AnnotationSleep: st.String()})
		}, requeue, expiry.PhaseAwake},
		{"it was replaced by another of its name", func(u *unstructured.Unstructured) {
			u.SetUID("uid-another")
		}, ctrl.Result{}, expiry.PhaseWaking},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := expiry.SleepState{Phase: expiry.PhaseAsleep, Since: since, Generation: 1, Replicas: ptr.To[int32](2)}
			h := newHarness(t, replicationController("rc", 0, expiry.AnnotationSleep, st.String()))
			ev := h.ev(rcGVK, "rc")
			h.changeAtScale(tt.meanwhile)
			res, err := h.s.Wake(h.ctx(), ev, "use")
			if err != nil || res != tt.result {
				t.Fatalf("Wake = %+v, %v; want %+v, no error", res, err, tt.result)
			}
			if got := h.stateOf(rcGVK, "rc").Phase; got != tt.wantPhase {
				t.Errorf("phase %s, want %s", got, tt.wantPhase)
			}
			if evs := h.events(); len(evs) != 0 {
				t.Errorf("Events %q, want none", evs)
			}
		})
	}
}
