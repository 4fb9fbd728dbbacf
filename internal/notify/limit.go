// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package notify

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// ErrBusy is what a limited channel's Send returns when the channel is
// already sending as many messages as it may at once. Nothing was sent:
// the caller tries again shortly. It is neither a failure nor a reason to
// back off.
var ErrBusy = errors.New("channel busy: as many messages in flight as --max-sends-per-channel allows")

// Limiter caps how many messages each channel sends at once, whichever
// policies use it. Reminders are sent from the reconciler's workers: a
// receiver that takes seconds per message would otherwise hold every
// worker, and deletions due meanwhile would wait for it.
type Limiter struct {
	max int

	mu    sync.Mutex
	slots map[string]chan struct{}
	// onFree, when set, is told the channel's name each time one of its
	// slots is given back.
	onFree atomic.Pointer[func(channel string)]
}

// NewLimiter returns a Limiter that lets each channel send limit messages
// at once; limit <= 0 means no limit.
func NewLimiter(limit int) *Limiter {
	return &Limiter{max: limit}
}

// Limit returns n with its sends counted against the limit of n's channel
// (by Name, the NotificationChannel's): the notifiers that different
// policies build for one channel share its limit. A nil Limiter, or one
// without a limit, returns n unchanged.
func (l *Limiter) Limit(n Notifier) Notifier {
	if l == nil || l.max <= 0 {
		return n
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.slots == nil {
		l.slots = map[string]chan struct{}{}
	}
	name := n.Name()
	s, ok := l.slots[name]
	if !ok {
		s = make(chan struct{}, l.max)
		l.slots[name] = s
	}
	return limited{Notifier: n, slots: s, freed: func() {
		if f := l.onFree.Load(); f != nil {
			(*f)(name)
		}
	}}
}

// OnFree has f told the channel's name each time one of its slots is
// given back, so that a message that found the channel busy can be tried
// again then rather than after a guess. f must not block.
func (l *Limiter) OnFree(f func(channel string)) {
	if l != nil {
		l.onFree.Store(&f)
	}
}

// limited is a notifier whose sends take one of its channel's slots.
type limited struct {
	Notifier
	slots chan struct{}
	freed func()
}

// give gives a slot back.
func (n limited) give() {
	<-n.slots
	n.freed()
}

// Send sends m if the channel has a free slot, and returns ErrBusy at
// once otherwise; under WaitForSlot it waits for one instead.
func (n limited) Send(ctx context.Context, m Message, c Content) error {
	select {
	case n.slots <- struct{}{}:
	default:
		if !waits(ctx) {
			return ErrBusy
		}
		select {
		case n.slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer n.give()
	return n.Notifier.Send(ctx, m, c)
}

// Reserve takes a slot of n's channel for one message to come, so that
// the work before the send (reading the object's title, say) is done only
// when the send can go ahead. It returns the notifier to send that
// message with, which gives the slot back when its Send returns, and a
// release for when the message is not sent after all (calling it after
// the Send is harmless). ok is false, and nothing is taken, when the
// channel is busy. A notifier without a limit is returned as it is.
func Reserve(n Notifier) (held Notifier, release func(), ok bool) {
	l, limitedOK := n.(limited)
	if !limitedOK {
		return n, func() {}, true
	}
	select {
	case l.slots <- struct{}{}:
	default:
		return nil, nil, false
	}
	release = sync.OnceFunc(l.give)
	return reservedSlot{Notifier: l.Notifier, release: release}, release, true
}

// reservedSlot is a limited notifier whose slot is already taken.
type reservedSlot struct {
	Notifier
	release func()
}

func (r reservedSlot) Send(ctx context.Context, m Message, c Content) error {
	defer r.release()
	return r.Notifier.Send(ctx, m, c)
}

type waitKey struct{}

// WaitForSlot returns a context under which a limited channel's Send
// waits for a free slot (as long as ctx allows) instead of returning
// ErrBusy: for senders in the background, which hold no worker.
func WaitForSlot(ctx context.Context) context.Context {
	return context.WithValue(ctx, waitKey{}, true)
}

func waits(ctx context.Context) bool {
	w, _ := ctx.Value(waitKey{}).(bool)
	return w
}
