// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// The record is what the controller remembers of what it told people:
// what it loses is said twice, and what it invents was never said.

func TestReportSaysEachWarningOnce(t *testing.T) {
	r := &Record{}
	t1, t2 := created, created.Add(time.Hour)
	if !r.Report(ReportDeletionFailed, t1) || r.Report(ReportDeletionFailed, t2) || !r.Report(ReportArchiveFailed, t2) {
		t.Error("Report said a warning twice, or a new one not at all")
	}
	if len(r.Reported) != 2 || !r.Reported[ReportDeletionFailed].Equal(t1) || !r.Reported[ReportArchiveFailed].Equal(t2) {
		t.Errorf("Reported = %v, want both warnings at their first time", r.Reported)
	}
}

func TestParseRecordOfNothingIsNoRecord(t *testing.T) {
	if r, err := ParseRecord(""); r != nil || err != nil {
		t.Errorf("ParseRecord(\"\") = %v, %v", r, err)
	}
}

func TestCloneSharesNothingAndLosesNothing(t *testing.T) {
	if (*Record)(nil).Clone() != nil {
		t.Error("the clone of no record is a record")
	}
	r := sent(fresh(), "3d", expires.Add(-3*Day), people...)
	c := r.Clone()
	if d := c.Sent["3d"]; !slices.Equal(d.Channels, people) || !d.At.Equal(expires.Add(-3*Day)) {
		t.Fatalf("the clone shows the 3d stage as %+v", d)
	}
	c.Delivered("2d", true, []string{"webhook"}, expires.Add(-2*Day))
	if _, ok := r.Sent["2d"]; ok {
		t.Error("a delivery recorded in the clone shows in the original")
	}
}

func TestDeliveredRecordsOnlyWhatReachedSomeone(t *testing.T) {
	r := fresh()
	r.Delivered("3d", true, nil, expires.Add(-3*Day))
	if len(r.Sent) != 0 || !r.NoticeAt.IsZero() || !r.Noticed.IsZero() {
		t.Errorf("a reminder no channel accepted counts: %+v", r)
	}
	r.Delivered(KeyExtended, false, people, expires.Add(-3*Day))
	if !r.NoticeAt.IsZero() || !r.Noticed.IsZero() {
		t.Error("an extension message counts as notice")
	}
	first, second := expires.Add(-3*Day), expires.Add(-2*Day)
	r.Delivered("3d", true, people, first)
	r.Delivered("2d", true, people, second)
	if !r.NoticeAt.Equal(first) || !r.Noticed.Equal(first) {
		t.Errorf("notice at %s, noticed %s; want both at the first reminder, %s", r.NoticeAt, r.Noticed, first)
	}
}

func TestTheWarningsAboutAnObjectOutliveItsExpiry(t *testing.T) {
	r := fresh()
	r.Warned = map[string]string{WarnedTimeout: "0123456789abcdef"}
	for _, to := range []time.Time{expires.Add(Day), expires.Add(-Day)} {
		if next := r.For(to, created, created.Add(time.Hour)); next.Warned[WarnedTimeout] != "0123456789abcdef" {
			t.Errorf("moved to %s: Warned = %v", to, next.Warned)
		}
	}
}

func earlierExpiries(r *Record) []time.Time {
	var out []time.Time
	for _, e := range r.Earlier {
		out = append(out, e.ExpiresAt)
	}
	return out
}

func TestEarlierHoldsOnlyOtherExpiriesThatSomethingWasSaidAbout(t *testing.T) {
	e1, e2 := expires, expires.Add(Week)
	now := expires.Add(-4 * Day)
	if next := fresh().For(e2, created, now); len(next.Earlier) != 0 {
		t.Errorf("an expiry nothing was said about is remembered: %v", earlierExpiries(next))
	}
	r := sent(fresh(), "3d", now, people...).For(e2, created, now)
	r = sent(r, KeyExtended, now, people...)
	back := r.For(e1, created, now.Add(time.Hour))
	if got := earlierExpiries(back); len(got) != 1 || !got[0].Equal(e2) {
		t.Errorf("back at %s, Earlier = %v, want only %s", e1, got, e2)
	}
}

// withSize returns a record about at with one stage delivered to one
// channel, named so that its entry in Earlier, alone, is size bytes of
// JSON.
func withSize(t *testing.T, at time.Time, size int) *Record {
	t.Helper()
	r := &Record{ExpiresAt: at, Since: created, Sent: map[string]Delivery{"3d": {At: at.Add(-3 * Day), Channels: []string{"x"}}}}
	b, err := json.Marshal([]Earlier{r.delivered()})
	if err != nil {
		t.Fatal(err)
	}
	r.Sent["3d"] = Delivery{At: at.Add(-3 * Day), Channels: []string{strings.Repeat("x", 1+size-len(b))}}
	if b, _ := json.Marshal([]Earlier{r.delivered()}); len(b) != size {
		t.Fatalf("entry of %d bytes, want %d", len(b), size)
	}
	return r
}

