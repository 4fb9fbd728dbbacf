// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package decide

import (
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
)

// TestUseReplacesARecordOnlyWhenSomethingWasSaid: a record that use
// alone moved later is what the stored one gives again at every look,
// not a replacement; were it one, every use would cost a record write.
// Once a reminder went out, the new expiry is news and the record is
// replaced.
func TestUseReplacesARecordOnlyWhenSomethingWasSaid(t *testing.T) {
	created := time.Date(2026, time.March, 1, 9, 0, 0, 0, time.UTC)
	now := created.Add(90 * time.Minute)
	c := &match.Candidate{Schedule: expiry.Schedule{DefaultTTL: 2 * time.Hour, IdleTTL: 2 * time.Hour, Reminders: []time.Duration{time.Hour}}}
	used := created.Add(time.Hour).Format(time.RFC3339)
	quiet := &expiry.Record{ExpiresAt: created.Add(2 * time.Hour), Since: created, Sent: map[string]expiry.Delivery{}}
	reminded := quiet.Clone()
	reminded.Delivered("1h", false, []string{"event"}, created.Add(time.Hour))
	for _, tt := range []struct {
		name  string
		shown *expiry.Record
		want  bool
	}{
		{"follows use in the record nothing was said of", quiet, false},
		{"replaces the record a reminder went out from", reminded, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := Evaluate(c, Object{Created: created, Annotations: map[string]string{
				expiry.AnnotationReminders:  tt.shown.String(),
				expiry.AnnotationLastActive: used,
			}}, now, nil)
			if !d.Life.ExpiresAt.Equal(created.Add(3 * time.Hour)) {
				t.Fatalf("expires at %s, want 3h after creation: use moves it", d.Life.ExpiresAt)
			}
			if d.Replaced != tt.want {
				t.Errorf("Replaced = %t, want %t", d.Replaced, tt.want)
			}
		})
	}
}
