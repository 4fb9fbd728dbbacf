// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package actions

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// limiter is a token bucket per client address: each address may make
// burst requests at once and rate a second after that. Buckets full again
// are forgotten, so the map holds only the addresses active lately.
type limiter struct {
	clock clock.PassiveClock
	rate  float64 // tokens a second
	burst float64

	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(c clock.PassiveClock, perMinute, burst int) *limiter {
	return &limiter{clock: c, rate: float64(perMinute) / 60, burst: float64(burst), buckets: map[string]*bucket{}}
}

// allow takes a token from addr's bucket, and reports whether there was
// one. A limiter with no rate allows everything.
func (l *limiter) allow(addr string) bool {
	if l == nil || l.rate <= 0 {
		return true
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > time.Minute {
		l.sweep(now)
	}
	b, ok := l.buckets[addr]
	if !ok {
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[addr] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// sweep forgets the buckets that have filled up again.
func (l *limiter) sweep(now time.Time) {
	full := time.Duration(l.burst / l.rate * float64(time.Second))
	for addr, b := range l.buckets {
		if now.Sub(b.at) >= full {
			delete(l.buckets, addr)
		}
	}
	l.swept = now
}
