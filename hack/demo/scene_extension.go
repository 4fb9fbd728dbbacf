// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The second scene, on the first one's clock: the owner of extend-me,
// reminded of its expiry, moves it with the plugin.
const (
	// extendAfter comes 2s after the 10s Playbook's 6s reminder and 4s
	// before its expiry, so the controller reminds it of the old date and
	// the plugin's patch always lands before it would delete it.
	extendAfter = 6 * time.Second
	// extendBy is how much later `kubectl timeout extend` moves its expiry.
	extendBy = "20s"
)

// extension tells the second scene in the middle of the first, when it
// happens, and goes back to the first.
func (s *story) extension(ctx context.Context, cl client.Client, r *role) error {
	s.n.scene(2, "an extension, on scene 1's clock")
	if err := s.extend(ctx, cl, r); err != nil {
		return err
	}
	s.n.scene(1, "goes on")
	return nil
}

// extend moves r's expiry through the plugin, as its owner would, and
// works out the reminders it is owed from then on.
func (s *story) extend(ctx context.Context, cl client.Client, r *role) error {
	was := r.life.ExpiresAt
	s.n.say("extending %s by %s through the plugin, %.1fs before it would expire:", r.title, extendBy, time.Until(was).Seconds())
	if err := s.kubectl.run(ctx, "extend", r.title, extendBy); err != nil {
		return err
	}
	now := time.Now()
	if err := cl.Get(ctx, client.ObjectKeyFromObject(r.obj), r.obj); err != nil {
		return fmt.Errorf("read Playbook %s after its extension: %w", r.title, err)
	}
	r.extendedAt, r.wasExpiring = now, was
	// The old date's stages that fell due before now were owed; the others
	// never will be. The new date's stages count from now.
	sent := 0
	for _, lead := range r.stages {
		if was.Add(-lead).Before(now) {
			sent++
		}
	}
	r.life = s.lifetime(r.obj)
	r.stages = s.stagesOf(r.life, now)
	r.due = sent + len(r.stages)
	s.n.say("%s now expires at %s instead of %s, set by %s", r.title, s.n.at(r.life.ExpiresAt), s.n.at(was), source(r.life))
	if sent > 0 {
		s.n.more("it was reminded of the old date, so an extended message follows;")
	}
	s.n.more("reminders for the new date: %s", s.dueTimes(r))
	return nil
}
