// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// Caps on deletions per minute. Each cap spaces deletions evenly, one
// every minute/N, and an expiry beyond it gets the next free turn: turns
// are handed out in the order objects come due, none is skipped, and a
// turn, once given, is kept while the object waits for it.
//
// A turn is given in two steps. A policy's cap queues the policy's own
// objects, possibly far ahead. The controller-wide cap is a rate over the
// deletions about to happen: an object takes its global turn only once
// its policy lets it go, so that one policy's long queue never holds back
// the objects of another.
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
	if s != nil && !at.Add(s.interval).Before(s.next) {
		s.next = at.Add(s.interval)
	}
}

// turn is the time an object may be deleted at, given to it under the
// caps.
type turn struct {
	uid       types.UID
	expiresAt time.Time
	at        time.Time
	// final is set once at holds a global turn too; until then at is the
	// turn under the policy's cap alone.
	final bool
	// perMinute is the policy's cap the turn was given under: a turn given
	// under another cap is given again.
	perMinute int32
}

// deletionCaps holds the global cap and one per policy, and the turns
// given to objects that are waiting.
type deletionCaps struct {
	mu       sync.Mutex
	global   *spacing
	policies map[string]*policyCap
	turns    map[wakeup.Key]turn
}

type policyCap struct {
	perMinute int32
	// queue hands out the policy's turns.
	queue *spacing
	// gone spaces the final turns: a global turn can put a deletion later
	// than its policy turn, and the next one must still keep its distance.
	gone *spacing
	// last is the latest final turn, from which a changed cap counts.
	last time.Time
}

func newDeletionCaps(globalPerMinute int) *deletionCaps {
	return &deletionCaps{global: newSpacing(globalPerMinute), policies: map[string]*policyCap{}, turns: map[wakeup.Key]turn{}}
}

// admit returns when the object may be deleted: now when no cap holds it,
// or the turn it was given, which it keeps until forget. limitedBy names
// the cap that set a turn later than now, and throttled says such a turn
// was given by this call.
func (c *deletionCaps) admit(key wakeup.Key, uid types.UID, expiresAt time.Time, policy string, perMinute int32, now time.Time) (at time.Time, limitedBy string, throttled bool) {
	if c == nil {
		return now, "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pc := c.policies[policy]
	if pc == nil || pc.perMinute != perMinute {
		// A changed cap counts from the last deletion, so that lowering it
		// does not let two deletions through at once.
		changed := &policyCap{perMinute: perMinute, queue: newSpacing(int(perMinute)), gone: newSpacing(int(perMinute))}
		if pc != nil && !pc.last.IsZero() {
			changed.last = pc.last
			changed.queue.take(pc.last)
			changed.gone.take(pc.last)
		}
		pc = changed
		c.policies[policy] = pc
	}
	if c.global == nil && pc.queue == nil {
		delete(c.turns, key)
		return now, "", false
	}

	t, ok := c.turns[key]
	if !ok || t.uid != uid || !t.expiresAt.Equal(expiresAt) || t.perMinute != perMinute {
		// The policy's queue is the first step.
		t = turn{uid: uid, expiresAt: expiresAt, perMinute: perMinute, at: pc.queue.earliest(now)}
		pc.queue.take(t.at)
		if t.at.After(now) {
			c.turns[key] = t
			return t.at, capPolicy, true
		}
	}
	if t.final || t.at.After(now) {
		// A retry (the delete conflicted or failed), or an object back
		// early for its turn, keeps it.
		return t.at, "", false
	}
	// The policy lets the object go: now it takes a global turn, and keeps
	// its distance from the policy's last deletion. The distance counts
	// from the turn the object was entitled to, not from now: a reconcile
	// that comes late does not push the policy's later turns back.
	t.final = true
	entitled := pc.gone.earliest(t.at)
	t.at = now
	if entitled.After(t.at) {
		t.at, limitedBy = entitled, capPolicy
	}
	if g := c.global.earliest(now); g.After(t.at) {
		t.at, limitedBy = g, capGlobal
	}
	c.global.take(t.at)
	if limitedBy == capGlobal {
		// Held back by the global cap: the policy's next deletion keeps
		// its distance from this one.
		entitled = t.at
	}
	pc.gone.take(entitled)
	pc.queue.take(entitled)
	pc.last = entitled
	c.turns[key] = t
	return t.at, limitedBy, t.at.After(now)
}

// forget drops the object's turn: it was deleted, or it is no longer due
// for deletion.
func (c *deletionCaps) forget(key wakeup.Key) {
	if c == nil {
		return
	}
	c.mu.Lock()
	delete(c.turns, key)
	c.mu.Unlock()
}
