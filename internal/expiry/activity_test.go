// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// idle is the schedule of "at least 14 days, and never while in use":
// defaultTTL 14d, idleTTL 3d, maxTTL 30d.
var idle = Schedule{DefaultTTL: 14 * Day, IdleTTL: 3 * Day, MaxTTL: 30 * Day,
	Reminders: []time.Duration{3 * Day, 2 * Day}, MinimumNotice: Day}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func TestScheduleLifetime(t *testing.T) {
	forbidden := idle
	forbidden.KeepForbidden = true
	noMax := idle
	noMax.MaxTTL = 0
	short := Schedule{DefaultTTL: 3 * Day, IdleTTL: 3 * Day}

	tests := []struct {
		name        string
		schedule    Schedule
		annotations map[string]string
		wantKeep    bool
		wantAt      time.Time
		wantSource  string
		wantActive  string
		wantInvalid []string
		wantIdle    bool
	}{
		{
			name: "the creation clock decides for an object never used", schedule: idle,
			wantAt: created.Add(14 * Day), wantSource: SourceDefault, wantActive: SourceCreated,
		},
		{
			name: "the creation clock decides while the last use plus idleTTL is earlier", schedule: idle,
			annotations: map[string]string{AnnotationLastActive: rfc(created.Add(5 * Day))},
			wantAt:      created.Add(14 * Day), wantSource: SourceDefault, wantActive: AnnotationLastActive,
		},
		{
			name: "the idle clock decides three days after a use on day 12", schedule: idle,
			annotations: map[string]string{AnnotationLastActive: rfc(created.Add(12 * Day))},
			wantAt:      created.Add(15 * Day), wantSource: SourceIdle, wantActive: AnnotationLastActive, wantIdle: true,
		},
		{
			name: "the idle clock counts a generation change the controller recorded", schedule: idle,
			annotations: map[string]string{AnnotationActivity: Activity{Generation: 4, At: created.Add(13 * Day)}.String()},
			wantAt:      created.Add(16 * Day), wantSource: SourceIdle, wantActive: SourceGeneration, wantIdle: true,
		},
		{
			name: "the later of last-active and the recorded generation change counts", schedule: idle,
			annotations: map[string]string{
				AnnotationLastActive: rfc(created.Add(13 * Day)),
				AnnotationActivity:   Activity{Generation: 2, At: created.Add(12 * Day)}.String(),
			},
			wantAt: created.Add(16 * Day), wantSource: SourceIdle, wantActive: AnnotationLastActive, wantIdle: true,
		},
		{
			name: "idleTTL alone means three days after the last use", schedule: short,
			annotations: map[string]string{AnnotationLastActive: rfc(created.Add(Day))},
			wantAt:      created.Add(4 * Day), wantSource: SourceIdle, wantActive: AnnotationLastActive, wantIdle: true,
		},
		{
			name: "an extension by annotation wins over an earlier idle expiry", schedule: idle,
			annotations: map[string]string{AnnotationTTL: "20d", AnnotationLastActive: rfc(created.Add(12 * Day))},
			wantAt:      created.Add(20 * Day), wantSource: AnnotationTTL, wantActive: AnnotationLastActive,
		},
		{
			name: "the maximum caps use without a warning", schedule: idle,
			annotations: map[string]string{AnnotationLastActive: rfc(created.Add(29 * Day))},
			wantAt:      created.Add(30 * Day), wantSource: SourceMax, wantActive: AnnotationLastActive, wantIdle: true,
		},
		{
			name: "the maximum clamps an expires-at beyond it, with a warning", schedule: idle,
			annotations: map[string]string{AnnotationExpiresAt: rfc(created.Add(60 * Day))},
			wantAt:      created.Add(30 * Day), wantSource: SourceMax, wantActive: SourceCreated,
			wantInvalid: []string{AnnotationExpiresAt},
		},
		{
			name: "the maximum clamps a ttl beyond it even while the idle clock runs", schedule: idle,
			annotations: map[string]string{AnnotationTTL: "45d", AnnotationLastActive: rfc(created.Add(40 * Day))},
			wantAt:      created.Add(30 * Day), wantSource: SourceMax, wantActive: AnnotationLastActive,
			wantInvalid: []string{AnnotationTTL},
		},
		{
			name: "without a maximum, a last-active far ahead keeps the object that long", schedule: noMax,
			annotations: map[string]string{AnnotationLastActive: rfc(created.Add(100 * Day))},
			wantAt:      created.Add(103 * Day), wantSource: SourceIdle, wantActive: AnnotationLastActive, wantIdle: true,
		},
		{
			name: "a last-active before creation counts as the creation", schedule: short,
			annotations: map[string]string{AnnotationLastActive: rfc(created.Add(-Day))},
			wantAt:      created.Add(3 * Day), wantSource: SourceDefault, wantActive: SourceCreated,
		},
		{
			name: "an invalid last-active is reported and ignored", schedule: idle,
			annotations: map[string]string{AnnotationLastActive: "yesterday"},
			wantAt:      created.Add(14 * Day), wantSource: SourceDefault, wantActive: SourceCreated,
			wantInvalid: []string{AnnotationLastActive},
		},
		{
			name: "an unreadable activity annotation is ignored", schedule: idle,
			annotations: map[string]string{AnnotationActivity: "{"},
			wantAt:      created.Add(14 * Day), wantSource: SourceDefault, wantActive: SourceCreated,
		},
		{
			name: "an allowed keep wins over the maximum", schedule: idle,
			annotations: map[string]string{AnnotationKeep: "true"},
			wantKeep:    true, wantActive: SourceCreated,
		},
		{
			name: "a forbidden keep is reported and ignored", schedule: forbidden,
			annotations: map[string]string{AnnotationKeep: "true"},
			wantAt:      created.Add(14 * Day), wantSource: SourceDefault, wantActive: SourceCreated,
			wantInvalid: []string{AnnotationKeep},
		},
		{
			name: "a forbidden keep with an unreadable value is ignored too", schedule: forbidden,
			annotations: map[string]string{AnnotationKeep: "yes please"},
			wantAt:      created.Add(14 * Day), wantSource: SourceDefault, wantActive: SourceCreated,
			wantInvalid: []string{AnnotationKeep},
		},
		{
			name: "keep=false under a policy that forbids keep says nothing", schedule: forbidden,
			annotations: map[string]string{AnnotationKeep: "false"},
			wantAt:      created.Add(14 * Day), wantSource: SourceDefault, wantActive: SourceCreated,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.schedule.Lifetime(created, tt.annotations)
			if l.Keep != tt.wantKeep {
				t.Fatalf("Keep = %v, want %v", l.Keep, tt.wantKeep)
			}
			if !tt.wantKeep && (!l.ExpiresAt.Equal(tt.wantAt) || l.Source != tt.wantSource) {
				t.Errorf("expires at %s by %s, want %s by %s", rfc(l.ExpiresAt), l.Source, rfc(tt.wantAt), tt.wantSource)
			}
			if l.ActiveBy != tt.wantActive {
				t.Errorf("ActiveBy = %q, want %q", l.ActiveBy, tt.wantActive)
			}
			var invalid []string
			for _, inv := range l.Invalid {
				invalid = append(invalid, inv.Annotation)
			}
			if !slices.Equal(invalid, tt.wantInvalid) {
				t.Errorf("invalid = %v, want %v", invalid, tt.wantInvalid)
			}
			if l.Idle() != tt.wantIdle {
				t.Errorf("Idle() = %v, want %v", l.Idle(), tt.wantIdle)
			}
			if l.KeepRefused != slices.Contains(tt.wantInvalid, AnnotationKeep) {
				t.Errorf("KeepRefused = %v", l.KeepRefused)
			}
		})
	}
}

