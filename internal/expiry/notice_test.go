// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// TestNoticeStaysOwedOnceGiven: a reminder that reached someone owes the
// minimum notice through every extension after it, even when no stage of
// the new expiry applies (they all fell due before the extension was
// seen) and the record, written before noticed existed, shows the notice
// only in noticeAt. Without a minimum notice, no reminder holds the
// deletion.
func TestNoticeStaysOwedOnceGiven(t *testing.T) {
	noNotice := standard
	noNotice.MinimumNotice = 0
	for _, tt := range []struct {
		name     string
		schedule Schedule
		record   *Record
		now      time.Time
		want     Plan
	}{
		{
			name:     "holds the deletion a minimum notice after noticeAt when an extension left no stage to send",
			schedule: standard,
			// Notice given 2h before the old expiry; extended an hour
			// before it by 30 minutes: every stage of the new expiry fell
			// due before the extension.
			record: oldRecord(`"expiresAt": ` + at(expires) + `, "since": ` + at(expires.Add(-time.Hour)) +
				`, "noticeAt": ` + at(expires.Add(-2*time.Hour))),
			now: expires.Add(time.Hour),
			want: Plan{Action: Notify, Event: v1alpha1.EventPostponed, Key: KeyPostponed, At: expires.Add(22 * time.Hour),
				Channels: people, Deadline: expires.Add(22 * time.Hour)},
		},
		{
			name:     "deletes at the expiry under a policy without minimum notice, whatever time noticed names",
			schedule: noNotice,
			record: oldRecord(`"expiresAt": ` + at(expires) + `, "since": ` + at(created) +
				`, "noticed": ` + at(expires.Add(time.Hour))),
			now:  expires.Add(30 * time.Minute),
			want: Plan{Action: Delete, At: expires},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Next(Input{Life: Lifetime{ExpiresAt: expires}, Schedule: tt.schedule, Record: tt.record, Channels: toAll(people), Now: tt.now})
			if !plansEqual(got, tt.want) {
				t.Errorf("Next =\n  %+v\nwant\n  %+v", got, tt.want)
			}
		})
	}
}

// TestNoticeOfReadsTheNoticeARecordShows: what the planner and the
// plugin's explain take for the notice given, and which reminders apply.
func TestNoticeOfReadsTheNoticeARecordShows(t *testing.T) {
	t.Run("takes the earliest delivery of a stage for the notice of a record without noticeAt", func(t *testing.T) {
		// The 2d reminder went out before the 3d one (a channel was slow
		// to take the 3d): the notice was given at the first.
		rec := oldRecord(`"expiresAt": ` + at(expires) + `, "since": ` + at(created) +
			`, "sent": {` + delivered("3d", expires.Add(-2*Day+time.Hour)) + `, ` + delivered("2d", expires.Add(-2*Day)) + `}`)
		n := NoticeOf(Input{Life: Lifetime{ExpiresAt: expires}, Schedule: standard, Record: rec, Now: expires.Add(-Day)})
		if !n.Given.Equal(expires.Add(-2 * Day)) {
			t.Errorf("Given = %s, want %s", rfc(n.Given), rfc(expires.Add(-2*Day)))
		}
	})
	t.Run("leaves out, under the sleep clock, a reminder due at the last use or before", func(t *testing.T) {
		// Asleep since the last use, 2.5 days before deletion: the 3d
		// reminder would have been due before it.
		life := Lifetime{ExpiresAt: expires, Source: SourceSleep, LastActive: expires.Add(-60 * time.Hour)}
		n := NoticeOf(Input{Life: life, Schedule: standard, Record: &Record{ExpiresAt: expires, Since: created}, Now: expires.Add(-Day)})
		if len(n.Stages) != 1 || n.Stages[0] != 2*Day {
			t.Errorf("Stages = %v, want only 2d", n.Stages)
		}
	})
}
