// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// The limits of sleep (make mutate): which specs sleep, which clock a
// sleep follows, and that a sleep never moves a deletion or what people
// are told.

func TestNewScheduleChecksTheSleep(t *testing.T) {
	tests := []struct {
		name   string
		maxTTL v1alpha1.Duration
		sleep  v1alpha1.Sleep
		// wantErr is part of the error; empty for none.
		wantErr string
	}{
		{"sleeps after idle", "", v1alpha1.Sleep{AfterIdle: "3h", DeleteAfter: "14d"}, ""},
		{"sleeps after an age", "", v1alpha1.Sleep{After: "2d", DeleteAfter: "14d"}, ""},
		{"refuses both clocks", "", v1alpha1.Sleep{AfterIdle: "3h", After: "2d", DeleteAfter: "14d"}, "exactly one"},
		{"refuses no clock", "", v1alpha1.Sleep{DeleteAfter: "14d"}, "exactly one"},
		{"needs deleteAfter", "", v1alpha1.Sleep{AfterIdle: "3h"}, "deleteAfter: required"},
		{"takes a sleep of one second", "", v1alpha1.Sleep{AfterIdle: "1s", DeleteAfter: "1d"}, ""},
		{"refuses a sleep under a second", "", v1alpha1.Sleep{AfterIdle: "999ms", DeleteAfter: "1d"}, "at least 1s"},
		{"takes a sleep before the maximum", "7d", v1alpha1.Sleep{After: "6d", DeleteAfter: "1d"}, ""},
		{"refuses a sleep at the maximum", "7d", v1alpha1.Sleep{After: "7d", DeleteAfter: "1d"}, "before they sleep"},
		{"refuses a sleep past the smallest maximum", "1ns", v1alpha1.Sleep{After: "1s", DeleteAfter: "1d"}, "before they sleep"},
		{"takes a reminder", "", v1alpha1.Sleep{AfterIdle: "3h", DeleteAfter: "14d", Reminder: "30m"}, ""},
		{"refuses a reminder of nothing", "", v1alpha1.Sleep{AfterIdle: "3h", DeleteAfter: "14d", Reminder: "0s"}, "spec.sleep.reminder"},
		{"takes a patch", "", suspend(`{"spec":{"suspend":true}}`), ""},
		{"takes a patch that removes a field of the spec", "", suspend(`{"spec":{"paused":null}}`), ""},
		{"refuses a patch of metadata", "", suspend(`{"metadata":{"annotations":{"x":"y"}}}`), "may not change metadata"},
		{"refuses a patch of the kind", "", suspend(`{"kind":"Pod"}`), "may not change metadata"},
		{"refuses a patch that removes the spec", "", suspend(`{"spec":null}`), `may not remove the field "spec"`},
		{"refuses a patch that is no object", "", suspend(`[1]`), "not a JSON object"},
		{"refuses a patch of null", "", suspend(`null`), "not a JSON object"},
		{"refuses an empty patch", "", suspend(`{}`), "empty"},
		{"takes a patch of the largest size", "", suspend(`{"spec":{"x":"` + strings.Repeat("a", MaxSleepPatch-17) + `"}}`), ""},
		{"refuses a patch over the largest size", "", suspend(`{"spec":{"x":"` + strings.Repeat("a", MaxSleepPatch-16) + `"}}`), "more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sleep := tt.sleep
			ttl := v1alpha1.Duration("1h")
			if tt.maxTTL == "1ns" {
				ttl = "1ns"
			}
			_, err := NewSchedule(v1alpha1.TimeoutPolicySpec{DefaultTTL: ttl, MaxTTL: tt.maxTTL, Sleep: &sleep})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("NewSchedule: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("NewSchedule: %v, want an error saying %q", err, tt.wantErr)
			}
		})
	}
}