func TestClampWarningSaysSo(t *testing.T) {
	l := idle.Lifetime(created, map[string]string{AnnotationExpiresAt: rfc(created.Add(60 * Day))})
	if len(l.Invalid) != 1 || !strings.Contains(l.Invalid[0].Error(), "maxTTL 30d") || !strings.Contains(l.Invalid[0].Error(), rfc(created.Add(30*Day))) {
		t.Fatalf("warning = %v, want one naming maxTTL 30d and the time it clamps to", l.Invalid)
	}
}

func TestNewScheduleIdleAndMaximum(t *testing.T) {
	tests := []struct {
		name    string
		spec    v1alpha1.TimeoutPolicySpec
		wantErr string
		want    Schedule
	}{
		{name: "parses idleTTL, maxTTL and keep: Forbidden",
			spec: v1alpha1.TimeoutPolicySpec{DefaultTTL: "3d", IdleTTL: "3d", MaxTTL: "30d", Keep: v1alpha1.KeepForbidden},
			want: Schedule{DefaultTTL: 3 * Day, MinimumNotice: Day, IdleTTL: 3 * Day, MaxTTL: 30 * Day, KeepForbidden: true}},
		{name: "refuses a maxTTL shorter than defaultTTL",
			spec:    v1alpha1.TimeoutPolicySpec{DefaultTTL: "14d", MaxTTL: "7d"},
			wantErr: "spec.maxTTL"},
		{name: "refuses a zero idleTTL",
			spec:    v1alpha1.TimeoutPolicySpec{IdleTTL: "0"},
			wantErr: "spec.idleTTL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSchedule(tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one about %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || s.IdleTTL != tt.want.IdleTTL || s.MaxTTL != tt.want.MaxTTL || s.KeepForbidden != tt.want.KeepForbidden || s.DefaultTTL != tt.want.DefaultTTL {
				t.Fatalf("NewSchedule = %+v, %v; want %+v", s, err, tt.want)
			}
		})
	}
}

