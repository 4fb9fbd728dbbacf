// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"reflect"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// extension while postponed: the extended message announces a time
// earlier than the deletion people were already told of.
func TestAnExtensionMessageAnnouncesTheDeletionNotTheExpiry(t *testing.T) {
	r := sent(fresh(), "2d", expires.Add(-time.Hour), people...)
	r = sent(r, KeyPostponed, expires, people...)
	now := expires.Add(time.Hour)
	e2 := expires.Add(2 * time.Hour)
	rec := r.For(e2, created, now)
	p := Next(Input{Life: Lifetime{ExpiresAt: e2}, Schedule: standard, Record: rec, Channels: toAll(people), Now: now})
	t.Logf("%+v", p)
	if p.Event == v1alpha1.EventExtended && p.At.Before(expires.Add(23*time.Hour)) {
		t.Errorf("extended message announces %s; the object cannot go before %s (already announced)", p.At, expires.Add(23*time.Hour))
	}
}

// minimumNotice lowered after the postponed message went out: the
// object is deleted before the time the postponement announced.
func TestALoweredNoticeDoesNotDeleteBeforeAnAnnouncedPostponement(t *testing.T) {
	r := sent(fresh(), "2d", expires.Add(-time.Hour), people...)
	r = sent(r, KeyPostponed, expires, people...)
	r.PostponedTo = expires.Add(23 * time.Hour) // as the controller records it
	s := standard
	s.MinimumNotice = 2 * time.Hour
	now := expires.Add(2 * time.Hour)
	p := Next(Input{Life: Lifetime{ExpiresAt: expires}, Schedule: s, Record: r, Channels: toAll(people), Now: now})
	t.Logf("%+v", p)
	if p.Action == Delete {
		t.Errorf("deleted at %s, 21h before the postponed time people were told", now)
	}
}

func TestAnEmptyRecordIsReadAsNoRecord(t *testing.T) {
	rec, err := ParseRecord(`{}`)
	if err != nil {
		t.Fatal(err)
	}
	now := expires.Add(-36 * time.Hour) // both stages due, nothing sent
	r := rec.For(expires, created, now)
	p := Next(Input{Life: Lifetime{ExpiresAt: expires}, Schedule: standard, Record: r, Channels: toAll(people), Now: now})
	t.Logf("since=%s plan=%+v", r.Since, p)
	p = Next(Input{Life: Lifetime{ExpiresAt: expires}, Schedule: standard, Record: r, Channels: toAll(people), Now: expires})
	if p.Action == Delete {
		t.Errorf("a record reading {} makes the object deletable at expiry without any reminder")
	}
}

// Reminders [3d, 2d]; every delivery fails until after the object was
// extended by an hour at expiry-1d. The stages owed before the extension
// stay owed: the object is not deleted before a reminder has reached
// people and the minimum notice has passed since.
func TestAnExtensionDoesNotReleaseNoticeStillOwed(t *testing.T) {
	extendAt := expires.Add(-Day)
	newExpiry := expires.Add(time.Hour)
	channelsWorkFrom := extendAt.Add(time.Minute)

	var rec *Record
	var firstReminder time.Time
	expiry := expires
	for now := created; now.Before(newExpiry.Add(3 * Day)); now = now.Add(time.Minute) {
		if !now.Before(extendAt) {
			expiry = newExpiry
		}
		rec = rec.For(expiry, created, now)
		p := Next(Input{Life: Lifetime{ExpiresAt: expiry}, Schedule: standard, Record: rec, Channels: toAll(people), Now: now})
		switch p.Action {
		case Delete:
			if firstReminder.IsZero() {
				t.Fatalf("deleted at %s with no reminder delivered", now)
			}
			if now.Before(firstReminder.Add(standard.MinimumNotice)) {
				t.Fatalf("deleted at %s, %s after the first reminder (%s); the minimum notice is %s",
					now, now.Sub(firstReminder), firstReminder, standard.MinimumNotice)
			}
			return
		case Notify:
			if now.Before(channelsWorkFrom) {
				continue
			}
			rec = rec.Clone()
			rec.Delivered(p.Key, p.Event == v1alpha1.EventReminder, p.Channels, now)
			if p.Event == v1alpha1.EventPostponed {
				rec.PostponedTo = p.At
			}
			if p.Event == v1alpha1.EventReminder && firstReminder.IsZero() {
				firstReminder = now
			}
		}
	}
	t.Fatalf("never deleted")
}

// A policy with dryRun, defaultTTL 6s, reminders [3s], minimumNotice 8s:
// reminder, postponed, would-delete; then dryRun is switched off. The
// notice given during the rehearsal led to no deletion: the object gets
// the minimum notice again from the moment the deletion goes live.
func TestGoingLiveOwesTheMinimumNoticeFromThen(t *testing.T) {
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

	tests := []struct {
		name     string
		schedule Schedule
		record   *Record
		dryRun   bool
		now      time.Time
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Next(Input{Life: Lifetime{ExpiresAt: e}, Schedule: tt.schedule, Record: tt.record, Channels: ch, DryRun: tt.dryRun, Now: tt.now})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Next() = %+v\nwant     %+v", got, tt.want)
			}
		})
	}
}

// A reminder told people the object goes at its expiry; then the lifetime
// is shortened (a policy edit, an annotation) to a time already past. The
// object is not deleted before the time people were given, whatever the
// minimum notice, and the shortened record still owes its own notice.
func TestAShorteningNeverDeletesBeforeATimeAMessageGave(t *testing.T) {
	for _, notice := range []time.Duration{0, time.Hour} {
		t.Run("minimum notice "+FormatDuration(notice), func(t *testing.T) {
			s := Schedule{DefaultTTL: 14 * Day, Reminders: []time.Duration{3 * Day}, MinimumNotice: notice}
			remindedAt := expires.Add(-3 * Day)
			rec := (*Record)(nil).For(expires, created, remindedAt)
			rec.Delivered(StageKey(3*Day), true, people, remindedAt)
			rec.Announce(expires)

			shortened := created.Add(Day)
			var deletedAt time.Time
			for now := remindedAt.Add(time.Minute); now.Before(expires.Add(2 * Day)); now = now.Add(time.Minute) {
				rec = rec.For(shortened, created, now)
				p := Next(Input{Life: Lifetime{ExpiresAt: shortened}, Schedule: s, Record: rec, Channels: toAll(people), Now: now})
				if p.Action == Delete {
					deletedAt = now
					break
				}
				if p.Action == Notify {
					rec = rec.Clone()
					rec.Delivered(p.Key, p.Event == v1alpha1.EventReminder, p.Channels, now)
					rec.Announce(p.At)
				}
			}
			if deletedAt.IsZero() {
				t.Fatal("never deleted")
			}
			if deletedAt.Before(expires) {
				t.Errorf("deleted at %s, before %s, the time the reminder gave", deletedAt, expires)
			}
			if deletedAt.After(expires.Add(notice + time.Minute)) {
				t.Errorf("deleted at %s, later than the time given plus the notice", deletedAt)
			}
		})
	}
}
