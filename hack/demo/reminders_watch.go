// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// What the first scene sees as it happens: deletions, Events and
// messages, each judged on arrival.

func (s *story) onPlaybook(ctx context.Context, sev stamped, ok bool) error {
	ev := sev.Event
	if err := watchEnded(ctx, "Playbook", ev, ok); err != nil {
		return err
	}
	if ev.Type != watch.Deleted {
		return nil
	}
	now := sev.at
	u, _ := ev.Object.(*unstructured.Unstructured)
	r := s.role(u.GetName())
	if r == nil {
		return nil
	}
	r.deleted, r.deletedAt = true, now
	// The object as deleted, so the verdict counts any late edit to it.
	life := s.lifetime(u)
	// When a postponement was announced, deletion is due then.
	due := life.ExpiresAt
	if r.postponedTo.After(due) {
		due = r.postponedTo
	}
	lag := now.Sub(due)
	switch {
	case life.Keep:
		s.lost++
		s.n.say("deleted %s although it is kept: that is a bug", r.title)
	case now.Before(life.ExpiresAt):
		s.early++
		s.n.say("deleted %s EARLY (expires at %s, deleted %d ms before)", r.title, s.n.at(life.ExpiresAt), life.ExpiresAt.Sub(now).Milliseconds())
	case !r.noticeAt.IsZero() && now.Before(r.noticeAt.Add(s.schedule.MinimumNotice)):
		s.early++
		s.n.say("deleted %s EARLY: %d ms after its first reminder, short of the %s of notice", r.title, now.Sub(r.noticeAt).Milliseconds(), minimumNotice)
	case lag > lateAfter:
		s.late++
		s.n.say("deleted %s LATE (due at %s, deleted %d ms after)", r.title, s.n.at(due), lag.Milliseconds())
	case due.After(life.ExpiresAt):
		s.onTime++
		s.n.say("deleted %s (expired at %s, postponed to %s, deleted %d ms after that)", r.title, s.n.at(life.ExpiresAt), s.n.at(due), lag.Milliseconds())
	default:
		s.onTime++
		s.n.say("deleted %s (expired at %s, deleted %d ms after)", r.title, s.n.at(life.ExpiresAt), lag.Milliseconds())
		if r.due == 0 {
			s.n.more("no reminder before it, as none applied: it lived less than the shortest lead")
		}
	}
	return nil
}

func (s *story) onEvent(ctx context.Context, ev watch.Event, ok bool) error {
	if err := watchEnded(ctx, "Event", ev, ok); err != nil {
		return err
	}
	e, _ := ev.Object.(*eventsv1.Event)
	if ev.Type != watch.Added || e == nil {
		return nil
	}
	who := e.Regarding.Kind + "/" + e.Regarding.Name
	r := s.role(e.Regarding.Name)
	if r == nil && e.Regarding.Kind == playbookGVK.Kind {
		// A Playbook of a scene played alongside: that scene tells it.
		return nil
	}
	if r != nil {
		who = r.title
		switch e.Reason {
		case kube.ReasonExpired:
			r.expiredNote = true
		case kube.ReasonDeleted:
			r.deletedNote = true
		}
	}
	s.n.say("event %-7s %-17s %s: %s", e.Type, e.Reason, who, e.Note)
	return nil
}

// onMessage tells of a message that reached the demo, and keeps it for
// the reckoning at the end.
func (s *story) onMessage(m message) {
	s.facts.messages = append(s.facts.messages, m)
	if m.refused != "" {
		s.refused++
		s.n.say("webhook %s REFUSED a request (webhook-id %s): %s", webhookName, m.id, m.refused)
		return
	}
	r := s.role(m.name)
	what := m.subject
	if m.via == viaWebhook {
		what = s.describeEvent(m, r)
	}
	if s.seen == nil {
		s.seen, s.reminders = map[string]bool{}, map[string]int{}
	}
	key := m.via + " " + m.id
	if s.seen[key] {
		s.duplicates++
		s.n.say("%s DUPLICATE (id %s) of: %s", m.via, m.id, what)
		return
	}
	s.seen[key] = true
	if m.event == v1alpha1.EventReminder {
		s.reminders[m.via]++
	}
	// Every deletion brings an expired and a deleted message; the
	// deleted one is enough to tell.
	if m.event != v1alpha1.EventExpired {
		if m.via == viaMail {
			s.n.say("mail to %s: %s", strings.Join(m.to, ", "), what)
		} else {
			s.n.say("webhook %s: %s (signature ok)", webhookName, what)
		}
	}
	if r == nil {
		return
	}
	r.got = append(r.got, m)
	if m.event == v1alpha1.EventReminder && r.noticeAt.IsZero() {
		r.noticeAt = m.arrived
	}
	if m.event == v1alpha1.EventPostponed && m.via == viaWebhook {
		r.postponedTo = m.expiresAt
	}
}

// describeEvent is the narration of a CloudEvent: its type, the
// Playbook's title, and what its data adds.
func (s *story) describeEvent(m message, r *role) string {
	title := m.title
	if title == "" {
		// Said so rather than filled in: the controller reads the title
		// with the first reminder, so a Playbook that had none may come
		// without it.
		title = m.name + " (no data.title)"
		if r != nil {
			title = r.title + " (no data.title)"
		}
	}
	line := notify.CloudEventType(m.event) + " " + title
	switch m.event {
	case v1alpha1.EventReminder:
		line += " stage " + m.stage
	case v1alpha1.EventExtended:
		line += ", now expires at " + s.n.at(m.expiresAt)
	case v1alpha1.EventPostponed:
		line += ", deletion at " + s.n.at(m.expiresAt)
	}
	return line
}

func (s *story) role(name string) *role {
	for _, r := range s.cast {
		if r.obj.GetName() == name {
			return r
		}
	}
	return nil
}

// settled reports whether every deletion has been followed by its Expired
// and Deleted Events and by its expired and deleted messages on both
// channels.
func (s *story) settled() bool {
	for _, r := range s.cast {
		if !r.deleted {
			continue
		}
		if !r.expiredNote || !r.deletedNote {
			return false
		}
		for _, via := range []string{viaMail, viaWebhook} {
			if r.count(via, v1alpha1.EventExpired, time.Time{}) == 0 || r.count(via, v1alpha1.EventDeleted, time.Time{}) == 0 {
				return false
			}
		}
	}
	return true
}

// pending lists the Playbooks that should be deleted and are not yet.
func (s *story) pending() []string {
	var titles []string
	for _, r := range s.cast {
		if !r.life.Keep && !r.deleted {
			titles = append(titles, r.title)
		}
	}
	return titles
}

func (s *story) waiting() string {
	if p := s.pending(); len(p) > 0 {
		return strings.Join(p, ", ")
	}
	return "the last Expired and Deleted Events and messages"
}
