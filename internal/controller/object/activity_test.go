// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/archive"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// idleRemindingPolicy reminds 30 minutes before a one-hour default TTL
// through the scripted channel, and lets objects live an hour past their
// last use.
func idleRemindingPolicy() *v1alpha1.TimeoutPolicy {
	return fixture.Policy("idle-reminding", fixture.Reminders("30m"), func(p *v1alpha1.TimeoutPolicy) {
		p.Spec.MinimumNotice = "0s"
		p.Spec.IdleTTL = "1h"
		withScripted(p)
	})
}

// firstGeneration gives the ConfigMap the generation the API server creates
// objects with.
func firstGeneration(cm *corev1.ConfigMap) { cm.Generation = 1 }

// editSpec changes the stored object as a spec edit would: a new
// generation, which counts as use.
func editSpec(h *harness, cm *corev1.ConfigMap) {
	h.t.Helper()
	cur := h.stored(cm)
	if cur == nil {
		h.t.Fatalf("edit %s: it is gone", cm.Name)
	}
	cur.Generation++
	cur.Data = map[string]string{"edited": fmt.Sprint(cur.Generation)}
	if err := h.client.Update(context.Background(), cur); err != nil {
		h.t.Fatalf("edit %s: %v", cm.Name, err)
	}
}

// The activity annotation and the record are written by two passes: a
// restart between them (a new reconciler on the same API server, with
// nothing in memory) must not remind anyone of the expiry the use moved,
// must not lose the extended message owed for a reminder about it, and
// must not delete the object before its new expiry.
func TestARestartBetweenTheActivityAndTheRecordLosesNothing(t *testing.T) {
	tests := []struct {
		name string
		// editAt is when the object is edited, after t0; the old expiry
		// is t0+1h, its reminder due at t0+30m.
		editAt time.Duration
		// failRecord fails the first write after the activity's: the
		// record's, for the moved expiry.
		failRecord   bool
		wantExtended int
	}{
		{name: "owes one extended message when the reminder about the old date went out", editAt: 40 * time.Minute, wantExtended: 1},
		{name: "owes one extended message when the record's write failed before the restart", editAt: 40 * time.Minute, failRecord: true, wantExtended: 1},
		{name: "sends no reminder for the old date when the use came as it fell due", editAt: 30 * time.Minute, wantExtended: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm := fixture.NewConfigMap("used", firstGeneration)
			h := newHarness(t, fixture.T0, idleRemindingPolicy(), cm)
			oldExpiry := fixture.T0.Add(time.Hour)
			restart := func() {
				h.r = &Reconciler{Client: h.r.Client, APIReader: h.r.APIReader, Recorder: h.rec, Clock: h.clock,
					Channels: h.channels()}
				h.r.Outbox = h.r.NewOutbox(h.client, h.r.APIReader, "timeout-system", 0, logr.Discard())
			}
			// pass restarts, then reconciles once; it fails the test if the
			// object is gone before deleteBy.
			deleteBy := oldExpiry
			pass := func() {
				t.Helper()
				restart()
				if _, err := h.reconcile(cm); err != nil && !strings.Contains(err.Error(), "conflict") && !strings.Contains(err.Error(), "injected") {
					t.Fatal(err)
				}
				if h.stored(cm) == nil && h.clock.Now().Before(deleteBy) {
					t.Fatalf("deleted at %s, before its expiry %s", h.clock.Now(), deleteBy)
				}
			}
			at := func(d time.Duration, passes int) {
				t.Helper()
				h.clock.SetTime(fixture.T0.Add(d))
				for range passes {
					pass()
				}
			}
			at(tt.editAt-time.Minute, 3)
			sentBefore := len(sentMessages(h))

			h.clock.SetTime(fixture.T0.Add(tt.editAt))
			editSpec(h, cm)
			pass() // the activity is written
			act, err := expiry.ParseActivity(h.stored(cm).Annotations[expiry.AnnotationActivity])
			if err != nil || act.Generation != 2 {
				t.Fatalf("activity %+v, %v after the edit; want generation 2 recorded", act, err)
			}
			newExpiry := act.At.Add(time.Hour)
			if rec := storedRecord(t, h, cm); rec != nil && !rec.ExpiresAt.Equal(oldExpiry) {
				t.Fatalf("the record moved to %s in the pass that wrote the activity: no restart falls between them", rec.ExpiresAt)
			}
			deleteBy = newExpiry
			if tt.failRecord {
				h.mu.Lock()
				h.patchErr = errors.New("injected: the API server is away")
				h.mu.Unlock()
				pass()
				h.mu.Lock()
				h.patchErr = nil
				h.mu.Unlock()
			}
			at(tt.editAt, 4)
			for d := tt.editAt + time.Minute; fixture.T0.Add(d).Before(newExpiry); d += 10 * time.Minute {
				at(d, 3)
			}
			at(newExpiry.Sub(fixture.T0)-30*time.Minute+time.Second, 3) // the reminder about the new date
			at(newExpiry.Sub(fixture.T0), 2)
			if h.stored(cm) != nil {
				t.Fatalf("not deleted at its new expiry %s", newExpiry)
			}

			var extended, remindersNew int
			for _, m := range sentMessages(h)[sentBefore:] {
				switch {
				case m.ExpiresAt.Equal(oldExpiry):
					t.Errorf("a %s about the old expiry %s after the use moved it", m.Type, oldExpiry)
				case m.Type == v1alpha1.EventExtended && m.ExpiresAt.Equal(newExpiry):
					extended++
				case m.Type == v1alpha1.EventReminder && m.ExpiresAt.Equal(newExpiry):
					remindersNew++
				default:
					t.Errorf("unexpected %s about %s", m.Type, m.ExpiresAt)
				}
			}
			if extended != tt.wantExtended {
				t.Errorf("%d extended messages about %s; want %d", extended, newExpiry, tt.wantExtended)
			}
			if remindersNew != 1 {
				t.Errorf("%d reminders about the new expiry %s; want 1", remindersNew, newExpiry)
			}
		})
	}
}

