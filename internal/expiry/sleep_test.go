// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"reflect"
	"slices"
	"strings"
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
	// An object is deleted at the first whole second after deleteAfter
	// asleep (SleepDeletion): one second after it, for the whole seconds
	// here.
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
			wantExpiry: created.Add(3*time.Hour + 14*Day + time.Second),
		},
		{
			name: "sleeps once idle for afterIdle", schedule: sleepy,
			now: created.Add(3 * time.Hour), wantAction: Sleep, wantAt: created.Add(3 * time.Hour),
			wantExpiry: created.Add(3*time.Hour + 14*Day + time.Second),
		},
		{
			name: "sleeps later when used: the idle clock counts from the last activity", schedule: sleepy,
			annotations: map[string]string{AnnotationLastActive: created.Add(2 * time.Hour).Format(time.RFC3339)},
			now:         created.Add(4 * time.Hour), wantAction: Wait, wantAt: created.Add(5 * time.Hour),
			wantExpiry: created.Add(5*time.Hour + 14*Day + time.Second),
		},
		{
			name: "sleeps by age with after", schedule: Schedule{DefaultTTL: Day, SleepAfter: 2 * Day, SleepDeleteAfter: Week},
			now: created.Add(2 * Day), wantAction: Sleep, wantAt: created.Add(2 * Day), wantExpiry: created.Add(2*Day + Week + time.Second),
		},
		{
			name:        "sleeps by age again only after another age from its last wake",
			schedule:    Schedule{DefaultTTL: Day, SleepAfter: 2 * Day, SleepDeleteAfter: Week},
			annotations: sleepState(SleepState{Phase: PhaseAwake, Woke: created.Add(3 * Day)}),
			now:         created.Add(4 * Day), wantAction: Wait, wantAt: created.Add(5 * Day), wantExpiry: created.Add(5*Day + Week + time.Second),
		},
		{
			name: "a sleeping object is deleted deleteAfter after it went to sleep, not before", schedule: Schedule{DefaultTTL: Day, SleepAfterIdle: 3 * time.Hour, SleepDeleteAfter: 14 * Day},
			annotations: sleepState(asleep), now: asleep.Since.Add(14*Day - time.Second), wantAction: Wait,
			wantAt: asleep.Since.Add(14*Day + time.Second), wantExpiry: asleep.Since.Add(14*Day + time.Second),
		},
		{
			name: "deletes a sleeping object once its time asleep is over and notice was given", schedule: Schedule{DefaultTTL: Day, SleepAfterIdle: 3 * time.Hour, SleepDeleteAfter: 14 * Day},
			annotations: sleepState(asleep), now: asleep.Since.Add(14*Day + time.Second), wantAction: Delete,
			wantExpiry: asleep.Since.Add(14*Day + time.Second),
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
			wantExpiry: asleep.Since.Add(4*time.Hour + 14*Day + time.Second),
		},
		{
			name: "names the use that woke it when last-use says how and by whom", schedule: sleepy,
			annotations: func() map[string]string {
				a := Use{At: asleep.Since.Add(time.Hour), Via: ViaExec, By: "alice"}.Annotations()
				a[AnnotationSleep] = asleep.String()
				return a
			}(),
			now: asleep.Since.Add(2 * time.Hour), wantAction: Wake, wantWokeBy: "use (exec by alice)",
			wantExpiry: asleep.Since.Add(4*time.Hour + 14*Day + time.Second),
		},
		{
			name: "wakes a sleeping object whose workloads someone else scaled up", schedule: sleepy,
			annotations: sleepState(asleep), wokeBy: "Deployment amp-1/web scaled up",
			now: asleep.Since.Add(time.Hour), wantAction: Wake, wantWokeBy: "Deployment amp-1/web scaled up",
			wantExpiry: asleep.Since.Add(14*Day + time.Second),
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
			wantExpiry: asleep.Since.Add(4*time.Hour + 14*Day + time.Second),
		},
		{
			name: "completes a sleep under way", schedule: sleepy,
			annotations: sleepState(SleepState{Phase: PhaseSleeping, Since: asleep.Since}),
			now:         asleep.Since.Add(time.Minute), wantAction: Sleep, wantAt: asleep.Since, wantExpiry: asleep.Since.Add(14*Day + time.Second),
		},
		{
			name: "restarts the idle clock at a wake: sleeps again only after a fresh idle period", schedule: sleepy,
			annotations: sleepState(SleepState{Phase: PhaseAwake, Since: asleep.Since, Woke: asleep.Since.Add(Day)}),
			now:         asleep.Since.Add(Day + 2*time.Hour), wantAction: Wait, wantAt: asleep.Since.Add(Day + 3*time.Hour),
			wantExpiry: asleep.Since.Add(Day + 3*time.Hour + 14*Day + time.Second),
		},
		{
			name: "puts nothing to sleep under a dry run", schedule: sleepy, dryRun: true,
			now: created.Add(4 * time.Hour), wantAction: Wait, wantAt: created.Add(3*time.Hour + 14*Day - 3*Day + time.Second),
			wantExpiry: created.Add(3*time.Hour + 14*Day + time.Second),
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

// TestTheSleepingMessageGoesOutOnceBeforeEachSleep: with
// sleep.reminder 1h, the sleeping message is due 1h before the sleep, is
// said once for that sleep time, is owed again when use moves the sleep,
// and neither holds up the sleep nor goes out at the last use or before.
func TestTheSleepingMessageGoesOutOnceBeforeEachSleep(t *testing.T) {
	s := sleepy
	s.SleepReminder = time.Hour
	sleepAt := created.Add(3 * time.Hour)
	channels := map[v1alpha1.EventType][]string{v1alpha1.EventReminder: {"mail"}, v1alpha1.EventSleeping: {"mail", "chat"}}
	plan := func(annotations map[string]string, rec *Record, now time.Time) (Plan, Lifetime, *Record) {
		l := s.Lifetime(created, annotations, now)
		rec = rec.ForLife(l, created, now)
		return Next(Input{Life: l, Schedule: s, Record: rec, Channels: channels, Now: now}), l, rec
	}

	if p, _, _ := plan(nil, nil, sleepAt.Add(-time.Hour-time.Second)); p.Action != Wait || !p.At.Equal(sleepAt.Add(-time.Hour)) {
		t.Errorf("a second before it is due: %+v, want a wait until %s", p, sleepAt.Add(-time.Hour))
	}
	p, _, rec := plan(nil, nil, sleepAt.Add(-time.Hour))
	want := Plan{Action: Notify, Event: v1alpha1.EventSleeping, Key: KeySleeping(sleepAt), At: sleepAt, Channels: []string{"mail", "chat"}, Deadline: sleepAt}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("when due: %+v, want %+v", p, want)
	}
	rec.Delivered(p.Key, false, []string{"mail"}, sleepAt.Add(-time.Hour))
	if p, _, _ := plan(nil, rec, sleepAt.Add(-time.Hour)); p.Action != Notify || !slices.Equal(p.Channels, []string{"chat"}) {
		t.Errorf("after one channel took it: %+v, want it for the other", p)
	}
	rec.Delivered(p.Key, false, []string{"chat"}, sleepAt.Add(-time.Hour))
	if p, _, _ := plan(nil, rec, sleepAt.Add(-time.Minute)); p.Action != Wait || !p.At.Equal(sleepAt) {
		t.Errorf("once said: %+v, want a wait for the sleep", p)
	}
	if rec.Announced.Equal(sleepAt) {
		t.Errorf("the sleep time was recorded as an announced deletion")
	}
	// A sleep that comes late moves the expiry: the sleeping message gave
	// no deletion time, so no extended message is owed.
	if later := rec.For(rec.ExpiresAt.Add(time.Hour), created, sleepAt.Add(time.Hour)); !later.ExtendedFrom.IsZero() {
		t.Errorf("after only the sleeping message, a later expiry owes an extended message from %s", later.ExtendedFrom)
	}
	// Used 30 minutes before the sleep: the sleep moves, and its message
	// is owed again before the new time.
	used := map[string]string{AnnotationLastActive: sleepAt.Add(-30 * time.Minute).Format(time.RFC3339)}
	moved := sleepAt.Add(2*time.Hour + 30*time.Minute)
	if p, _, _ := plan(used, rec, sleepAt.Add(-20*time.Minute)); p.Action != Wait || !p.At.Equal(moved.Add(-time.Hour)) {
		t.Errorf("after use: %+v, want a wait until %s", p, moved.Add(-time.Hour))
	}
	if p, _, _ := plan(used, rec, moved.Add(-time.Hour)); p.Action != Notify || p.Key != KeySleeping(moved) {
		t.Errorf("after use, when due again: %+v, want the message for %s", p, moved)
	}
	// Not sent in time: the sleep does not wait for it.
	if p, _, _ := plan(nil, nil, sleepAt); p.Action != Sleep {
		t.Errorf("at the sleep, the message unsent: %+v, want the sleep", p)
	}
	// A lead as long as the idle time would be due at the last use.
	s.SleepReminder = 3 * time.Hour
	if p, _, _ := plan(nil, nil, created.Add(time.Hour)); p.Action != Wait || !p.At.Equal(sleepAt) {
		t.Errorf("a lead of afterIdle: %+v, want no message and a wait for the sleep", p)
	}
	// By age, use does not move the sleep: a use after the message was
	// due does not drop it.
	byAge := Schedule{DefaultTTL: Day, SleepAfter: 8 * time.Hour, SleepDeleteAfter: Week, SleepReminder: 30 * time.Minute}
	at8 := created.Add(8 * time.Hour)
	l := byAge.Lifetime(created, map[string]string{AnnotationLastActive: at8.Add(-20 * time.Minute).Format(time.RFC3339)}, at8.Add(-10*time.Minute))
	if p := Next(Input{Life: l, Schedule: byAge, Record: (*Record)(nil).ForLife(l, created, at8.Add(-10*time.Minute)), Channels: channels, Now: at8.Add(-10 * time.Minute)}); p.Action != Notify || p.Event != v1alpha1.EventSleeping {
		t.Errorf("by age, used after the message was due: %+v, want the sleeping message", p)
	}
}