func TestSleepsOnlyWithATimeAsleepAndAClock(t *testing.T) {
	for _, tt := range []struct {
		name     string
		schedule Schedule
		want     bool
	}{
		{"after idle", Schedule{SleepAfterIdle: time.Hour, SleepDeleteAfter: Day}, true},
		{"after an age", Schedule{SleepAfter: time.Hour, SleepDeleteAfter: Day}, true},
		{"with the shortest time asleep", Schedule{SleepAfter: time.Hour, SleepDeleteAfter: time.Nanosecond}, true},
		{"not without a clock", Schedule{SleepDeleteAfter: Day}, false},
		{"not without a time asleep", Schedule{SleepAfterIdle: time.Hour}, false},
	} {
		if got := tt.schedule.Sleeps(); got != tt.want {
			t.Errorf("%s: Sleeps = %t, want %t", tt.name, got, tt.want)
		}
	}
}

func TestActivityWindowFollowsTheShorterClockOfUse(t *testing.T) {
	for _, tt := range []struct {
		name     string
		schedule Schedule
		want     time.Duration
	}{
		{"idleTTL alone", Schedule{IdleTTL: Day}, Day / 20},
		{"a sleep after idle alone", Schedule{SleepAfterIdle: time.Hour, SleepDeleteAfter: Day}, 3 * time.Minute},
		{"a sleep after idle shorter than idleTTL", Schedule{IdleTTL: Day, SleepAfterIdle: time.Hour, SleepDeleteAfter: Day}, 3 * time.Minute},
		{"an idleTTL shorter than the sleep", Schedule{IdleTTL: time.Hour, SleepAfterIdle: Day, SleepDeleteAfter: Day}, 3 * time.Minute},
		{"the smallest idleTTL", Schedule{IdleTTL: time.Nanosecond, SleepAfterIdle: time.Hour, SleepDeleteAfter: Day}, 0},
		{"not a sleep by age", Schedule{IdleTTL: Day, SleepAfter: time.Hour, SleepDeleteAfter: Day}, Day / 20},
		{"not a schedule that does not sleep", Schedule{IdleTTL: Day, SleepAfterIdle: time.Hour}, Day / 20},
	} {
		if got := tt.schedule.ActivityWindow(); got != tt.want {
			t.Errorf("%s: ActivityWindow = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestParseSleepAndReplicas(t *testing.T) {
	// A time that is a number: the phase decodes, the rest does not.
	for _, value := range []string{`{"phase": "Asleep"`, `{"phase": "Asleep", "since": 5}`} {
		if st, err := ParseSleep(value); err == nil || st.Phase != "" {
			t.Errorf("ParseSleep(%s) = %+v, %v; want an error and an object that never slept", value, st, err)
		}
	}
	for phase, want := range map[string]bool{PhaseSleeping: true, PhaseAsleep: true, PhaseWaking: true, PhaseAwake: false} {
		if got := (SleepState{Phase: phase}).Changed(); got != want {
			t.Errorf("Changed of %s = %t, want %t", phase, got, want)
		}
	}
	for value, want := range map[string]int32{"3": 3, " 2 ": 2, "0": 0, "-1": -1, "x": -1} {
		n, ok := ParseReplicas(value)
		if ok != (want >= 0) || ok && n != want {
			t.Errorf("ParseReplicas(%q) = %d, %t; want %d", value, n, ok, want)
		}
	}
}

// The warning about a lifetime past maxTTL names the annotation that asked
// for it, whichever clock then moved the expiry.
func TestTheMaximumWarningNamesTheAnnotationUnderUseAndSleep(t *testing.T) {
	for _, tt := range []struct {
		name     string
		schedule Schedule
		source   string
	}{
		{"under use", Schedule{DefaultTTL: Day, IdleTTL: 40 * Day, MaxTTL: 7 * Day}, SourceIdle},
		{"under sleep", Schedule{DefaultTTL: Day, MaxTTL: 7 * Day, SleepAfter: 3 * Day, SleepDeleteAfter: 30 * Day}, SourceSleep},
	} {
		l := tt.schedule.Lifetime(created, map[string]string{AnnotationTTL: "10d"}, afterAll)
		var named []string
		for _, inv := range l.Invalid {
			named = append(named, inv.Annotation)
		}
		if l.Source != SourceMax || len(named) != 1 || named[0] != AnnotationTTL {
			t.Errorf("%s: source %s, warnings about %v; want the maximum, and one warning about %s", tt.name, l.Source, named, AnnotationTTL)
		}
		tt.schedule.MaxTTL = 0
		if l := tt.schedule.Lifetime(created, map[string]string{AnnotationTTL: "10d"}, afterAll); l.Source != tt.source {
			t.Fatalf("%s: without the maximum the source is %s, want %s: the case tests nothing", tt.name, l.Source, tt.source)
		}
	}
}

func TestALifetimeIsIdleOnlyWhenUseSetsIt(t *testing.T) {
	sleepy := Schedule{DefaultTTL: Day, SleepAfterIdle: 3 * time.Hour, SleepDeleteAfter: Day}
	if l := sleepy.Lifetime(created, nil, afterAll); l.Source != SourceSleep || !l.Idle() {
		t.Errorf("a sleep after idle sets the expiry: source %s, idle %t", l.Source, l.Idle())
	}
	sleepy.DefaultTTL = 30 * Day
	if l := sleepy.Lifetime(created, nil, afterAll); l.Source != SourceDefault || l.Idle() {
		t.Errorf("defaultTTL sets the expiry: source %s, idle %t; want not idle", l.Source, l.Idle())
	}
}

// An annotation that extends the lifetime again, after the message about
// the first extension, is news: people are told of it.
func TestASecondExtensionByAnnotationOwesItsMessage(t *testing.T) {
	first := expires.Add(-Day)
	r := &Record{ExpiresAt: expires, Since: created.Add(Day), ExtendedFrom: first,
		Sent: map[string]Delivery{KeyExtended: {At: created.Add(Day), Channels: people}}}
	l := Lifetime{ExpiresAt: expires.Add(Day), Base: expires.Add(Day), Source: AnnotationTTL}
	if next := r.ForLife(l, created, created.Add(2*Day)); !next.ExtendedFrom.Equal(expires) {
		t.Errorf("extended from %s, want %s", next.ExtendedFrom, expires)
	}
}

// Under the creation clock, use does not make a reminder lapse: only a
// clock that follows use has reminders due before the last use skipped.
func TestRemindersDueBeforeTheLastUseApplyUnderTheCreationClock(t *testing.T) {
	in := Input{Life: Lifetime{ExpiresAt: expires, Source: SourceDefault, LastActive: expires.Add(-Day)}, Schedule: standard, Record: fresh()}
	if n := NoticeOf(in); len(n.Stages) != 2 {
		t.Errorf("stages %v, want 3d and 2d", n.Stages)
	}
}

func TestSleepNeverDelaysNorHastensADeletionDue(t *testing.T) {
	channels := map[v1alpha1.EventType][]string{v1alpha1.EventReminder: people, v1alpha1.EventPostponed: people, v1alpha1.EventWoke: people}
	maxed := Schedule{DefaultTTL: Day, MaxTTL: 5 * Day, SleepAfterIdle: 3 * time.Hour, SleepDeleteAfter: 14 * Day}
	maximum := created.Add(5 * Day)

	t.Run("deletes at the maximum even with a woke message owed", func(t *testing.T) {
		l := maxed.Lifetime(created, map[string]string{
			AnnotationSleep:      SleepState{Phase: PhaseAwake, Since: created.Add(Day), Woke: created.Add(2 * Day)}.String(),
			AnnotationLastActive: maximum.Add(-time.Hour).Format(time.RFC3339),
		}, afterAll)
		rec := (*Record)(nil).ForLife(l, created, maximum)
		if p := Next(Input{Life: l, Schedule: maxed, Record: rec, Channels: channels, Now: maximum}); p.Action != Delete {
			t.Errorf("Next = %+v, want Delete", p)
		}
	})
	t.Run("puts an object to sleep before its maximum", func(t *testing.T) {
		s := maxed
		s.MaxTTL = 30 * Day
		l := s.Lifetime(created, nil, afterAll)
		now := created.Add(3 * time.Hour)
		if p := Next(Input{Life: l, Schedule: s, Record: (*Record)(nil).ForLife(l, created, now), Channels: channels, Now: now}); p.Action != Sleep || !p.At.Equal(now) {
			t.Errorf("Next = %+v, want Sleep at %s", p, now)
		}
	})
	t.Run("waits for the sleep, not the reminder, before its maximum", func(t *testing.T) {
		s := maxed
		s.MaxTTL, s.Reminders, s.MinimumNotice = 30*Day, []time.Duration{3 * Day}, Day
		l := s.Lifetime(created, nil, afterAll)
		now := created.Add(time.Hour)
		if p := Next(Input{Life: l, Schedule: s, Record: (*Record)(nil).ForLife(l, created, now), Channels: channels, Now: now}); p.Action != Wait || !p.At.Equal(l.SleepAt) {
			t.Errorf("Next = %+v, want Wait until the sleep at %s", p, l.SleepAt)
		}
	})
	t.Run("plans no sleep past the maximum while the deletion waits for its notice", func(t *testing.T) {
		s := maxed
		s.Reminders, s.MinimumNotice = []time.Duration{time.Hour}, Day
		l := s.Lifetime(created, nil, afterAll)
		rec := (*Record)(nil).ForLife(l, created, created)
		rec.Delivered("1h", true, people, maximum.Add(-time.Hour))
		rec.Delivered(KeyPostponed, false, people, maximum)
		now := maximum.Add(time.Hour)
		want := maximum.Add(23 * time.Hour)
		if p := Next(Input{Life: l, Schedule: s, Record: rec, Channels: channels, Now: now}); p.Action != Wait || !p.At.Equal(want) {
			t.Errorf("Next = %+v, want Wait until %s", p, want)
		}
	})
}

func TestARecordFollowsUseThroughSleepMessagesOnly(t *testing.T) {
	quiet := &Record{ExpiresAt: expires, Since: created, Sent: map[string]Delivery{KeySlept(created): {At: created, Channels: people}}}
	if !quiet.Follows(idleLife) {
		t.Error("a record with only a slept message does not follow use")
	}
	told := &Record{ExpiresAt: expires, Since: created, Sent: map[string]Delivery{KeyExtended: {At: created, Channels: people}}}
	if told.Follows(idleLife) {
		t.Error("a record with an extension message follows use")
	}
}

func TestASleepMessageReplacesTheEarlierOnesOnly(t *testing.T) {
	r := sent(fresh(), "3d", expires.Add(-3*Day), people...)
	first, second := created.Add(Day), created.Add(2*Day)
	r.Delivered(KeySlept(first), false, people, first)
	r.Delivered(KeySlept(second), false, []string{"email"}, second)
	r.Delivered(KeySlept(second), false, []string{"slack"}, second.Add(time.Minute))
	if _, ok := r.Sent[KeySlept(first)]; ok {
		t.Error("the earlier sleep's message is kept")
	}
	if _, ok := r.Sent["3d"]; !ok {
		t.Error("a reminder was dropped with the earlier sleep's message")
	}
	if d := r.Sent[KeySlept(second)]; !d.At.Equal(second) || len(d.Channels) != 2 {
		t.Errorf("the sleep's message shows %+v, want both channels from %s", d, second)
	}
}

// suspend is a sleep after idle by patch.
func suspend(patch string) v1alpha1.Sleep {
	return v1alpha1.Sleep{AfterIdle: "3h", DeleteAfter: "14d", Patch: &runtime.RawExtension{Raw: []byte(patch)}}
}

// TestTheInverseOfAPatchPutsBackWhatItReplaced: the wake of a sleep by
// patch applies the inverse, read from the object before the sleep.
func TestTheInverseOfAPatchPutsBackWhatItReplaced(t *testing.T) {
	for _, tt := range []struct {
		name, patch, current, want string
	}{
		{"a field set before", `{"spec":{"suspend":true}}`, `{"spec":{"suspend":false,"schedule":"@daily"}}`, `{"spec":{"suspend":false}}`},
		{"a field absent before is removed", `{"spec":{"suspend":true}}`, `{"spec":{"schedule":"@daily"}}`, `{"spec":{"suspend":null}}`},
		{"a field already at the patch's value stays so", `{"spec":{"suspend":true}}`, `{"spec":{"suspend":true}}`, `{"spec":{"suspend":true}}`},
		{"a field the patch removes comes back", `{"spec":{"paused":null}}`, `{"spec":{"paused":{"until":"x"}}}`, `{"spec":{"paused":{"until":"x"}}}`},
		{"an object where there was none", `{"spec":{"a":{"b":1}}}`, `{"spec":{"a":"text"}}`, `{"spec":{"a":"text"}}`},
		{"a whole object absent before", `{"spec":{"a":{"b":1}}}`, `{"status":{}}`, `{"spec":null}`},
		{"a list, whole", `{"spec":{"l":[1]}}`, `{"spec":{"l":[1,2]}}`, `{"spec":{"l":[1,2]}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var p, c map[string]any
			if err := json.Unmarshal([]byte(tt.patch), &p); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.current), &c); err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(Inverse(p, c))
			if string(got) != tt.want {
				t.Errorf("Inverse = %s, want %s", got, tt.want)
			}
		})
	}
}

// A sleep under way remembers the generation of each workload it found,
// as many as fit in a bound that keeps the annotation far below the API
// server's limit however many workloads a namespace holds, and tells a
// workload changed since from one it has not reached.
func TestASleepRecordsTheWorkloadsItFoundWithinItsBound(t *testing.T) {
	prefix := "Deployment " + strings.Repeat("s", 63) + "/" + strings.Repeat("n", 240)
	var found []Generation
	for i := range 1000 {
		found = append(found, Generation{Name: fmt.Sprintf("%s-%d", prefix, i), Generation: int64(i * 7)})
	}
	var st SleepState
	st.RecordWorkloads(found)
	n := len(st.Workloads)
	if n == 0 || n == len(found) {
		t.Fatalf("%d of %d workloads with the longest names recorded, want the first that fit", n, len(found))
	}
	for _, g := range found[:n] {
		if got, ok := st.Workloads[g.Name]; !ok || got != g.Generation {
			t.Fatalf("%s recorded at %d (%t), want %d: the first that fit, in order", g.Name, got, ok, g.Generation)
		}
	}
	b, _ := json.Marshal(st.Workloads)
	if len(b) > MaxSleepWorkloads {
		t.Errorf("the workloads recorded take %d bytes, over the bound of %d", len(b), MaxSleepWorkloads)
	}
	more := map[string]int64{found[n].Name: found[n].Generation}
	maps.Copy(more, st.Workloads)
	if b, _ := json.Marshal(more); len(b) <= MaxSleepWorkloads {
		t.Errorf("the next workload would fit (%d bytes of %d) but was left out", len(b), MaxSleepWorkloads)
	}

	first := found[0]
	for _, tt := range []struct {
		name       string
		generation int64
		want       bool
	}{
		{first.Name, first.Generation, false},
		{first.Name, first.Generation + 1, true},
		{"Deployment other/made-since", 7, false},
	} {
		if got := st.ChangedSince(tt.name, tt.generation); got != tt.want {
			t.Errorf("ChangedSince(%.30s…, %d) = %t, want %t", tt.name, tt.generation, got, tt.want)
		}
	}
	parsed, err := ParseSleep(SleepState{Phase: PhaseSleeping, Since: time.Unix(0, 0), Workloads: st.Workloads}.String())
	if err != nil || len(parsed.Workloads) != n {
		t.Errorf("read back %d workloads (%v), want %d", len(parsed.Workloads), err, n)
	}
	st.RecordWorkloads(found[:2])
	if len(st.Workloads) != 2 {
		t.Errorf("a second record holds %d workloads, want the 2 it was given", len(st.Workloads))
	}

	// To the byte: three names of 5,456 characters at generation 0 take
	// {"…":0,"…":0,"…":0}, 16,384 bytes, which is the bound; one more
	// digit is one byte too many, and the third is left out.
	name := func(c string) string { return strings.Repeat(c, 5456) }
	for _, tt := range []struct {
		last int64
		want int
	}{{0, 3}, {10, 2}} {
		st.RecordWorkloads([]Generation{{name("a"), 0}, {name("b"), 0}, {name("c"), tt.last}})
		if len(st.Workloads) != tt.want {
			b, _ := json.Marshal(map[string]int64{name("a"): 0, name("b"): 0, name("c"): tt.last})
			t.Errorf("%d of 3 workloads taking %d bytes recorded within %d, want %d", len(st.Workloads), len(b), MaxSleepWorkloads, tt.want)
		}
	}
}