// sentMessages returns what the scripted channel accepted so far.
func sentMessages(h *harness) []notify.Message {
	h.scripted.mu.Lock()
	defer h.scripted.mu.Unlock()
	return slices.Clone(h.scripted.sent)
}

// Before a delete the object is read again from the API server; an edit
// that read shows and the cache did not is use like any other: under an
// idle policy it moves the expiry, and the object is not deleted for the
// old one.
func TestAnEditOnlyTheFreshReadShowsIsUseBeforeADelete(t *testing.T) {
	cm := fixture.NewConfigMap("edited-late", firstGeneration)
	policy := fixture.Policy("idle-archiving", fixture.Archiving, func(p *v1alpha1.TimeoutPolicy) { p.Spec.IdleTTL = "1h" })
	at := fixture.T0.Add(time.Hour)
	h := newHarness(t, at, policy, cm)
	// The archive makes the reconciler read the object fresh.
	h.r.Archive = archive.Dir(t.TempDir())
	unedited := h.stored(cm)
	editSpec(h, cm)
	// The cache has not seen the edit yet.
	h.mu.Lock()
	h.cacheView = func(o *metav1.PartialObjectMetadata) error {
		o.Generation, o.ResourceVersion = unedited.Generation, unedited.ResourceVersion
		return nil
	}
	h.mu.Unlock()

	mustReconcile(t, h, cm)
	stored := h.stored(cm)
	if stored == nil {
		t.Fatal("deleted at its old expiry though the API server showed an edit just made")
	}
	act, err := expiry.ParseActivity(stored.Annotations[expiry.AnnotationActivity])
	if err != nil || act.Generation != 2 || !act.At.Equal(at) {
		t.Errorf("activity %+v, %v; want generation 2 recorded at %s", act, err, at)
	}
}

