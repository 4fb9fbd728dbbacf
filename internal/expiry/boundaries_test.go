// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// These tests stand where a single flipped comparison or clamp would
// delete an object early or without its notice (make mutate): at the
// exact boundaries, with records written by earlier versions, which lack
// the fields added since (noticeAt, announced, noticed), and with a
// lifetime equal to a reminder's lead.

// oldRecord is a record annotation as an earlier version wrote it: the
// fields given, and none added since.
func oldRecord(fields string) *Record {
	return mustParseRecord("{" + fields + "}")
}

func at(t time.Time) string { return `"` + t.Format(time.RFC3339Nano) + `"` }

func delivered(key string, when time.Time) string {
	return fmt.Sprintf(`%q: {"at": %s, "channels": ["email", "slack"]}`, key, at(when))
}

func TestNextNeverDeletesBeforeTheNoticeARecordShows(t *testing.T) {
	oneStage := Schedule{DefaultTTL: Day, Reminders: []time.Duration{time.Hour}, MinimumNotice: time.Hour}
	dayLong := created.Add(Day)
	hourLong := created.Add(time.Hour)
	noNotice := standard
	noNotice.MinimumNotice = 0
	longNotice := standard
	longNotice.MinimumNotice = 3 * Day
	tinyNotice := oneStage
	tinyNotice.MinimumNotice = time.Nanosecond

	tests := []struct {
		name     string
		schedule Schedule
		expires  time.Time
		record   *Record
		now      time.Time
		want     Plan
	}{
		{
			name:     "counts the minimum notice from noticeAt in a record written before noticed and announced existed",
			schedule: standard, expires: expires,
			record: oldRecord(`"expiresAt": ` + at(expires) + `, "since": ` + at(created) + `, "noticeAt": ` + at(expires.Add(-time.Hour)) +
				`, "sent": {` + delivered("2d", expires.Add(-time.Hour)) + `}`),
			now: expires.Add(time.Hour),
			want: Plan{Action: Notify, Event: v1alpha1.EventPostponed, Key: KeyPostponed, At: expires.Add(23 * time.Hour),
				Channels: people, Deadline: expires.Add(23 * time.Hour)},
		},
		{
			name:     "counts the minimum notice from the first stage delivered in a record written before noticeAt existed",
			schedule: longNotice, expires: expires,
			record: oldRecord(`"expiresAt": ` + at(expires) + `, "since": ` + at(created) +
				`, "sent": {` + delivered("3d", expires.Add(-3*Day)) + `, ` + delivered("2d", expires.Add(-2*Day)) + `}`),
			now:  expires,
			want: Plan{Action: Delete, At: expires},
		},
		{
			name:     "counts the notice from noticeAt, not from an earlier delivery of a stage restored without one",
			schedule: standard, expires: expires,
			record: oldRecord(`"expiresAt": ` + at(expires) + `, "since": ` + at(created) + `, "noticeAt": ` + at(expires.Add(-time.Hour)) +
				`, "sent": {` + delivered("2d", expires.Add(-2*Day)) + `}`),
			now: expires.Add(time.Hour),
			want: Plan{Action: Notify, Event: v1alpha1.EventPostponed, Key: KeyPostponed, At: expires.Add(23 * time.Hour),
				Channels: people, Deadline: expires.Add(23 * time.Hour)},
		},
		{
			name:     "deletes at the expiry under a policy without minimum notice, whatever reminder went out after it",
			schedule: noNotice, expires: expires,
			record: oldRecord(`"expiresAt": ` + at(expires) + `, "since": ` + at(created) + `, "noticeAt": ` + at(expires.Add(time.Hour)) +
				`, "sent": {` + delivered("2d", expires.Add(time.Hour)) + `}`),
			now:  expires.Add(30 * time.Minute),
			want: Plan{Action: Delete, At: expires},
		},
		{
			name:     "keeps the minimum notice from the first reminder after the expiry moved earlier",
			schedule: oneStage, expires: created.Add(30 * time.Minute),
			// A reminder a minute before the old expiry, a day away, said
			// it; the policy's notice has been raised to an hour since.
			record: oldRecord(`"expiresAt": ` + at(created.Add(30*time.Minute)) + `, "since": ` + at(created) +
				`, "announced": ` + at(dayLong) + `, "noticed": ` + at(dayLong.Add(-time.Minute))),
			now: dayLong,
			want: Plan{Action: Notify, Event: v1alpha1.EventPostponed, Key: KeyPostponed, At: dayLong.Add(59 * time.Minute),
				Channels: people, Deadline: dayLong.Add(59 * time.Minute)},
		},
		{
			name:     "never deletes without the reminder of a policy with a single stage",
			schedule: oneStage, expires: dayLong, record: (*Record)(nil).For(dayLong, created, created),
			now: dayLong.Add(time.Minute),
			want: Plan{Action: Notify, Event: v1alpha1.EventReminder, Key: "1h", At: dayLong.Add(61 * time.Minute),
				Channels: people, Deadline: dayLong},
		},
		{
			name:     "owes even a minimum notice of a nanosecond",
			schedule: tinyNotice, expires: dayLong, record: (*Record)(nil).For(dayLong, created, created),
			now: dayLong.Add(time.Minute),
			want: Plan{Action: Notify, Event: v1alpha1.EventReminder, Key: "1h", At: dayLong.Add(time.Minute + time.Nanosecond),
				Channels: people, Deadline: dayLong},
		},
		{
			name:     "sends the reminder whose lead is the whole lifetime at the creation",
			schedule: oneStage, expires: hourLong, record: (*Record)(nil).For(hourLong, created, created),
			now:  created,
			want: Plan{Action: Notify, Event: v1alpha1.EventReminder, Key: "1h", At: hourLong, Channels: people, Deadline: hourLong},
		},
		{
			name:     "gives the whole minimum notice to a lifetime equal to the lead, when the reminder went out late",
			schedule: oneStage, expires: hourLong,
			record: sent((*Record)(nil).For(hourLong, created, created), "1h", created.Add(10*time.Minute), people...),
			now:    hourLong,
			want: Plan{Action: Notify, Event: v1alpha1.EventPostponed, Key: KeyPostponed, At: hourLong.Add(10 * time.Minute),
				Channels: people, Deadline: hourLong.Add(10 * time.Minute)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Next(Input{Life: Lifetime{ExpiresAt: tt.expires}, Schedule: tt.schedule, Record: tt.record, Channels: toAll(people), Now: tt.now})
			if !plansEqual(got, tt.want) {
				t.Errorf("Next =\n  %+v\nwant\n  %+v", got, tt.want)
			}
		})
	}
}

