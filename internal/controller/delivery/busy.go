// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

import (
	"math/rand/v2"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// BusyRetry is how soon a message is tried again after its channels were
// busy (notify.ErrBusy), before a jitter of as much again, when nothing
// wakes the object as a slot frees (the reconciler without Wake, as the
// simulation and unit tests drive it): soon, since nothing failed and a
// reminder with a short lead must not miss it (the bench's smoke test
// reminds 3 s ahead), while a look that finds the channel busy again
// costs no API request. The object keeps no backoff and no failure: the
// message was not sent, so it cannot be sent twice.
const BusyRetry = 250 * time.Millisecond

// BusyFallback is the same when a freed slot wakes the object: then it is
// only the safety net for a slot given back to an object that no longer
// needed it, and a long one saves a look a second at every waiting
// message (with 1,000 waiting, 2,700 looks a second at busyRetry).
const BusyFallback = time.Second

// busyResult asks for another look when some channels were busy, and
// queues the object for the next free slot of each.
func (d *Deliverer) busyResult(key wakeup.Key, busy []string) ctrl.Result {
	wait := BusyRetry
	if d.Wake != nil {
		d.slotWaiters.add(key, busy)
		wait = BusyFallback
	}
	return ctrl.Result{RequeueAfter: wait + rand.N(wait)}
}

// orBusy is res, or sooner when some channels were busy.
func (d *Deliverer) orBusy(res ctrl.Result, key wakeup.Key, busy []string) ctrl.Result {
	if len(busy) == 0 {
		return res
	}
	if b := d.busyResult(key, busy); res.RequeueAfter <= 0 || b.RequeueAfter < res.RequeueAfter {
		return b
	}
	return res
}

// SlotFreed wakes the object that has waited longest for a slot of the
// channel, now that one was given back.
func (d *Deliverer) SlotFreed(channel string) {
	if d.Wake == nil {
		return
	}
	if key, ok := d.slotWaiters.next(channel); ok {
		d.Wake(key)
	}
}

// slotWaiters are the objects waiting for a slot of each channel, in the
// order they found it busy, each once.
type slotWaiters struct {
	mu    sync.Mutex
	lines map[string]*waitLine
}

type waitLine struct {
	keys []wakeup.Key
	in   map[wakeup.Key]struct{}
}

func (s *slotWaiters) add(key wakeup.Key, channels []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lines == nil {
		s.lines = map[string]*waitLine{}
	}
	for _, ch := range channels {
		l, ok := s.lines[ch]
		if !ok {
			l = &waitLine{in: map[wakeup.Key]struct{}{}}
			s.lines[ch] = l
		}
		if _, waiting := l.in[key]; !waiting {
			l.in[key] = struct{}{}
			l.keys = append(l.keys, key)
		}
	}
}

func (s *slotWaiters) next(channel string) (wakeup.Key, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.lines[channel]
	if !ok {
		return wakeup.Key{}, false
	}
	key := l.keys[0]
	l.keys = l.keys[1:]
	delete(l.in, key)
	if len(l.keys) == 0 {
		// Dropped, not kept empty: its map would keep the size of the
		// longest wait.
		delete(s.lines, channel)
	}
	return key, true
}
