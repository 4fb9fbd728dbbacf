// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/amphitheatre-app/timeout-controller/internal/audit"
)

// reclaimWait bounds the wait for garbage collection and the namespace
// controller to remove what the deleted Playbooks owned.
const reclaimWait = 2 * time.Minute

// reclaimed is what the deleted Playbooks' namespaces held, from the
// deleted records of the audit trail, and how long after expiry the last
// of them was gone, from the reclaimed records.
type reclaimed struct {
	playbooks, namespaces, objects, pods int
	cpuMillis, memBytes                  int64
	slowest                              time.Duration
}

// line is the demo's last word on capacity: "8 Playbooks reclaimed: ...".
func (r reclaimed) line() string {
	return fmt.Sprintf("%d Playbooks reclaimed: %d namespaces, %d objects, %d Pods, %s CPU and %s of memory requested; the last owned object gone %s after its Playbook expired",
		r.playbooks, r.namespaces, r.objects, r.pods,
		resource.NewMilliQuantity(r.cpuMillis, resource.DecimalSI), resource.NewQuantity(r.memBytes, resource.BinarySI),
		r.slowest.Round(100*time.Millisecond))
}

// reclaim is the scene of the first scene's Playbooks' namespaces
// reclaimed: it waits until the audit trail says that everything each
// deleted Playbook owned is gone, and tells what that freed.
func (s *story) reclaim(ctx context.Context, _ *set) error {
	deleted := 0
	for _, r := range s.cast {
		if r.deleted {
			deleted++
		}
	}
	s.n.say("waiting for garbage collection to remove what the %d deleted Playbooks owned", deleted)
	deadline := time.Now().Add(reclaimWait)
	for {
		recs, err := audit.ReadFile(s.files.audit)
		if err != nil {
			return err
		}
		if s.castCount(recs, audit.Reclaimed) >= deleted {
			s.facts.reclaimed = s.sumReclaimed(recs)
			s.n.say("%s", s.facts.reclaimed.line())
			return nil
		}
		if time.Now().After(deadline) {
			s.problem("after %s, %d of %d deleted Playbooks had everything they owned gone", reclaimWait, s.castCount(recs, audit.Reclaimed), deleted)
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// sumReclaimed adds up what the first scene's Playbooks held.
func (s *story) sumReclaimed(recs []audit.Record) reclaimed {
	var r reclaimed
	for _, rec := range recs {
		if s.role(rec.Object.Name) == nil {
			continue
		}
		switch {
		case rec.Type == audit.Deleted && rec.Reclaimed != nil:
			r.playbooks++
			r.namespaces += len(rec.Reclaimed.Namespaces)
			r.objects += rec.Reclaimed.Objects
			r.pods += rec.Reclaimed.Pods
			r.cpuMillis += rec.Reclaimed.CPUMillis
			r.memBytes += rec.Reclaimed.MemoryBytes
		case rec.Type == audit.Reclaimed && rec.ExpiresAt != nil:
			r.slowest = max(r.slowest, rec.Time.Sub(*rec.ExpiresAt))
		}
	}
	return r
}
