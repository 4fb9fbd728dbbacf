// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"maps"
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

// far is the last-active that would keep an object for centuries.
var far = time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)

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
		// now is when the lifetime is read; afterAll when zero.
		now         time.Time
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
			name: "without a maximum, a last-active written long ago keeps the object idleTTL past it", schedule: noMax,
			annotations: map[string]string{AnnotationLastActive: rfc(created.Add(100 * Day))},
			wantAt:      created.Add(103 * Day), wantSource: SourceIdle, wantActive: AnnotationLastActive, wantIdle: true,
		},
		{
			name: "a last-active far ahead counts from now until the controller notes it", schedule: noMax,
			annotations: map[string]string{AnnotationLastActive: "2999-01-01T00:00:00Z"},
			now:         created.Add(13 * Day),
			wantAt:      created.Add(16 * Day), wantSource: SourceIdle, wantActive: AnnotationLastActive, wantIdle: true,
			wantInvalid: []string{AnnotationLastActive},
		},
		{
			name: "a last-active far ahead counts from when the controller first saw it", schedule: noMax,
			annotations: map[string]string{
				AnnotationLastActive: "2999-01-01T00:00:00Z",
				AnnotationActivity:   Activity{Generation: 1, Ahead: &Ahead{LastActive: far, Seen: created.Add(12 * Day)}}.String(),
			},
			now:    created.Add(40 * Day),
			wantAt: created.Add(15 * Day), wantSource: SourceIdle, wantActive: AnnotationLastActive, wantIdle: true,
			wantInvalid: []string{AnnotationLastActive},
		},
		{
			name: "a last-active as far ahead as the clock skew allows counts as written", schedule: noMax,
			annotations: map[string]string{AnnotationLastActive: rfc(created.Add(13*Day + Skew))},
			now:         created.Add(13 * Day),
			wantAt:      created.Add(16*Day + Skew), wantSource: SourceIdle, wantActive: AnnotationLastActive, wantIdle: true,
		},
		{
			name: "a last-active a second further ahead than the skew counts from now", schedule: noMax,
			annotations: map[string]string{AnnotationLastActive: rfc(created.Add(13*Day + Skew + time.Second))},
			now:         created.Add(13 * Day),
			wantAt:      created.Add(16 * Day), wantSource: SourceIdle, wantActive: AnnotationLastActive, wantIdle: true,
			wantInvalid: []string{AnnotationLastActive},
		},
		{
			name: "a note seen ahead of now is not the controller's", schedule: noMax,
			annotations: map[string]string{
				AnnotationLastActive: "2999-01-01T00:00:00Z",
				AnnotationActivity:   Activity{Generation: 1, Ahead: &Ahead{LastActive: far, Seen: created.Add(13*Day + Skew + time.Second)}}.String(),
			},
			now:    created.Add(13 * Day),
			wantAt: created.Add(16 * Day), wantSource: SourceIdle, wantActive: AnnotationLastActive, wantIdle: true,
			wantInvalid: []string{AnnotationLastActive},
		},
		{
			name: "a note seen within the skew ahead of now counts", schedule: noMax,
			annotations: map[string]string{
				AnnotationLastActive: "2999-01-01T00:00:00Z",
				AnnotationActivity:   Activity{Generation: 1, Ahead: &Ahead{LastActive: far, Seen: created.Add(13*Day + Skew)}}.String(),
			},
			now:    created.Add(13 * Day),
			wantAt: created.Add(16*Day + Skew), wantSource: SourceIdle, wantActive: AnnotationLastActive, wantIdle: true,
			wantInvalid: []string{AnnotationLastActive},
		},
		{
			name: "a note about another time does not apply", schedule: noMax,
			annotations: map[string]string{
				AnnotationLastActive: "2999-01-01T00:00:00Z",
				AnnotationActivity:   Activity{Generation: 1, Ahead: &Ahead{LastActive: far.Add(time.Second), Seen: created.Add(Day)}}.String(),
			},
			now:    created.Add(13 * Day),
			wantAt: created.Add(16 * Day), wantSource: SourceIdle, wantActive: AnnotationLastActive, wantIdle: true,
			wantInvalid: []string{AnnotationLastActive},
		},
		{
			name: "a note seen at the time it names leaves the time as it is", schedule: noMax,
			annotations: map[string]string{
				AnnotationLastActive: rfc(created.Add(12 * Day)),
				AnnotationActivity:   Activity{Generation: 1, Ahead: &Ahead{LastActive: created.Add(12 * Day), Seen: created.Add(12 * Day)}}.String(),
			},
			now:    created.Add(13 * Day),
			wantAt: created.Add(15 * Day), wantSource: SourceIdle, wantActive: AnnotationLastActive, wantIdle: true,
		},
		{
			name: "a recorded generation change ahead of now counts as now", schedule: noMax,
			annotations: map[string]string{AnnotationActivity: Activity{Generation: 3, At: far}.String()},
			now:         created.Add(13 * Day),
			wantAt:      created.Add(16 * Day), wantSource: SourceIdle, wantActive: SourceGeneration, wantIdle: true,
		},
		{
			name: "a recorded generation change within the skew counts as recorded", schedule: noMax,
			annotations: map[string]string{AnnotationActivity: Activity{Generation: 3, At: created.Add(13*Day + Skew)}.String()},
			now:         created.Add(13 * Day),
			wantAt:      created.Add(16*Day + Skew), wantSource: SourceIdle, wantActive: SourceGeneration, wantIdle: true,
		},
		{
			name: "a wake ahead of now is no use", schedule: noMax,
			annotations: map[string]string{AnnotationSleep: SleepState{Phase: PhaseAwake, Woke: created.Add(13*Day + Skew + time.Second)}.String()},
			now:         created.Add(13 * Day),
			wantAt:      created.Add(14 * Day), wantSource: SourceDefault, wantActive: SourceCreated,
		},
		{
			name: "a wake within the skew is use", schedule: noMax,
			annotations: map[string]string{AnnotationSleep: SleepState{Phase: PhaseAwake, Woke: created.Add(13*Day + Skew)}.String()},
			now:         created.Add(13 * Day),
			wantAt:      created.Add(16*Day + Skew), wantSource: SourceIdle, wantActive: SourceWoke, wantIdle: true,
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
			now := tt.now
			if now.IsZero() {
				now = afterAll
			}
			l := tt.schedule.Lifetime(created, tt.annotations, now)
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
	l := idle.Lifetime(created, map[string]string{AnnotationExpiresAt: rfc(created.Add(60 * Day))}, afterAll)
	if len(l.Invalid) != 1 || !strings.Contains(l.Invalid[0].Error(), "maxTTL 30d") || !strings.Contains(l.Invalid[0].Error(), rfc(created.Add(30*Day))) {
		t.Fatalf("warning = %v, want one naming maxTTL 30d and the time it clamps to", l.Invalid)
	}
}