// TestASleepUnderWayAtTheMaximumGivesWayToTheDeletion: a sleep that keeps
// failing (a patch the API server refuses) does not hold an object past
// maxTTL.
func TestASleepUnderWayAtTheMaximumGivesWayToTheDeletion(t *testing.T) {
	s := Schedule{DefaultTTL: Day, MaxTTL: 2 * Day, SleepAfterIdle: 3 * time.Hour, SleepDeleteAfter: Week}
	st := SleepState{Phase: PhaseSleeping, Since: created.Add(4 * time.Hour), Generation: 1}
	for _, tt := range []struct {
		now  time.Time
		want Action
	}{{created.Add(2*Day - time.Second), Sleep}, {created.Add(2 * Day), Delete}} {
		l := s.Lifetime(created, sleepState(st), tt.now)
		p := Next(Input{Life: l, Schedule: s, Record: (*Record)(nil).ForLife(l, created, tt.now), Now: tt.now})
		if p.Action != tt.want {
			t.Errorf("at %s: %+v, want %s", tt.now, p, tt.want)
		}
	}
}

func TestParseSleepRefusesAPatchOfMetadata(t *testing.T) {
	for _, v := range []string{
		`{"phase":"Asleep","patch":{"metadata":{"annotations":{"x":"y"}}},"wakePatch":{"spec":{}}}`,
		`{"phase":"Waking","patch":{"spec":{}},"wakePatch":{"kind":"Secret"}}`,
		`{"phase":"Asleep","patch":{"spec":{"suspend":true}}}`,
		`{"phase":"Asleep","patch":[1],"wakePatch":{"spec":{}}}`,
	} {
		if _, err := ParseSleep(v); err == nil {
			t.Errorf("ParseSleep(%s) took it", v)
		}
	}
	if _, err := ParseSleep(`{"phase":"Asleep","patch":{"spec":{"suspend":true}},"wakePatch":{"spec":{"suspend":null}}}`); err != nil {
		t.Errorf("ParseSleep of a patch and its inverse: %v", err)
	}
}

