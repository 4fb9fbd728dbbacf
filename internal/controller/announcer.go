// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// announce tells people something that happens once, at the time it
// happens (expired, deleted, deletion failed, would delete): there is no
// record to keep and no retry, since the object may be gone.
func (r *ObjectReconciler) announce(ctx context.Context, ev *evaluation, t v1alpha1.EventType, detail string) {
	key, obj := ev.key, ev.obj
	names := slices.Sorted(maps.Keys(ev.channels.notifiers))
	if len(names) == 0 {
		return
	}
	// No InvalidRecipient warnings from here: the object may be gone, and
	// its reconciles warned already.
	msg := r.message(ctx, ev, t, ev.Life.ExpiresAt, "")
	msg.Detail = detail
	sent, _, failed := r.deliver(ctx, ev, names, msg)
	r.audit(ctx, ev, deliveryRecords(t, "", sent, failed)...)
	log := logf.FromContext(ctx)
	var problems []string
	for _, name := range failed.names() {
		log.Error(errors.New(failed[name]), "notification failed", "event", t, "channel", name)
		problems = append(problems, fmt.Sprintf("via %s: %s", name, failed[name]))
	}
	if len(problems) > 0 {
		r.Recorder.Eventf(reference(key.GVK, obj), nil, corev1.EventTypeWarning, ReasonMessageFailed, actionNotify,
			"Sending the %s message failed %s", t, strings.Join(problems, "; "))
	}
	if len(sent) > 0 {
		log.Info("notified", "event", t, "channels", sent)
	}
}

// announceTimeout bounds the sending of a one-off message, waiting for a
// free slot included.
const announceTimeout = 30 * time.Second

// maxAnnouncing is how many one-off messages are sent at once.
const maxAnnouncing = 16

// announcer sends one-off messages in the background, a few at a time, so
// that a slow receiver does not delay the next deletion. It is a manager
// Runnable: at shutdown it waits for the messages under way, and from
// then on sends each before its reconcile returns, which the manager also
// waits for before it releases the Lease.
type announcer struct {
	mu       sync.Mutex
	sending  sync.WaitGroup
	draining bool
	slots    chan struct{}
}

// Start waits for the shutdown, then drains.
func (a *announcer) Start(ctx context.Context) error {
	<-ctx.Done()
	a.drain()
	return nil
}

// run calls send in the background, or at once when inline or draining.
// send gets a context of its own, bounded by announceTimeout and not cut
// short by a shutdown.
func (a *announcer) run(ctx context.Context, inline bool, send func(context.Context)) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), announceTimeout)
	a.mu.Lock()
	if inline || a.draining {
		a.mu.Unlock()
		defer cancel()
		send(ctx)
		return
	}
	if a.slots == nil {
		a.slots = make(chan struct{}, maxAnnouncing)
	}
	slots := a.slots
	a.sending.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.sending.Done()
		defer cancel()
		// A burst of deletions must not open a connection per message.
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		case <-ctx.Done():
			return
		}
		send(ctx)
	}()
}

// drain waits for the messages sent in the background; those announced
// from now on are sent before their reconcile returns.
func (a *announcer) drain() {
	a.mu.Lock()
	a.draining = true
	a.mu.Unlock()
	a.sending.Wait()
}

// announceLater sends a one-off message through the announcer.
func (r *ObjectReconciler) announceLater(ctx context.Context, ev *evaluation, t v1alpha1.EventType, detail string) {
	r.announcer.run(ctx, r.AnnounceInline, func(ctx context.Context) {
		r.announce(ctx, ev, t, detail)
	})
}
