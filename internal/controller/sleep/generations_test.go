// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package sleep

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// A sleep that begins writes down the generation of each workload it
// found, and drops them once asleep: while it is under way, a workload it
// has not scaled down whose generation changed since was changed by
// someone else (written back from its manifest during a failover, or
// scaled), which is use, not a workload it has yet to reach.
func TestASleepUnderWayTakesAWorkloadChangedSinceItBeganForUse(t *testing.T) {
	t.Run("the state under way records the generations, and the state asleep drops them", func(t *testing.T) {
		cm := env()
		web := deployment("amp-a", "web", ptr.To[int32](2))
		web.Generation = 4
		h := newHarness(t, cm, owned("amp-a", cm), web, statefulSet("amp-a", "db", ptr.To[int32](1)))
		// The last write fails: the state under way stays as written.
		n := 0
		h.fail = func(req string) error {
			if strings.HasPrefix(req, "patch ConfigMap") {
				if n++; n == 2 {
					return errors.New("boom")
				}
			}
			return nil
		}
		if _, err := h.s.Sleep(h.ctx(), h.ev(fixture.ConfigMapGVK, "env")); err == nil {
			t.Fatal("the last write failed, and Sleep said nothing")
		}
		st := h.stateOf(fixture.ConfigMapGVK, "env")
		want := map[string]int64{"Deployment amp-a/web": 4, "StatefulSet amp-a/db": 1}
		if st.Phase != expiry.PhaseSleeping || len(st.Workloads) != len(want) || st.Workloads["Deployment amp-a/web"] != 4 || st.Workloads["StatefulSet amp-a/db"] != 1 {
			t.Fatalf("state under way %+v, want Sleeping with the workloads %v", st, want)
		}
		h.fail = nil
		if _, err := h.s.Sleep(h.ctx(), h.ev(fixture.ConfigMapGVK, "env")); err != nil {
			t.Fatal(err)
		}
		if st := h.stateOf(fixture.ConfigMapGVK, "env"); st.Phase != expiry.PhaseAsleep || st.Workloads != nil {
			t.Errorf("state %+v, want Asleep without the workloads", st)
		}
	})

	t.Run("a workload the sleep scaled down, at the generation its own write gave it, is not", func(t *testing.T) {
		st := sleeping()
		st.Workloads = map[string]int64{"Deployment amp-a/web": 1, "StatefulSet amp-a/db": 1}
		cm := env(fixture.Annotated(expiry.AnnotationSleep, st.String()))
		web := deployment("amp-a", "web", ptr.To[int32](0), expiry.AnnotationReplicas, "2", expiry.LabelAsleep, "uid-env")
		web.Generation = 2
		h := newHarness(t, cm, owned("amp-a", cm), web, statefulSet("amp-a", "db", ptr.To[int32](1)))
		if wokeBy, _, err := h.s.ObserveWake(h.ctx(), h.ev(fixture.ConfigMapGVK, "env")); err != nil || wokeBy != "" {
			t.Fatalf("ObserveWake = %q, %v; want nothing woke it", wokeBy, err)
		}
		if _, err := h.s.Sleep(h.ctx(), h.ev(fixture.ConfigMapGVK, "env")); err != nil {
			t.Fatal(err)
		}
		st = h.stateOf(fixture.ConfigMapGVK, "env")
		if st.Phase != expiry.PhaseAsleep || st.Freed != 3 || h.replicas(statefulSets, "amp-a", "db").replicas != 0 {
			t.Errorf("state %s, db %s; want the sleep completed, 3 replicas freed", st, h.replicas(statefulSets, "amp-a", "db"))
		}
	})

	for _, tt := range []struct {
		name string
		// generation is web's when the sleep resumes; it began at 1.
		generation int64
		wantUse    bool
	}{
		{"a workload at the generation the sleep found is one it has yet to reach", 1, false},
		{"a workload at another generation was changed by someone else", 3, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := sleeping()
			st.Workloads = map[string]int64{"Deployment amp-a/web": 1}
			cm := env(fixture.Annotated(expiry.AnnotationSleep, st.String()))
			web := deployment("amp-a", "web", ptr.To[int32](2))
			web.Generation = tt.generation
			h := newHarness(t, cm, owned("amp-a", cm), web)

			ev := h.ev(fixture.ConfigMapGVK, "env")
			wokeBy, external, err := h.s.ObserveWake(h.ctx(), ev)
			if err != nil {
				t.Fatal(err)
			}
			if got := wokeBy != ""; got != tt.wantUse || external != tt.wantUse {
				t.Errorf("ObserveWake = %q, external %t; want use %t", wokeBy, external, tt.wantUse)
			}
			if tt.wantUse && wokeBy != "Deployment amp-a/web changed by someone else during the sleep (generation 3)" {
				t.Errorf("woken by %q, want the workload and its generation named", wokeBy)
			}

			res, err := h.s.Sleep(h.ctx(), h.ev(fixture.ConfigMapGVK, "env"))
			if err != nil {
				t.Fatal(err)
			}
			got := h.replicas(deployments, "amp-a", "web")
			if tt.wantUse {
				if res != requeue || got != (workloadState{2, "", ""}) {
					t.Errorf("Sleep = %+v, web %s; want a requeue, and web left running as it is", res, got)
				}
				if st := h.stateOf(fixture.ConfigMapGVK, "env"); st.Phase != expiry.PhaseSleeping {
					t.Errorf("phase %q, want still Sleeping, for the look that wakes it", st.Phase)
				}
				return
			}
			if got.replicas != 0 || h.stateOf(fixture.ConfigMapGVK, "env").Phase != expiry.PhaseAsleep {
				t.Errorf("web %s, phase %q; want it scaled down and the object asleep", got, h.stateOf(fixture.ConfigMapGVK, "env").Phase)
			}
		})
	}
}

// Use is counted to the second: a sleep that begins in the second of the
// object's last use (recorded by the look that brought the sleep) counts
// from the next second, or that use would read as use since the sleep and
// wake the object at once. One that begins later counts from when it
// began.
func TestASleepCountsFromTheSecondAfterTheLastUse(t *testing.T) {
	for _, tt := range []struct {
		name      string
		lastUse   time.Time
		wantSince time.Time
	}{
		{"use in the sleep's second", now.Truncate(time.Second).Add(200 * time.Millisecond), now.Truncate(time.Second).Add(time.Second)},
		{"use at the start of the sleep's second", now.Truncate(time.Second), now.Truncate(time.Second).Add(time.Second)},
		{"use in the second before", now.Truncate(time.Second).Add(-time.Millisecond), now},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cm := env()
			h := newHarness(t, cm, owned("amp-a", cm), deployment("amp-a", "web", ptr.To[int32](2)))
			ev := h.ev(fixture.ConfigMapGVK, "env")
			ev.Now = now.Add(300 * time.Millisecond)
			ev.Life.LastActive = tt.lastUse
			if _, err := h.s.Sleep(h.ctx(), ev); err != nil {
				t.Fatal(err)
			}
			want := tt.wantSince
			if tt.wantSince.Equal(now) {
				want = ev.Now
			}
			if st := h.stateOf(fixture.ConfigMapGVK, "env"); !st.Since.Equal(want) {
				t.Errorf("asleep since %s, want %s", st.Since.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
			}
		})
	}
}
