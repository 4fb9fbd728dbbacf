// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package sleep

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

var (
	deployments  = appsv1.SchemeGroupVersion.WithKind("Deployment")
	statefulSets = appsv1.SchemeGroupVersion.WithKind("StatefulSet")
	mebibytes64  = int64(64 << 20)
	requeue      = ctrl.Result{RequeueAfter: kube.ConflictRetry}
)

// sleeping is the state of a sleep of env under way since since.
func sleeping() expiry.SleepState {
	return expiry.SleepState{Phase: expiry.PhaseSleeping, Since: since, Generation: 1}
}

// A sleep of an object that owns namespaces scales each workload in them
// that runs to zero, in the write that saves its replicas and labels it
// with the object's UID; it leaves alone one at zero, goes on where a
// sleep under way stopped, and says Asleep, with what it freed, last.
func TestASleepScalesTheWorkloadsOfTheNamespacesTheObjectOwns(t *testing.T) {
	type want struct {
		result    ctrl.Result
		workloads map[string]workloadState
		// patched are the workloads written.
		patched []string
		// phase, freed, cpu and memory are the state after the sleep.
		phase       string
		freed       int32
		cpu, memory int64
		// event is part of the Slept Event; empty for none.
		event string
	}
	for _, tt := range []struct {
		name string
		// state is env's sleep annotation; empty for none.
		state string
		ttl   string
		objs  func(cm *corev1.ConfigMap) []client.Object
		want  want
	}{{
		name: "a first sleep scales the Deployments and StatefulSets that run, and those alone",
		ttl:  "30d",
		objs: func(cm *corev1.ConfigMap) []client.Object {
			return []client.Object{
				owned("amp-a", cm), owned("amp-b", cm), fixture.NewNamespace("other", nil),
				deployment("amp-a", "web", ptr.To[int32](2)), statefulSet("amp-a", "db", ptr.To[int32](1)),
				deployment("amp-a", "idle", ptr.To[int32](0)),
				// Unset replicas are one.
				deployment("amp-b", "api", nil),
				deployment("other", "elsewhere", ptr.To[int32](5)),
			}
		},
		want: want{
			result: ctrl.Result{},
			workloads: map[string]workloadState{
				"Deployment amp-a/web":       {0, "2", "uid-env"},
				"StatefulSet amp-a/db":       {0, "1", "uid-env"},
				"Deployment amp-a/idle":      {0, "", ""},
				"Deployment amp-b/api":       {0, "1", "uid-env"},
				"Deployment other/elsewhere": {5, "", ""},
			},
			patched: []string{"patch Deployment amp-a/web", "patch StatefulSet amp-a/db", "patch Deployment amp-b/api"},
			phase:   expiry.PhaseAsleep, freed: 4, cpu: 400, memory: 4 * mebibytes64,
			// Its ttl, written before the sleep, outlasts a day asleep.
			event: "Asleep since 2026-03-01T11:00:01Z (policy sleepy): 4 replicas scaled to zero; use wakes it; deleted at 2026-03-31T09:00:00Z unless used",
		},
	}, {
		name:  "a sleep under way goes on with the workloads it has not scaled, and counts those it had",
		state: state(sleeping()),
		objs: func(cm *corev1.ConfigMap) []client.Object {
			return []client.Object{
				owned("amp-a", cm),
				deployment("amp-a", "web", ptr.To[int32](0), expiry.AnnotationReplicas, "2", expiry.LabelAsleep, "uid-env"),
				statefulSet("amp-a", "db", ptr.To[int32](1)),
			}
		},
		want: want{
			result: ctrl.Result{},
			workloads: map[string]workloadState{
				"Deployment amp-a/web": {0, "2", "uid-env"},
				"StatefulSet amp-a/db": {0, "1", "uid-env"},
			},
			patched: []string{"patch StatefulSet amp-a/db"},
			phase:   expiry.PhaseAsleep, freed: 3, cpu: 300, memory: 3 * mebibytes64,
			// A day asleep, from when the sleep began.
			event: "Asleep since 2026-03-01T10:00:01Z (policy sleepy): 3 replicas scaled to zero; use wakes it; deleted at 2026-03-02T10:00:02Z unless used",
		},
	}, {
		name:  "a workload scaled up since a sleep under way scaled it down is use: the sleep stops there",
		state: state(sleeping()),
		objs: func(cm *corev1.ConfigMap) []client.Object {
			return []client.Object{
				owned("amp-a", cm),
				deployment("amp-a", "web", ptr.To[int32](1), expiry.AnnotationReplicas, "2", expiry.LabelAsleep, "uid-env"),
				statefulSet("amp-a", "db", ptr.To[int32](1)),
			}
		},
		want: want{
			result: requeue,
			workloads: map[string]workloadState{
				"Deployment amp-a/web": {1, "2", "uid-env"},
				"StatefulSet amp-a/db": {1, "", ""},
			},
			phase: expiry.PhaseSleeping,
		},
	}, {
		name:  "a sleep under way that another look completed is not done again",
		state: state(expiry.SleepState{Phase: expiry.PhaseAsleep, Since: since, Generation: 1, Freed: 1}),
		objs: func(cm *corev1.ConfigMap) []client.Object {
			return []client.Object{owned("amp-a", cm), statefulSet("amp-a", "db", ptr.To[int32](1))}
		},
		want: want{
			result:    requeue,
			workloads: map[string]workloadState{"StatefulSet amp-a/db": {1, "", ""}},
			phase:     expiry.PhaseAsleep, freed: 1,
		},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			cm := env()
			if tt.ttl != "" {
				fixture.TTL(tt.ttl)(cm)
			}
			h := newHarness(t, append(tt.objs(cm), cm)...)
			ev := h.ev(fixture.ConfigMapGVK, "env")
			if tt.state != "" {
				// The look saw the sleep under way, which the API server
				// may have moved on from since.
				ev.Life.Sleep = sleeping()
				ev.Obj.Annotations = map[string]string{expiry.AnnotationSleep: tt.state}
				fixture.Annotated(expiry.AnnotationSleep, tt.state)(cm)
				if err := h.client.Update(h.ctx(), cm); err != nil {
					t.Fatal(err)
				}
				ev.Obj.ResourceVersion = h.meta(fixture.ConfigMapGVK, "team-a", "env").ResourceVersion
			}
			h.made("")
			slept := count(t, sleeps)

			res, err := h.s.Sleep(h.ctx(), ev)
			if err != nil || res != tt.want.result {
				t.Fatalf("Sleep = %+v, %v; want %+v, no error", res, err, tt.want.result)
			}
			h.expectWorkloads(tt.want.workloads)
			patched, reads := h.writes()
			if !slices.Equal(patched, tt.want.patched) {
				t.Errorf("workloads written %q, want %q", patched, tt.want.patched)
			}
			// Only its workloads were written since the look wrote the
			// object, or read it for a sleep under way: the last write
			// needs no other read.
			if want := min(len(tt.state), 1); len(reads) != want {
				t.Errorf("the object read %d times, want %d", len(reads), want)
			}
			if act := h.meta(fixture.ConfigMapGVK, "team-a", "env").Annotations[expiry.AnnotationActivity]; act != "" {
				t.Errorf("activity annotation %q written: the object changed no generation", act)
			}
			st := h.stateOf(fixture.ConfigMapGVK, "env")
			if st.Phase != tt.want.phase || st.Freed != tt.want.freed || st.FreedCPUMillis != tt.want.cpu || st.FreedMemoryBytes != tt.want.memory {
				t.Errorf("state %s; want %s, %d replicas, %dm and %d bytes freed", st, tt.want.phase, tt.want.freed, tt.want.cpu, tt.want.memory)
			}
			if !st.Since.Equal(since) && !st.Since.Equal(now) {
				t.Errorf("asleep since %s", st.Since)
			}
			evs := h.events()
			if tt.want.event == "" {
				if len(evs) != 0 || count(t, sleeps) != slept {
					t.Errorf("Events %q, %v sleeps counted; want none", evs, count(t, sleeps)-slept)
				}
				return
			}
			if want := "Normal Slept " + tt.want.event; !slices.Equal(evs, []string{want}) {
				t.Errorf("Events %q, want %q", evs, want)
			}
			if got := count(t, sleeps) - slept; got != 1 {
				t.Errorf("%v sleeps counted, want 1", got)
			}
			if got := h.logs.With(`"msg"="slept"`); len(got) != 1 || !strings.Contains(got[0], `"patched"=false`) || !strings.Contains(got[0], `"replicas"=`) {
				t.Errorf("logged %q, want one line that says slept, with the replicas and not patched", got)
			}
		})
	}
}

