// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

var (
	created  = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	expires  = created.Add(14 * Day)
	standard = Schedule{DefaultTTL: 14 * Day, Reminders: []time.Duration{3 * Day, 2 * Day}, MinimumNotice: Day}
	people   = []string{"email", "slack"}
	// afterAll is a now later than every time the tests write: no time of
	// use is ahead of it.
	afterAll = created.AddDate(20, 0, 0)
)

// sent builds a record for expires in which key reached channels at at.
func sent(rec *Record, key string, at time.Time, channels ...string) *Record {
	rec.Delivered(key, key != KeyExtended && key != KeyPostponed, channels, at)
	return rec
}

// mustParseRecord parses a record annotation for a table.
func mustParseRecord(s string) *Record {
	r, err := ParseRecord(s)
	if err != nil {
		panic(err)
	}
	return r
}

func fresh() *Record { return (*Record)(nil).For(expires, created, created) }

// toAll gives every recorded message type the same channels.
func toAll(channels []string) map[v1alpha1.EventType][]string {
	return map[v1alpha1.EventType][]string{
		v1alpha1.EventReminder: channels, v1alpha1.EventExtended: channels, v1alpha1.EventPostponed: channels,
	}
}

func TestNext(t *testing.T) {
	tests := []struct {
		name     string
		life     Lifetime
		schedule Schedule
		record   *Record
		now      time.Time
		want     Plan
	}{
		{
			name: "keeps an object annotated keep=true, even long after its expiry",
			life: Lifetime{Keep: true}, schedule: standard, now: expires.Add(Week),
			want: Plan{Action: Keep},
		},
		{
			name: "waits for the first reminder",
			life: Lifetime{ExpiresAt: expires}, schedule: standard, record: fresh(), now: created,
			want: Plan{Action: Wait, At: expires.Add(-3 * Day)},
		},
		{
			name: "sends the 3d reminder when it falls due, retrying no later than the 2d one",
			life: Lifetime{ExpiresAt: expires}, schedule: standard, record: fresh(), now: expires.Add(-3 * Day),
			want: Plan{Action: Notify, Event: v1alpha1.EventReminder, Key: "3d", At: expires, Channels: people, Deadline: expires.Add(-2 * Day)},
		},
		{
			name: "waits for the 2d reminder once the 3d one was delivered",
			life: Lifetime{ExpiresAt: expires}, schedule: standard,
			record: sent(fresh(), "3d", expires.Add(-3*Day), people...), now: expires.Add(-3 * Day),
			want: Plan{Action: Wait, At: expires.Add(-2 * Day)},
		},
		{
			name: "sends only the most urgent stage to an object first seen inside both windows",
			life: Lifetime{ExpiresAt: expires}, schedule: standard, record: fresh(), now: expires.Add(-36 * time.Hour),
			want: Plan{Action: Notify, Event: v1alpha1.EventReminder, Key: "2d", At: expires, Channels: people, Deadline: expires},
		},
		{
			name: "does not go back to a longer stage once a shorter one was delivered",
			life: Lifetime{ExpiresAt: expires}, schedule: standard,
			record: sent(fresh(), "2d", expires.Add(-36*time.Hour), people...), now: expires.Add(-30 * time.Hour),
			want: Plan{Action: Wait, At: expires},
		},
		{
			name: "deletes at expiry when the notice was given in time",
			life: Lifetime{ExpiresAt: expires}, schedule: standard,
			record: sent(sent(fresh(), "3d", expires.Add(-3*Day), people...), "2d", expires.Add(-2*Day), people...), now: expires,
			want: Plan{Action: Delete, At: expires},
		},
		{
			name: "retries only the channel that refused the latest stage",
			life: Lifetime{ExpiresAt: expires}, schedule: standard,
			record: sent(fresh(), "3d", expires.Add(-3*Day), "email"), now: expires.Add(-3*Day + time.Minute),
			want: Plan{Action: Notify, Event: v1alpha1.EventReminder, Key: "3d", At: expires, Channels: []string{"slack"},
				Deadline: expires.Add(-2 * Day)},
		},
		{
			name: "gives up retrying a stage once the next one is due",
			life: Lifetime{ExpiresAt: expires}, schedule: standard,
			record: sent(fresh(), "3d", expires.Add(-3*Day), "email"), now: expires.Add(-2 * Day),
			want: Plan{Action: Notify, Event: v1alpha1.EventReminder, Key: "2d", At: expires, Channels: people, Deadline: expires},
		},
		{
			name: "does not let a failing channel hold up a deletion that is due",
			life: Lifetime{ExpiresAt: expires}, schedule: standard,
			record: sent(fresh(), "2d", expires.Add(-2*Day), "email"), now: expires,
			want: Plan{Action: Delete, At: expires},
		},
		{
			name: "keeps trying the reminder past expiry while no channel has accepted one, announcing the deletion a notice away",
			life: Lifetime{ExpiresAt: expires}, schedule: standard, record: fresh(), now: expires.Add(time.Hour),
			want: Plan{Action: Notify, Event: v1alpha1.EventReminder, Key: "2d", At: expires.Add(25 * time.Hour), Channels: people, Deadline: expires},
		},
		{
			name: "deletes at expiry rather than send a reminder too late to matter when no notice is owed",
			life: Lifetime{ExpiresAt: expires}, schedule: Schedule{Reminders: standard.Reminders}, record: fresh(), now: expires,
			want: Plan{Action: Delete, At: expires},
		},
		{
			name: "postpones the deletion to a minimum notice after a late first reminder",
			life: Lifetime{ExpiresAt: expires}, schedule: standard,
			record: sent(fresh(), "2d", expires.Add(-time.Hour), people...), now: expires,
			want: Plan{Action: Notify, Event: v1alpha1.EventPostponed, Key: KeyPostponed, At: expires.Add(23 * time.Hour),
				Channels: people, Deadline: expires.Add(23 * time.Hour)},
		},
		{
			name: "waits for the postponed time once people were told of it",
			life: Lifetime{ExpiresAt: expires}, schedule: standard,
			record: sent(sent(fresh(), "2d", expires.Add(-time.Hour), people...), KeyPostponed, expires, people...), now: expires,
			want: Plan{Action: Wait, At: expires.Add(23 * time.Hour)},
		},
		{
			name: "deletes at the postponed time",
			life: Lifetime{ExpiresAt: expires}, schedule: standard,
			record: sent(sent(fresh(), "2d", expires.Add(-time.Hour), people...), KeyPostponed, expires, people...),
			now:    expires.Add(23 * time.Hour),
			want:   Plan{Action: Delete, At: expires},
		},
		{
			name: "does not postpone when the minimum notice is off",
			life: Lifetime{ExpiresAt: expires}, schedule: Schedule{Reminders: standard.Reminders},
			record: sent(fresh(), "2d", expires.Add(-time.Hour), people...), now: expires,
			want: Plan{Action: Delete, At: expires},
		},
		{
			name: "gives an object shorter-lived than every lead no reminder and no notice hold",
			life: Lifetime{ExpiresAt: created.Add(36 * time.Hour)}, schedule: standard,
			record: (*Record)(nil).For(created.Add(36*time.Hour), created, created), now: created,
			want: Plan{Action: Wait, At: created.Add(36 * time.Hour)},
		},
		{
			name: "deletes such an object at its expiry",
			life: Lifetime{ExpiresAt: created.Add(36 * time.Hour)}, schedule: standard,
			record: (*Record)(nil).For(created.Add(36*time.Hour), created, created), now: created.Add(36 * time.Hour),
			want: Plan{Action: Delete, At: created.Add(36 * time.Hour)},
		},
		{
			name: "applies the stages that fall inside a shorter life",
			life: Lifetime{ExpiresAt: created.Add(60 * time.Hour)}, schedule: standard,
			record: (*Record)(nil).For(created.Add(60*time.Hour), created, created), now: created,
			want: Plan{Action: Wait, At: created.Add(12 * time.Hour)},
		},
		{
			name: "sends no reminders and deletes on time without reminders",
			life: Lifetime{ExpiresAt: expires}, schedule: Schedule{MinimumNotice: Day}, record: fresh(), now: expires,
			want: Plan{Action: Delete, At: expires},
		},
		{
			name: "tells people of an extension they had been reminded of",
			life: Lifetime{ExpiresAt: expires.Add(Week)}, schedule: standard,
			record: sent(fresh(), "3d", expires.Add(-3*Day), people...).For(expires.Add(Week), created, expires.Add(-Day)),
			now:    expires.Add(-Day),
			want: Plan{Action: Notify, Event: v1alpha1.EventExtended, Key: KeyExtended, At: expires.Add(Week),
				Channels: people, Deadline: expires.Add(Week - 3*Day)},
		},
		{
			name: "re-sends the stages of the new date after an extension",
			life: Lifetime{ExpiresAt: expires.Add(Week)}, schedule: standard,
			record: sent(sent(fresh(), "3d", expires.Add(-3*Day), people...).For(expires.Add(Week), created, expires.Add(-Day)),
				KeyExtended, expires.Add(-Day), people...),
			now:  expires.Add(Week - 3*Day),
			want: Plan{Action: Notify, Event: v1alpha1.EventReminder, Key: "3d", At: expires.Add(Week), Channels: people, Deadline: expires.Add(Week - 2*Day)},
		},
		{
			name: "does not catch up on stages of the new date that fell due before the extension",
			life: Lifetime{ExpiresAt: expires.Add(12 * time.Hour)}, schedule: standard,
			record: sent(sent(fresh(), "3d", expires.Add(-3*Day), people...).For(expires.Add(12*time.Hour), created, expires.Add(-2*Day)),
				KeyExtended, expires.Add(-2*Day), people...),
			now:  expires.Add(-2 * Day),
			want: Plan{Action: Wait, At: expires.Add(-36 * time.Hour)},
		},
		{
			name: "counts the notice given before an extension",
			life: Lifetime{ExpiresAt: expires.Add(time.Hour)}, schedule: standard,
			record: sent(fresh(), "2d", expires.Add(-90*time.Minute), people...).For(expires.Add(time.Hour), created, expires.Add(-time.Hour)),
			now:    expires.Add(time.Hour),
			want: Plan{Action: Notify, Event: v1alpha1.EventPostponed, Key: KeyPostponed, At: expires.Add(22*time.Hour + 30*time.Minute),
				Channels: people, Deadline: expires.Add(22*time.Hour + 30*time.Minute)},
		},
		{
			name: "catches up and owes notice again after the expiry moved earlier",
			life: Lifetime{ExpiresAt: expires.Add(-Day)}, schedule: standard,
			record: sent(fresh(), "3d", expires.Add(-3*Day), people...).For(expires.Add(-Day), created, expires.Add(-2*Day+time.Millisecond)),
			now:    expires.Add(-2*Day + 5*time.Millisecond),
			want: Plan{Action: Notify, Event: v1alpha1.EventReminder, Key: "2d", At: expires.Add(-Day + 5*time.Millisecond), Channels: people,
				Deadline: expires.Add(-Day)},
		},
		{
			name: "takes the notice from the stages sent when an edited record lost it",
			life: Lifetime{ExpiresAt: expires}, schedule: standard,
			record: func() *Record {
				r := sent(fresh(), "2d", expires.Add(-2*Day), people...)
				r.NoticeAt = time.Time{}
				return r
			}(),
			now:  expires.Add(time.Hour),
			want: Plan{Action: Delete, At: expires},
		},
		{
			name: "announces in an extension message the postponed deletion people were told of, not the new expiry",
			life: Lifetime{ExpiresAt: expires.Add(2 * time.Hour)}, schedule: standard,
			record: sent(sent(fresh(), "2d", expires.Add(-time.Hour), people...), KeyPostponed, expires, people...).
				For(expires.Add(2*time.Hour), created, expires.Add(time.Hour)),
			now: expires.Add(time.Hour),
			// The 2d reminder went out at expiry-1h: a day's notice from then.
			want: Plan{Action: Notify, Event: v1alpha1.EventExtended, Key: KeyExtended, At: expires.Add(23 * time.Hour), Channels: people,
				Deadline: expires.Add(2 * time.Hour)},
		},
		{
			name:     "waits for an announced postponement after the minimum notice was lowered",
			life:     Lifetime{ExpiresAt: expires},
			schedule: Schedule{DefaultTTL: standard.DefaultTTL, Reminders: standard.Reminders, MinimumNotice: 2 * time.Hour},
			record: func() *Record {
				r := sent(sent(fresh(), "2d", expires.Add(-time.Hour), people...), KeyPostponed, expires, people...)
				r.PostponedTo = expires.Add(23 * time.Hour) // as the controller records it
				return r
			}(),
			now:  expires.Add(2 * time.Hour),
			want: Plan{Action: Wait, At: expires.Add(23 * time.Hour)},
		},
		{
			name: "reads an empty record annotation as no record: reminds at expiry rather than delete",
			life: Lifetime{ExpiresAt: expires}, schedule: standard,
			record: mustParseRecord(`{}`).For(expires, created, expires), now: expires,
			want: Plan{Action: Notify, Event: v1alpha1.EventReminder, Key: "2d", At: expires.Add(Day), Channels: people,
				Deadline: expires},
		},
		{
			name: "sends no extension message when nobody had been told anything",
			life: Lifetime{ExpiresAt: expires.Add(Week)}, schedule: standard,
			record: fresh().For(expires.Add(Week), created, created.Add(Day)), now: created.Add(Day),
			want: Plan{Action: Wait, At: expires.Add(Week - 3*Day)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Next(Input{Life: tt.life, Schedule: tt.schedule, Record: tt.record, Channels: toAll(people), Now: tt.now})
			if got.Action != tt.want.Action || !got.At.Equal(tt.want.At) || got.Event != tt.want.Event || got.Key != tt.want.Key ||
				!slices.Equal(got.Channels, tt.want.Channels) || !got.Deadline.Equal(tt.want.Deadline) {
				t.Errorf("Next() =\n  %+v\nwant\n  %+v", got, tt.want)
			}
		})
	}
}

