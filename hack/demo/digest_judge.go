// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/outbox"
)

// digestFacts are what the scene of the owner's digest saw.
type digestFacts struct {
	cast []*digestRole
	// mails are those about its Playbooks, in the order they came.
	mails []message
}

// digestRole is a Playbook of the scene.
type digestRole struct {
	title     string
	owned     bool
	obj       *unstructured.Unstructured
	deletedAt time.Time
}

func (f *digestFacts) role(u *unstructured.Unstructured) *digestRole {
	if u == nil {
		return nil
	}
	for _, r := range f.cast {
		if r.obj.GetUID() == u.GetUID() {
			return r
		}
	}
	return nil
}

func (f *digestFacts) pending() int {
	n := 0
	for _, r := range f.cast {
		if r.deletedAt.IsZero() {
			n++
		}
	}
	return n
}

// digests are the owner's digests received.
func (f *digestFacts) digests() []message {
	var out []message
	for _, m := range f.mails {
		if isDigest(m) {
			out = append(out, m)
		}
	}
	return out
}

// about returns the mails of type typ about r besides the digest.
func (f *digestFacts) about(r *digestRole, typ v1alpha1.EventType) []message {
	var out []message
	for _, m := range f.mails {
		if m.name == r.obj.GetName() && m.event == typ && !isDigest(m) {
			out = append(out, m)
		}
	}
	return out
}

// settled reports whether the digest and every deletion's expired and
// deleted mails came.
func (f *digestFacts) settled() bool {
	if len(f.digests()) == 0 {
		return false
	}
	for _, r := range f.cast {
		if len(f.about(r, v1alpha1.EventExpired)) == 0 || len(f.about(r, v1alpha1.EventDeleted)) == 0 {
			return false
		}
	}
	return true
}

// line is the demo's summary of the scene.
func (f *digestFacts) line() string {
	items := 0
	if d := f.digests(); len(d) > 0 {
		items = len(digestItems(d[0]))
	}
	return fmt.Sprintf("%s got %d digest listing %d Playbooks, in place of %d reminders", digestOwner, len(f.digests()), items, len(digestTitles))
}

// judgeDigest finds what went wrong in the scene: a digest missing,
// doubled, early, late or listing the wrong Playbooks; a Playbook's own
// reminder to its owner, or one missing or doubled to the policy's
// address; a deletion early, late or missing; the owner told of a
// Playbook not theirs.
func (s *story) judgeDigest(f *digestFacts) {
	digests := f.digests()
	if len(digests) != 1 {
		s.problem("%s got %d digests, want 1", digestOwner, len(digests))
	}
	var firstDue time.Time
	for _, r := range f.cast {
		if due := r.obj.GetCreationTimestamp().Add(digestLife - digestLead); r.owned && (firstDue.IsZero() || due.Before(firstDue)) {
			firstDue = due
		}
	}
	if len(digests) > 0 {
		d := digests[0]
		items := digestItems(d)
		if len(items) != len(digestTitles) {
			s.problem("the digest lists %d Playbooks, want %d: %v", len(items), len(digestTitles), items)
		}
		for _, r := range f.cast {
			if listed := strings.Contains(d.text, r.obj.GetName()); listed != r.owned {
				s.problem("the digest lists %s: %t, want %t", r.title, listed, r.owned)
			}
		}
		// Sent at the first one's due time, within the window before the
		// others'.
		if v := verdictOf(d.arrived, firstDue.Add(-outbox.Window(digestLead)), firstDue); v != "on time" {
			s.problem("the digest came %s: at %s, its first Playbook's reminder due at %s", v, formatUTC(d.arrived), formatUTC(firstDue))
		}
	}
	for _, r := range f.cast {
		reminders := f.about(r, v1alpha1.EventReminder)
		if len(reminders) != 1 || !slices.Contains(reminders[0].to, mailTo) || slices.Contains(reminders[0].to, digestOwner) {
			s.problem("%s: %d reminders of its own, want one to %s and none to %s", r.title, len(reminders), mailTo, digestOwner)
		}
		for _, typ := range []v1alpha1.EventType{v1alpha1.EventExpired, v1alpha1.EventDeleted} {
			got := f.about(r, typ)
			if len(got) != 1 {
				s.problem("%s: %d %s mails, want 1", r.title, len(got), typ)
				continue
			}
			if told := slices.Contains(got[0].to, digestOwner); told != r.owned {
				s.problem("%s: its %s mail reaches %s: %t, want %t", r.title, typ, digestOwner, told, r.owned)
			}
		}
		due := r.obj.GetCreationTimestamp().Add(digestLife)
		if r.deletedAt.IsZero() {
			s.problem("%s was not deleted", r.title)
		} else if v := verdictOf(r.deletedAt, due, due); v != "on time" {
			s.problem("%s deleted %s: at %s, due at %s", r.title, v, formatUTC(r.deletedAt), formatUTC(due))
		}
	}
	s.n.say("%s", f.line())
	for _, p := range s.problemsSoFar() {
		s.n.say("PROBLEM: %s", p)
	}
}