func plansEqual(a, b Plan) bool {
	return a.Action == b.Action && a.At.Equal(b.At) && a.Event == b.Event && a.Key == b.Key &&
		strings.Join(a.Channels, ",") == strings.Join(b.Channels, ",") && a.Deadline.Equal(b.Deadline)
}

// A message delivered to one channel of two is sent again to the other,
// whichever message it is.
func TestNextSendsAPartlyDeliveredMessageToTheChannelLeft(t *testing.T) {
	// Extended 60 hours before the new expiry: only the 2d stage applies,
	// and it is not due yet.
	extendedAt := expires.Add(-60 * time.Hour)
	extended := &Record{ExpiresAt: expires, Since: extendedAt, ExtendedFrom: expires.Add(-Day)}
	tests := []struct {
		name   string
		record *Record
		now    time.Time
		key    string
		event  v1alpha1.EventType
	}{
		{"a reminder", sent(fresh(), "3d", expires.Add(-3*Day), "email"), expires.Add(-3 * Day), "3d", v1alpha1.EventReminder},
		{"an extension", sent(extended, KeyExtended, extendedAt, "email"), extendedAt, KeyExtended, v1alpha1.EventExtended},
		{"a postponement", sent(sent(fresh(), "2d", expires.Add(-time.Hour), people...), KeyPostponed, expires, "email"), expires, KeyPostponed, v1alpha1.EventPostponed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Next(Input{Life: Lifetime{ExpiresAt: expires}, Schedule: standard, Record: tt.record, Channels: toAll(people), Now: tt.now})
			if got.Action != Notify || got.Key != tt.key || got.Event != tt.event || strings.Join(got.Channels, ",") != "slack" {
				t.Errorf("Next = %+v, want %s to slack", got, tt.key)
			}
		})
	}
}

func TestNextWhenADryRunGoesLiveAtTheBoundaries(t *testing.T) {
	noStages := Schedule{DefaultTTL: 14 * Day}
	channels := map[v1alpha1.EventType][]string{v1alpha1.EventWouldDelete: people, v1alpha1.EventPostponed: people}
	rehearsed := sent(fresh(), KeyWouldDelete, expires, "email")
	t.Run("reports a rehearsed deletion to the channel left", func(t *testing.T) {
		got := Next(Input{Life: Lifetime{ExpiresAt: expires}, Schedule: noStages, Record: rehearsed, Channels: channels, DryRun: true, Now: expires})
		if got.Action != Notify || got.Key != KeyWouldDelete || strings.Join(got.Channels, ",") != "slack" {
			t.Errorf("Next = %+v, want the report to slack", got)
		}
	})
	t.Run("owes a deletion going live even a minimum notice of a nanosecond", func(t *testing.T) {
		s := noStages
		s.MinimumNotice = time.Nanosecond
		now := expires.Add(time.Hour)
		got := Next(Input{Life: Lifetime{ExpiresAt: expires}, Schedule: s, Record: rehearsed, Channels: channels, Now: now})
		if got.Action != Notify || got.Key != KeyLive || !got.At.Equal(now.Add(time.Nanosecond)) {
			t.Errorf("Next = %+v, want the postponement of going live", got)
		}
	})
}

