// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Caps on deletions per minute. Each cap spaces deletions evenly, one
// every minute/N, and an expiry beyond it gets the next free turn: turns
// are handed out in the order objects come due, none is skipped, and a
// turn, once given, is kept while the object waits for it.
const (
	capGlobal = "global"
	capPolicy = "policy"
)

// spacing lets one deletion through every interval: the generic cell rate
// algorithm with a burst of one. next is the earliest time the next
// deletion may go.
type spacing struct {
	interval time.Duration
	next     time.Time
}

func newSpacing(perMinute int) *spacing {
	if perMinute <= 0 {
		return nil
	}
	return &spacing{interval: time.Minute / time.Duration(perMinute)}
}

func (s *spacing) earliest(now time.Time) time.Time {
	if s == nil || s.next.Before(now) {
		return now
	}
	return s.next
}

func (s *spacing) take(at time.Time) {
	if s != nil {
		s.next = at.Add(s.interval)
	}
}

// turn is the time an object may be deleted at, given to it under a cap.
type turn struct {
	uid       types.UID
	expiresAt time.Time
	at        time.Time
	// perMinute is the policy's cap the turn was given under: a turn given
	// under another cap is given again.
	perMinute int32
}

// deletionCaps holds the global cap and one per policy, and the turns
// given to objects that are waiting.
type deletionCaps struct {
	mu       sync.Mutex
	global   *spacing
	policies map[string]policyCap
	turns    map[Key]turn
}

type policyCap struct {
	perMinute int32
	spacing   *spacing
}

func newDeletionCaps(globalPerMinute int) *deletionCaps {
	return &deletionCaps{global: newSpacing(globalPerMinute), policies: map[string]policyCap{}, turns: map[Key]turn{}}
}

// admit returns when the object may be deleted: now when no cap holds it,
// or the turn it was given, which it keeps until forget. limitedBy names
// the cap that set a turn later than now, and throttled says such a turn
// was given by this call.
func (c *deletionCaps) admit(key Key, uid types.UID, expiresAt time.Time, policy string, perMinute int32, now time.Time) (at time.Time, limitedBy string, throttled bool) {
	if c == nil {
		return now, "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// A retry (the delete conflicted or failed) keeps its turn.
	if t, ok := c.turns[key]; ok && t.uid == uid && t.expiresAt.Equal(expiresAt) && t.perMinute == perMinute {
		return t.at, "", false
	}
	delete(c.turns, key)

	pc := c.policies[policy]
	if pc.perMinute != perMinute {
		pc = policyCap{perMinute: perMinute, spacing: newSpacing(int(perMinute))}
		c.policies[policy] = pc
	}
	if c.global == nil && pc.spacing == nil {
		return now, "", false
	}
	at = now
	if g := c.global.earliest(now); g.After(at) {
		at, limitedBy = g, capGlobal
	}
	if p := pc.spacing.earliest(now); p.After(at) {
		at, limitedBy = p, capPolicy
	}
	c.global.take(at)
	pc.spacing.take(at)
	c.turns[key] = turn{uid: uid, expiresAt: expiresAt, at: at, perMinute: perMinute}
	return at, limitedBy, at.After(now)
}

// forget drops the object's turn: it was deleted, or it is no longer due
// for deletion.
func (c *deletionCaps) forget(key Key) {
	if c == nil {
		return
	}
	c.mu.Lock()
	delete(c.turns, key)
	c.mu.Unlock()
}
