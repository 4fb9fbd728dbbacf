// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import "testing"

// TestARecordMovesWithItsExpiry: what For and ForLife keep of a record
// when the expiry stays, moves, or comes back, for records the controller
// wrote and records edited by hand.
func TestARecordMovesWithItsExpiry(t *testing.T) {
	now := expires.Add(-Day)
	reminded := func() *Record { return sent(fresh(), "3d", expires.Add(-3*Day), people...) }

	t.Run("keeps the record as it is for the same expiry", func(t *testing.T) {
		r := reminded()
		if next := r.For(expires, created, now); next != r || len(next.Earlier) != 0 {
			t.Errorf("For the same expiry = %+v, want the record itself, with no earlier expiry", next)
		}
	})
	t.Run("starts afresh from a record that shows no expiry", func(t *testing.T) {
		r := &Record{Since: created, NoticeAt: expires.Add(-3 * Day), Sent: map[string]Delivery{"3d": {At: expires.Add(-3 * Day), Channels: people}}}
		next := r.For(expires, created, now)
		if !next.Since.Equal(created) || !next.NoticeAt.IsZero() || len(next.Sent) != 0 || len(next.Earlier) != 0 {
			t.Errorf("For = %+v, want a record as for an object first seen", next)
		}
	})
	t.Run("remembers an earlier expiry once, even from a record that lists its own", func(t *testing.T) {
		r := reminded()
		r.Earlier = []Earlier{{ExpiresAt: expires, Sent: map[string]Delivery{"2d": {At: expires.Add(-2 * Day), Channels: people}}}}
		next := r.For(expires.Add(Day), created, now)
		if got := earlierExpiries(next); len(got) != 1 || !got[0].Equal(expires) {
			t.Errorf("Earlier expiries %v, want %s once", got, rfc(expires))
		}
	})
	t.Run("keeps the earliest notice when an expiry comes back", func(t *testing.T) {
		// Reminded about the current expiry before the returning one's
		// reminder went out.
		r := &Record{ExpiresAt: expires, Since: created, NoticeAt: expires.Add(-3 * Day),
			Sent: map[string]Delivery{"3d": {At: expires.Add(-3 * Day), Channels: people}},
			Earlier: []Earlier{{ExpiresAt: expires.Add(Day), NoticeAt: expires.Add(-Day),
				Sent: map[string]Delivery{"2d": {At: expires.Add(-Day), Channels: people}}}}}
		if next := r.For(expires.Add(Day), created, now); !next.NoticeAt.Equal(expires.Add(-3 * Day)) {
			t.Errorf("NoticeAt = %s, want the earlier %s", rfc(next.NoticeAt), rfc(expires.Add(-3*Day)))
		}
	})
	t.Run("counts no extension message for a returning expiry that is no extension", func(t *testing.T) {
		r := &Record{ExpiresAt: expires.Add(Day), Since: created,
			Earlier: []Earlier{{ExpiresAt: expires, Sent: map[string]Delivery{KeyExtended: {At: expires.Add(-2 * Day), Channels: people}}}}}
		if next := r.For(expires, created, now); len(next.Sent) != 0 {
			t.Errorf("Sent = %v, want nothing: the message announced another extension", next.Sent)
		}
	})
	t.Run("keeps an extension message owed when use moves the expiry on", func(t *testing.T) {
		// Extended from expires-1d; nobody has been told yet.
		r := &Record{ExpiresAt: expires, Since: created, ExtendedFrom: expires.Add(-Day)}
		if next := r.ForLife(idleLife, created, now); !next.ExtendedFrom.Equal(expires.Add(-Day)) {
			t.Errorf("ExtendedFrom = %s, want the one still owed, %s", rfc(next.ExtendedFrom), rfc(expires.Add(-Day)))
		}
	})
	t.Run("announces no extension again when a sleep moves the expiry on", func(t *testing.T) {
		r := sent(fresh(), KeyExtended, expires.Add(-2*Day), people...)
		asleep := Lifetime{ExpiresAt: expires.Add(Day), Base: expires, Source: SourceSleep}
		if next := r.ForLife(asleep, created, now); !next.ExtendedFrom.IsZero() {
			t.Errorf("ExtendedFrom = %s, want none: the extension was announced", rfc(next.ExtendedFrom))
		}
	})
}
