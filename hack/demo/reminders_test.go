// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
)

// The checks of the first scene: reminders, deletions, messages, Events.

// checkReminders checks which reminders the controller recorded and the
// receivers got about p, on each channel, and that they came before the
// deletion.
func checkReminders(t *testing.T, res *results, p playbookFacts, c fate) {
	for _, via := range []string{viaMail, viaWebhook} {
		var recorded []string
		for _, rec := range res.records(p.obj.GetUID(), audit.Notified) {
			if rec.Message == string(v1alpha1.EventReminder) && rec.Channel == channelOf(via) {
				recorded = append(recorded, rec.Stage)
			}
		}
		if !slices.Equal(recorded, c.stages) {
			t.Errorf("the audit trail has reminders %v via %s, want %v", recorded, channelOf(via), c.stages)
		}
		got := res.received(p.obj.GetName(), via, v1alpha1.EventReminder)
		if len(got) != len(c.stages) {
			t.Errorf("%d reminders came by %s, want %d (%v)", len(got), via, len(c.stages), c.stages)
		}
		for i, m := range got {
			if via == viaWebhook && i < len(c.stages) && m.stage != c.stages[i] {
				t.Errorf("reminder %d by webhook is of stage %s, want %s", i+1, m.stage, c.stages[i])
			}
			if deleting := res.records(p.obj.GetUID(), audit.Deleting); len(deleting) > 0 && !m.arrived.Before(deleting[0].Time) {
				t.Errorf("the %s reminder by %s came %s after the delete was sent", m.stage, via, m.arrived.Sub(deleting[0].Time))
			}
		}
	}
	for _, m := range res.received(p.obj.GetName(), viaMail, v1alpha1.EventReminder) {
		if !slices.Contains(m.to, mailTo) || slices.Contains(m.to, "alice@demo.local") != c.alice {
			t.Errorf("a reminder was mailed to %v; want %s, and alice@demo.local only if the notify annotation names her (%t)", m.to, mailTo, c.alice)
		}
	}
}

// checkDeletion checks that p was deleted once, neither before its expiry
// nor before the minimum notice after its first reminder, and not late;
// or, when kept, not at all.
func checkDeletion(t *testing.T, res *results, p playbookFacts, c fate) {
	uid := p.obj.GetUID()
	archived, deleting, deleted := res.records(uid, audit.Archived), res.deletesMade(uid), res.records(uid, audit.Deleted)
	if c.kept {
		// Any delete sent, even one the API server refused, is a bug.
		sent := res.records(uid, audit.Deleting)
		if len(archived)+len(sent)+len(deleted) > 0 || !p.deletedAt.IsZero() {
			t.Errorf("the kept Playbook was deleted: %d archived, %d deleting and %d deleted records; seen deleted at %s",
				len(archived), len(sent), len(deleted), p.deletedAt)
		}
		return
	}
	if len(deleting) != 1 || len(deleted) != 1 || p.deletedAt.IsZero() {
		t.Fatalf("%d deleting and %d deleted records, seen deleted at %s; want one deletion", len(deleting), len(deleted), p.deletedAt)
	}
	// Only the first scene's policy archives.
	if want := b2i(p.scene == 1); len(archived) != want {
		t.Errorf("%d archived records, want %d", len(archived), want)
	} else if want == 1 && archived[0].Time.After(deleting[0].Time) {
		t.Errorf("archived at %s, after the deleting record at %s", archived[0].Time, deleting[0].Time)
	}

	due := expiresAt(t, p, c)
	if c.extended {
		if moved := due.Sub(p.obj.GetCreationTimestamp().Add(c.life)); moved != mustDuration(t, extendBy) {
			t.Errorf("the extension moved the expiry by %s, want %s", moved, extendBy)
		}
	}
	// A reminder reached people no earlier than it came to the receivers.
	var first time.Time
	for _, via := range []string{viaMail, viaWebhook} {
		if got := res.received(p.obj.GetName(), via, v1alpha1.EventReminder); len(got) > 0 && (first.IsZero() || got[0].arrived.Before(first)) {
			first = got[0].arrived
		}
	}
	if !first.IsZero() {
		if notice := first.Add(mustDuration(t, minimumNotice)); notice.After(due) {
			due = notice
		}
	}
	// The first delete sent, even one the API server refused.
	if at := res.records(uid, audit.Deleting)[0].Time; at.Before(due) {
		t.Errorf("deleted EARLY: the delete was sent at %s, %s before %s", at, due.Sub(at), due)
	}
	if lag := deleted[0].Time.Sub(due); lag > lateAfter {
		t.Errorf("deleted LATE: %s after %s", lag, due)
	}
	if postponed := len(res.records(uid, audit.Postponed)) > 0; postponed != c.postponed {
		t.Errorf("postponed on the audit trail: %t, want %t", postponed, c.postponed)
	}
	if invalid := len(res.records(uid, audit.InvalidAnnotation)) > 0; invalid != c.invalid {
		t.Errorf("an invalid-annotation record: %t, want %t", invalid, c.invalid)
	}
}

