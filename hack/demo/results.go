// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
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
	// playbooks are the Playbooks of both acts, in the order created.
	playbooks []playbookFacts
	// trail is the controller's audit trail, read once both acts were over.
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
	// start; finalList is the list at the end of act one, after the
	// restore.
	listed, finalList plugin.ItemList
	explained         plugin.Explanation
	// workdir is the temporary directory and pid the controller's process:
	// neither may outlive the demo.
	workdir string
	pid     int
	// reclaimed is what the deleted Playbooks' namespaces held.
	reclaimed reclaimed
	// link is what the third act did with a reminder's links.
	link linkFacts
}

// playbookFacts is one Playbook of the demo.
type playbookFacts struct {
	title string
	// act is 1, 2 or 3: the second act's Playbooks are under the policy
	// usePolicy, the third's under linksPolicy.
	act int
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
		r.playbooks = append(r.playbooks, playbookFacts{title: c.title, act: 1, obj: c.obj, deletedAt: c.deletedAt})
	}
	for _, c := range s.useCast {
		r.playbooks = append(r.playbooks, playbookFacts{title: c.title, act: 2, obj: c.obj, deletedAt: c.deletedAt})
	}
	for _, c := range s.linkCast {
		r.playbooks = append(r.playbooks, playbookFacts{title: c.title, act: 3, obj: c.obj, deletedAt: c.deletedAt})
	}
	if s.kubectl != nil {
		r.plugin = s.kubectl.runs
	}
	return &r
}

// gather takes in, once both acts are over, what may still be on its way:
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