func TestAClampedLastActiveSaysFromWhenUseCounts(t *testing.T) {
	now := created.Add(13 * Day)
	l := idle.Lifetime(created, map[string]string{AnnotationLastActive: "2999-01-01T00:00:00Z"}, now)
	if len(l.Invalid) != 1 || !strings.Contains(l.Invalid[0].Error(), "no later than when it is written (5s of clock skew allowed)") ||
		!strings.Contains(l.Invalid[0].Error(), "counts from "+rfc(now)) {
		t.Fatalf("warning = %v, want one naming the skew allowed and the time use counts from", l.Invalid)
	}
}

func TestSettle(t *testing.T) {
	now := created.Add(13 * Day)
	farValue := "2999-01-01T00:00:00Z"
	noted := func(at, seen time.Time) *Ahead { return &Ahead{LastActive: at, Seen: seen} }
	tests := []struct {
		name        string
		annotations map[string]string
		want        Activity
		wantWrite   bool
	}{
		{name: "writes nothing for an object without use", want: Activity{Generation: 1}},
		{
			name:        "writes nothing for a last-active in the past",
			annotations: map[string]string{AnnotationLastActive: rfc(now.Add(-time.Hour))},
			want:        Activity{Generation: 1},
		},
		{
			name:        "writes nothing for a last-active within the clock skew",
			annotations: map[string]string{AnnotationLastActive: rfc(now.Add(Skew))},
			want:        Activity{Generation: 1},
		},
		{
			name:        "notes a last-active ahead of now, seen now",
			annotations: map[string]string{AnnotationLastActive: farValue},
			want:        Activity{Generation: 1, Ahead: noted(far, now)}, wantWrite: true,
		},
		{
			name:        "notes a last-active a second past the clock skew",
			annotations: map[string]string{AnnotationLastActive: rfc(now.Add(Skew + time.Second))},
			want:        Activity{Generation: 1, Ahead: noted(now.Add(Skew+time.Second), now)}, wantWrite: true,
		},
		{
			name: "keeps the generation it recorded when it notes",
			annotations: map[string]string{
				AnnotationLastActive: farValue,
				AnnotationActivity:   Activity{Generation: 4, At: created.Add(Day)}.String(),
			},
			want: Activity{Generation: 4, At: created.Add(Day), Ahead: noted(far, now)}, wantWrite: true,
		},
		{
			name: "keeps a note of the last-active the object shows",
			annotations: map[string]string{
				AnnotationLastActive: farValue,
				AnnotationActivity:   Activity{Generation: 2, Ahead: noted(far, created.Add(Day))}.String(),
			},
			want: Activity{Generation: 2, Ahead: noted(far, created.Add(Day))},
		},
		{
			name: "keeps a note whose last-active is no longer ahead",
			annotations: map[string]string{
				AnnotationLastActive: rfc(now.Add(-time.Hour)),
				AnnotationActivity:   Activity{Generation: 2, Ahead: noted(now.Add(-time.Hour), created.Add(Day))}.String(),
			},
			want: Activity{Generation: 2, Ahead: noted(now.Add(-time.Hour), created.Add(Day))},
		},
		{
			name: "keeps a note seen within the skew ahead of now",
			annotations: map[string]string{
				AnnotationLastActive: farValue,
				AnnotationActivity:   Activity{Generation: 2, Ahead: noted(far, now.Add(Skew))}.String(),
			},
			want: Activity{Generation: 2, Ahead: noted(far, now.Add(Skew))},
		},
		{
			name: "replaces a note seen ahead of now, which it did not write",
			annotations: map[string]string{
				AnnotationLastActive: farValue,
				AnnotationActivity:   Activity{Generation: 2, Ahead: noted(far, now.Add(Skew+time.Second))}.String(),
			},
			want: Activity{Generation: 2, Ahead: noted(far, now)}, wantWrite: true,
		},
		{
			name: "replaces a note of another last-active",
			annotations: map[string]string{
				AnnotationLastActive: farValue,
				AnnotationActivity:   Activity{Generation: 2, Ahead: noted(far.Add(time.Second), created.Add(Day))}.String(),
			},
			want: Activity{Generation: 2, Ahead: noted(far, now)}, wantWrite: true,
		},
		{
			name: "drops a note whose last-active was changed",
			annotations: map[string]string{
				AnnotationLastActive: rfc(now),
				AnnotationActivity:   Activity{Generation: 2, Ahead: noted(far, created.Add(Day))}.String(),
			},
			want: Activity{Generation: 2}, wantWrite: true,
		},
		{
			name:        "drops a note whose last-active was removed",
			annotations: map[string]string{AnnotationActivity: Activity{Generation: 2, Ahead: noted(far, created.Add(Day))}.String()},
			want:        Activity{Generation: 2}, wantWrite: true,
		},
		{
			name: "drops a note whose last-active no longer parses",
			annotations: map[string]string{
				AnnotationLastActive: "soon",
				AnnotationActivity:   Activity{Generation: 2, Ahead: noted(far, created.Add(Day))}.String(),
			},
			want: Activity{Generation: 2}, wantWrite: true,
		},
		{
			name:        "brings a recorded change ahead of now back to now",
			annotations: map[string]string{AnnotationActivity: Activity{Generation: 3, At: far}.String()},
			want:        Activity{Generation: 3, At: now}, wantWrite: true,
		},
		{
			name:        "leaves a recorded change within the skew",
			annotations: map[string]string{AnnotationActivity: Activity{Generation: 3, At: now.Add(Skew)}.String()},
			want:        Activity{Generation: 3, At: now.Add(Skew)},
		},
		{
			name:        "replaces an unreadable activity when it notes",
			annotations: map[string]string{AnnotationLastActive: farValue, AnnotationActivity: "{"},
			want:        Activity{Generation: 1, Ahead: noted(far, now)}, wantWrite: true,
		},
		{
			name:        "leaves an unreadable activity alone otherwise",
			annotations: map[string]string{AnnotationActivity: "{"},
			want:        Activity{Generation: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, write := Settle(tt.annotations, now)
			if write != tt.wantWrite || got.String() != tt.want.String() {
				t.Fatalf("Settle = %s, %t; want %s, %t", got, write, tt.want, tt.wantWrite)
			}
			if !write {
				return
			}
			// What it writes is what the lifetime read before the write.
			a := maps.Clone(tt.annotations)
			if a == nil {
				a = map[string]string{}
			}
			before := noMaxIdle.Lifetime(created, a, now)
			a[AnnotationActivity] = got.String()
			after := noMaxIdle.Lifetime(created, a, now)
			if !after.LastActive.Equal(before.LastActive) {
				t.Errorf("last active %s once written, %s before", rfc(after.LastActive), rfc(before.LastActive))
			}
			if again, write := Settle(a, now.Add(Day)); write {
				t.Errorf("Settle a day after its own write = %s, true; want nothing to write", again)
			}
		})
	}
}