func TestRecordFor(t *testing.T) {
	t.Run("keeps the record for the same expiry", func(t *testing.T) {
		r := sent(fresh(), "3d", expires.Add(-3*Day), people...)
		if got := r.For(expires, created, expires); got != r {
			t.Errorf("For(same expiry) returned a new record %+v", got)
		}
	})
	t.Run("starts a record at creation for an object first seen", func(t *testing.T) {
		got := (*Record)(nil).For(expires, created, expires.Add(-Day))
		if !got.Since.Equal(created) || !got.ExpiresAt.Equal(expires) || len(got.Sent) != 0 {
			t.Errorf("For() = %+v", got)
		}
	})
	t.Run("keeps the notice and owes an extension message when the expiry moves later", func(t *testing.T) {
		r := sent(fresh(), "3d", expires.Add(-3*Day), people...)
		r.Title = "hello"
		now := expires.Add(-Day)
		got := r.For(expires.Add(Week), created, now)
		if !got.NoticeAt.Equal(r.NoticeAt) || !got.ExtendedFrom.Equal(expires) || !got.Since.Equal(now) || len(got.Sent) != 0 || got.Title != "hello" {
			t.Errorf("For(later) = %+v", got)
		}
	})
	t.Run("drops the notice and counts from creation when the expiry moves earlier", func(t *testing.T) {
		r := sent(fresh(), "3d", expires.Add(-3*Day), people...)
		got := r.For(expires.Add(-Day), created, expires.Add(-2*Day))
		if !got.NoticeAt.IsZero() || !got.ExtendedFrom.IsZero() || len(got.Sent) != 0 || !got.Since.Equal(created) {
			t.Errorf("For(earlier) = %+v", got)
		}
	})
	t.Run("round-trips through the annotation", func(t *testing.T) {
		r := sent(sent(fresh(), "3d", expires.Add(-3*Day), "email"), "3d", expires.Add(-3*Day+time.Minute), "slack")
		back, err := ParseRecord(r.String())
		if err != nil {
			t.Fatal(err)
		}
		if back.String() != r.String() || !slices.Equal(back.Sent["3d"].Channels, []string{"email", "slack"}) ||
			!back.Sent["3d"].At.Equal(expires.Add(-3*Day)) {
			t.Errorf("ParseRecord(%s) = %s", r, back)
		}
	})
	t.Run("refuses an unreadable annotation", func(t *testing.T) {
		if _, err := ParseRecord("{not json"); err == nil {
			t.Error("ParseRecord accepted broken JSON")
		}
	})
}

