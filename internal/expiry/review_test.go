// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
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
