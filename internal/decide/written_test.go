// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package decide

import (
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
)

// TestWrittenExpiries: every expiry someone writes is a new record, to be
// audited with who wrote it, whether or not a reminder was recorded yet;
// what use or a sleep moves is not.
func TestWrittenExpiries(t *testing.T) {
	created := time.Date(2026, time.March, 1, 9, 0, 0, 0, time.UTC)
	now := created.Add(time.Hour)
	c := &match.Candidate{Schedule: expiry.Schedule{DefaultTTL: 14 * 24 * time.Hour}}
	stamp := func(changed string) string {
		return `{"by":"alice@example.com","groups":["dev"],"changed":["` + changed + `"]}`
	}
	reminded := (&expiry.Record{ExpiresAt: created.Add(14 * 24 * time.Hour), Since: created,
		NoticeAt: now.Add(-time.Minute), Sent: map[string]expiry.Delivery{"3d": {At: now.Add(-time.Minute)}}}).String()
	for _, tt := range []struct {
		name         string
		schedule     *expiry.Schedule
		annotations  map[string]string
		written      bool
		previous     time.Time
		wantReplaced bool
	}{
		{
			name:        "records an expiry someone wrote before any reminder was sent",
			annotations: map[string]string{expiry.AnnotationExpiresAt: "2026-03-20T09:00:00Z", expiry.AnnotationChangedBy: stamp("expires-at")},
			written:     true, wantReplaced: true,
		},
		{
			name:        "records a ttl someone wrote before any reminder was sent",
			annotations: map[string]string{expiry.AnnotationTTL: "20d", expiry.AnnotationChangedBy: stamp("ttl")},
			written:     true, wantReplaced: true,
		},
		{
			name:        "records a change made after a reminder, with the expiry it replaced",
			annotations: map[string]string{expiry.AnnotationTTL: "20d", expiry.AnnotationChangedBy: stamp("ttl"), expiry.AnnotationReminders: reminded},
			written:     true, wantReplaced: true, previous: created.Add(14 * 24 * time.Hour),
		},
		{
			name:        "writes nothing for an annotation nobody is stamped as writing",
			annotations: map[string]string{expiry.AnnotationTTL: "20d"},
		},
		{
			name:        "writes nothing for a stamp about use alone",
			annotations: map[string]string{expiry.AnnotationLastActive: now.Format(time.RFC3339), expiry.AnnotationChangedBy: stamp("last-active")},
		},
		{
			name:        "writes nothing for a stamped value that does not parse",
			annotations: map[string]string{expiry.AnnotationTTL: "twenty days", expiry.AnnotationChangedBy: stamp("ttl")},
		},
		{
			name:        "writes nothing for a stamp that does not parse",
			annotations: map[string]string{expiry.AnnotationTTL: "20d", expiry.AnnotationChangedBy: "{"},
		},
		{
			name:        "writes nothing for a kept object",
			annotations: map[string]string{expiry.AnnotationKeep: "true", expiry.AnnotationChangedBy: stamp("keep")},
		},
		{
			name:        "writes nothing for an extension the limits refused",
			schedule:    &expiry.Schedule{DefaultTTL: 14 * 24 * time.Hour, Limits: &expiry.Limits{MaxCount: 0}},
			annotations: map[string]string{expiry.AnnotationTTL: "20d", expiry.AnnotationChangedBy: stamp("ttl"), expiry.AnnotationExtensions: "granted=2026-03-15T09:00:00Z used=0 maxCount=0 maxStep=- exempt=- keep=false at=- by=-"},
		},
		{
			name:     "replaces the record when use moves a reminded expiry, but as no written change",
			schedule: &expiry.Schedule{DefaultTTL: time.Hour, IdleTTL: 3 * time.Hour},
			annotations: map[string]string{expiry.AnnotationLastActive: now.Format(time.RFC3339), expiry.AnnotationChangedBy: stamp("last-active"),
				expiry.AnnotationReminders: (&expiry.Record{ExpiresAt: created.Add(time.Hour), Since: created, NoticeAt: now.Add(-time.Minute), Sent: map[string]expiry.Delivery{"10m": {At: now.Add(-time.Minute)}}}).String()},
			wantReplaced: true, previous: created.Add(time.Hour),
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cand := c
			if tt.schedule != nil {
				cand = &match.Candidate{Schedule: *tt.schedule}
			}
			d := Evaluate(cand, Object{Created: created, Annotations: tt.annotations}, now, nil)
			if d.Written != tt.written || d.Replaced != tt.wantReplaced || !d.Previous.Equal(tt.previous) {
				t.Errorf("Written %t, Replaced %t, Previous %s (source %s, invalid %v); want Written %t, Replaced %t, Previous %s",
					d.Written, d.Replaced, d.Previous, d.Life.Source, d.Life.Invalid, tt.written, tt.wantReplaced, tt.previous)
			}
			if d.Replaced && (d.Record == nil || !d.Record.ExpiresAt.Equal(d.Life.ExpiresAt)) {
				t.Errorf("Record %v; want a new record about %s", d.Record, d.Life.ExpiresAt)
			}
		})
	}
}