func TestAfter(t *testing.T) {
	now := created
	tests := []struct {
		name string
		at   time.Time
		want time.Duration
	}{
		{"is the time left", now.Add(90 * time.Second), 90 * time.Second},
		{"is at least a millisecond when the time is now", now, time.Millisecond},
		{"is at least a millisecond when the time is past", now.Add(-time.Hour), time.Millisecond},
		{"is at least a millisecond when less is left", now.Add(time.Microsecond), time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := After(tt.at, now); got != tt.want {
				t.Errorf("After() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestActionString(t *testing.T) {
	for a, want := range map[Action]string{Keep: "Keep", Wait: "Wait", Notify: "Notify", Delete: "Delete", Action(42): "Unknown"} {
		if got := a.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(a), got, want)
		}
	}
}

// FuzzParseRecord: the record annotation can be edited by anyone who can
// edit the object; whatever it holds, reading it never panics and planning
// from it never returns a Wait in the past (a tight loop).
func FuzzParseRecord(f *testing.F) {
	f.Add(fresh().String())
	f.Add(sent(fresh(), "3d", expires.Add(-3*Day), people...).String())
	f.Add(`{"expiresAt":"2026-11-15T09:00:00Z","sent":{"3d":{"at":"0001-01-01T00:00:00Z"}}}`)
	f.Add(`{"expiresAt":"bad"}`)
	f.Add(`{"expiresAt":"2026-11-15T09:00:00Z","since":"2026-11-01T09:00:00Z","sent":{"2d":{"at":"2026-11-13T09:00:00Z","channels":["email","slack"]}}}`)
	f.Fuzz(func(t *testing.T, value string) {
		rec, err := ParseRecord(value)
		if err != nil {
			return
		}
		for _, now := range []time.Time{expires.Add(-36 * time.Hour), expires, expires.Add(30 * time.Hour)} {
			r := rec.For(expires, created, now)
			p := Next(Input{Life: Lifetime{ExpiresAt: expires}, Schedule: standard, Record: r, Channels: toAll(people), Now: now})
			if p.Action == Wait && !p.At.After(now) {
				t.Fatalf("Next planned a Wait until %s at %s from record %s", p.At, now, value)
			}
		}
	})
}

// TestRecordForReturningExpiry follows an expiry that policy edits move
// away and back: what was delivered about it stays delivered.
func TestRecordForReturningExpiry(t *testing.T) {
	later, earlier := expires.Add(Week), expires.Add(-Day)
	tests := []struct {
		name string
		// moves are the expiries For is called with, one hour apart,
		// starting from a record for expires whose 3d reminder reached
		// email and slack.
		moves []time.Time
		// delivered is what the last record counts as delivered.
		delivered map[string][]string
		notice    bool
	}{
		{name: "counts the stages of an expiry moved later and back as delivered",
			moves: []time.Time{later, expires}, delivered: map[string][]string{"3d": people}, notice: true},
		{name: "counts the stages of an expiry moved earlier and back as delivered",
			moves: []time.Time{earlier, expires}, delivered: map[string][]string{"3d": people}, notice: true},
		{name: "remembers an expiry across several others",
			moves: []time.Time{later, earlier, expires.Add(2 * Week), expires}, delivered: map[string][]string{"3d": people}, notice: true},
		{name: "forgets an expiry beyond the last four",
			moves: []time.Time{later, expires.Add(2 * Week), expires.Add(3 * Week), expires.Add(4 * Week), expires.Add(5 * Week), expires}, delivered: map[string][]string{}},
		{name: "counts nothing as delivered for an expiry never seen",
			moves: []time.Time{later, expires.Add(2 * Week)}, delivered: map[string][]string{"extended": people}, notice: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := sent(fresh(), "3d", expires.Add(-3*Day), people...)
			now := expires.Add(-3 * Day)
			for _, at := range tt.moves {
				now = now.Add(time.Hour)
				rec = rec.For(at, created, now)
				// Each new expiry is announced to everyone it concerns.
				if !rec.ExtendedFrom.IsZero() {
					rec.Delivered(KeyExtended, false, people, now)
				}
			}
			got := map[string][]string{}
			for k, d := range rec.Sent {
				got[k] = d.Channels
			}
			if len(got) != len(tt.delivered) {
				t.Fatalf("delivered %v, want %v", got, tt.delivered)
			}
			for k, want := range tt.delivered {
				if !slices.Equal(got[k], want) {
					t.Errorf("delivered %v, want %v", got, tt.delivered)
				}
			}
			if rec.NoticeAt.IsZero() == tt.notice {
				t.Errorf("NoticeAt = %v, want notice %v", rec.NoticeAt, tt.notice)
			}
		})
	}
}

func TestRecordForReturningExtension(t *testing.T) {
	later := expires.Add(Week)
	rec := sent(fresh(), "3d", expires.Add(-3*Day), people...)
	now := expires.Add(-2 * Day)
	rec = sent(rec.For(later, created, now), KeyExtended, now, people...)
	rec = sent(rec, "3d", later.Add(-3*Day), "email")
	announced := rec.Announced

	t.Run("does not announce the same extension again", func(t *testing.T) {
		back := rec.For(expires, created, now.Add(time.Hour)).For(later, created, now.Add(2*time.Hour))
		if !back.ExtendedFrom.Equal(expires) || !slices.Equal(back.Sent[KeyExtended].Channels, people) ||
			!slices.Equal(back.Sent["3d"].Channels, []string{"email"}) || !back.Announced.Equal(announced) {
			t.Errorf("For(later again) = %s", back)
		}
	})
	t.Run("announces an extension from another expiry", func(t *testing.T) {
		other := sent(rec.For(expires.Add(Day), created, now.Add(time.Hour)), "3d", now.Add(time.Hour), "slack")
		back := other.For(later, created, now.Add(2*time.Hour))
		if !back.ExtendedFrom.Equal(expires.Add(Day)) || len(back.Sent[KeyExtended].Channels) != 0 ||
			!slices.Equal(back.Sent["3d"].Channels, []string{"email"}) {
			t.Errorf("For(later from another expiry) = %s", back)
		}
	})
}

// TestRecordSize measures the annotation for the largest records a policy
// allows: ten reminders, every message, ten channels, moved through more
// expiries than it remembers.
func TestRecordSize(t *testing.T) {
	for _, tt := range []struct {
		name    string
		channel string
		earlier int
		most    int
	}{
		{name: "channels with the longest names", channel: "%0253d", earlier: 1, most: 72 << 10},
		{name: "channels with ordinary names", channel: "team-%d-slack", earlier: MaxEarlier, most: 16 << 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var channels []string
			for i := range 10 {
				channels = append(channels, fmt.Sprintf(tt.channel, i))
			}
			rec := worstRecord(channels)
			earlier, err := json.Marshal(rec.Earlier)
			if err != nil {
				t.Fatal(err)
			}
			if len(earlier) > MaxEarlierSize || len(rec.Earlier) != tt.earlier {
				t.Errorf("%d earlier expiries take %d bytes, want %d within %d", len(rec.Earlier), len(earlier), tt.earlier, MaxEarlierSize)
			}
			size := len(rec.String())
			if size > tt.most {
				t.Errorf("the record takes %d bytes, want at most %d", size, tt.most)
			}
			t.Logf("the record takes %d bytes, %d of them for %d earlier expiries", size, len(earlier), len(rec.Earlier))
		})
	}
}