// checkOtherMessages checks the messages besides reminders: the expiry
// and the deletion, the extension and the postponement, each once on each
// channel and on the audit trail.
func checkOtherMessages(t *testing.T, res *results, p playbookFacts, c fate) {
	want := map[v1alpha1.EventType]int{
		v1alpha1.EventExpired:   b2i(!c.kept),
		v1alpha1.EventDeleted:   b2i(!c.kept),
		v1alpha1.EventExtended:  b2i(c.extended),
		v1alpha1.EventPostponed: b2i(c.postponed),
	}
	for typ, n := range want {
		for _, via := range []string{viaMail, viaWebhook} {
			got := res.received(p.obj.GetName(), via, typ)
			if len(got) != n {
				t.Errorf("%d %s messages by %s, want %d", len(got), typ, via, n)
			}
			recorded := 0
			for _, rec := range res.records(p.obj.GetUID(), audit.Notified) {
				if rec.Message == string(typ) && rec.Channel == channelOf(via) {
					recorded++
				}
			}
			if recorded != n {
				t.Errorf("%d notified records of %s messages via %s, want %d", recorded, typ, channelOf(via), n)
			}
			if typ == v1alpha1.EventExtended && via == viaWebhook && len(got) == 1 && !got[0].expiresAt.Equal(expiresAt(t, p, c)) {
				t.Errorf("the extended message announces %s, want the new expiry %s", got[0].expiresAt, expiresAt(t, p, c))
			}
		}
	}
}

// checkMessages checks what reached the receivers as a whole.
func checkMessages(t *testing.T, res *results) {
	names := map[string]bool{}
	for _, p := range res.playbooks {
		names[p.obj.GetName()] = p.title == "ttl-15s" || p.title == "extend-me"
	}
	t.Run("receives every message once, signed, about a Playbook of the demo", func(t *testing.T) {
		seen := map[string]bool{}
		for _, m := range res.messages {
			key := m.via + " " + m.id
			switch _, ours := names[m.name]; {
			case m.refused != "":
				t.Errorf("the webhook receiver refused a request (id %s): %s", m.id, m.refused)
			case seen[key]:
				t.Errorf("%s message %s (%s about %s) came twice", m.via, m.id, m.event, m.name)
			case !ours:
				t.Errorf("%s message %s about %q, which the demo did not make", m.via, m.id, m.name)
			}
			seen[key] = true
		}
	})
	t.Run("mails alice only about the Playbooks that name her", func(t *testing.T) {
		for _, m := range res.messages {
			if m.via == viaMail && slices.Contains(m.to, "alice@demo.local") && !names[m.name] {
				t.Errorf("alice got a %s mail about %s", m.event, m.name)
			}
		}
	})
	t.Run("records no message twice for the same expiry", func(t *testing.T) {
		seen := map[string]bool{}
		for _, rec := range res.trail {
			if rec.Type != audit.Notified || rec.ExpiresAt == nil {
				continue
			}
			key := string(rec.Object.UID) + " " + rec.ExpiresAt.String() + " " + rec.Message + " " + rec.Stage + " " + rec.Channel
			if seen[key] {
				t.Errorf("recorded twice: %s", key)
			}
			seen[key] = true
		}
	})
}

// checkEvents checks the Kubernetes Events the controller recorded.
func checkEvents(t *testing.T, res *results) {
	has := func(p playbookFacts, typ, reason string) bool {
		return slices.ContainsFunc(res.events, func(e eventsv1.Event) bool {
			return e.Regarding.UID == p.obj.GetUID() && e.Type == typ && e.Reason == reason
		})
	}
	for _, c := range firstScene {
		p := res.playbook(t, c.title, 1)
		t.Run("events of "+c.title, func(t *testing.T) {
			for _, e := range []struct {
				typ, reason string
				want        bool
			}{
				{corev1.EventTypeNormal, kube.ReasonExpired, !c.kept},
				{corev1.EventTypeNormal, kube.ReasonDeleted, !c.kept},
				{corev1.EventTypeNormal, kube.ReasonDeletionPostponed, c.postponed},
				{corev1.EventTypeWarning, kube.ReasonInvalidTimeout, c.invalid},
			} {
				if got := has(p, e.typ, e.reason); got != e.want {
					t.Errorf("a %s %s Event: %t, want %t", e.typ, e.reason, got, e.want)
				}
			}
		})
	}
	for _, c := range useScene {
		p := res.playbook(t, c.title, sceneUse)
		t.Run("events of "+c.title, func(t *testing.T) {
			if got := has(p, corev1.EventTypeWarning, kube.ReasonInvalidTimeout); got != c.invalid {
				t.Errorf("a Warning %s Event: %t, want %t", kube.ReasonInvalidTimeout, got, c.invalid)
			}
		})
	}
}
