// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/outbox"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// told is a policy with the scripted channel and no reminders.
func told() *v1alpha1.TimeoutPolicy {
	return fixture.Policy("told", withScripted)
}

func (h *harness) outboxEntries() []corev1.ConfigMap {
	h.t.Helper()
	var list corev1.ConfigMapList
	if err := h.client.List(context.Background(), &list, client.InNamespace("timeout-system"), client.MatchingLabels{outbox.LabelEntry: "true"}); err != nil {
		h.t.Fatal(err)
	}
	return list.Items
}

func (h *harness) sendOutbox() {
	h.r.Outbox.Pass(context.Background())
	h.r.Outbox.Wait()
}

func TestTheExpiredAndDeletedMessagesWaitInTheOutboxForAChannelThatRefusesThem(t *testing.T) {
	cm := fixture.NewConfigMap("scratch", fixture.TTL("10m"))
	h := newHarness(t, fixture.T0.Add(time.Hour), told(), cm)
	h.scripted.set(nil, errors.New("451 try again later"))

	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	if h.stored(cm) != nil {
		t.Fatal("not deleted")
	}
	h.sendOutbox()
	if n := len(h.outboxEntries()); n != 1 {
		t.Fatalf("%d outbox entries after the channel refused, want 1", n)
	}

	h.scripted.set(nil, nil)
	h.clock.Step(time.Second)
	h.sendOutbox()
	if h.scripted.count(v1alpha1.EventExpired) != 1 || h.scripted.count(v1alpha1.EventDeleted) != 1 {
		t.Fatalf("after the channel recovered it got %d expired and %d deleted messages, want one each",
			h.scripted.count(v1alpha1.EventExpired), h.scripted.count(v1alpha1.EventDeleted))
	}
	if n := len(h.outboxEntries()); n != 0 {
		t.Errorf("%d outbox entries left after every message was accepted", n)
	}
}

func TestADeleteThatFailsLeavesNoOutboxEntry(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"loses a race with an extension", apierrors.NewConflict(configMaps, "scratch", errors.New("the object has been modified"))},
		{"finds the object gone", apierrors.NewNotFound(configMaps, "scratch")},
		{"is refused", apierrors.NewForbidden(configMaps, "scratch", errors.New("no"))},
	} {
		t.Run(c.name, func(t *testing.T) {
			cm := fixture.NewConfigMap("scratch", fixture.TTL("10m"))
			h := newHarness(t, fixture.T0.Add(time.Hour), told(), cm)
			h.deleteErr = c.err

			_, _ = h.reconcile(cm)
			fixture.Drain(h.rec)
			for _, e := range h.outboxEntries() {
				if !strings.HasSuffix(e.Name, "-"+expiry.ReportDeletionFailed) {
					t.Fatalf("outbox entry %s after the delete failed, want none but the deletion-failed message", e.Name)
				}
			}
			h.clock.Step(time.Hour)
			h.sendOutbox()
			if h.scripted.count(v1alpha1.EventDeleted) != 0 {
				t.Error("a deleted message went out about an object that was not deleted")
			}
		})
	}
}

// A policy on ConfigMaps whose selector takes in the outbox's own entries
// leaves them alone: deleting one would lose the messages it holds.
func TestAPolicyOnConfigMapsNeverDeletesTheOutboxEntries(t *testing.T) {
	entry := fixture.NewConfigMap("timeout-outbox-uid-gone", fixture.TTL("10m"), func(cm *corev1.ConfigMap) {
		cm.Namespace = "timeout-system"
		cm.Labels = map[string]string{outbox.LabelEntry: "true"}
	})
	h := newHarness(t, fixture.T0.Add(time.Hour), fixture.Policy("everything"), entry)
	if _, err := h.reconcile(entry); err != nil {
		t.Fatal(err)
	}
	if h.stored(entry) == nil {
		t.Fatal("an outbox entry was deleted under a policy on ConfigMaps")
	}
}

func TestTheDeletionFailedMessageWaitsInTheOutboxForAChannelThatRefusesItOnce(t *testing.T) {
	cm := fixture.NewConfigMap("scratch", fixture.TTL("10m"))
	h := newHarness(t, fixture.T0.Add(time.Hour), told(), cm)
	h.scripted.set(nil, errors.New("451 try again later"))
	h.deleteErr = apierrors.NewForbidden(configMaps, "scratch", errors.New("no"))

	if _, err := h.reconcile(cm); err == nil {
		t.Fatal("the refused delete returned no error")
	}
	h.sendOutbox()
	h.scripted.set(nil, nil)
	h.clock.Step(time.Second)
	h.sendOutbox()
	if n := h.scripted.count(v1alpha1.EventDeletionFailed); n != 1 {
		t.Fatalf("the channel that refused once got %d deletion-failed messages, want one", n)
	}
	if n := len(h.outboxEntries()); n != 0 {
		t.Errorf("%d outbox entries left after the message was accepted", n)
	}
	// Tried again and refused again: said once per expiry.
	h.clock.Step(time.Minute)
	_, _ = h.reconcile(cm)
	h.sendOutbox()
	if n := h.scripted.count(v1alpha1.EventDeletionFailed); n != 1 {
		t.Errorf("%d deletion-failed messages after the delete failed again, want one", n)
	}
}
