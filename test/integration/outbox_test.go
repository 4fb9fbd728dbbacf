// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/outbox"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// expectOneID waits until the receiver accepted an event of type typ
// about subject, and checks that every one it accepted carries one id.
func (rc *receiver) expectOneID(t *testing.T, subject, typ string, within time.Duration) {
	t.Helper()
	fixture.Eventually(t, within, typ+" event for "+subject, func() (bool, error) {
		return len(rc.events(subject, typ)) > 0, nil
	})
	if ids := rc.ids(subject, typ); len(ids) != 1 {
		t.Fatalf("%s events for %s carry ids %v, want one", typ, subject, ids)
	}
	if bad := rc.rejected(); len(bad) > 0 {
		t.Fatalf("the receiver rejected deliveries: %v", bad)
	}
}

// expectOutboxEmpty waits until no outbox entry about uid is left.
func expectOutboxEmpty(t *testing.T, uid types.UID) {
	t.Helper()
	fixture.Eventually(t, 5*time.Second, "the outbox entry of "+string(uid)+" removed", func() (bool, error) {
		var list corev1.ConfigMapList
		if err := k8s.List(context.Background(), &list, client.InNamespace(outboxNamespace), client.MatchingLabels{outbox.LabelEntry: "true"}); err != nil {
			return false, err
		}
		for _, cm := range list.Items {
			if cm.Name == outbox.Name(uid) {
				return false, nil
			}
		}
		return true, nil
	})
}

func TestTheDeletedMessageSurvivesAReceiverThatFailsOnce(t *testing.T) {
	t.Parallel()
	rc := startReceiver(t, []byte("whsec-not-a-real-key-0a17f3"))
	createPolicy(t, "outbox-webhook", reminderPolicy(t, "outbox-webhook", nil, "", nil, rc))

	for _, how := range []string{breakUnavailable, breakReset} {
		t.Run("after "+how, func(t *testing.T) {
			pb := create(t, playbooks, newPlaybook("outbox-webhook", "", map[string]string{expiry.AnnotationTTL: "2s"}))
			rc.breakNext(pb.GetName(), "deleted", how)
			pb.expectDeletedOnTime(t, pb.after(2*time.Second))

			rc.expectOneID(t, pb.GetName(), "deleted", 10*time.Second)
			rc.expectOneID(t, pb.GetName(), "expired", time.Second)
			if n := rc.begun(pb.GetName()); n < 3 {
				t.Errorf("%d deliveries begun, want the broken one, its retry and the expired message", n)
			}
			expectOutboxEmpty(t, pb.GetUID())
		})
	}
}

func TestTheExpiredAndDeletedMailsSurviveAMailServerThatRefusesOnce(t *testing.T) {
	t.Parallel()
	mb := fixture.NewMailbox(t, nil)
	createPolicy(t, "outbox-mail", reminderPolicy(t, "outbox-mail", nil, "", mb, nil))
	// The first answer to each of the two mails: 451.
	mb.RefuseNext(2)

	pb := create(t, playbooks, newPlaybook("outbox-mail", "", map[string]string{expiry.AnnotationTTL: "2s"}))
	pb.expectDeletedOnTime(t, pb.after(2*time.Second))

	for _, event := range []string{"expired", "deleted"} {
		fixture.Eventually(t, 10*time.Second, "the "+event+" mail", func() (bool, error) {
			for _, m := range mb.WithHeader("X-Timeout-Object", pb.GetName()) {
				if m.Header.Get("X-Timeout-Event") == event {
					return true, nil
				}
			}
			return false, nil
		})
	}
	if refused := mb.RefusalsLeft(); refused != 0 {
		t.Fatalf("the mail server refused %d mails of 2: the test did not exercise a refusal", 2-refused)
	}
	expectOutboxEmpty(t, pb.GetUID())
}

// TestTheDeletedMessageSurvivesARestart is not parallel: it restarts the
// controller, which the parallel tests must not see.
func TestTheDeletedMessageSurvivesARestart(t *testing.T) {
	rc := startReceiver(t, []byte("whsec-not-a-real-key-77c2d9"))
	createPolicy(t, "outbox-restart", reminderPolicy(t, "outbox-restart", nil, "", nil, rc))

	// Down from the start: every delivery fails until it recovers.
	rc.failNext(1000)
	pb := create(t, playbooks, newPlaybook("outbox-restart", "", map[string]string{expiry.AnnotationTTL: "2s"}))
	pb.expectDeletedOnTime(t, pb.after(2*time.Second))
	fixture.Eventually(t, 5*time.Second, "a delivery tried while the receiver is down", func() (bool, error) {
		return rc.begun(pb.GetName()) >= 2, nil
	})

	if err := stopController(); err != nil {
		t.Fatal(err)
	}
	rc.failNext(0)
	if _, err := startController(restConfig, testScheme); err != nil {
		t.Fatal(err)
	}

	rc.expectOneID(t, pb.GetName(), "deleted", 30*time.Second)
	rc.expectOneID(t, pb.GetName(), "expired", 5*time.Second)
	expectOutboxEmpty(t, pb.GetUID())
}