// A sleep writes the object's state before it scales anything, and says
// Asleep after; a write that fails stops it, with what the next look
// needs.
func TestASleepThatCannotWriteStopsWhereItIs(t *testing.T) {
	boom := errors.New("boom")
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "env", boom)
	gone := apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "env")
	for _, tt := range []struct {
		name string
		// fail is the request that fails, and with what.
		fail string
		err  error
		// nth fails the nth request of that kind (0: every one).
		nth        int
		wantResult ctrl.Result
		// wantErr is part of the error; empty for none.
		wantErr string
		// wantPhase is env's phase after; empty for none.
		wantPhase string
		// web is the replicas of amp-a/web after.
		web int32
	}{
		{"the namespaces the object owns are not known", "list Namespace", boom, 0, ctrl.Result{}, "list the namespaces uid-env owns: boom", "", 2},
		{"the deployments cannot be read", "read Deployment amp-a", boom, 0, ctrl.Result{}, "list the deployments in amp-a: boom", "", 2},
		{"the statefulsets cannot be read", "read StatefulSet amp-a", boom, 0, ctrl.Result{}, "list the statefulsets in amp-a: boom", "", 2},
		{"the object's scale cannot be read", "get scale", boom, 0, ctrl.Result{}, "get the scale of ConfigMap/team-a/env: boom", "", 2},
		{"the object's scale is not supported", "get scale", apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "configmaps"}, "get"), 0, ctrl.Result{}, "", expiry.PhaseAsleep, 0},
		{"the first write conflicts", "patch ConfigMap", conflict, 1, requeue, "", "", 2},
		{"the first write finds the object gone", "patch ConfigMap", gone, 1, ctrl.Result{}, "", "", 2},
		{"the first write fails", "patch ConfigMap", boom, 1, ctrl.Result{}, "write the sleep state of ConfigMap/team-a/env: boom", "", 2},
		{"a workload changed since it was read", "patch Deployment", conflict, 0, requeue, "", expiry.PhaseSleeping, 2},
		{"a workload cannot be scaled", "patch Deployment", boom, 0, ctrl.Result{}, "scale Deployment amp-a/web to zero: boom", expiry.PhaseSleeping, 2},
		{"the last write conflicts", "patch ConfigMap", conflict, 2, requeue, "", expiry.PhaseSleeping, 0},
		{"the last write fails", "patch ConfigMap", boom, 2, ctrl.Result{}, "write the sleep state of ConfigMap/team-a/env: boom", expiry.PhaseSleeping, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cm := env()
			h := newHarness(t, cm, owned("amp-a", cm), deployment("amp-a", "web", ptr.To[int32](2)))
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
			res, err := h.s.Sleep(h.ctx(), h.ev(fixture.ConfigMapGVK, "env"))
			if res != tt.wantResult {
				t.Errorf("result %+v, want %+v", res, tt.wantResult)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr || !errors.Is(err, tt.err)):
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
			if got := h.stateOf(fixture.ConfigMapGVK, "env").Phase; got != tt.wantPhase {
				t.Errorf("phase %q, want %q", got, tt.wantPhase)
			}
			if got := h.replicas(deployments, "amp-a", "web").replicas; got != tt.web {
				t.Errorf("web at %d replicas, want %d", got, tt.web)
			}
			if evs := h.events(); tt.wantPhase != expiry.PhaseAsleep && len(evs) != 0 {
				t.Errorf("Events %q, want none", evs)
			}
		})
	}
}

