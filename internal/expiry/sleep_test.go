// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// sleepy sleeps objects 3 hours after their last use and deletes them
// after 14 days asleep; reminders 3d and 2d before deletion.
var sleepy = Schedule{DefaultTTL: Day, Reminders: []time.Duration{3 * Day, 2 * Day}, MinimumNotice: Day,
	SleepAfterIdle: 3 * time.Hour, SleepDeleteAfter: 14 * Day}

func sleepState(s SleepState) map[string]string {
	return map[string]string{AnnotationSleep: s.String()}
}

func TestSleepPlan(t *testing.T) {
	asleep := SleepState{Phase: PhaseAsleep, Since: created.Add(4 * time.Hour), Generation: 1}
	tests := []struct {
		name        string
		schedule    Schedule
		annotations map[string]string
		now         time.Time
		wokeBy      string
		dryRun      bool
		wantAction  Action
		wantAt      time.Time // for Wait and Sleep
		wantExpiry  time.Time
		wantWokeBy  string
	}{
		{
			name: "waits for the idle time before sleeping: nothing sleeps early", schedule: sleepy,
			now: created.Add(3*time.Hour - time.Second), wantAction: Wait, wantAt: created.Add(3 * time.Hour),
			wantExpiry: created.Add(3*time.Hour + 14*Day),
		},
		{
			name: "sleeps once idle for afterIdle", schedule: sleepy,
			now: created.Add(3 * time.Hour), wantAction: Sleep, wantAt: created.Add(3 * time.Hour),
			wantExpiry: created.Add(3*time.Hour + 14*Day),
		},
		{
			name: "sleeps later when used: the idle clock counts from the last activity", schedule: sleepy,
			annotations: map[string]string{AnnotationLastActive: created.Add(2 * time.Hour).Format(time.RFC3339)},
			now:         created.Add(4 * time.Hour), wantAction: Wait, wantAt: created.Add(5 * time.Hour),
			wantExpiry: created.Add(5*time.Hour + 14*Day),
		},
		{
			name: "sleeps by age with after", schedule: Schedule{DefaultTTL: Day, SleepAfter: 2 * Day, SleepDeleteAfter: Week},
			now: created.Add(2 * Day), wantAction: Sleep, wantAt: created.Add(2 * Day), wantExpiry: created.Add(2*Day + Week),
		},
		{
			name:        "sleeps by age again only after another age from its last wake",
			schedule:    Schedule{DefaultTTL: Day, SleepAfter: 2 * Day, SleepDeleteAfter: Week},
			annotations: sleepState(SleepState{Phase: PhaseAwake, Woke: created.Add(3 * Day)}),
			now:         created.Add(4 * Day), wantAction: Wait, wantAt: created.Add(5 * Day), wantExpiry: created.Add(5*Day + Week),
		},
		{
			name: "a sleeping object is deleted deleteAfter after it went to sleep, not before", schedule: Schedule{DefaultTTL: Day, SleepAfterIdle: 3 * time.Hour, SleepDeleteAfter: 14 * Day},
			annotations: sleepState(asleep), now: asleep.Since.Add(14*Day - time.Second), wantAction: Wait,
			wantAt: asleep.Since.Add(14 * Day), wantExpiry: asleep.Since.Add(14 * Day),
		},
		{
			name: "deletes a sleeping object once its time asleep is over and notice was given", schedule: Schedule{DefaultTTL: Day, SleepAfterIdle: 3 * time.Hour, SleepDeleteAfter: 14 * Day},
			annotations: sleepState(asleep), now: asleep.Since.Add(14 * Day), wantAction: Delete,
			wantExpiry: asleep.Since.Add(14 * Day),
		},
		{
			name: "the deletion is never earlier than the lifetime's own expiry", schedule: Schedule{DefaultTTL: 30 * Day, SleepAfterIdle: 3 * time.Hour, SleepDeleteAfter: Day},
			annotations: sleepState(asleep), now: asleep.Since.Add(2 * Day), wantAction: Wait,
			wantAt: created.Add(30 * Day), wantExpiry: created.Add(30 * Day),
		},
		{
			name: "maxTTL bounds the whole life: a sleeping object goes at its maximum", schedule: Schedule{DefaultTTL: Day, MaxTTL: 5 * Day, SleepAfterIdle: 3 * time.Hour, SleepDeleteAfter: 14 * Day},
			annotations: sleepState(asleep), now: created.Add(5 * Day), wantAction: Delete, wantExpiry: created.Add(5 * Day),
		},
		{
			name: "an awake object at its maximum is deleted, not put to sleep", schedule: Schedule{DefaultTTL: Day, MaxTTL: 5 * Day, SleepAfterIdle: 3 * time.Hour, SleepDeleteAfter: 14 * Day},
			annotations: map[string]string{AnnotationLastActive: created.Add(5*Day - time.Hour).Format(time.RFC3339)},
			now:         created.Add(5 * Day), wantAction: Delete, wantExpiry: created.Add(5 * Day),
		},
		{
			name: "wakes a sleeping object used after it went to sleep", schedule: sleepy,
			annotations: map[string]string{AnnotationSleep: asleep.String(), AnnotationLastActive: asleep.Since.Add(time.Hour).Format(time.RFC3339)},
			now:         asleep.Since.Add(2 * time.Hour), wantAction: Wake, wantWokeBy: "use (" + AnnotationLastActive + ")",
			wantExpiry: asleep.Since.Add(4*time.Hour + 14*Day),
		},
		{
			name: "wakes a sleeping object whose workloads someone else scaled up", schedule: sleepy,
			annotations: sleepState(asleep), wokeBy: "Deployment amp-1/web scaled up",
			now: asleep.Since.Add(time.Hour), wantAction: Wake, wantWokeBy: "Deployment amp-1/web scaled up",
			wantExpiry: asleep.Since.Add(14 * Day),
		},
		{
			name: "the keep annotation wakes a sleeping object", schedule: sleepy,
			annotations: map[string]string{AnnotationSleep: asleep.String(), AnnotationKeep: "true"},
			now:         asleep.Since.Add(time.Hour), wantAction: Wake, wantWokeBy: WokeByKeep,
		},
		{
			name: "the keep annotation keeps from sleeping", schedule: sleepy,
			annotations: map[string]string{AnnotationKeep: "true"}, now: created.Add(Week), wantAction: Keep,
		},
		{
			name: "a policy that no longer sleeps wakes its sleeping objects", schedule: standard,
			annotations: sleepState(asleep), now: asleep.Since.Add(time.Hour), wantAction: Wake, wantWokeBy: WokeByPolicy,
			wantExpiry: expires,
		},
		{
			name: "completes a wake under way", schedule: sleepy,
			annotations: sleepState(SleepState{Phase: PhaseWaking, Since: asleep.Since, Woke: asleep.Since.Add(time.Hour), WokeBy: "use"}),
			now:         asleep.Since.Add(time.Hour), wantAction: Wake, wantWokeBy: "use",
			wantExpiry: asleep.Since.Add(4*time.Hour + 14*Day),
		},
		{
			name: "completes a sleep under way", schedule: sleepy,
			annotations: sleepState(SleepState{Phase: PhaseSleeping, Since: asleep.Since}),
			now:         asleep.Since.Add(time.Minute), wantAction: Sleep, wantAt: asleep.Since, wantExpiry: asleep.Since.Add(14 * Day),
		},
		{
			name: "restarts the idle clock at a wake: sleeps again only after a fresh idle period", schedule: sleepy,
			annotations: sleepState(SleepState{Phase: PhaseAwake, Since: asleep.Since, Woke: asleep.Since.Add(Day)}),
			now:         asleep.Since.Add(Day + 2*time.Hour), wantAction: Wait, wantAt: asleep.Since.Add(Day + 3*time.Hour),
			wantExpiry: asleep.Since.Add(Day + 3*time.Hour + 14*Day),
		},
		{
			name: "puts nothing to sleep under a dry run", schedule: sleepy, dryRun: true,
			now: created.Add(4 * time.Hour), wantAction: Wait, wantAt: created.Add(3*time.Hour + 14*Day - 3*Day),
			wantExpiry: created.Add(3*time.Hour + 14*Day),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.schedule.Lifetime(created, tt.annotations, afterAll)
			var rec *Record
			if !l.Keep {
				rec = (*Record)(nil).ForLife(l, created, tt.now)
			}
			p := Next(Input{Life: l, Schedule: tt.schedule, Record: rec, Channels: map[v1alpha1.EventType][]string{
				v1alpha1.EventReminder: {"events"},
			}, DryRun: tt.dryRun, WokeBy: tt.wokeBy, Now: tt.now})
			if p.Action != tt.wantAction {
				t.Fatalf("action %s (%+v), want %s", p.Action, p, tt.wantAction)
			}
			if !tt.wantAt.IsZero() && !p.At.Equal(tt.wantAt) {
				t.Errorf("at %s, want %s", p.At, tt.wantAt)
			}
			if p.WokeBy != tt.wantWokeBy {
				t.Errorf("woke by %q, want %q", p.WokeBy, tt.wantWokeBy)
			}
			if !tt.wantExpiry.IsZero() && !l.ExpiresAt.Equal(tt.wantExpiry) {
				t.Errorf("expires %s, want %s", l.ExpiresAt, tt.wantExpiry)
			}
		})
	}
}

