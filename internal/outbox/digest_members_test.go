// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"testing"
	"time"
)

// TestADigestListsItsMembersStillThere: an object dropped from a digest
// (gone, or extended) is reminded by its own reconcile, not the digest.
func TestADigestListsItsMembersStillThere(t *testing.T) {
	kept, dropped := member("pb-1", t0), member("pb-2", t0)
	dropped.Dropped = true
	d := newDigest([]Member{kept, dropped}, "email")
	if !d.Lists(kept.Object.UID, kept.ExpiresAt) {
		t.Error("the digest does not list a member still there")
	}
	if d.Lists(dropped.Object.UID, dropped.ExpiresAt) {
		t.Error("the digest lists a member it dropped")
	}
}

// TestADigestIsAboutTheMemberThatExpiresFirst: the digest's mail names,
// as its own object and expiry, the member still there that goes first,
// wherever it is in the list.
func TestADigestIsAboutTheMemberThatExpiresFirst(t *testing.T) {
	first := member("pb-2", t0.Add(time.Hour))
	gone := member("pb-0", t0)
	gone.Dropped = true
	d := newDigest([]Member{member("pb-1", t0.Add(2*time.Hour)), gone, first, member("pb-3", t0.Add(3*time.Hour))}, "email")
	m := d.message(t0)
	if m.Object.Name != first.Object.Name || !m.ExpiresAt.Equal(first.ExpiresAt) {
		t.Errorf("the mail is about %q expiring %s, want %q expiring %s", m.Object.Name, m.ExpiresAt, first.Object.Name, first.ExpiresAt)
	}
	if got := names(m.Digest); len(got) != 3 {
		t.Errorf("items %v, want the three members still there", got)
	}
	// And when it is the first listed.
	d = newDigest([]Member{first, member("pb-1", t0.Add(2*time.Hour))}, "email")
	if m := d.message(t0); m.Object.Name != first.Object.Name {
		t.Errorf("the mail is about %q, want %q, listed first", m.Object.Name, first.Object.Name)
	}
}

// TestADigestBeingSentIsDueWhenItsFirstChannelIs: each channel backs off
// on its own; the digest is looked at again when the soonest is due.
func TestADigestBeingSentIsDueWhenItsFirstChannelIs(t *testing.T) {
	d := newDigest([]Member{member("pb-1", t0)}, "a-mail", "b-mail", "c-mail", "d-mail")
	d.State = DigestSending
	for i, c := range []string{"a-mail", "b-mail", "c-mail", "d-mail"} {
		d.Channels[c].NextAttempt = t0.Add(time.Duration(4-i) * time.Minute)
	}
	// The channels are a map: look several times, each in another order.
	for range 20 {
		if at := digestDueAt(&trackedDigest{digest: d}); !at.Equal(t0.Add(time.Minute)) {
			t.Fatalf("due at %s, want %s", at, t0.Add(time.Minute))
		}
	}
}