func TestActivityWindowIsATwentiethOfIdleTTL(t *testing.T) {
	if got := (Schedule{IdleTTL: Day}).ActivityWindow(); got != 72*time.Minute {
		t.Fatalf("window of a one-day idleTTL = %s, want 72m", got)
	}
	if got := (Schedule{}).ActivityWindow(); got != 0 {
		t.Fatalf("window without idleTTL = %s, want 0", got)
	}
}

// plan evaluates an object with the annotations at now, from the record
// it showed before, as the controller does.
func plan(s Schedule, annotations map[string]string, rec *Record, now time.Time) (Plan, *Record) {
	l := s.Lifetime(created, annotations)
	next := rec.ForLife(l, created, now)
	return Next(Input{Life: l, Schedule: s, Record: next, Channels: toAll(people), Now: now}), next
}

func TestPlanFollowsUse(t *testing.T) {
	base := created.Add(14 * Day)
	recFor := func(at time.Time) *Record { return (*Record)(nil).For(at, created, created) }
	used := func(at time.Time) map[string]string { return map[string]string{AnnotationLastActive: rfc(at)} }

	t.Run("use before any reminder moves the reminders without a message", func(t *testing.T) {
		now := created.Add(12 * Day)
		p, rec := plan(idle, used(now), recFor(base), now)
		// A 3d reminder of a 3d idle expiry would be due at the use itself.
		if p.Action != Wait || !p.At.Equal(now.Add(Day)) {
			t.Fatalf("plan = %+v, want a wait for the 2d reminder at %s", p, rfc(now.Add(Day)))
		}
		if !rec.ExtendedFrom.IsZero() {
			t.Fatalf("record owes an extended message: %+v", rec)
		}
		// The 2d reminder of the new date is armed: due two days before it.
		later := now.Add(Day)
		p, _ = plan(idle, used(now), rec, later)
		if p.Action != Notify || p.Key != "2d" || !p.At.Equal(now.Add(3*Day)) {
			t.Fatalf("plan a day later = %+v, want the 2d reminder of %s", p, rfc(now.Add(3*Day)))
		}
	})

	t.Run("use after a reminder sends one extended message, and later use none", func(t *testing.T) {
		reminded := sent(recFor(base), "3d", base.Add(-3*Day), people...)
		now := base.Add(-2*Day - time.Hour)
		p, rec := plan(idle, used(now), reminded, now)
		if p.Action != Notify || p.Event != v1alpha1.EventExtended || !p.At.Equal(now.Add(3*Day)) {
			t.Fatalf("plan = %+v, want the extended message announcing %s", p, rfc(now.Add(3*Day)))
		}
		rec.Delivered(p.Key, false, p.Channels, now)
		rec.Announce(p.At)
		again := now.Add(2 * time.Hour)
		p, rec = plan(idle, used(again), rec, again)
		if p.Action != Wait {
			t.Fatalf("plan after more use = %+v, want a quiet wait", p)
		}
		if _, ok := rec.Sent[KeyExtended]; ok || !rec.ExtendedFrom.IsZero() {
			t.Fatalf("record after more use owes or shows an extension: %+v", rec)
		}
	})

	t.Run("use during the minimum-notice hold postpones the deletion to the new date", func(t *testing.T) {
		// First seen late: the 2d reminder reached people an hour before
		// expiry, so the deletion waits until a day after it.
		noticeAt := base.Add(-time.Hour)
		held := sent(recFor(base), "2d", noticeAt, people...)
		held.Announce(noticeAt.Add(Day))
		now := base.Add(time.Hour)
		if p, _ := plan(idle, nil, held.Clone(), now); p.Action == Delete {
			t.Fatalf("deleted during the hold: %+v", p)
		}
		p, rec := plan(idle, used(now), held, now)
		if p.Action != Notify || p.Event != v1alpha1.EventExtended || !p.At.Equal(now.Add(3*Day)) {
			t.Fatalf("plan = %+v, want the extended message to %s", p, rfc(now.Add(3*Day)))
		}
		rec.Delivered(p.Key, false, p.Channels, now)
		for _, at := range []time.Time{noticeAt.Add(Day), now.Add(3*Day - time.Second)} {
			if p, _ := plan(idle, used(now), rec.Clone(), at); p.Action == Delete {
				t.Fatalf("deleted at %s, before the new expiry %s", rfc(at), rfc(now.Add(3*Day)))
			}
		}
	})

	t.Run("use racing the expiry: the fresh state decides", func(t *testing.T) {
		rec := sent(recFor(base), "2d", base.Add(-2*Day), people...)
		rec.Noticed, rec.NoticeAt = base.Add(-2*Day), base.Add(-2*Day)
		// The cache has no use: the deletion is due.
		if p, _ := plan(idle, nil, rec.Clone(), base); p.Action != Delete {
			t.Fatalf("stale plan = %+v, want Delete", p)
		}
		// The fresh read shows a use a second before expiry.
		p, _ := plan(idle, used(base.Add(-time.Second)), rec.Clone(), base)
		if p.Action == Delete {
			t.Fatalf("fresh plan = %+v, want anything but Delete", p)
		}
	})

	t.Run("use cannot take an object past its maximum", func(t *testing.T) {
		maxAt := created.Add(30 * Day)
		rec := sent(recFor(maxAt), "2d", maxAt.Add(-2*Day), people...)
		rec.Noticed = maxAt.Add(-2 * Day)
		p, _ := plan(idle, used(maxAt.Add(-time.Minute)), rec, maxAt)
		if p.Action != Delete || !p.At.Equal(maxAt) {
			t.Fatalf("plan = %+v, want Delete at the maximum %s", p, rfc(maxAt))
		}
	})
}

