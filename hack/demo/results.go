// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/plugin"
)

// results are the facts one run of the demo gathered, besides what it
// printed: what it created, what the controller recorded, what reached the
// receivers and what the plugin showed. TestDemo checks these, not the
// narration, so that rewording a line breaks nothing.
type results struct {
	// playbooks are the Playbooks of every scene, scene by scene.
	playbooks []playbookFacts
	// trail is the controller's audit trail, read once every scene was over.
	trail []audit.Record
	// messages are all that reached the mail inbox and the webhook
	// receiver, in the order they arrived: duplicates and refused
	// requests included.
	messages []message
	// events are the Kubernetes Events in eventNamespace at the end.
	events []eventsv1.Event
	// plugin are the plugin commands run, in order, with their exit codes.
	plugin []pluginRun
	// listed and explained are `kubectl timeout list` and `explain
	// short-notice` as JSON, taken just after the printed ones at the
	// start; finalList is the list in the scene of the archive, after
	// the restore.
	listed, finalList plugin.ItemList
	explained         plugin.Explanation
	// workdir is the temporary directory and pid the controller's process:
	// neither may outlive the demo.
	workdir string
	pid     int
	// reclaimed is what the deleted Playbooks' namespaces held.
	reclaimed reclaimed
	// link is what the scene on links did with a reminder's links.
	link linkFacts
	// sleep and digest are what the scenes of sleep and of the owner's
	// digest saw.
	sleep  *sleepFacts
	digest *digestFacts
}

// playbookFacts is one Playbook of the demo.
type playbookFacts struct {
	title string
	// scene is the number of the scene it plays in (see scenes): 1 under
	// the policy policyName, sceneUse under usePolicy, sceneLinks under
	// linksPolicy, sceneSleep and sceneDigest under theirs.
	scene int
	// obj is the Playbook as the API server returned it when created (its
	// name, UID, creation time and annotations), or, once extended, as
	// read after the extension.
	obj *unstructured.Unstructured
	// deletedAt is when its deletion reached the demo; zero if it was not
	// deleted.
	deletedAt time.Time
}

// results returns what the demo gathered so far.
func (s *story) results() *results {
	r := s.facts
	for _, c := range s.cast {
		r.playbooks = append(r.playbooks, playbookFacts{title: c.title, scene: 1, obj: c.obj, deletedAt: c.deletedAt})
	}
	if f := s.facts.sleep; f != nil && f.obj != nil {
		r.playbooks = append(r.playbooks, playbookFacts{title: sleepTitle, scene: sceneSleep, obj: f.obj, deletedAt: f.deletedAt})
	}
	if f := s.facts.digest; f != nil {
		for _, c := range f.cast {
			r.playbooks = append(r.playbooks, playbookFacts{title: c.title, scene: sceneDigest, obj: c.obj, deletedAt: c.deletedAt})
		}
	}
	for _, c := range s.useCast {
		r.playbooks = append(r.playbooks, playbookFacts{title: c.title, scene: sceneUse, obj: c.obj, deletedAt: c.deletedAt})
	}
	for _, c := range s.linkCast {
		r.playbooks = append(r.playbooks, playbookFacts{title: c.title, scene: sceneLinks, obj: c.obj, deletedAt: c.deletedAt})
	}
	// The scenes played alongside kept theirs: all of them count.
	r.messages = slices.Clone(r.messages)
	if f := s.facts.sleep; f != nil {
		r.messages = append(r.messages, f.messages...)
	}
	if f := s.facts.digest; f != nil {
		r.messages = append(r.messages, f.mails...)
	}
	if s.kubectl != nil {
		r.plugin = s.kubectl.runs()
	}
	return &r
}

// gather takes in, once every scene is over, what may still be on its way:
// messages not read yet, the audit records of the last deletions, and the
// Events.
func (s *story) gather(ctx context.Context, cl client.Client, rc *receivers) error {
	for more := true; more; {
		select {
		case m := <-rc.messages:
			// Nothing is due now: whatever comes is narrated, and found
			// wrong by the test.
			s.onMessage(m)
		default:
			more = false
		}
	}
	deleted := 0
	for _, p := range s.results().playbooks {
		if !p.deletedAt.IsZero() {
			deleted++
		}
	}
	// The deleted record is written once the API server has taken the
	// delete, which can be a moment after the demo saw the object go.
	deadline := time.Now().Add(eventGrace)
	for {
		recs, err := audit.ReadFile(s.files.audit)
		if err != nil {
			return fmt.Errorf("read the audit trail: %w", err)
		}
		s.facts.trail = recs
		if count(recs, audit.Deleted) >= deleted || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
	var events eventsv1.EventList
	if err := cl.List(ctx, &events, client.InNamespace(eventNamespace)); err != nil {
		return fmt.Errorf("list Events: %w", err)
	}
	s.facts.events = events.Items
	return nil
}
