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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// asleepPatch is a policy's spec.sleep.patch of a ConfigMap, and awake
// its inverse on one whose mode is awake.
const (
	asleepPatch = `{"data":{"mode":"asleep"}}`
	awakePatch  = `{"data":{"mode":"awake"}}`
)

// paused is a ConfigMap that a patch puts to sleep.
func paused(kv ...string) *corev1.ConfigMap {
	cm := fixture.NewConfigMap("paused", fixture.Annotated(kv...))
	cm.Generation = 1
	cm.Data = map[string]string{"mode": "awake"}
	return cm
}

// dataOf is the data of a stored ConfigMap in team-a.
func (h *harness) dataOf(name string) map[string]string {
	h.t.Helper()
	var cm corev1.ConfigMap
	if err := h.client.Get(context.Background(), types.NamespacedName{Namespace: "team-a", Name: name}, &cm); err != nil {
		h.t.Fatal(err)
	}
	return cm.Data
}

// activityGeneration is the generation the stored object's activity
// annotation holds.
func (h *harness) activityGeneration(gvk schema.GroupVersionKind, name string) int64 {
	h.t.Helper()
	act, _ := expiry.ParseActivity(h.meta(gvk, "team-a", name).Annotations[expiry.AnnotationActivity])
	return act.Generation
}

