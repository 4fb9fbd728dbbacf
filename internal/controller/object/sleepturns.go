// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"sync"
	"time"

	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// sleepTurns spaces the sleeps that begin, one every second/N, so that
// many objects falling idle at once (a team going home) never take the
// API server from the deletions, reminders and wakes due meanwhile: a
// sleep a few seconds late breaks no promise, a late deletion or wake
// does. Turns are handed out in the order objects come due, and a turn,
// once given, is kept while the object waits for it. Wakes and a sleep
// under way are never held.
type sleepTurns struct {
	mu      sync.Mutex
	spacing *spacing
	turns   map[wakeup.Key]time.Time
}

func newSleepTurns(perSecond int) *sleepTurns {
	if perSecond <= 0 {
		return nil
	}
	return &sleepTurns{spacing: &spacing{interval: time.Second / time.Duration(perSecond)}, turns: map[wakeup.Key]time.Time{}}
}

// admit returns when the object's sleep may begin: now, or the turn it
// was given, which it keeps until it comes or forget.
func (s *sleepTurns) admit(key wakeup.Key, now time.Time) time.Time {
	if s == nil {
		return now
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if at, ok := s.turns[key]; ok {
		if at.After(now) {
			return at
		}
		delete(s.turns, key)
		return now
	}
	at := s.spacing.earliest(now)
	s.spacing.take(at)
	if at.After(now) {
		s.turns[key] = at
	}
	return at
}

// forget drops the object's turn: it was deleted.
func (s *sleepTurns) forget(key wakeup.Key) {
	if s == nil {
		return
	}
	s.mu.Lock()
	delete(s.turns, key)
	s.mu.Unlock()
}
