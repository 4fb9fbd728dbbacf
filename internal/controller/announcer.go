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
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// announce tells people something that happens once, at the time it
// happens (expired, deleted, deletion failed, would delete): there is no
// record to keep and no retry, since the object may be gone.
func (r *ObjectReconciler) announce(ctx context.Context, key Key, obj *metav1.PartialObjectMetadata, ev *evaluation, t v1alpha1.EventType, detail string) {
	names := slices.Sorted(maps.Keys(ev.channels.notifiers))
	if len(names) == 0 {
		return
	}
	// No InvalidRecipient warnings from here: the object may be gone, and
	// its reconciles warned already.
	msg := r.message(key, obj, ev, t, ev.Life.ExpiresAt, "")
	msg.Detail = detail
	sent, _, failed := r.deliver(ctx, ev, names, msg)
	r.audit(ctx, key, obj, ev, deliveryRecords(t, "", sent, failed)...)
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

func (r *ObjectReconciler) slots() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.announceSlots == nil {
		r.announceSlots = make(chan struct{}, maxAnnouncing)
	}
	return r.announceSlots
}

// announceLater sends a one-off message without holding up the worker: a
// slow receiver must not delay the next deletion.
func (r *ObjectReconciler) announceLater(ctx context.Context, key Key, obj *metav1.PartialObjectMetadata, ev *evaluation, t v1alpha1.EventType, detail string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), announceTimeout)
	r.mu.Lock()
	if r.draining {
		// Shutting down: sent before the worker returns, which the
		// manager waits for.
		r.mu.Unlock()
		defer cancel()
		r.announce(ctx, key, obj, ev, t, detail)
		return
	}
	r.announcing.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.announcing.Done()
		defer cancel()
		// A burst of deletions must not open a connection per message.
		slots := r.slots()
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		case <-ctx.Done():
			return
		}
		r.announce(ctx, key, obj, ev, t, detail)
	}()
}

// drainAnnouncements waits, at shutdown, for the one-off messages sent in
// the background; those announced from now on are sent before their
// reconcile returns.
func (r *ObjectReconciler) drainAnnouncements() {
	r.mu.Lock()
	r.draining = true
	r.mu.Unlock()
	r.announcing.Wait()
}
