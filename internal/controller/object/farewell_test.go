// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"context"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// The expired and deleted messages are written to the outbox a moment
// before the deletion falls due, so that the delete is the only write when
// it does; a farewell whose deletion does not come as it was written for
// is withdrawn, and never sent.
func TestTheFarewellIsWrittenAheadOfTheDeletion(t *testing.T) {
	expires := fixture.T0.Add(10 * time.Minute)
	setup := func(t *testing.T) (*harness, func() string) {
		cm := fixture.NewConfigMap("scratch", fixture.TTL("10m"))
		h := newHarness(t, fixture.T0, told(), cm)
		if res := mustReconcile(t, h, cm); res.RequeueAfter != 10*time.Minute-farewellLead {
			t.Fatalf("RequeueAfter = %v, want the farewell's lead before the deletion, %v", res.RequeueAfter, 10*time.Minute-farewellLead)
		}
		h.clock.SetTime(expires.Add(-farewellLead))
		// The write takes its time: the next look is still due at the
		// deletion, not that much later.
		h.mu.Lock()
		h.beforeCreate = func() { h.clock.Step(200 * time.Millisecond) }
		h.mu.Unlock()
		if res := mustReconcile(t, h, cm); res.RequeueAfter != farewellLead-200*time.Millisecond {
			t.Fatalf("RequeueAfter = %v after a farewell written in 200ms, want the deletion, %v away", res.RequeueAfter, farewellLead-200*time.Millisecond)
		}
		h.mu.Lock()
		h.beforeCreate = nil
		h.mu.Unlock()
		entries := h.outboxEntries()
		if len(entries) != 1 || h.stored(cm) == nil {
			t.Fatalf("%d outbox entries a moment before the deletion, object stored: %t; want 1, and the object", len(entries), h.stored(cm) != nil)
		}
		// Looked at by the outbox's sender now, it waits for the delete.
		h.sendOutbox()
		if n := h.scripted.count(v1alpha1.EventDeleted); n != 0 {
			t.Fatalf("%d deleted messages before the delete", n)
		}
		version := func() string {
			entries := h.outboxEntries()
			if len(entries) != 1 {
				return ""
			}
			return entries[0].ResourceVersion
		}
		return h, version
	}

	t.Run("and the deletion writes it no more", func(t *testing.T) {
		h, version := setup(t)
		cm := fixture.NewConfigMap("scratch")
		written := version()
		h.clock.SetTime(expires)
		mustReconcile(t, h, cm)
		if h.stored(cm) != nil {
			t.Fatal("not deleted when due")
		}
		if got := version(); got != written {
			t.Errorf("the outbox entry at version %s after the delete, was %s: written again", got, written)
		}
		h.sendOutbox()
		if h.scripted.count(v1alpha1.EventExpired) != 1 || h.scripted.count(v1alpha1.EventDeleted) != 1 {
			t.Errorf("%d expired and %d deleted messages, want one each", h.scripted.count(v1alpha1.EventExpired), h.scripted.count(v1alpha1.EventDeleted))
		}
	})
	t.Run("and written again when the deletion comes too late for it", func(t *testing.T) {
		// Held back (a deletion cap) until after the outbox's sender
		// dropped the entry of an object still there.
		h, version := setup(t)
		cm := fixture.NewConfigMap("scratch")
		h.clock.SetTime(expires.Add(-farewellLead + 16*time.Second))
		h.sendOutbox()
		if n := len(h.outboxEntries()); n != 0 {
			t.Fatalf("%d outbox entries 16 s after the farewell was written, want the sender to have dropped it", n)
		}
		mustReconcile(t, h, cm)
		if h.stored(cm) != nil {
			t.Fatal("not deleted")
		}
		if version() == "" {
			t.Fatal("no outbox entry after the delete: the farewell was not written again")
		}
		h.sendOutbox()
		if h.scripted.count(v1alpha1.EventExpired) != 1 || h.scripted.count(v1alpha1.EventDeleted) != 1 {
			t.Errorf("%d expired and %d deleted messages, want one each", h.scripted.count(v1alpha1.EventExpired), h.scripted.count(v1alpha1.EventDeleted))
		}
	})
	t.Run("and withdrawn when the object is extended", func(t *testing.T) {
		h, _ := setup(t)
		cm := fixture.NewConfigMap("scratch")
		h.annotate(cm, expiry.AnnotationTTL, "20m")
		h.clock.SetTime(expires)
		mustReconcile(t, h, cm)
		if h.stored(cm) == nil {
			t.Fatal("deleted at the old expiry")
		}
		if n := len(h.outboxEntries()); n != 0 {
			t.Errorf("%d outbox entries after the extension, want the farewell withdrawn", n)
		}
		// Deleted at the new expiry, once, with a farewell about it.
		h.clock.SetTime(fixture.T0.Add(20 * time.Minute))
		mustReconcile(t, h, cm)
		if h.stored(cm) != nil {
			t.Fatal("not deleted at the new expiry")
		}
		h.sendOutbox()
		if n := h.scripted.count(v1alpha1.EventDeleted); n != 1 {
			t.Errorf("%d deleted messages, want 1", n)
		}
	})
	t.Run("and withdrawn when someone else deletes the object first", func(t *testing.T) {
		h, _ := setup(t)
		cm := fixture.NewConfigMap("scratch")
		if err := h.client.Delete(context.Background(), h.stored(cm)); err != nil {
			t.Fatal(err)
		}
		mustReconcile(t, h, cm)
		if n := len(h.outboxEntries()); n != 0 {
			t.Errorf("%d outbox entries after someone else deleted the object, want the farewell withdrawn", n)
		}
		h.clock.Step(time.Minute)
		h.sendOutbox()
		if n := h.scripted.count(v1alpha1.EventDeleted); n != 0 {
			t.Errorf("%d deleted messages about an object the controller did not delete", n)
		}
	})
}