// Uses are written at most once per idleTTL/20, except when a message or
// the deletion is due: a reminder sent meanwhile would be about the
// expiry the use has moved.
func TestAUseInsideTheThrottleWindowIsWrittenBeforeADueReminder(t *testing.T) {
	cm := fixture.NewConfigMap("busy", firstGeneration)
	policy := idleRemindingPolicy()
	// A window of 93s; the 30m lead, shorter, applies to the idle clock.
	policy.Spec.IdleTTL = "31m"
	h := newHarness(t, fixture.T0.Add(29*time.Minute), policy, cm)
	editSpec(h, cm)
	mustReconcile(t, h, cm) // written; the idle clock (t0+1h) does not move the expiry
	if act, _ := expiry.ParseActivity(h.stored(cm).Annotations[expiry.AnnotationActivity]); act.Generation != 2 {
		t.Fatalf("activity %+v after the first use; want generation 2", act)
	}

	// 80s after that write, once the reminder about t0+1h fell due.
	used := fixture.T0.Add(30*time.Minute + 20*time.Second)
	h.clock.SetTime(used)
	editSpec(h, cm)
	for range 3 {
		mustReconcile(t, h, cm)
	}
	oldExpiry, newExpiry := fixture.T0.Add(time.Hour), used.Add(31*time.Minute)
	h.clock.SetTime(newExpiry.Add(-30 * time.Minute))
	for range 3 {
		mustReconcile(t, h, cm)
	}
	reminded := 0
	for _, m := range sentMessages(h) {
		switch {
		case m.ExpiresAt.Equal(oldExpiry):
			t.Errorf("a %s about %s, the expiry the use at %s moved", m.Type, oldExpiry, used.Format(time.TimeOnly))
		case m.Type == v1alpha1.EventReminder && m.ExpiresAt.Equal(newExpiry):
			reminded++
		}
	}
	if reminded != 1 {
		t.Errorf("%d reminders about the new expiry %s; want 1", reminded, newExpiry)
	}
}

// A last-active of 2999 is use at the moment it was first seen: the
// controller notes that moment on the object before anything else, a
// restart and a later recorded edit keep the note, and the object is
// deleted idleTTL after it, not in 2999.
func TestALastActiveFarAheadKeepsTheObjectOnlyIdleTTLPastItsWrite(t *testing.T) {
	written := fixture.T0.Add(20 * time.Minute)
	cm := fixture.NewConfigMap("forged", firstGeneration)
	policy := fixture.Policy("idle", fixture.Reminders(), func(p *v1alpha1.TimeoutPolicy) {
		p.Spec.DefaultTTL, p.Spec.IdleTTL, p.Spec.Keep = "30m", "1h", v1alpha1.KeepForbidden
	})
	h := newHarness(t, written, policy, cm)
	cur := h.stored(cm)
	cur.Annotations = map[string]string{expiry.AnnotationLastActive: "2999-01-01T00:00:00Z"}
	if err := h.client.Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	mustReconcile(t, h, cm)
	act, err := expiry.ParseActivity(h.stored(cm).Annotations[expiry.AnnotationActivity])
	if err != nil || act.Ahead == nil || !act.Ahead.Seen.Equal(written) {
		t.Fatalf("activity %+v, %v; want the last-active noted as seen at %s", act, err, written)
	}
	mustReconcile(t, h, cm) // the pass after the note
	if got := fixture.Drain(h.rec); !slices.ContainsFunc(got, func(e string) bool {
		return strings.Contains(e, kube.ReasonInvalidTimeout) && strings.Contains(e, "counts from "+written.Format(time.RFC3339))
	}) {
		t.Errorf("events %v; want an InvalidTimeout saying the use counts from %s", got, written)
	}

	// A restart and an edit recorded later keep the note.
	h.r = &Reconciler{Client: h.r.Client, APIReader: h.r.APIReader, Recorder: h.rec, Clock: h.clock, Channels: h.channels()}
	h.clock.SetTime(written.Add(30 * time.Minute))
	editSpec(h, cm)
	for range 3 {
		mustReconcile(t, h, cm)
	}
	act, _ = expiry.ParseActivity(h.stored(cm).Annotations[expiry.AnnotationActivity])
	if act.Generation != 2 || act.Ahead == nil || !act.Ahead.Seen.Equal(written) {
		t.Fatalf("activity %+v after the edit; want generation 2 and the note of %s kept", act, written)
	}

	// The edit at written+30m is the latest use: deleted an hour after it.
	expires := written.Add(90 * time.Minute)
	h.clock.SetTime(expires.Add(-time.Second))
	mustReconcile(t, h, cm)
	if h.stored(cm) == nil {
		t.Fatalf("deleted before %s", expires)
	}
	h.clock.SetTime(expires)
	for range 2 {
		mustReconcile(t, h, cm)
	}
	if h.stored(cm) != nil {
		t.Fatalf("not deleted at %s, an hour after its last use: the last-active of 2999 kept it", expires)
	}
}
