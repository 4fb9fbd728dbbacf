// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// 2,000 objects falling idle in the same second under 10 sleeps a second:
// each gets a turn, in the order it came, 100 ms apart; an object back
// before its turn keeps it, and none is skipped.
func TestSleepTurnsSpreadABurstInOrder(t *testing.T) {
	turns := newSleepTurns(10)
	now := time.Date(2026, 11, 30, 18, 0, 0, 0, time.UTC)
	var got []time.Time
	for i := range 2000 {
		got = append(got, turns.admit(capKey(i), now))
	}
	if !got[0].Equal(now) {
		t.Fatalf("the first sleep waits until %s", got[0])
	}
	for i := 1; i < len(got); i++ {
		if gap := got[i].Sub(got[i-1]); gap != 100*time.Millisecond {
			t.Fatalf("turns %d and %d are %s apart", i-1, i, gap)
		}
	}
	// Back early (another event about it): the same turn, not a new one.
	early := now.Add(time.Second)
	if at := turns.admit(capKey(1500), early); !at.Equal(got[1500]) {
		t.Fatalf("back early the object got %s, want its turn %s", at, got[1500])
	}
	// At its turn it goes, and the turn is used up.
	if at := turns.admit(capKey(1500), got[1500]); !at.Equal(got[1500]) {
		t.Fatalf("at its turn the object got %s, want %s", at, got[1500])
	}
	if _, kept := turns.turns[capKey(1500)]; kept {
		t.Fatal("a turn taken is still held")
	}
	// A deleted object's turn is dropped.
	turns.forget(capKey(1999))
	if _, kept := turns.turns[capKey(1999)]; kept {
		t.Fatal("a forgotten turn is still held")
	}
}

func TestNoSleepCapNoTurn(t *testing.T) {
	turns := newSleepTurns(0)
	now := time.Date(2026, 11, 30, 18, 0, 0, 0, time.UTC)
	for i := range 100 {
		if at := turns.admit(capKey(i), now); !at.Equal(now) {
			t.Fatalf("object %d waits until %s with no cap", i, at)
		}
	}
	turns.forget(capKey(1))
}

// Two objects fall idle at once under one sleep a second: the first
// sleeps at once, the second waits its turn, a second later, and sleeps
// then; a wake is never held back.
func TestASecondSleepWaitsItsTurnAndAWakeDoesNot(t *testing.T) {
	first, objs := sleepyObjects()
	second := fixture.NewConfigMap("env-2", firstGeneration)
	h := newHarness(t, fixture.T0.Add(time.Hour+time.Second), append(objs, second)...)
	h.r.SleepsPerSecond = 1

	if _, err := h.reconcile(first); err != nil {
		t.Fatal(err)
	}
	if st := h.sleepStored(first); st.Phase != expiry.PhaseAsleep {
		t.Fatalf("the first is %q, want asleep", st.Phase)
	}
	res, err := h.reconcile(second)
	if err != nil {
		t.Fatal(err)
	}
	if st := h.sleepStored(second); st.Phase != "" {
		t.Fatalf("the second is %q before its turn", st.Phase)
	}
	if res.RequeueAfter != time.Second {
		t.Fatalf("the second is looked at again after %s, want its turn a second later", res.RequeueAfter)
	}
	h.clock.Step(time.Second)
	if _, err := h.reconcile(second); err != nil {
		t.Fatal(err)
	}
	if st := h.sleepStored(second); st.Phase != expiry.PhaseAsleep {
		t.Fatalf("the second is %q at its turn, want asleep", st.Phase)
	}

	// Both used at once: both wake at once.
	for _, cm := range []*corev1.ConfigMap{first, second} {
		h.annotate(cm, expiry.AnnotationLastActive, h.clock.Now().UTC().Format(time.RFC3339))
		if _, err := h.reconcile(cm); err != nil {
			t.Fatal(err)
		}
		if st := h.sleepStored(cm); st.Phase != expiry.PhaseAwake {
			t.Fatalf("%s is %q after its use, want awake", cm.Name, st.Phase)
		}
	}
}