// An object scaled itself, or patched, is put to sleep through itself:
// its replicas (or the values the patch replaces) are kept in its state
// first, and Asleep is written at the generation the change gave it,
// which its activity annotation takes too, so that the change is not use.
func TestASleepOfAnObjectScaledOrPatchedItself(t *testing.T) {
	rc := func(replicas int32, kv ...string) func() client.Object {
		return func() client.Object { return replicationController("rc", replicas, kv...) }
	}
	app := func(replicas int32, kv ...string) func() client.Object {
		return func() client.Object {
			return deployment("team-a", "app", ptr.To(replicas), kv...)
		}
	}
	under := func(st expiry.SleepState) []string {
		return []string{expiry.AnnotationSleep, st.String()}
	}
	sleepingAt := func(n int32) expiry.SleepState {
		st := sleeping()
		st.Replicas = ptr.To(n)
		return st
	}
	patchedSleep := expiry.SleepState{Phase: expiry.PhaseSleeping, Since: since, Generation: 1, Patch: json.RawMessage(asleepPatch), WakePatch: json.RawMessage(awakePatch)}
	for _, tt := range []struct {
		name  string
		gvk   schema.GroupVersionKind
		obj   func() client.Object
		patch string
		// result and requests are what Sleep returns and the requests
		// it makes that write, read or ask for a scale: never a list of
		// workloads, which an object changed itself does not have.
		result   ctrl.Result
		requests []string
		// replicas the object has after, and the state it says.
		replicas    int32
		phase       string
		stReplicas  *int32
		freed       int32
		generation  int64
		wakePatch   string
		event       string
		logPatched  string
		wantModeNow string
	}{{
		name: "a Deployment is said Sleeping in the write that scales it to zero",
		gvk:  deploymentGVK, obj: app(3),
		requests: []string{"get scale Deployment team-a/app", "patch Deployment team-a/app", "patch Deployment team-a/app"},
		replicas: 0, phase: expiry.PhaseAsleep, stReplicas: ptr.To[int32](3), freed: 3, generation: 2,
		event: "3 replicas scaled to zero", logPatched: "false",
	}, {
		name: "a ReplicationController is scaled through its scale subresource, between its two writes",
		gvk:  rcGVK, obj: rc(2),
		requests: []string{"get scale ReplicationController team-a/rc", "patch ReplicationController team-a/rc",
			`patch scale ReplicationController team-a/rc {"spec":{"replicas":0}}`, "read ReplicationController team-a/rc", "patch ReplicationController team-a/rc"},
		replicas: 0, phase: expiry.PhaseAsleep, stReplicas: ptr.To[int32](2), freed: 2, generation: 2,
		event: "2 replicas scaled to zero", logPatched: "false",
	}, {
		name: "one at zero already is not scaled",
		gvk:  rcGVK, obj: rc(0),
		requests: []string{"get scale ReplicationController team-a/rc", "patch ReplicationController team-a/rc", "read ReplicationController team-a/rc", "patch ReplicationController team-a/rc"},
		replicas: 0, phase: expiry.PhaseAsleep, stReplicas: ptr.To[int32](0), freed: 0, generation: 1,
		event: "0 replicas scaled to zero", logPatched: "false",
	}, {
		name: "a Deployment scaled up since a sleep under way scaled it down is use",
		gvk:  deploymentGVK, obj: app(1, under(sleepingAt(3))...),
		result:   requeue,
		requests: []string{"read Deployment team-a/app", "get scale Deployment team-a/app"},
		replicas: 1, phase: expiry.PhaseSleeping, stReplicas: ptr.To[int32](3), generation: 1,
	}, {
		name: "a sleep under way of a Deployment at zero is completed, with the replicas it began with",
		gvk:  deploymentGVK, obj: app(0, under(sleepingAt(3))...),
		requests: []string{"read Deployment team-a/app", "get scale Deployment team-a/app", "patch Deployment team-a/app"},
		replicas: 0, phase: expiry.PhaseAsleep, stReplicas: ptr.To[int32](3), freed: 3, generation: 1,
		event: "3 replicas scaled to zero", logPatched: "false",
	}, {
		name: "a sleep under way of a ReplicationController scales it to zero",
		gvk:  rcGVK, obj: rc(1, under(sleepingAt(1))...),
		requests: []string{"read ReplicationController team-a/rc", "get scale ReplicationController team-a/rc",
			`patch scale ReplicationController team-a/rc {"spec":{"replicas":0}}`, "read ReplicationController team-a/rc", "patch ReplicationController team-a/rc"},
		replicas: 0, phase: expiry.PhaseAsleep, stReplicas: ptr.To[int32](1), freed: 1, generation: 2,
		event: "1 replicas scaled to zero", logPatched: "false",
	}, {
		name: "a policy's patch is applied after the write that keeps what it replaces",
		gvk:  fixture.ConfigMapGVK, obj: func() client.Object { return paused() }, patch: asleepPatch,
		requests: []string{"read ConfigMap team-a/paused", "patch ConfigMap team-a/paused", "patch ConfigMap team-a/paused", "read ConfigMap team-a/paused", "patch ConfigMap team-a/paused"},
		replicas: -1, phase: expiry.PhaseAsleep, generation: 2, wakePatch: awakePatch,
		event: "spec.sleep.patch applied", logPatched: "true", wantModeNow: "asleep",
	}, {
		name: "a sleep under way applies the patch it began with, whatever the policy says since",
		gvk:  fixture.ConfigMapGVK, obj: func() client.Object { return paused(under(patchedSleep)...) },
		requests: []string{"read ConfigMap team-a/paused", "patch ConfigMap team-a/paused", "read ConfigMap team-a/paused", "patch ConfigMap team-a/paused"},
		replicas: -1, phase: expiry.PhaseAsleep, generation: 2, wakePatch: awakePatch,
		event: "spec.sleep.patch applied", logPatched: "true", wantModeNow: "asleep",
	}} {
		t.Run(tt.name, func(t *testing.T) {
			obj := tt.obj()
			h := newHarness(t, obj)
			h.bump = true
			ev := h.ev(tt.gvk, obj.GetName())
			if tt.patch != "" {
				ev.Schedule.SleepPatch = []byte(tt.patch)
			}
			h.made("")
			res, err := h.s.Sleep(h.ctx(), ev)
			if err != nil || res != tt.result {
				t.Fatalf("Sleep = %+v, %v; want %+v, no error", res, err, tt.result)
			}
			var reqs []string
			for _, r := range h.made("") {
				if strings.HasPrefix(r, "patch ") || strings.HasPrefix(r, "get scale") || strings.HasPrefix(r, "read ") || strings.HasPrefix(r, "list ") {
					reqs = append(reqs, r)
				}
			}
			if !slices.Equal(reqs, tt.requests) {
				t.Errorf("requests %q, want %q", reqs, tt.requests)
			}
			if got := h.replicas(tt.gvk, "team-a", obj.GetName()).replicas; got != tt.replicas {
				t.Errorf("%d replicas, want %d", got, tt.replicas)
			}
			st := h.stateOf(tt.gvk, obj.GetName())
			if st.Phase != tt.phase || !ptr.Equal(st.Replicas, tt.stReplicas) || st.Freed != tt.freed || string(st.WakePatch) != tt.wakePatch {
				t.Errorf("state %s; want %s, replicas %v, %d freed, wake patch %s", st, tt.phase, ptr.Deref(tt.stReplicas, -1), tt.freed, tt.wakePatch)
			}
			if tt.wantModeNow != "" {
				if got := h.dataOf(obj.GetName())["mode"]; got != tt.wantModeNow {
					t.Errorf("mode %q, want %q", got, tt.wantModeNow)
				}
			}
			evs := h.events()
			if tt.event == "" {
				if len(evs) != 0 {
					t.Errorf("Events %q, want none", evs)
				}
				return
			}
			if st.Generation != tt.generation || h.activityGeneration(tt.gvk, obj.GetName()) != tt.generation {
				t.Errorf("asleep at generation %d, activity at %d; want both %d", st.Generation, h.activityGeneration(tt.gvk, obj.GetName()), tt.generation)
			}
			if len(evs) != 1 || !strings.HasPrefix(evs[0], "Normal Slept ") || !strings.Contains(evs[0], "): "+tt.event+"; use wakes it") {
				t.Errorf("Events %q, want one Slept that says %q", evs, tt.event)
			}
			if got := h.logs.With(`"msg"="slept"`); len(got) != 1 || !strings.Contains(got[0], `"patched"=`+tt.logPatched) {
				t.Errorf("logged %q, want patched=%s", got, tt.logPatched)
			}
		})
	}
}

