// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// sleepChannels carries every message type, those of sleep included.
func sleepChannels() map[v1alpha1.EventType][]string {
	c := toAll(people)
	for _, e := range []v1alpha1.EventType{v1alpha1.EventSleeping, v1alpha1.EventSlept, v1alpha1.EventWoke} {
		c[e] = people
	}
	return c
}

// TestSleepMessagesAreAboutASleepThatHappensOrHappened: the slept and
// woke messages are said of an object asleep and of a wake that was, the
// sleeping message of a sleep that can still come.
func TestSleepMessagesAreAboutASleepThatHappensOrHappened(t *testing.T) {
	t.Run("says neither slept nor woke of an object used while asleep, held at its maximum", func(t *testing.T) {
		s := Schedule{DefaultTTL: Day, MaxTTL: 10 * Day, SleepAfterIdle: 3 * time.Hour, SleepDeleteAfter: 14 * Day}
		// It slept a day after its creation, having woken once before;
		// then it was used at day 9 and reached its maximum asleep. A
		// postponement holds the deletion 12 hours more.
		st := SleepState{Phase: PhaseAsleep, Since: created.Add(Day), Woke: created.Add(12 * time.Hour), Generation: 1}
		a := sleepState(st)
		a[AnnotationLastActive] = rfc(created.Add(9 * Day))
		now := created.Add(10 * Day)
		l := s.Lifetime(created, a, now)
		rec := sent(&Record{ExpiresAt: l.ExpiresAt, Since: created, PostponedTo: now.Add(12 * time.Hour)}, KeyPostponed, now.Add(-time.Hour), people...)
		if p := Next(Input{Life: l, Schedule: s, Record: rec, Channels: sleepChannels(), Now: now}); p.Action != Wait {
			t.Errorf("Next = %+v, want a wait for the postponed deletion", p)
		}
	})
	t.Run("says no slept message of a sleep never finished, at the maximum", func(t *testing.T) {
		s := Schedule{DefaultTTL: Day, MaxTTL: 10 * Day, SleepAfterIdle: 3 * time.Hour, SleepDeleteAfter: 14 * Day}
		// Its sleep began a day after its creation and kept failing until
		// the maximum; a postponement holds the deletion 12 hours more.
		a := sleepState(SleepState{Phase: PhaseSleeping, Since: created.Add(Day), Generation: 1})
		now := created.Add(10 * Day)
		l := s.Lifetime(created, a, now)
		rec := sent(&Record{ExpiresAt: l.ExpiresAt, Since: created, PostponedTo: now.Add(12 * time.Hour)}, KeyPostponed, now.Add(-time.Hour), people...)
		if p := Next(Input{Life: l, Schedule: s, Record: rec, Channels: sleepChannels(), Now: now}); p.Action != Wait {
			t.Errorf("Next = %+v, want a wait for the postponed deletion", p)
		}
	})
	t.Run("says no woke message of an awake object that shows no wake", func(t *testing.T) {
		now := created.Add(time.Hour)
		l := sleepy.Lifetime(created, sleepState(SleepState{Phase: PhaseAwake}), now)
		p := Next(Input{Life: l, Schedule: sleepy, Record: (*Record)(nil).For(l.ExpiresAt, created, now), Channels: sleepChannels(), Now: now})
		if p.Action == Notify && p.Event == v1alpha1.EventWoke {
			t.Errorf("Next = %+v, want no woke message", p)
		}
	})
	t.Run("says no sleeping message of a sleep due past the maximum", func(t *testing.T) {
		s := Schedule{DefaultTTL: 2 * Day, MaxTTL: 3 * Day, SleepAfterIdle: 12 * time.Hour, SleepDeleteAfter: Day, SleepReminder: 10 * time.Hour}
		// Used 2d20h after creation: the sleep would be 8 hours past the
		// maximum, its message due 2 hours before it.
		a := map[string]string{AnnotationLastActive: rfc(created.Add(2*Day + 20*time.Hour))}
		now := created.Add(2*Day + 23*time.Hour)
		l := s.Lifetime(created, a, now)
		p := Next(Input{Life: l, Schedule: s, Record: (*Record)(nil).For(l.ExpiresAt, created, now), Channels: sleepChannels(), Now: now})
		if p.Action == Notify && p.Event == v1alpha1.EventSleeping {
			t.Errorf("Next = %+v, want no sleeping message", p)
		}
	})
}

// TestOnlyASleepAfterIdleIsUse: a sleep at a fixed time after creation
// moves the expiry, but the object is not alive because it was used.
func TestOnlyASleepAfterIdleIsUse(t *testing.T) {
	for _, tt := range []struct {
		name  string
		byUse bool
	}{
		{"a sleep after idle counts as use", true},
		{"a sleep at a fixed time does not", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := Lifetime{ExpiresAt: expires.Add(Day), Base: expires, Source: SourceSleep, SleepByUse: tt.byUse}
			if got := l.Idle(); got != tt.byUse {
				t.Errorf("Idle = %t, want %t", got, tt.byUse)
			}
		})
	}
}
