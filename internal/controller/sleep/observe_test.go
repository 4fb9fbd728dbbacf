// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package sleep

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// A look at a sleeping object sees what woke it that its annotations do
// not show: a spec edit, or someone else scaling it, or a workload it
// owns, up. A sleep under way is looked at too, for the workloads it
// scaled down already.
func TestALookSeesWhatWokeASleepingObject(t *testing.T) {
	asleep := expiry.SleepState{Phase: expiry.PhaseAsleep, Since: since, Generation: 1}
	with := func(st expiry.SleepState, f func(*expiry.SleepState)) expiry.SleepState {
		f(&st)
		return st
	}
	patched := func(st *expiry.SleepState) {
		st.Patch, st.WakePatch = json.RawMessage(asleepPatch), json.RawMessage(awakePatch)
	}
	scaled := func(n int32) func(*expiry.SleepState) {
		return func(st *expiry.SleepState) { st.Replicas = ptr.To(n) }
	}
	none := func(*expiry.SleepState) {}
	// envWith is env, at generation gen, owning amp-a with the
	// workloads given.
	envWith := func(gen int64, ws ...client.Object) func() []client.Object {
		return func() []client.Object {
			cm := env()
			cm.Generation = gen
			return append([]client.Object{cm, owned("amp-a", cm)}, ws...)
		}
	}
	web := func(replicas int32, kv ...string) client.Object {
		return deployment("amp-a", "web", ptr.To(replicas), kv...)
	}
	saved := func(n string) []string { return []string{expiry.AnnotationReplicas, n, expiry.LabelAsleep, "uid-env"} }
	rc := func(gen int64, replicas int32) func() []client.Object {
		return func() []client.Object {
			o := replicationController("rc", replicas)
			o.Generation = gen
			return []client.Object{o}
		}
	}
	app := func(replicas int32) func() []client.Object {
		return func() []client.Object { return []client.Object{deployment("team-a", "app", ptr.To(replicas))} }
	}
	pausedAt := func(gen int64) func() []client.Object {
		return func() []client.Object {
			cm := paused()
			cm.Generation = gen
			return []client.Object{cm}
		}
	}
	for _, tt := range []struct {
		name string
		gvk  schema.GroupVersionKind
		objs func() []client.Object
		st   expiry.SleepState
		// awake says the lifetime has the object awake: used since it
		// went to sleep.
		awake bool
		// watched says the watch of marked workloads runs and has seen
		// no change since a read that found none scaled up.
		watched      bool
		wantBy       string
		wantExternal bool
		// wantRead says the look read the workloads.
		wantRead bool
	}{
		{name: "an awake object is not looked at", gvk: fixture.ConfigMapGVK,
			objs: envWith(1, web(2)), st: expiry.SleepState{Phase: expiry.PhaseAwake, Since: since, Woke: since}},
		{name: "a sleeping object used since it went to sleep is not looked at", gvk: fixture.ConfigMapGVK,
			objs: envWith(1, web(2, saved("2")...)), st: with(sleeping(), none), awake: true},

		{name: "a patched object edited since is woken by the edit", gvk: fixture.ConfigMapGVK,
			objs: pausedAt(3), st: with(asleep, patched), wantBy: "a spec edit (generation 3)"},
		{name: "a patched object at the generation it slept at is asleep", gvk: fixture.ConfigMapGVK,
			objs: pausedAt(1), st: with(asleep, patched)},
		{name: "a patched object whose sleep is under way changes generation itself", gvk: fixture.ConfigMapGVK,
			objs: pausedAt(3), st: with(sleeping(), patched)},

		{name: "an object scaled itself that someone scaled up is woken externally", gvk: rcGVK,
			objs: rc(1, 1), st: with(asleep, scaled(2)), wantBy: "scaled up to 1 by someone else", wantExternal: true},
		{name: "an object scaled itself found back at its replicas was scaled up", gvk: rcGVK,
			objs: rc(1, 2), st: with(asleep, scaled(2)), wantBy: "scaled up to 2 by someone else", wantExternal: true},
		{name: "an object scaled itself at zero is asleep, whatever its generation says", gvk: rcGVK,
			objs: rc(5, 0), st: with(asleep, scaled(2))},
		{name: "a sleep under way that has not scaled the object yet finds it at its replicas", gvk: rcGVK,
			objs: rc(1, 2), st: with(sleeping(), scaled(2))},
		{name: "a sleep under way finds the object at other replicas: scaled up", gvk: rcGVK,
			objs: rc(1, 3), st: with(sleeping(), scaled(2)), wantBy: "scaled up to 3 by someone else", wantExternal: true},
		{name: "a Deployment is scaled in the write that says Sleeping: at its replicas, it was scaled up since", gvk: deploymentGVK,
			objs: app(3), st: with(sleeping(), scaled(3)), wantBy: "scaled up to 3 by someone else", wantExternal: true},

		{name: "an object edited since it went to sleep is woken by the edit", gvk: fixture.ConfigMapGVK,
			objs: envWith(2, web(0, saved("2")...)), st: asleep, wantBy: "a spec edit (generation 2)"},
		{name: "a state that kept no generation says nothing of edits", gvk: fixture.ConfigMapGVK,
			objs: envWith(2, web(0, saved("2")...)), st: with(asleep, func(st *expiry.SleepState) { st.Generation = 0 }), wantRead: true},

		{name: "a workload running while its owner is asleep was scaled up by someone else", gvk: fixture.ConfigMapGVK,
			objs: envWith(1, web(1)), st: asleep, wantBy: "Deployment amp-a/web scaled up to 1 by someone else", wantExternal: true, wantRead: true},
		{name: "a workload scaled down by the sleep and up since, during a sleep under way", gvk: fixture.ConfigMapGVK,
			objs: envWith(1, web(1, saved("2")...)), st: sleeping(), wantBy: "Deployment amp-a/web scaled up to 1 by someone else", wantExternal: true, wantRead: true},
		{name: "a workload a sleep under way has not scaled down yet runs", gvk: fixture.ConfigMapGVK,
			objs: envWith(1, web(2)), st: sleeping(), wantRead: true},
		{name: "workloads all at zero are asleep", gvk: fixture.ConfigMapGVK,
			objs: envWith(1, web(0, saved("2")...), statefulSet("amp-a", "db", ptr.To[int32](0), saved("1")...)), st: asleep, wantRead: true},

		{name: "the watch lets a look skip the workloads when nothing changed since the last read", gvk: fixture.ConfigMapGVK,
			objs: envWith(1, web(1)), st: asleep, watched: true},
		{name: "the watch does not let a sleep under way skip them", gvk: fixture.ConfigMapGVK,
			objs: envWith(1, web(1, saved("2")...)), st: sleeping(), watched: true, wantBy: "Deployment amp-a/web scaled up to 1 by someone else", wantExternal: true, wantRead: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			objs := tt.objs()
			h := newHarness(t, objs...)
			ev := h.ev(tt.gvk, objs[0].GetName())
			ev.Life.Sleep, ev.Life.Asleep = tt.st, !tt.awake
			if tt.watched {
				h.s.Marked = &MarkedWatch{}
				h.s.Marked.running.Store(true)
				h.s.Marked.reading(ev.Obj.UID)()
			}
			h.made("")
			by, external, err := h.s.ObserveWake(h.ctx(), ev)
			if err != nil || by != tt.wantBy || external != tt.wantExternal {
				t.Errorf("ObserveWake = %q, %t, %v; want %q, %t, no error", by, external, err, tt.wantBy, tt.wantExternal)
			}
			if read := len(h.made("read Deployment")) > 0; read != tt.wantRead {
				t.Errorf("read the workloads: %t, want %t", read, tt.wantRead)
			}
		})
	}
}