func TestSleptAndWokeAreSaidOnce(t *testing.T) {
	asleep := SleepState{Phase: PhaseAsleep, Since: created.Add(4 * time.Hour)}
	l := sleepy.Lifetime(created, sleepState(asleep), afterAll)
	now := asleep.Since.Add(time.Minute)
	ch := map[v1alpha1.EventType][]string{v1alpha1.EventSlept: {"events"}, v1alpha1.EventWoke: {"events"}}
	rec := (*Record)(nil).ForLife(l, created, now)
	p := Next(Input{Life: l, Schedule: sleepy, Record: rec, Channels: ch, Now: now})
	if p.Action != Notify || p.Event != v1alpha1.EventSlept || !p.At.Equal(asleep.Since.Add(14*Day)) {
		t.Fatalf("plan %+v, want the slept message announcing the deletion", p)
	}
	rec.Delivered(p.Key, false, p.Channels, now)
	if p := Next(Input{Life: l, Schedule: sleepy, Record: rec, Channels: ch, Now: now}); p.Action != Wait {
		t.Fatalf("plan %+v after slept was delivered, want Wait", p)
	}

	woke := SleepState{Phase: PhaseAwake, Since: asleep.Since, Woke: asleep.Since.Add(Day)}
	now = woke.Woke.Add(time.Minute)
	l = sleepy.Lifetime(created, sleepState(woke), afterAll)
	rec = rec.ForLife(l, created, now)
	p = Next(Input{Life: l, Schedule: sleepy, Record: rec, Channels: ch, Now: now})
	if p.Action != Notify || p.Event != v1alpha1.EventWoke {
		t.Fatalf("plan %+v, want the woke message", p)
	}
	if rec.ExtendedFrom != (time.Time{}) {
		t.Errorf("a wake owes no extension message: extended from %s", rec.ExtendedFrom)
	}
	rec.Delivered(p.Key, false, p.Channels, now)
	// Used again: the expiry moves, the woke message is not said again.
	later := now.Add(time.Hour)
	l = sleepy.Lifetime(created, map[string]string{AnnotationSleep: woke.String(), AnnotationLastActive: later.Format(time.RFC3339)}, afterAll)
	if !rec.Follows(l) {
		t.Errorf("a record holding only the woke message follows use without a write")
	}
	rec = rec.ForLife(l, created, later)
	if p := Next(Input{Life: l, Schedule: sleepy, Record: rec, Channels: ch, Now: later}); p.Action != Wait {
		t.Fatalf("plan %+v after use, want Wait", p)
	}
}
