// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

var playbookResource = schema.GroupVersionResource{Group: "amphitheatre.app", Version: "v1", Resource: "playbooks"}

// touchReport is what the run with activity measured: spec edits (use the
// controller observes itself) on a share of the Playbooks that do not
// expire during the run, and the controller's writes of them.
type touchReport struct {
	Objects int     `json:"objects"`
	Seconds float64 `json:"seconds"`
	// Edits are the bench's spec edits; Failed, those the API server did
	// not take (the bench counts its own writes out of API).
	Edits  int64 `json:"edits"`
	Failed int64 `json:"failed"`
	// Writes is the controller's count of activity writes
	// (timeout_controller_activity_writes_total) during the run.
	Writes float64 `json:"writes"`
	// WritesPerObjectHour is Writes per touched object per hour;
	// AtOneDayIdleTTL scales it to a one-day idleTTL, where the window
	// (idleTTL/20) is 72 minutes instead of the run's.
	WritesPerObjectHour float64 `json:"writesPerObjectHour"`
	AtOneDayIdleTTL     float64 `json:"writesPerObjectHourAtOneDayIdleTTL"`
}

// idleTTL is the idleTTL of the touched Playbooks' policy: none without
// -idle-ttl.
func idleTTL(cfg config) v1alpha1.Duration {
	if cfg.IdleTTL <= 0 {
		return ""
	}
	return v1alpha1.Duration(expiry.FormatDuration(cfg.IdleTTL))
}

// touchedCount is how many of the Playbooks that expire a day later the
// run touches.
func touchedCount(cfg config) int {
	return min(int(math.Round(cfg.Touch*float64(cfg.N))), cfg.N-cfg.Expiring)
}

// startTouching edits the spec of the touchable Playbooks every
// TouchEvery for TouchFor, ending with the last expiry so that the
// deletions are measured under that load, and returns a function that
// stops and waits.
func (m *measurement) startTouching(ctx context.Context) (stop func()) {
	names := m.pop.touched
	if len(names) == 0 || m.cfg.TouchFor <= 0 {
		return func() {}
	}
	m.touch = &touchReport{Objects: len(names)}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var edits, failed atomic.Int64
	start := time.Now()
	if s := m.pop.lastDue.Add(-m.cfg.TouchFor); s.After(start) {
		start = s
	}
	end := start.Add(m.cfg.TouchFor)
	wg.Go(func() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start)):
		}
		m.p.say("editing the spec of %d Playbooks every %s for %s", len(names), m.cfg.TouchEvery, m.cfg.TouchFor)
		tick := time.NewTicker(m.cfg.TouchEvery)
		defer tick.Stop()
		round := 0
		for time.Now().Before(end) {
			round++
			work := make(chan string)
			var inner sync.WaitGroup
			for range m.cfg.Creators {
				inner.Go(func() {
					for name := range work {
						patch := fmt.Sprintf(`{"spec":{"title":"touched %d"}}`, round)
						_, err := m.cl.dynamic.Resource(playbookResource).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
						if err != nil {
							failed.Add(1)
							continue
						}
						edits.Add(1)
					}
				})
			}
			for _, name := range names {
				select {
				case work <- name:
				case <-ctx.Done():
				}
			}
			close(work)
			inner.Wait()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	// From the sync on: a write of use the controller owes for an edit
	// made before the start would count too.
	before, _ := scrapeController(ctx, m.ctrlAddr)
	return func() {
		wg.Wait()
		cancel()
		m.touch.Seconds = time.Since(start).Seconds()
		m.touch.Edits, m.touch.Failed = edits.Load(), failed.Load()
		after, err := scrapeController(context.Background(), m.ctrlAddr)
		if err != nil {
			m.problems = append(m.problems, "read the activity writes: "+err.Error())
			return
		}
		m.touch.Writes = after.ActivityWrites - before.ActivityWrites
		hours := m.touch.Seconds / 3600
		m.touch.WritesPerObjectHour = m.touch.Writes / float64(len(names)) / hours
		m.touch.AtOneDayIdleTTL = m.touch.WritesPerObjectHour * m.cfg.IdleTTL.Seconds() / (24 * time.Hour).Seconds()
		m.p.say("%d edits in %.0fs (%d failed); the controller wrote activity %.0f times: %.1f writes per object per hour, %.2f at a one-day idleTTL",
			m.touch.Edits, m.touch.Seconds, m.touch.Failed, m.touch.Writes, m.touch.WritesPerObjectHour, m.touch.AtOneDayIdleTTL)
	}
}

// usedLabel marks the -touch Playbooks; the policy usedPolicyName selects
// them and the others do not.
const (
	usedLabel      = "bench.timeout.amphitheatre.app/used"
	usedPolicyName = "bench-used"
)

// createUsedPolicy creates the policy of the touched Playbooks: the bench
// policy's, with -idle-ttl. Its own policy lets the idleTTL be as long as
// a real one (a day, say) without moving the expiries the run measures:
// creation counts as use, so under an idleTTL longer than -margin the
// expiring Playbooks would live longer.
func (cl *cluster) createUsedPolicy(ctx context.Context, cfg config, channel string) error {
	policy := &v1alpha1.TimeoutPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: usedPolicyName, Annotations: benchAuthor},
		Spec: v1alpha1.TimeoutPolicySpec{
			Target:        v1alpha1.Target{APIVersion: "amphitheatre.app/v1", Kind: "Playbook"},
			Selector:      &metav1.LabelSelector{MatchLabels: map[string]string{usedLabel: "true"}},
			DefaultTTL:    "14d",
			MinimumNotice: "0s",
			IdleTTL:       idleTTL(cfg),
			Notifications: v1alpha1.Notifications{Channels: []v1alpha1.ChannelReference{{Name: channel}}},
		},
	}
	if err := cl.client.Create(ctx, policy); err != nil {
		return fmt.Errorf("create TimeoutPolicy %s: %w", usedPolicyName, err)
	}
	return nil
}