func TestLifetimeAtTheBoundariesOfItsClocks(t *testing.T) {
	keep := map[string]string{AnnotationKeep: "true"}
	tests := []struct {
		name        string
		schedule    Schedule
		annotations map[string]string
		expires     time.Time
		idleAt, max time.Time
	}{
		{"a kept object has no expiry, idle time or maximum",
			Schedule{DefaultTTL: Day, IdleTTL: Day, MaxTTL: Week}, keep, time.Time{}, time.Time{}, time.Time{}},
		{"an object under a policy without idleTTL has no idle time",
			Schedule{DefaultTTL: Day}, nil, created.Add(Day), time.Time{}, time.Time{}},
		{"the smallest idleTTL counts",
			Schedule{DefaultTTL: Day, IdleTTL: time.Nanosecond}, nil, created.Add(Day), created.Add(time.Nanosecond), time.Time{}},
		{"the smallest maxTTL caps",
			Schedule{DefaultTTL: time.Nanosecond, MaxTTL: time.Nanosecond}, map[string]string{AnnotationTTL: "1h"},
			created.Add(time.Nanosecond), time.Time{}, created.Add(time.Nanosecond)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.schedule.Lifetime(created, tt.annotations, afterAll)
			if !l.ExpiresAt.Equal(tt.expires) || !l.IdleAt.Equal(tt.idleAt) || !l.Max.Equal(tt.max) {
				t.Errorf("expires %s, idle at %s, max %s; want %s, %s, %s", l.ExpiresAt, l.IdleAt, l.Max, tt.expires, tt.idleAt, tt.max)
			}
		})
	}
}

// Positive means greater than zero: the smallest value of each duration
// is one nanosecond (one second for the bare legacy ttl), and it is taken.
func TestTheSmallestPositiveDurationsAreAccepted(t *testing.T) {
	s, err := NewSchedule(v1alpha1.TimeoutPolicySpec{DefaultTTL: "1ns", Reminders: []v1alpha1.Duration{"1ns"}, IdleTTL: "1ns", MaxTTL: "1ns"})
	if err != nil {
		t.Fatalf("NewSchedule: %v", err)
	}
	if s.DefaultTTL != 1 || len(s.Reminders) != 1 || s.Reminders[0] != 1 || s.IdleTTL != 1 || s.MaxTTL != 1 {
		t.Errorf("schedule %+v, want every duration 1ns", s)
	}
	for key, want := range map[string]time.Duration{AnnotationTTL: time.Nanosecond, AnnotationLegacyTTL: time.Second} {
		value := map[string]string{AnnotationTTL: "1ns", AnnotationLegacyTTL: "1"}[key]
		l := Compute(created, map[string]string{key: value}, Day)
		if !l.ExpiresAt.Equal(created.Add(want)) || len(l.Invalid) != 0 {
			t.Errorf("%s=%s: expires %s (%v), want %s after creation", key, value, l.ExpiresAt, l.Invalid, want)
		}
	}
}

func TestNewScheduleAllowsADefaultEqualToTheMaximum(t *testing.T) {
	if _, err := NewSchedule(v1alpha1.TimeoutPolicySpec{DefaultTTL: "7d", MaxTTL: "7d"}); err != nil {
		t.Errorf("defaultTTL equal to maxTTL: %v", err)
	}
	if _, err := NewSchedule(v1alpha1.TimeoutPolicySpec{DefaultTTL: "1h", MaxTTL: "1ns"}); err == nil {
		t.Error("defaultTTL 1h under maxTTL 1ns accepted")
	}
}

// A duration too long for a time.Duration must be refused, not wrapped
// round to a short one: a ttl of half a million years read as a few
// minutes would delete the object at once.
func TestParseDurationRefusesWhatWouldWrapRound(t *testing.T) {
	for _, in := range []string{
		"5124095577h",            // 2^64 ns and 3.5 s: would wrap to 3.5 s
		"20000000000000000000ns", // beyond 2^64: its digits would wrap
	} {
		if d, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, d)
		}
	}
}

func TestParseDurationReadsEveryFractionDigit(t *testing.T) {
	for in, want := range map[string]time.Duration{"1.1h": 66 * time.Minute, "0.1s": 100 * time.Millisecond} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"1.5", "1."} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) accepted a number without a unit", in)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "ttl", 3}, {"ttl", "", 3}, {"keep", "keep", 0},
		{"kitten", "sitting", 3}, {"flaw", "lawn", 2}, {"notfy", "notify", 1}, {"ttll", "ttl", 1},
	} {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