// A sleep that cannot scale or patch the object itself stops, with an
// error that says what it could not do; so does one whose patch cannot be
// undone.
func TestASleepThatCannotChangeTheObjectItselfFails(t *testing.T) {
	boom := errors.New("boom")
	// big is a ConfigMap whose value the patch replaces takes n bytes in
	// the wake patch.
	big := func(n int) func() client.Object {
		return func() client.Object {
			cm := paused()
			cm.Data["mode"] = strings.Repeat("x", n-len(awakePatch)+len("awake"))
			return cm
		}
	}
	for _, tt := range []struct {
		name  string
		obj   func() client.Object
		gvk   schema.GroupVersionKind
		patch string
		fail  string
		// uid, when set, is the UID the look saw.
		uid       types.UID
		wantErr   string
		wantPhase string
	}{
		{"a patch that is no JSON", func() client.Object { return paused() }, fixture.ConfigMapGVK, `{`, "", "",
			"spec.sleep.patch: unexpected end of JSON input", ""},
		{"the object cannot be read for the values the patch replaces", func() client.Object { return paused() }, fixture.ConfigMapGVK, asleepPatch, "read ConfigMap", "",
			"get ConfigMap/team-a/paused: boom", ""},
		{"an object replaced by another of its name", func() client.Object { return paused() }, fixture.ConfigMapGVK, asleepPatch, "", "uid-before",
			"get ConfigMap/team-a/paused: replaced by another object of that name", ""},
		{"the values the patch replaces take more than the sleep annotation keeps", big(4*expiry.MaxSleepPatch + 1), fixture.ConfigMapGVK, asleepPatch, "", "",
			"the values spec.sleep.patch replaces on ConfigMap/team-a/paused take 16385 bytes, more than the 16384 the sleep annotation keeps", ""},
		{"the values the patch replaces take all the sleep annotation keeps", big(4 * expiry.MaxSleepPatch), fixture.ConfigMapGVK, asleepPatch, "", "",
			"", expiry.PhaseAsleep},
		{"the patch cannot be applied", func() client.Object { return paused() }, fixture.ConfigMapGVK, asleepPatch, "patch ConfigMap team-a/paused", "",
			"apply spec.sleep.patch to ConfigMap/team-a/paused: boom", expiry.PhaseSleeping},
		{"the object cannot be scaled", func() client.Object { return replicationController("rc", 2) }, rcGVK, "", "patch scale", "",
			"scale ReplicationController/team-a/rc to zero: boom", expiry.PhaseSleeping},
		{"the object cannot be read after it was scaled", func() client.Object { return replicationController("rc", 2) }, rcGVK, "", "read ReplicationController", "",
			"get ReplicationController/team-a/rc: boom", expiry.PhaseSleeping},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := tt.obj()
			h := newHarness(t, obj)
			ev := h.ev(tt.gvk, obj.GetName())
			if tt.patch != "" {
				ev.Schedule.SleepPatch = []byte(tt.patch)
			}
			if tt.uid != "" {
				ev.Obj.UID = tt.uid
			}
			n := 0
			h.fail = func(req string) error {
				// The patch is the second write of the object.
				if tt.fail != "" && strings.HasPrefix(req, tt.fail) {
					if n++; !strings.HasPrefix(tt.fail, "patch ConfigMap") || n == 2 {
						return boom
					}
				}
				return nil
			}
			_, err := h.s.Sleep(h.ctx(), ev)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
			if got := h.stateOf(tt.gvk, obj.GetName()).Phase; got != tt.wantPhase {
				t.Errorf("phase %q, want %q", got, tt.wantPhase)
			}
		})
	}
}