// worstRecord is a record whose every message reached channels under each
// of more expiries than it remembers.
func worstRecord(channels []string) *Record {
	keys := []string{KeyExtended, KeyPostponed, KeyWouldDelete, KeyLive}
	for i := range 10 {
		keys = append(keys, StageKey(time.Duration(i+1)*time.Hour))
	}
	rec := fresh()
	now := created
	for i := range 2 * MaxEarlier {
		now = now.Add(time.Hour)
		rec = rec.For(expires.Add(time.Duration(i+1)*Day), created, now)
		for _, k := range keys {
			rec.Delivered(k, IsStage(k), channels, now)
		}
	}
	return rec
}

// A policy with dryRun, defaultTTL 6s, reminders [3s], minimumNotice 8s:
// reminder, postponed, would-delete; then dryRun is switched off. The
// notice given during the rehearsal led to no deletion: the object gets
// the minimum notice again from the moment the deletion goes live.
func TestNextWhenADryRunGoesLive(t *testing.T) {
	c := created
	s := Schedule{DefaultTTL: 6 * time.Second, Reminders: []time.Duration{3 * time.Second}, MinimumNotice: 8 * time.Second}
	e := c.Add(6 * time.Second)
	ch := toAll(people)
	ch[v1alpha1.EventWouldDelete] = people
	rehearsed := func() *Record {
		r := (*Record)(nil).For(e, c, c)
		r.Delivered("3s", true, people, c.Add(3*time.Second))
		r.Delivered(KeyPostponed, false, people, e)
		r.PostponedTo = c.Add(11 * time.Second)
		r.Delivered(KeyWouldDelete, false, people, c.Add(11*time.Second))
		return r
	}
	live := c.Add(15 * time.Second)
	wentLive := rehearsed()
	wentLive.Delivered(KeyLive, false, people, live)
	wentLive.PostponedTo = live.Add(8 * time.Second)
	noNotice := s
	noNotice.MinimumNotice = 0
	moved := c.Add(40 * time.Second)

	tests := []struct {
		name     string
		schedule Schedule
		record   *Record
		dryRun   bool
		now      time.Time
		expires  time.Time
		want     Plan
	}{
		{
			name: "reports the rehearsed deletion once under dry run", schedule: s, dryRun: true, now: c.Add(11 * time.Second),
			record: func() *Record {
				r := rehearsed()
				delete(r.Sent, KeyWouldDelete)
				return r
			}(),
			want: Plan{Action: Notify, Event: v1alpha1.EventWouldDelete, Key: KeyWouldDelete, At: e, Channels: people},
		},
		{
			name: "rehearses nothing more once the rehearsal was reported", schedule: s, dryRun: true, now: live,
			record: rehearsed(), want: Plan{Action: Delete, At: e},
		},
		{
			name: "postpones a rehearsed deletion by the minimum notice when it goes live", schedule: s, now: live,
			record: rehearsed(),
			want:   Plan{Action: Notify, Event: v1alpha1.EventPostponed, Key: KeyLive, At: live.Add(8 * time.Second), Channels: people},
		},
		{
			name: "waits for the time announced on going live", schedule: s, now: live.Add(time.Second),
			record: wentLive, want: Plan{Action: Wait, At: live.Add(8 * time.Second)},
		},
		{
			name: "deletes at the time announced on going live", schedule: s, now: live.Add(8 * time.Second),
			record: wentLive, want: Plan{Action: Delete, At: e},
		},
		{
			name: "deletes a rehearsed object at once on going live when the minimum notice is off", schedule: noNotice, now: live,
			record: rehearsed(), want: Plan{Action: Delete, At: e},
		},
		{
			name: "postpones a rehearsal recorded before the record kept its time", schedule: s, now: live,
			record: func() *Record {
				r := rehearsed()
				r.Rehearsed = time.Time{}
				return r
			}(),
			want: Plan{Action: Notify, Event: v1alpha1.EventPostponed, Key: KeyLive, At: live.Add(8 * time.Second), Channels: people},
		},
		{
			// The policy that goes live also gives a later expiry: the
			// new record still owes the postponement on going live.
			name: "postpones a rehearsed deletion whose expiry moved as it went live", schedule: s, now: moved,
			expires: moved, record: rehearsed().For(moved, c, live),
			want: Plan{Action: Notify, Event: v1alpha1.EventPostponed, Key: KeyLive, At: moved.Add(8 * time.Second), Channels: people},
		},
		{
			name: "owes no second postponement once going live was announced and the expiry moved", schedule: s, now: moved,
			expires: moved, record: func() *Record {
				r := wentLive.For(moved, c, live.Add(time.Second))
				r.Delivered("3s", true, people, moved.Add(-3*time.Second))
				return r
			}(),
			want: Plan{Action: Delete, At: moved},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exp := e
			if !tt.expires.IsZero() {
				exp = tt.expires
			}
			got := Next(Input{Life: Lifetime{ExpiresAt: exp}, Schedule: tt.schedule, Record: tt.record, Channels: ch, DryRun: tt.dryRun, Now: tt.now})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Next() = %+v\nwant     %+v", got, tt.want)
			}
		})
	}
}