func TestSleptAndWokeAreSaidOnce(t *testing.T) {
	asleep := SleepState{Phase: PhaseAsleep, Since: created.Add(4 * time.Hour)}
	l := sleepy.Lifetime(created, sleepState(asleep), afterAll)
	now := asleep.Since.Add(time.Minute)
	ch := map[v1alpha1.EventType][]string{v1alpha1.EventSlept: {"events"}, v1alpha1.EventWoke: {"events"}}
	rec := (*Record)(nil).ForLife(l, created, now)
	p := Next(Input{Life: l, Schedule: sleepy, Record: rec, Channels: ch, Now: now})
	if p.Action != Notify || p.Event != v1alpha1.EventSlept || !p.At.Equal(SleepDeletion(asleep.Since, 14*Day)) {
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

// A sleep is written a little after the time it was due at, a whole
// second: the deletion time it gives is the one the object had before it
// slept, a whole second, which the slept message announces as it is; a
// record made for the object awake is the record asleep (nothing was
// moved, nothing is audited as an extension); and the object sleeps at
// least deleteAfter. A wake is stamped to the nanosecond: the sleep after
// it is due at the next whole second.
func TestASleepKeepsTheDeletionTimeItWasDueWith(t *testing.T) {
	byIdle := Schedule{DefaultTTL: Day, MinimumNotice: Day, SleepAfterIdle: 3 * time.Hour, SleepDeleteAfter: 14 * Day}
	byAge := Schedule{DefaultTTL: Day, MinimumNotice: Day, SleepAfter: 2 * Day, SleepDeleteAfter: 14 * Day}
	woke := SleepState{Phase: PhaseAwake, Since: created.Add(time.Hour), Woke: created.Add(2*time.Hour + 123456789*time.Nanosecond), WokeBy: "use"}
	nanoPast := woke
	nanoPast.Woke = created.Add(2*time.Hour + time.Nanosecond)
	ch := map[v1alpha1.EventType][]string{v1alpha1.EventSlept: {"events"}}
	for _, tc := range []struct {
		name     string
		schedule Schedule
		state    SleepState
		// idle is when the object is idle long enough, to the nanosecond.
		idle time.Time
	}{
		{"a new object", byIdle, SleepState{}, created.Add(3 * time.Hour)},
		{"an object woken at a fraction of a second", byIdle, woke, woke.Woke.Add(3 * time.Hour)},
		{"an object woken at a fraction of a second, sleeping by age", byAge, woke, woke.Woke.Add(2 * Day)},
		{"an object woken a nanosecond past a second", byAge, nanoPast, nanoPast.Woke.Add(2 * Day)},
	} {
		var annotations map[string]string
		if tc.state.Phase != "" {
			annotations = sleepState(tc.state)
		}
		awake := tc.schedule.Lifetime(created, annotations, tc.idle.Add(-time.Minute))
		due := awake.SleepAt
		if due.Nanosecond() != 0 || due.Before(tc.idle) || !due.Before(tc.idle.Add(time.Second)) {
			t.Fatalf("%s: sleeps at %s; want the first whole second from %s", tc.name, due.Format(time.RFC3339Nano), tc.idle.Format(time.RFC3339Nano))
		}
		for _, late := range []time.Duration{0, time.Nanosecond, 2114873 * time.Nanosecond, 400 * time.Millisecond, time.Second - time.Nanosecond} {
			t.Run(tc.name+", written "+late.String()+" after it was due", func(t *testing.T) {
				now := due.Add(late)
				rec := (*Record)(nil).ForLife(awake, created, now)
				st := tc.state
				st.Phase, st.Since, st.Generation = PhaseAsleep, now, 1
				asleep := tc.schedule.Lifetime(created, sleepState(st), now)
				if !asleep.Asleep {
					t.Fatalf("not asleep: %+v", asleep)
				}
				if !asleep.ExpiresAt.Equal(awake.ExpiresAt) {
					t.Errorf("deleted at %s asleep, %s awake: the sleep moved it", asleep.ExpiresAt.Format(time.RFC3339Nano), awake.ExpiresAt.Format(time.RFC3339Nano))
				}
				if asleep.ExpiresAt.Nanosecond() != 0 {
					t.Errorf("deleted at %s, not a whole second", asleep.ExpiresAt.Format(time.RFC3339Nano))
				}
				if asleep.ExpiresAt.Before(now.Add(14 * Day)) {
					t.Errorf("deleted at %s, before 14d asleep (%s)", asleep.ExpiresAt.Format(time.RFC3339Nano), now.Add(14*Day).Format(time.RFC3339Nano))
				}
				if next := rec.ForLife(asleep, created, now); next != rec {
					t.Errorf("the sleep replaced the record: %+v, was %+v", next, rec)
				}
				p := Next(Input{Life: asleep, Schedule: tc.schedule, Record: rec, Channels: ch, Now: now})
				if p.Action != Notify || p.Event != v1alpha1.EventSlept {
					t.Fatalf("plan %+v, want the slept message", p)
				}
				if !p.At.Equal(asleep.ExpiresAt) || p.At.Nanosecond() != 0 {
					t.Errorf("the slept message announces %s; want the deletion time %s, a whole second", p.At.Format(time.RFC3339Nano), asleep.ExpiresAt.Format(time.RFC3339Nano))
				}
			})
		}
	}
}

func TestSleepDeletionIsAWholeSecondNeverEarly(t *testing.T) {
	since := created.Add(2114873 * time.Nanosecond)
	for _, d := range []time.Duration{time.Second, 1500 * time.Millisecond, 14 * Day, time.Nanosecond} {
		for _, s := range []time.Time{created, since, created.Add(time.Second - time.Nanosecond)} {
			got := SleepDeletion(s, d)
			if got.Nanosecond() != 0 || !got.After(s.Add(d)) || got.After(s.Add(d+time.Second)) {
				t.Errorf("SleepDeletion(%s, %s) = %s; want the first whole second after %s",
					s.Format(time.RFC3339Nano), d, got.Format(time.RFC3339Nano), s.Add(d).Format(time.RFC3339Nano))
			}
		}
	}
}

// The sleeping message at the edges: a lead of a nanosecond is a lead,
// and a plan without a record (an object kept has none) waits for the
// sleep.
func TestTheSleepingMessageAtItsEdges(t *testing.T) {
	s := sleepy
	s.SleepReminder = time.Nanosecond
	sleepAt := created.Add(3 * time.Hour)
	channels := map[v1alpha1.EventType][]string{v1alpha1.EventSleeping: {"mail"}}
	l := s.Lifetime(created, nil, created)
	now := sleepAt.Add(-time.Nanosecond)
	if p := Next(Input{Life: l, Schedule: s, Record: (*Record)(nil).ForLife(l, created, now), Channels: channels, Now: now}); p.Action != Notify || p.Event != v1alpha1.EventSleeping {
		t.Errorf("a nanosecond before the sleep, with a lead of a nanosecond: %+v, want the sleeping message", p)
	}
	s.SleepReminder = time.Hour
	if p := sleepMessages(Input{Life: l, Schedule: s, Channels: channels, Now: created}, Plan{Action: Wait, At: created.Add(Day)}); p.Action != Wait || !p.At.Equal(sleepAt) {
		t.Errorf("without a record: %+v, want a wait for the sleep", p)
	}
}

// The rehearsal stays on the record through other messages, until the
// postponement on going live is out.
func TestTheRehearsalLastsUntilGoingLiveIsAnnounced(t *testing.T) {
	r := (*Record)(nil).For(expires, created, created)
	at := expires.Add(time.Minute)
	r.Delivered(KeyWouldDelete, false, people, at)
	r.Delivered(StageKey(Day), true, people, at.Add(time.Minute))
	r.Delivered(KeyExtended, false, people, at.Add(2*time.Minute))
	if !r.Rehearsed.Equal(at) {
		t.Fatalf("rehearsed %s after other messages, want %s", r.Rehearsed, at)
	}
	r.Delivered(KeyWouldDelete, false, people, at.Add(3*time.Minute))
	if !r.Rehearsed.Equal(at) {
		t.Errorf("rehearsed %s after a second report, want the first %s", r.Rehearsed, at)
	}
	r.Delivered(KeyLive, false, people, at.Add(4*time.Minute))
	if !r.Rehearsed.IsZero() {
		t.Errorf("rehearsed %s after the postponement on going live, want none", r.Rehearsed)
	}
}

// The patches a sleep annotation may hold, at the size limit.
func TestParseSleepTakesPatchesUpToTheirLimit(t *testing.T) {
	state := func(n int) string {
		wake := `{"spec":{"x":"` + strings.Repeat("a", n-17) + `"}}`
		return `{"phase":"Asleep","patch":{"spec":{"x":1}},"wakePatch":` + wake + `}`
	}
	if _, err := ParseSleep(state(4 * MaxSleepPatch)); err != nil {
		t.Errorf("a wake patch of %d bytes: %v", 4*MaxSleepPatch, err)
	}
	if _, err := ParseSleep(state(4*MaxSleepPatch + 1)); err == nil {
		t.Errorf("a wake patch of %d bytes was taken", 4*MaxSleepPatch+1)
	}
}