// The replicas a sleep freed are what it scaled down and what the pod
// templates of those replicas request.
func TestPodSpecRequestsAreThoseOfTheTemplatesContainers(t *testing.T) {
	cpu, mem := podSpecRequests(podSpec().Spec)
	if cpu != 100 || mem != mebibytes64 {
		t.Errorf("requests %dm, %d bytes; want 100m, 64Mi", cpu, mem)
	}
}

// count is the value of a counter.
func count(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A sleep under way goes on only once the API server shows the object
// still in it: one that cannot be read, is gone, or was replaced is left
// to the next look.
func TestASleepUnderWayGoesOnOnlyWithTheObjectItBegan(t *testing.T) {
	boom := errors.New("boom")
	for _, tt := range []struct {
		name string
		// fail fails the read of the object; gone deletes it; uid is the
		// UID of the object the API server has.
		fail    error
		gone    bool
		uid     string
		wantErr string
	}{
		{name: "the object cannot be read", fail: boom, wantErr: "get ConfigMap/team-a/env: boom"},
		{name: "the object is gone", gone: true},
		{name: "the object was replaced by another of its name", uid: "uid-another"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cm := env(fixture.Annotated(expiry.AnnotationSleep, sleeping().String()))
			ns := owned("amp-a", cm)
			if tt.uid != "" {
				cm.UID = types.UID(tt.uid)
			}
			h := newHarness(t, cm, ns, statefulSet("amp-a", "db", ptr.To[int32](1)))
			ev := h.ev(fixture.ConfigMapGVK, "env")
			ev.Obj.UID = "uid-env"
			if tt.gone {
				if err := h.client.Delete(h.ctx(), cm); err != nil {
					t.Fatal(err)
				}
			}
			if tt.fail != nil {
				h.failing("read ConfigMap", tt.fail)
			}
			res, err := h.s.Sleep(h.ctx(), ev)
			if res != requeue {
				t.Errorf("result %+v, want %+v", res, requeue)
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
			if got := h.replicas(statefulSets, "amp-a", "db"); got != (workloadState{1, "", ""}) {
				t.Errorf("db: %s; want it as it was", got)
			}
			if evs := h.events(); len(evs) != 0 {
				t.Errorf("Events %q, want none", evs)
			}
		})
	}
}