// noMaxIdle is idle without a maximum: nothing but the clamp bounds use.
var noMaxIdle = Schedule{DefaultTTL: 14 * Day, IdleTTL: 3 * Day, Reminders: []time.Duration{3 * Day, 2 * Day}, MinimumNotice: Day}

// A last-active of 2999 written on day 12 of an object's life: the
// controller sees it at once and notes it, or later, after a restart.
// Either way the object is reminded and deleted idleTTL after the note,
// never later, and never before idleTTL past the write.
func TestAFarLastActiveIsDeletedIdleTTLAfterItWasSeen(t *testing.T) {
	written := created.Add(12 * Day)
	for _, seenAfter := range []time.Duration{0, time.Hour, 2 * Day} {
		seen := written.Add(seenAfter)
		a := map[string]string{AnnotationLastActive: "2999-01-01T00:00:00Z"}
		act, write := Settle(a, seen)
		if !write {
			t.Fatalf("seen %s after the write: nothing to note", seenAfter)
		}
		a[AnnotationActivity] = act.String()
		want := seen.Add(noMaxIdle.IdleTTL)
		var rec *Record
		var deleted time.Time
		for now := seen; now.Before(want.Add(2 * Day)); now = now.Add(time.Hour) {
			if _, write := Settle(a, now); write {
				t.Fatalf("Settle at %s wants to write again", rfc(now))
			}
			var p Plan
			p, rec = plan(noMaxIdle, a, rec, now)
			if p.Action == Notify {
				rec.Delivered(p.Key, p.Event == v1alpha1.EventReminder, p.Channels, now)
			}
			if p.Action == Delete {
				deleted = now
				break
			}
		}
		if deleted.IsZero() || deleted.Before(written.Add(noMaxIdle.IdleTTL)) || deleted.After(want.Add(time.Hour)) {
			t.Errorf("seen %s after the write: deleted at %s, want within an hour after %s", seenAfter, rfc(deleted), rfc(want))
		}
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
	l := s.Lifetime(created, annotations, now)
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
			l := s.Lifetime(created, a, afterAll)
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
		// Read while the times written may be ahead of the clock: use
		// never counts from the future.
		now := created.Add(Day)
		for _, s := range []Schedule{idle, noMaxIdle} {
			if l := s.Lifetime(created, a, now); l.LastActive.After(now.Add(Skew)) {
				t.Fatalf("last active %s, ahead of now %s", l.LastActive, now)
			}
		}
	})
}
