// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/delivery"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

func TestAReminderToABusyChannelFreesTheWorkerAndIsSentOnceLater(t *testing.T) {
	first, second := fixture.NewConfigMap("first"), fixture.NewConfigMap("second")
	h := newHarness(t, fixture.T0.Add(31*time.Minute), remindingPolicy("0s"), first, second)
	h.r.Channels.Limiter = notify.NewLimiter(1)
	release, firstDone := holdTheOnlySlot(t, h, first)

	type outcome struct {
		requeue time.Duration
		err     error
	}
	secondDone := make(chan outcome, 1)
	go func() {
		res, err := h.reconcile(second)
		secondDone <- outcome{res.RequeueAfter, err}
	}()
	var got outcome
	select {
	case got = <-secondDone:
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("the second reconcile was still sending 5s later, holding its worker while the channel's one slot was taken")
	}
	if got.err != nil || got.requeue < delivery.BusyRetry || got.requeue >= 2*delivery.BusyRetry {
		t.Errorf("busy channel: RequeueAfter %v, error %v; want a retry in [%v, %v) and no error", got.requeue, got.err, delivery.BusyRetry, 2*delivery.BusyRetry)
	}
	for _, e := range fixture.Drain(h.rec) {
		if strings.HasPrefix(e, "Warning") {
			t.Errorf("Event %q for a busy channel: nothing failed", e)
		}
	}
	if rec, _ := expiry.ParseRecord(h.stored(second).Annotations[expiry.AnnotationReminders]); rec != nil && len(rec.Sent) > 0 {
		t.Errorf("record of the object whose channel was busy = %+v, want nothing sent", rec.Sent)
	}

	close(release)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	// No backoff: the very next look sends it.
	if _, err := h.reconcile(second); err != nil {
		t.Fatal(err)
	}
	if n := h.scripted.count(v1alpha1.EventReminder); n != 2 {
		t.Errorf("%d reminders sent, want 2: one per object", n)
	}
	rec, _ := expiry.ParseRecord(h.stored(second).Annotations[expiry.AnnotationReminders])
	if rec == nil || len(rec.Sent["30m"].Channels) != 1 {
		t.Errorf("record once the channel was free = %+v, want the 30m stage sent", rec)
	}
	if _, err := h.reconcile(second); err != nil {
		t.Fatal(err)
	}
	if n := h.scripted.count(v1alpha1.EventReminder); n != 2 {
		t.Errorf("%d reminders after another look, want still 2", n)
	}
}

func TestAMessageThatFoundItsChannelBusyIsWokenWhenASlotFrees(t *testing.T) {
	first, second := fixture.NewConfigMap("first"), fixture.NewConfigMap("second")
	h := newHarness(t, fixture.T0.Add(31*time.Minute), remindingPolicy("0s"), first, second)
	h.r.Channels.Limiter = notify.NewLimiter(1)
	woken := make(chan wakeup.Key, 4)
	h.r.Wake = func(k wakeup.Key) { woken <- k }
	h.r.Channels.Limiter.OnFree(h.r.SlotFreed)
	release, firstDone := holdTheOnlySlot(t, h, first)
	res, err := h.reconcile(second)
	if err != nil || res.RequeueAfter < delivery.BusyFallback || res.RequeueAfter >= 2*delivery.BusyFallback {
		t.Fatalf("busy channel, woken when free: RequeueAfter %v, error %v; want the fallback in [%v, %v)", res.RequeueAfter, err, delivery.BusyFallback, 2*delivery.BusyFallback)
	}
	select {
	case k := <-woken:
		t.Fatalf("%s woken while the slot was still taken", k)
	default:
	}

	close(release)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-woken:
		if k != keyOf(second) {
			t.Fatalf("woke %s when the slot freed, want %s", k, keyOf(second))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("nothing woken when the slot freed: the waiting reminder would wait for the fallback")
	}
	// Woken once: the next free slot has no one left to wake.
	if _, err := h.reconcile(second); err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-woken:
		t.Fatalf("%s woken again after its message was sent", k)
	default:
	}
	if n := h.scripted.count(v1alpha1.EventReminder); n != 2 {
		t.Errorf("%d reminders sent, want 2: one per object", n)
	}
}

// holdTheOnlySlot reconciles cm in the background until its reminder is
// being sent, and holds the send (and so the channel's one slot) until
// release is closed; firstDone then gets the reconcile's error.
func holdTheOnlySlot(t *testing.T, h *harness, cm *corev1.ConfigMap) (release chan struct{}, firstDone chan error) {
	t.Helper()
	started := make(chan struct{}, 2)
	release = make(chan struct{})
	h.scripted.mu.Lock()
	h.scripted.during = func() { started <- struct{}{}; <-release }
	h.scripted.mu.Unlock()
	firstDone = make(chan error, 1)
	go func() {
		_, err := h.reconcile(cm)
		firstDone <- err
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first reminder was never sent")
	}
	return release, firstDone
}