func TestEarlierKeepsWhatFitsInItsBound(t *testing.T) {
	later := expires.Add(Week)
	now := expires.Add(-4 * Day)
	if next := withSize(t, expires, MaxEarlierSize).For(later, created, now); len(next.Earlier) != 1 {
		t.Error("an earlier expiry that fills the bound exactly was dropped")
	}
	if next := withSize(t, expires, MaxEarlierSize+1).For(later, created, now); len(next.Earlier) != 0 {
		t.Error("an earlier expiry beyond the bound was kept")
	}
	// Two that do not fit together: the older one goes.
	r := withSize(t, expires, MaxEarlierSize/2+100)
	r.Earlier = []Earlier{withSize(t, expires.Add(-Week), MaxEarlierSize/2+100).delivered()}
	if got := earlierExpiries(r.For(later, created, now)); len(got) != 1 || !got[0].Equal(expires) {
		t.Errorf("Earlier = %v, want the newer one, %s", got, expires)
	}
}

// An expiry that comes back keeps the notice given about it and the
// notice the record holds: the earliest of the two.
func TestAnExpiryThatComesBackKeepsTheEarliestNotice(t *testing.T) {
	e0, e1 := expires, expires.Add(Week)
	n0, n1 := e0.Add(-3*Day), e0.Add(-5*Day)
	extension := map[string]Delivery{KeyExtended: {At: n1, Channels: people}}
	tests := []struct {
		name    string
		earlier Earlier
		want    time.Time
	}{
		{"keeps the record's notice when only the extension was said about the returning expiry",
			Earlier{ExpiresAt: e1, ExtendedFrom: e0, Sent: extension}, n0},
		{"takes the returning expiry's notice when it is earlier",
			Earlier{ExpiresAt: e1, ExtendedFrom: e0, NoticeAt: n1, Sent: map[string]Delivery{"3d": {At: n1, Channels: people}}}, n1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Record{ExpiresAt: e0, Since: created, NoticeAt: n0, Noticed: n1,
				Sent: map[string]Delivery{"3d": {At: n0, Channels: people}}, Earlier: []Earlier{tt.earlier}}
			if next := r.For(e1, created, e0.Add(-Day)); !next.NoticeAt.Equal(tt.want) {
				t.Errorf("notice at %s, want %s", next.NoticeAt, tt.want)
			}
		})
	}
}

// idleLife is a lifetime whose expiry use moved from expires to a day
// later.
var idleLife = Lifetime{ExpiresAt: expires.Add(Day), Base: expires, IdleAt: expires.Add(Day), Source: SourceIdle}

func TestARecordFollowsUseOnlyWhileNothingWasSaid(t *testing.T) {
	quiet := func() *Record { return &Record{ExpiresAt: expires, Since: created} }
	notIdle := idleLife
	notIdle.IdleAt = time.Time{}
	tests := []struct {
		name   string
		record *Record
		life   Lifetime
		want   bool
	}{
		{"follows a later expiry set by use", quiet(), idleLife, true},
		{"no record follows nothing", nil, idleLife, false},
		{"a record without an expiry does not follow", &Record{}, idleLife, false},
		{"does not follow an expiry use did not move", quiet(), notIdle, false},
		{"does not follow an expiry that is not later", quiet(), Lifetime{ExpiresAt: expires, Base: created, IdleAt: expires}, false},
		{"does not follow once a reminder went out", sent(quiet(), "3d", expires.Add(-3*Day), people...), idleLife, false},
		{"does not follow once notice was given", &Record{ExpiresAt: expires, Since: created, NoticeAt: expires.Add(-3 * Day)}, idleLife, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.record.Follows(tt.life); got != tt.want {
				t.Errorf("Follows = %t, want %t", got, tt.want)
			}
		})
	}
}

// Use that moves an expiry people were reminded of is news: they are
// told of the extension.
func TestUseAfterAReminderOwesAnExtensionMessage(t *testing.T) {
	r := sent(fresh(), "3d", expires.Add(-3*Day), people...)
	r = sent(r, KeyExtended, expires.Add(-3*Day), people...)
	next := r.ForLife(idleLife, created, expires.Add(-2*Day))
	if !next.ExtendedFrom.Equal(expires) {
		t.Errorf("extended from %s, want %s: a reminder gave the old date", next.ExtendedFrom, expires)
	}
}

func TestParseActivity(t *testing.T) {
	if a, err := ParseActivity(""); err != nil || a.Generation != 1 {
		t.Errorf("ParseActivity(\"\") = %+v, %v; want generation 1", a, err)
	}
	if a, err := ParseActivity(`{"generation": 7`); err == nil || a.Generation != 1 {
		t.Errorf("ParseActivity of broken JSON = %+v, %v; want generation 1 and an error", a, err)
	}
}

func TestClosestKeyNamesTheFirstOfTwoAsClose(t *testing.T) {
	// "tep" is two edits from both ttl and keep.
	if got := closestKey("tep"); got != "ttl" {
		t.Errorf("closestKey(\"tep\") = %q, want ttl, the first", got)
	}
}