// A look at an object asleep whose workloads it read and found none
// scaled up notes it, for the watch to let the next look skip them; and
// it labels those an earlier version scaled down without the label, so
// that the watch sees them.
func TestALookAtASleepingObjectNotesWhatItFound(t *testing.T) {
	asleep := expiry.SleepState{Phase: expiry.PhaseAsleep, Since: since, Generation: 1}
	for _, tt := range []struct {
		name string
		st   expiry.SleepState
		// failLabel fails the writes of the label.
		failLabel bool
		// wantFresh says the next look may skip the workloads.
		wantFresh bool
		want      map[string]workloadState
	}{
		{"asleep, the workloads an earlier version scaled down are labelled", asleep, false, true, map[string]workloadState{
			"legacy": {0, "2", "uid-env"}, "marked": {0, "1", "uid-env"}, "idle": {0, "", ""},
		}},
		{"a label that cannot be written is left to the next look", asleep, true, true, map[string]workloadState{
			"legacy": {0, "2", ""}, "marked": {0, "1", "uid-env"}, "idle": {0, "", ""},
		}},
		{"a sleep under way labels nothing, and notes nothing", sleeping(), false, false, map[string]workloadState{
			"legacy": {0, "2", ""}, "marked": {0, "1", "uid-env"}, "idle": {0, "", ""},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cm := env()
			h := newHarness(t, cm, owned("amp-a", cm),
				deployment("amp-a", "legacy", ptr.To[int32](0), expiry.AnnotationReplicas, "2"),
				deployment("amp-a", "marked", ptr.To[int32](0), expiry.AnnotationReplicas, "1", expiry.LabelAsleep, "uid-env"),
				deployment("amp-a", "idle", ptr.To[int32](0)))
			if tt.failLabel {
				h.failing("patch Deployment", errors.New("boom"))
			}
			h.s.Marked = &MarkedWatch{}
			h.s.Marked.running.Store(true)
			ev := h.ev(fixture.ConfigMapGVK, "env")
			ev.Life.Sleep, ev.Life.Asleep = tt.st, true
			h.made("")
			if by, _, err := h.s.ObserveWake(h.ctx(), ev); err != nil || by != "" {
				t.Fatalf("ObserveWake = %q, %v; want nothing woke it", by, err)
			}
			for name, want := range tt.want {
				if got := h.replicas(deployments, "amp-a", name); got != want {
					t.Errorf("%s: %s; want %s", name, got, want)
				}
			}
			wantPatches := []string{}
			if tt.st.Phase == expiry.PhaseAsleep {
				wantPatches = []string{"patch Deployment amp-a/legacy"}
			}
			if got := h.made("patch "); !slices.Equal(got, wantPatches) {
				t.Errorf("writes %q, want %q", got, wantPatches)
			}
			if got := h.s.Marked.unchanged(cm.UID); got != tt.wantFresh {
				t.Errorf("the next look may skip the workloads: %t, want %t", got, tt.wantFresh)
			}
			logged := h.logs.With(`"msg"="label a sleeping workload"`)
			if tt.failLabel != (len(logged) == 1) || tt.failLabel && !strings.Contains(logged[0], `"workload"="Deployment amp-a/legacy"`) {
				t.Errorf("logged %q", logged)
			}
		})
	}
}