// TestNextKeepsTheNoticeAcrossLifetimeChanges plays a lifetime minute by
// minute, delivering what Next asks for as the controller records it, while
// the expiry changes under it: an object is deleted only after a reminder
// reached people, a minimum notice after the first one, and never before a
// time a message gave.
func TestNextKeepsTheNoticeAcrossLifetimeChanges(t *testing.T) {
	extendAt := expires.Add(-Day)
	remindedAt := expires.Add(-3 * Day)
	// announced is a record of a 3d reminder that told people of expires.
	announced := func() *Record {
		rec := (*Record)(nil).For(expires, created, remindedAt)
		rec.Delivered(StageKey(3*Day), true, people, remindedAt)
		rec.Announce(expires)
		return rec
	}
	shortened := func(time.Time) time.Time { return created.Add(Day) }
	oneHourNotice := Schedule{DefaultTTL: 14 * Day, Reminders: []time.Duration{3 * Day}, MinimumNotice: time.Hour}
	noNotice := oneHourNotice
	noNotice.MinimumNotice = 0

	tests := []struct {
		name     string
		schedule Schedule
		record   *Record
		from     time.Time
		// expiry is the object's expiry at now.
		expiry func(now time.Time) time.Time
		// Every delivery fails before deliverFrom.
		deliverFrom time.Time
		// The deletion falls in [notBefore, by].
		notBefore, by time.Time
	}{
		{
			// Reminders [3d, 2d] all fail until after the object was
			// extended by an hour at expiry-1d: the stages owed before the
			// extension stay owed, and the day of notice counts from the
			// first reminder that got through.
			name:     "keeps the notice owed before an extension made while every channel failed",
			schedule: standard, from: created,
			expiry: func(now time.Time) time.Time {
				if now.Before(extendAt) {
					return expires
				}
				return expires.Add(time.Hour)
			},
			deliverFrom: extendAt.Add(time.Minute),
			// The first reminder, at expiry-1d+1m, gives a day's notice
			// before the new expiry: the object goes at that expiry.
			notBefore: expires.Add(time.Hour), by: expires.Add(time.Hour),
		},
		{
			name:     "never deletes before the time a reminder gave when the lifetime is shortened into the past",
			schedule: noNotice, record: announced(), from: remindedAt.Add(time.Minute), expiry: shortened,
			notBefore: expires, by: expires.Add(time.Minute),
		},
		{
			name:     "owes the shortened lifetime its own notice after the time a reminder gave",
			schedule: oneHourNotice, record: announced(), from: remindedAt.Add(time.Minute), expiry: shortened,
			notBefore: expires, by: expires.Add(time.Hour + time.Minute),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := tt.record
			var firstReminder, deletedAt time.Time
			for now := tt.from; deletedAt.IsZero() && now.Before(expires.Add(3*Day)); now = now.Add(time.Minute) {
				expiry := tt.expiry(now)
				rec = rec.For(expiry, created, now)
				p := Next(Input{Life: Lifetime{ExpiresAt: expiry}, Schedule: tt.schedule, Record: rec, Channels: toAll(people), Now: now})
				switch {
				case p.Action == Delete:
					deletedAt = now
				case p.Action == Notify && !now.Before(tt.deliverFrom):
					// As the controller records a delivery.
					rec = rec.Clone()
					rec.Delivered(p.Key, p.Event == v1alpha1.EventReminder, p.Channels, now)
					if p.Event == v1alpha1.EventPostponed {
						rec.PostponedTo = p.At
					}
					rec.Announce(p.At)
					if p.Event == v1alpha1.EventReminder && firstReminder.IsZero() {
						firstReminder = now
					}
				}
			}
			switch {
			case deletedAt.IsZero():
				t.Fatal("never deleted")
			case tt.record == nil && firstReminder.IsZero():
				t.Fatalf("deleted at %s with no reminder delivered", deletedAt)
			case tt.record == nil && deletedAt.Before(firstReminder.Add(tt.schedule.MinimumNotice)):
				t.Fatalf("deleted at %s, %s after the first reminder; the minimum notice is %s",
					deletedAt, deletedAt.Sub(firstReminder), tt.schedule.MinimumNotice)
			case deletedAt.Before(tt.notBefore) || deletedAt.After(tt.by):
				t.Errorf("deleted at %s, want between %s and %s", deletedAt, tt.notBefore, tt.by)
			}
		})
	}
}

