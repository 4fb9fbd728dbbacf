// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/archive"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// The scene of the audit trail and the archive looks back at the first
// scene's Playbooks. Which Playbook's records it shows from the audit
// trail, and which one it brings back from the archive:
const (
	trailOf   = "extend-me"
	restoreOf = "default-ttl"
)

// archive is the scene of the audit trail, the archive, and a restore
// from it; the list at its end shows what is left of the first scene.
func (s *story) archive(ctx context.Context, set *set) error {
	if err := s.trail(ctx); err != nil {
		return err
	}
	if err := s.restore(ctx, set.cl); err != nil {
		return err
	}
	s.n.say("what is left under policy %s:", policyName)
	if err := s.kubectl.run(ctx, "list", "--policy", policyName); err != nil {
		return err
	}
	if err := s.kubectl.decode(ctx, &s.facts.finalList, "list", "--policy", policyName); err != nil {
		return err
	}
	list := playbookList()
	if err := set.cl.List(ctx, list); err != nil {
		return fmt.Errorf("list Playbooks: %w", err)
	}
	for _, r := range s.cast {
		if r.life.Keep && slices.ContainsFunc(list.Items, func(u unstructured.Unstructured) bool { return u.GetUID() == r.obj.GetUID() }) {
			s.n.say("%s is still there, as %s asks", r.title, expiry.AnnotationKeep)
		}
	}
	return nil
}

// trail reads the controller's audit trail, checks it against what the
// story saw (a record for each message received, an archive and a
// deletion for each Playbook deleted) and shows its counts and the
// records of one Playbook. Then it checks the archive.
func (s *story) trail(ctx context.Context) error {
	deleted, told := 0, 0
	for _, r := range s.cast {
		if r.deleted {
			deleted++
		}
		told += len(r.got)
	}
	// The controller writes a message's record once the channel has taken
	// it, which can be a moment after the message reached the demo.
	var recs []audit.Record
	deadline := time.Now().Add(eventGrace)
	for {
		var err error
		if recs, err = audit.ReadFile(s.files.audit); err != nil {
			return err
		}
		if (s.castCount(recs, audit.Notified) >= told && s.castCount(recs, audit.Deleted) >= deleted) || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}

	s.n.say("the controller's audit trail, %s: %d records, one per decision", s.files.audit, len(recs))
	rows := []string{"TYPE\tRECORDS\tBY MESSAGE"}
	var types []audit.Type
	byType := map[audit.Type]int{}
	var messages []string
	byMessage := map[string]int{}
	for _, rec := range recs {
		if byType[rec.Type] == 0 {
			types = append(types, rec.Type)
		}
		byType[rec.Type]++
		if rec.Type == audit.Notified {
			if byMessage[rec.Message] == 0 {
				messages = append(messages, rec.Message)
			}
			byMessage[rec.Message]++
		}
	}
	for _, t := range types {
		by := "-"
		if t == audit.Notified {
			var parts []string
			for _, m := range messages {
				parts = append(parts, fmt.Sprintf("%s %d", m, byMessage[m]))
			}
			by = strings.Join(parts, ", ")
		}
		rows = append(rows, fmt.Sprintf("%s\t%d\t%s", t, byType[t], by))
	}
	s.n.table(rows)

	s.n.say("the records about %s:", trailOf)
	rows = []string{"AT\tTYPE\tWHAT"}
	for _, rec := range recs {
		if r := s.role(rec.Object.Name); r != nil && r.title == trailOf {
			rows = append(rows, fmt.Sprintf("%s\t%s\t%s", s.n.at(rec.Time), rec.Type, s.what(rec)))
		}
	}
	s.n.table(rows)

	if n := s.castCount(recs, audit.Notified); n != told {
		s.problem("the audit trail has %d notified records about the first scene's Playbooks for the %d messages about them that reached the demo", n, told)
	}
	for _, r := range s.cast {
		s.checkRecords(r, recs)
	}
	return s.checkArchive(deleted)
}

