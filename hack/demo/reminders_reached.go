// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// The first scene's reckoning, and the demo's summary.

// reached tells what reached people about each Playbook, and finds the
// reminders that went wrong: missing before a deletion, more than were
// due, or arriving after the deletion.
func (s *story) reached() {
	s.n.say("what reached people, duplicates left out:")
	rows := []string{"TITLE\tREMINDERS DUE\tBY MAIL\tBY WEBHOOK\tSLOWEST REMINDER\tOTHER MESSAGES (BOTH WAYS)"}
	for _, r := range s.cast {
		others := "-"
		for _, t := range v1alpha1.EventTypes {
			if t != v1alpha1.EventReminder && r.count(viaMail, t, time.Time{})+r.count(viaWebhook, t, time.Time{}) > 0 {
				others = strings.TrimPrefix(others+", "+string(t), "-, ")
			}
		}
		rows = append(rows, fmt.Sprintf("%s\t%d\t%d\t%d\t%s\t%s", r.title, r.due,
			r.count(viaMail, v1alpha1.EventReminder, time.Time{}), r.count(viaWebhook, v1alpha1.EventReminder, time.Time{}),
			s.slowest(r), others))

		for _, via := range []string{viaMail, viaWebhook} {
			all := r.count(via, v1alpha1.EventReminder, time.Time{})
			if all > r.due {
				s.problem("%s got %d reminders by %s where %d were due", r.title, all, via, r.due)
			}
			if !r.deleted {
				continue
			}
			if before := r.count(via, v1alpha1.EventReminder, r.deletedAt); before < r.due {
				s.problem("%s was deleted after %d of its %d reminders by %s", r.title, before, r.due, via)
			}
		}
		for _, m := range r.got {
			if r.deleted && m.arrived.After(r.deletedAt) && !announcedAfter(m.event) {
				s.problem("%s: the %s message by %s arrived %d ms after the deletion", r.title, m.event, m.via, m.arrived.Sub(r.deletedAt).Milliseconds())
			}
		}
	}
	s.n.table(rows)
	for _, p := range s.problemsSoFar() {
		s.n.say("PROBLEM: %s", p)
	}
}

// slowest is the longest a reminder of r took, by webhook, from the time
// its stage fell due to its arrival; a reminder that came before that time
// or over lateAfter after it is a problem.
func (s *story) slowest(r *role) string {
	worst, found := time.Duration(0), false
	for _, m := range r.got {
		if m.via != viaWebhook || m.event != v1alpha1.EventReminder {
			continue
		}
		lead, err := expiry.ParseDuration(m.stage)
		if err != nil {
			s.problem("%s: a reminder came with stage %q", r.title, m.stage)
			continue
		}
		// Due against the object's expiry, not the deletion time the message
		// announces: that is later when the notice is still owed.
		expiresAt := r.life.ExpiresAt
		if !r.extendedAt.IsZero() && m.arrived.Before(r.extendedAt) {
			expiresAt = r.wasExpiring
		}
		d := m.arrived.Sub(expiresAt.Add(-lead))
		if d < 0 || d > lateAfter {
			s.problem("%s: the %s reminder arrived %d ms after it fell due", r.title, m.stage, d.Milliseconds())
		}
		worst, found = max(worst, d), true
	}
	if !found {
		return "-"
	}
	return fmt.Sprintf("%d ms", worst.Milliseconds())
}

// announcedAfter reports whether messages of type t tell of a deletion
// and so come after it.
func announcedAfter(t v1alpha1.EventType) bool {
	return t == v1alpha1.EventExpired || t == v1alpha1.EventDeleted
}

// summary is the demo's last lines: what became of the Playbooks.
func (s *story) summary() string {
	kept, pending := 0, len(s.pending())
	for _, r := range s.cast {
		if r.life.Keep && !r.deleted {
			kept++
		}
	}
	line := fmt.Sprintf("demo: %d deleted on time, %d kept, %d early", s.onTime, kept, s.early)
	if s.late > 0 {
		line += fmt.Sprintf(", %d late (over %s after expiry)", s.late, lateAfter)
	}
	if s.lost > 0 {
		line += fmt.Sprintf(", %d kept but deleted", s.lost)
	}
	if pending > 0 {
		line += fmt.Sprintf(", %d not deleted yet", pending)
	}
	line += fmt.Sprintf("; %d reminders by mail and %d by webhook, %d duplicates", s.reminders[viaMail], s.reminders[viaWebhook], s.duplicates)
	if s.refused > 0 {
		line += fmt.Sprintf(", %d webhook requests refused", s.refused)
	}
	if p := s.problemsSoFar(); len(p) > 0 {
		line += fmt.Sprintf(", %d problems", len(p))
	}
	if f := s.facts.sleep; f != nil {
		line += "\ndemo: " + f.line()
	}
	if s.facts.reclaimed.playbooks > 0 {
		line += "\ndemo: " + s.facts.reclaimed.line()
	}
	if f := s.facts.digest; f != nil {
		line += "\ndemo: " + f.line()
	}
	return line
}
