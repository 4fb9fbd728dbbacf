// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// maxRetryDelay caps the backoff between deliveries of a message that some
// channel refused.
const maxRetryDelay = 5 * time.Minute

// retryDelay is how long until the first of plan's channels may be tried
// again, and never past the plan's deadline while that is ahead: a
// deadline already behind (a notice still owed after expiry) must not
// turn the backoff into a tight loop.
func (d *Deliverer) retryDelay(plan expiry.Plan, retryKeyOf func(string) retryKey, now time.Time) time.Duration {
	var next time.Time
	for _, name := range plan.Channels {
		if at := d.retries.nextAttempt(retryKeyOf(name)); !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	if next.IsZero() {
		next = now.Add(maxRetryDelay)
	}
	if plan.Deadline.After(now) && plan.Deadline.Before(next) {
		next = plan.Deadline
	}
	return expiry.After(next, now)
}

// retries remembers failed deliveries per object, message and channel,
// for backoff.
type retries struct {
	mu sync.Mutex
	n  map[retryKey]retryState
}

// retryKey names one message to one channel; a new object under the same
// name, or a new expiry, starts afresh.
type retryKey struct {
	wakeup.Key
	uid              types.UID
	expiresAt        int64
	message, channel string
}

func newRetryKey(k wakeup.Key, uid types.UID, expiresAt time.Time, message, channel string) retryKey {
	return retryKey{k, uid, expiresAt.UnixNano(), message, channel}
}

type retryState struct {
	attempts int
	next     time.Time
}

// failed counts a failure at now and returns the number of failures so far.
func (r *retries) failed(rk retryKey, now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[retryKey]retryState{}
	}
	s := r.n[rk]
	s.attempts++
	s.next = now.Add(min(time.Second<<min(s.attempts-1, 16), maxRetryDelay))
	r.n[rk] = s
	return s.attempts
}

// due reports whether the channel may be tried at now.
func (r *retries) due(rk retryKey, now time.Time) bool {
	at := r.nextAttempt(rk)
	return at.IsZero() || !now.Before(at)
}

func (r *retries) nextAttempt(rk retryKey) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[rk].next
}

// forget drops every count about k.
func (r *retries) forget(k wakeup.Key) {
	r.mu.Lock()
	for rk := range r.n {
		if rk.Key == k {
			delete(r.n, rk)
		}
	}
	r.mu.Unlock()
}

func (r *retries) reset(rk retryKey) {
	r.mu.Lock()
	delete(r.n, rk)
	r.mu.Unlock()
}

// NextAttempt is when the message of type message (a reminder stage, or
// the type) about the object key with uid, as it expires at expiresAt, is
// next tried on channel after it failed there; zero when it is not
// waiting.
func (d *Deliverer) NextAttempt(key wakeup.Key, uid types.UID, expiresAt time.Time, message, channel string) time.Time {
	return d.retries.nextAttempt(newRetryKey(key, uid, expiresAt, message, channel))
}