// checkRecords finds what is wrong with r's records: a Playbook deleted
// has one archived record, then one deleting and one deleted record, and
// its manifest is in the archive file the first names; any other has none.
func (s *story) checkRecords(r *role, recs []audit.Record) {
	var archived, deleting, deleted []audit.Record
	for _, rec := range recs {
		if rec.Object.UID != r.obj.GetUID() {
			continue
		}
		switch rec.Type {
		case audit.Archived:
			archived = append(archived, rec)
		case audit.Deleting:
			deleting = append(deleting, rec)
		case audit.Deleted:
			deleted = append(deleted, rec)
		}
	}
	if !r.deleted {
		if len(archived)+len(deleting)+len(deleted) > 0 {
			s.problem("%s is not deleted, but the audit trail has %d archived, %d deleting and %d deleted records for it",
				r.title, len(archived), len(deleting), len(deleted))
		}
		return
	}
	if len(archived) != 1 || len(deleting) != 1 || len(deleted) != 1 {
		s.problem("%s was deleted once, and the audit trail has %d archived, %d deleting and %d deleted records for it",
			r.title, len(archived), len(deleting), len(deleted))
		return
	}
	if archived[0].Time.After(deleting[0].Time) || deleting[0].Time.After(deleted[0].Time) {
		s.problem("%s: archived, deleting and deleted records out of order", r.title)
	}
	obj, h, err := archive.Read(archived[0].Detail)
	switch {
	case err != nil:
		s.problem("%s: the archived record names %s: %v", r.title, archived[0].Detail, err)
	case h.UID != r.obj.GetUID():
		s.problem("%s: the archive %s holds UID %s", r.title, archived[0].Detail, h.UID)
	default:
		if title, _, _ := unstructured.NestedString(obj.Object, "spec", "title"); title != r.title {
			s.problem("%s: the archive %s holds the Playbook titled %q", r.title, archived[0].Detail, title)
		}
	}
}

// checkArchive says where the archive is, and checks that it holds one
// manifest per Playbook deleted.
func (s *story) checkArchive(deleted int) error {
	entries, err := archive.List(s.files.archive)
	if err != nil {
		return fmt.Errorf("read the archive: %w", err)
	}
	dirs := map[string]bool{}
	for _, e := range entries {
		rel, _ := filepath.Rel(s.files.archive, filepath.Dir(e.Path))
		dirs[rel] = true
	}
	where := make([]string, 0, len(dirs))
	for d := range dirs {
		where = append(where, d+"/")
	}
	s.n.say("the archive, %s: %d manifests, one for each Playbook deleted, as <uid>.yaml in %s", s.files.archive, len(entries), strings.Join(where, ", "))
	if len(entries) != deleted {
		s.problem("the archive holds %d manifests for the %d Playbooks deleted", len(entries), deleted)
	}
	return nil
}

// what is the detail of a record: the message and its channel, the
// archive file, or what the controller wrote.
func (s *story) what(rec audit.Record) string {
	var w string
	switch rec.Type {
	case audit.Notified, audit.NotifyFailed:
		w = strings.TrimSpace(rec.Message+" "+rec.Stage) + " via " + rec.Channel
	case audit.Archived:
		w = rec.Detail
		if rel, err := filepath.Rel(s.files.dir, rec.Detail); err == nil {
			w = rel
		}
	default:
		w = rec.Detail
	}
	if rec.Error != "" {
		w += ": " + rec.Error
	}
	return w
}

// restore brings one deleted Playbook back from the archive with the
// plugin. It is not part of the cast: the story is over, and the demo
// ends long before its new expiry.
func (s *story) restore(ctx context.Context, cl client.Client) error {
	var r *role
	for _, c := range s.cast {
		if c.title == restoreOf {
			r = c
		}
	}
	s.n.say("restoring %s from the archive, as its owner would after missing the reminders:", r.title)
	if err := s.kubectl.run(ctx, "restore", "playbook/"+r.obj.GetName(), "--archive-dir", s.files.archive); err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(playbookGVK)
	if err := cl.Get(ctx, client.ObjectKeyFromObject(r.obj), u); err != nil {
		return fmt.Errorf("read the restored Playbook %s: %w", r.title, err)
	}
	life := s.lifetime(u)
	s.n.say("%s is back under its old name, as a new object (UID %s, was %s)", r.title, u.GetUID(), r.obj.GetUID())
	s.n.more("with a fresh lifetime: it expires at %s, %s after its new creation, set by %s;",
		s.n.at(life.ExpiresAt), life.ExpiresAt.Sub(u.GetCreationTimestamp().Time), source(life))
	s.n.more("it is not one of the cast: nothing happens to it before the demo ends and takes the control plane down")
	if u.GetUID() == r.obj.GetUID() {
		s.problem("the restored %s has the UID of the deleted one", r.title)
	}
	if !life.ExpiresAt.After(r.deletedAt) {
		s.problem("the restored %s kept its old expiry (%s)", r.title, s.n.at(life.ExpiresAt))
	}
	return nil
}

// castCount counts the records of type t about the first scene's
// Playbooks.
func (s *story) castCount(recs []audit.Record, t audit.Type) int {
	n := 0
	for _, rec := range recs {
		if rec.Type == t && s.role(rec.Object.Name) != nil {
			n++
		}
	}
	return n
}

func count(recs []audit.Record, t audit.Type) int {
	n := 0
	for _, rec := range recs {
		if rec.Type == t {
			n++
		}
	}
	return n
}