// FuzzScheduleLifetime writes anything into the annotations of use: they
// may move an expiry later than the creation clock, never earlier, and
// never past the maximum.
func FuzzScheduleLifetime(f *testing.F) {
	f.Add("2026-11-20T09:00:00Z", `{"generation":3,"at":"2026-11-21T09:00:00Z"}`, "")
	f.Add("yesterday", "{", "true")
	f.Add("9999-12-31T23:59:59Z", `{"generation":-1,"at":"0001-01-01T00:00:00Z"}`, "maybe")
	f.Add(" 2026-11-01T09:00:00+01:00 ", "", "false")
	forbidden := idle
	forbidden.KeepForbidden = true
	f.Fuzz(func(t *testing.T, lastActive, activity, keep string) {
		a := map[string]string{AnnotationLastActive: lastActive, AnnotationActivity: activity, AnnotationKeep: keep}
		for _, s := range []Schedule{idle, forbidden} {
			l := s.Lifetime(created, a)
			if l.Keep {
				if s.KeepForbidden {
					t.Fatalf("kept under keep: Forbidden: %+v", l)
				}
				continue
			}
			if l.ExpiresAt.Before(l.Base) && l.ExpiresAt.Before(l.Max) {
				t.Fatalf("expires at %s, before the creation clock %s", l.ExpiresAt, l.Base)
			}
			if l.ExpiresAt.After(l.Max) {
				t.Fatalf("expires at %s, past the maximum %s", l.ExpiresAt, l.Max)
			}
			if l.LastActive.Before(created) {
				t.Fatalf("last active %s, before the creation", l.LastActive)
			}
		}
	})
}
