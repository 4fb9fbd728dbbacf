// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// TTLCache keeps answers for a while, and at most limit of them, so that
// made-up keys cannot grow it without end. Full, it forgets the answers
// that have expired and, when none has, the one that would expire first:
// the ones still in use stay. Like all in-memory state here, it could be
// dropped at any moment.
type TTLCache[K comparable, V any] struct {
	clock clock.PassiveClock
	limit int

	mu      sync.Mutex
	entries map[K]ttlEntry[V]
}

type ttlEntry[V any] struct {
	value V
	until time.Time
}

// NewTTLCache returns an empty cache of at most limit entries (at least
// one).
func NewTTLCache[K comparable, V any](c clock.PassiveClock, limit int) *TTLCache[K, V] {
	return &TTLCache[K, V]{clock: c, limit: max(limit, 1), entries: map[K]ttlEntry[V]{}}
}

// Get returns the value kept under k, unless there is none or it has
// expired.
func (c *TTLCache[K, V]) Get(k K) (V, bool) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || !now.Before(e.until) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// Put keeps v under k until the time until. The caller reckons it from
// when it asked, not from when the answer came: an answer is never kept
// longer than its time to live.
func (c *TTLCache[K, V]) Put(k K, v V, until time.Time) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[k]; !ok && len(c.entries) >= c.limit {
		c.evict(now)
	}
	c.entries[k] = ttlEntry[V]{value: v, until: until}
}

// evict makes room for one entry: every expired entry goes or, when none
// has expired, the one that would expire first.
func (c *TTLCache[K, V]) evict(now time.Time) {
	var (
		soonest K
		at      time.Time
	)
	for k, e := range c.entries {
		if !now.Before(e.until) {
			delete(c.entries, k)
			continue
		}
		if at.IsZero() || e.until.Before(at) {
			soonest, at = k, e.until
		}
	}
	if len(c.entries) >= c.limit {
		delete(c.entries, soonest)
	}
}