// The last write of a sleep or a wake is locked on the object as the API
// server has it; when the object changed there, or was replaced, since
// the look's first write, the look says nothing.
func TestASleepWhoseObjectMovedOnSaysNothing(t *testing.T) {
	for _, tt := range []struct {
		name string
		// meanwhile changes the object after its first write.
		meanwhile  func(u *unstructured.Unstructured)
		result     ctrl.Result
		wantPhase  string
		wantWokeBy string
	}{
		{"another look completed the sleep", func(u *unstructured.Unstructured) {
			st := expiry.SleepState{Phase: expiry.PhaseAsleep, Since: now, Generation: 1, Freed: 2}
			u.SetAnnotations(map[string]string{expiry.AnnotationSleep: st.String()})
		}, requeue, expiry.PhaseAsleep, ""},
		{"it was used and woken", func(u *unstructured.Unstructured) {
			st := expiry.SleepState{Phase: expiry.PhaseAwake, Since: now, Woke: now, WokeBy: "use"}
			u.SetAnnotations(map[string]string{expiry.AnnotationSleep: st.String()})
		}, requeue, expiry.PhaseAwake, "use"},
		{"it was replaced by another of its name", func(u *unstructured.Unstructured) {
			u.SetUID("uid-another")
		}, ctrl.Result{}, expiry.PhaseSleeping, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, replicationController("rc", 2))
			ev := h.ev(rcGVK, "rc")
			h.changeAtScale(tt.meanwhile)
			res, err := h.s.Sleep(h.ctx(), ev)
			if err != nil || res != tt.result {
				t.Fatalf("Sleep = %+v, %v; want %+v, no error", res, err, tt.result)
			}
			if st := h.stateOf(rcGVK, "rc"); st.Phase != tt.wantPhase || st.WokeBy != tt.wantWokeBy {
				t.Errorf("state %s, want %s", st, tt.wantPhase)
			}
			if evs := h.events(); len(evs) != 0 {
				t.Errorf("Events %q, want none", evs)
			}
		})
	}
}