// TestAPostponementOutlivesAChangeOfTheExpiry: the deletion time a
// postponement gave (later by a slow delivery) holds whichever way the
// expiry moves after it.
func TestAPostponementOutlivesAChangeOfTheExpiry(t *testing.T) {
	s := Schedule{DefaultTTL: time.Hour, MinimumNotice: 10 * time.Minute}
	expiresAt := created.Add(time.Hour)
	rec := (*Record)(nil).For(expiresAt, created, created)
	rec.Delivered(KeyLive, false, people, expiresAt.Add(15*time.Second))
	rec.PostponedTo = expiresAt.Add(10*time.Minute + 15*time.Second)
	for _, at := range []time.Time{created.Add(30 * time.Minute), created.Add(2 * time.Hour)} {
		moved := rec.For(at, created, expiresAt.Add(time.Minute))
		if !moved.PostponedTo.Equal(rec.PostponedTo) {
			t.Errorf("expiry moved to %s: postponed to %s, want %s", at, moved.PostponedTo, rec.PostponedTo)
		}
		now := rec.PostponedTo.Add(-time.Second)
		if p := Next(Input{Life: Lifetime{ExpiresAt: at}, Schedule: s, Record: moved, Channels: toAll(people), Now: now}); p.Action == Delete {
			t.Errorf("expiry moved to %s: deleted a second before the postponement", at)
		}
	}
}
