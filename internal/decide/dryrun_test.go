// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package decide

import (
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
)

// TestPlanRehearsesTheDeletionOnlyUnderADryRun: the controller and the
// plugin both plan through Decision.Plan, so the dry run they pass must
// reach the planner as it is, one way or the other: a rehearsal that
// deletes is a deletion without the dry run promised, a live policy that
// only rehearses keeps objects forever.
func TestPlanRehearsesTheDeletionOnlyUnderADryRun(t *testing.T) {
	created := time.Date(2026, time.March, 1, 9, 0, 0, 0, time.UTC)
	now := created.Add(3 * time.Hour)
	c := &match.Candidate{Schedule: expiry.Schedule{DefaultTTL: 2 * time.Hour}}
	channels := map[v1alpha1.EventType][]string{v1alpha1.EventWouldDelete: {"event"}}
	for _, tt := range []struct {
		name     string
		rehearse bool
		want     expiry.Action
		event    v1alpha1.EventType
	}{
		{"reports the deletion it would make under a dry run", true, expiry.Notify, v1alpha1.EventWouldDelete},
		{"deletes when the policy is live", false, expiry.Delete, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := Evaluate(c, Object{Created: created}, now, nil)
			p := d.Plan(channels, tt.rehearse, now)
			if p.Action != tt.want || p.Event != tt.event {
				t.Errorf("Plan(dry run %t) = %s %q, want %s %q", tt.rehearse, p.Action, p.Event, tt.want, tt.event)
			}
		})
	}
}