// A look whose reads fail says why.
func TestALookThatCannotReadSaysWhy(t *testing.T) {
	boom := errors.New("boom")
	for _, tt := range []struct {
		name    string
		gvk     schema.GroupVersionKind
		obj     func() []client.Object
		st      expiry.SleepState
		fail    string
		wantErr string
	}{
		{"the scale of an object scaled itself", rcGVK, func() []client.Object { return []client.Object{replicationController("rc", 0)} },
			expiry.SleepState{Phase: expiry.PhaseAsleep, Since: since, Replicas: ptr.To[int32](2)}, "get scale", "get the scale of ReplicationController/team-a/rc: boom"},
		{"the workloads", fixture.ConfigMapGVK, func() []client.Object {
			cm := env()
			return []client.Object{cm, owned("amp-a", cm)}
		}, expiry.SleepState{Phase: expiry.PhaseAsleep, Since: since, Generation: 1}, "read Deployment", "list the deployments in amp-a: boom"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			objs := tt.obj()
			h := newHarness(t, objs...)
			h.failing(tt.fail, boom)
			ev := h.ev(tt.gvk, objs[0].GetName())
			ev.Life.Sleep, ev.Life.Asleep = tt.st, true
			by, external, err := h.s.ObserveWake(h.ctx(), ev)
			if by != "" || external || err == nil || err.Error() != tt.wantErr {
				t.Errorf("ObserveWake = %q, %t, %v; want %q", by, external, err, tt.wantErr)
			}
		})
	}
}
