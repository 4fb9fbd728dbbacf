// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/sleep"
)

// sleepFacts are what the scene of sleep saw, for its verdict and the
// test.
type sleepFacts struct {
	// obj is the Playbook as created; replicas its Deployments' then.
	obj      *unstructured.Unstructured
	replicas map[string]int32
	// sleeps and wakes are each sleep and wake, in order.
	sleeps, wakes []sleepStep
	// wokenAt is when the demo last used it to wake it; execErr is how
	// the exec failed (there is no kubelet).
	wokenAt time.Time
	execErr string
	// wakeAsked is the sleep after which the demo last woke it.
	wakeAsked int
	// deletedAt is when its deletion reached the demo.
	deletedAt time.Time
	// messages are those about it, in the order they came; events the
	// Events about it, counted by reason.
	messages []message
	events   map[string]int
}

// sleepStep is one sleep or wake: at is when the controller says it
// happened, seen when the demo saw it, from the activity it counts from
// (or the use that woke it), and the Deployments' replicas then.
type sleepStep struct {
	at, seen, from time.Time
	replicas       map[string]int32
	freed          int32
	// by is what woke it.
	by string
}

func (f *sleepFacts) lastSleep() time.Time {
	if len(f.sleeps) == 0 {
		return time.Time{}
	}
	return f.sleeps[len(f.sleeps)-1].at
}

// count returns how many messages of type typ came about the Playbook.
func (f *sleepFacts) count(typ v1alpha1.EventType) int {
	n := 0
	for _, m := range f.messages {
		if m.event == typ {
			n++
		}
	}
	return n
}

// line is the demo's summary of the scene.
func (f *sleepFacts) line() string {
	return fmt.Sprintf("%s slept %d times and woke %d (by %s), then was deleted asleep",
		sleepTitle, len(f.sleeps), len(f.wakes), strings.Join(f.wokeBy(), ", then "))
}

func (f *sleepFacts) wokeBy() []string {
	var by []string
	for _, w := range f.wakes {
		by = append(by, w.by)
	}
	return by
}

// judgeSleep finds what went wrong in the scene of sleep: a sleep, a wake
// or the deletion early, late, missing or doubled; a workload not scaled
// down or back; a message or an Event missing or doubled.
func (s *story) judgeSleep(ctx context.Context, cl client.Client, f *sleepFacts) error {
	if len(f.sleeps) != sleeps || len(f.wakes) != sleeps-1 {
		s.problem("%s slept %d times and woke %d, want %d and %d", sleepTitle, len(f.sleeps), len(f.wakes), sleeps, sleeps-1)
	}
	for i, st := range f.sleeps {
		if v := verdictOf(st.at, st.from.Add(sleepAfter), st.from.Add(sleepAfter)); v != "on time" {
			s.problem("%s: sleep %d %s: at %s, %s after the activity it counts from", sleepTitle, i+1, v, formatUTC(st.at), st.at.Sub(st.from))
		}
		for name, n := range st.replicas {
			if n != 0 {
				s.problem("%s: asleep (sleep %d) with Deployment %s at %d replicas", sleepTitle, i+1, name, n)
			}
		}
	}
	for i, w := range f.wakes {
		if lag := w.seen.Sub(w.from); lag > lateAfter || w.at.Before(w.from.Add(-time.Second)) {
			s.problem("%s: wake %d LATE or before its use: woke at %s, used at %s", sleepTitle, i+1, formatUTC(w.at), formatUTC(w.from))
		}
		if !maps.Equal(w.replicas, f.replicas) {
			s.problem("%s: woken (wake %d) with Deployments %s, want %s", sleepTitle, i+1, formatReplicas(w.replicas), formatReplicas(f.replicas))
		}
	}
	if want := "use (exec by " + execUser + ")"; len(f.wakes) == sleeps-1 && f.wakes[1].by != want {
		s.problem("%s: the second wake was by %q, want %q", sleepTitle, f.wakes[1].by, want)
	}
	if !f.deletedAt.IsZero() && len(f.sleeps) > 0 {
		due := f.lastSleep().Add(sleepDeleteAfter)
		if v := verdictOf(f.deletedAt, due, due); v != "on time" {
			s.problem("%s: deleted %s, at %s, %s after its last sleep", sleepTitle, v, formatUTC(f.deletedAt), f.deletedAt.Sub(f.lastSleep()))
		}
	}

	want := map[v1alpha1.EventType]int{v1alpha1.EventSlept: sleeps, v1alpha1.EventWoke: sleeps - 1, v1alpha1.EventExpired: 1, v1alpha1.EventDeleted: 1}
	ids := map[string]bool{}
	got := map[v1alpha1.EventType]int{}
	for _, m := range f.messages {
		if ids[m.id] {
			s.problem("%s: the %s message %s came twice", sleepTitle, m.event, m.id)
		}
		ids[m.id] = true
		got[m.event]++
	}
	for _, typ := range v1alpha1.EventTypes {
		if got[typ] != want[typ] {
			s.problem("%s: %d %s messages by webhook, want %d", sleepTitle, got[typ], typ, want[typ])
		}
	}

	var events eventsv1.EventList
	if err := cl.List(ctx, &events, client.InNamespace(eventNamespace)); err != nil {
		return fmt.Errorf("list Events: %w", err)
	}
	f.events = map[string]int{}
	for _, e := range events.Items {
		if e.Regarding.UID == f.obj.GetUID() {
			n := 1
			if e.Series != nil {
				n = int(e.Series.Count)
			}
			f.events[e.Reason] += n
		}
	}
	for reason, n := range map[string]int{sleep.ReasonSlept: sleeps, sleep.ReasonWoke: sleeps - 1} {
		if f.events[reason] != n {
			s.problem("%s: %d %s Events, want %d", sleepTitle, f.events[reason], reason, n)
		}
	}
	s.n.say("%s", f.line())
	for _, p := range s.problemsSoFar() {
		s.n.say("PROBLEM: %s", p)
	}
	return nil
}
