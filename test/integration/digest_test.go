// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"net/mail"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/outbox"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// digestsIn returns the owners' digests the mailbox holds for owner.
func digestsIn(mb *fixture.Mailbox, owner string) []fixture.Mail {
	var out []fixture.Mail
	for _, m := range mb.WithHeader("X-Timeout-Event", "reminder") {
		if slices.Equal(m.To, []string{owner}) {
			out = append(out, m)
		}
	}
	return out
}

// storedDigests counts the digest entries in the controller's namespace.
func storedDigests(t *testing.T) int {
	t.Helper()
	var cms corev1.ConfigMapList
	if err := k8s.List(context.Background(), &cms, client.InNamespace(outboxNamespace), client.HasLabels{outbox.LabelDigest}); err != nil {
		t.Fatal(err)
	}
	return len(cms.Items)
}

// TestAnOwnerGetsOneDigestPerStageAcrossRestarts: 12 Playbooks of one
// owner and 2 of another, whose only recipients are their owners, fall
// due together. The controller is stopped once the digests are written
// but not sent (the mail server refuses), and again as the first one
// arrives (its records being written). Each owner gets one digest of the
// stage, listing its Playbooks (the same Message-ID twice at most, should
// a stop land between the acceptance and the entry saying so), and no
// Playbook is deleted before the notice its digest gave. Not parallel: it
// restarts the controller.
func TestAnOwnerGetsOneDigestPerStageAcrossRestarts(t *testing.T) {
	const test = "owner-digest"
	const notice = 10 * time.Second
	// Before the controller first reads the owner addresses, as every
	// test that tells owners.
	writeOwnerAddresses(t)
	mb := ownersOnlyPolicy(t, test, "20s", "10s")

	mb.Refuse(true)
	owners := map[string][]*tracked{"alice.digest@example.com": nil, "carol.digest@example.com": nil}
	for owner, n := range map[string]int{"alice.digest@example.com": 12, "carol.digest@example.com": 2} {
		for range n {
			owners[owner] = append(owners[owner], create(t, playbooks,
				newPlaybook(test, "", map[string]string{expiry.AnnotationTTL: "30s", notify.AnnotationOwner: owner})))
		}
	}

	// Written, not sent: the first stop.
	fixture.Eventually(t, 40*time.Second, "both owners' digests written", func() (bool, error) {
		return storedDigests(t) >= 2, nil
	})
	restart(t)
	mb.Refuse(false)

	// Sent, its records being written: the second stop.
	fixture.Eventually(t, 30*time.Second, "a digest received", func() (bool, error) {
		return len(digestsIn(mb, "alice.digest@example.com"))+len(digestsIn(mb, "carol.digest@example.com")) > 0, nil
	})
	restart(t)

	checkDigests(t, mb, owners, 30*time.Second, notice)
}

// checkDigests checks that each owner got one digest of the stage (the
// same Message-ID twice at most), listing its own Playbooks and no one
// else's; that no Playbook was deleted before the notice its digest gave,
// nor before it expired (ttl after its creation); and that the digest entries are gone at the end.
func checkDigests(t *testing.T, mb *fixture.Mailbox, owners map[string][]*tracked, ttl, notice time.Duration) {
	t.Helper()
	sentAt := map[string]time.Time{}
	for owner, pbs := range owners {
		var got []fixture.Mail
		fixture.Eventually(t, 30*time.Second, "the digest to "+owner, func() (bool, error) {
			got = digestsIn(mb, owner)
			return len(got) > 0, nil
		})
		ids := map[string]int{}
		for _, m := range got {
			ids[m.Header.Get("Message-Id")]++
			for _, pb := range pbs {
				if !strings.Contains(m.Body, pb.GetName()) {
					t.Errorf("the digest to %s does not list %s:\n%s", owner, pb.GetName(), m.Body)
				}
			}
			for other, theirs := range owners {
				for _, pb := range theirs {
					if other != owner && strings.Contains(m.Body, pb.GetName()) {
						t.Errorf("the digest to %s lists %s, which is %s's", owner, pb.GetName(), other)
					}
				}
			}
			date, err := mail.ParseDate(m.Header.Get("Date"))
			if err != nil {
				t.Fatalf("the digest to %s: Date: %v", owner, err)
			}
			if sentAt[owner].IsZero() || date.Before(sentAt[owner]) {
				sentAt[owner] = date
			}
		}
		t.Logf("%s: %d digest mails, Message-IDs %v", owner, len(got), ids)
		if len(ids) != 1 {
			t.Errorf("%s got %d digests of the stage (Message-IDs %v), want 1", owner, len(ids), ids)
		}
		for id, n := range ids {
			if n > 2 {
				t.Errorf("%s got the digest %s %d times, want at most twice", owner, id, n)
			}
		}
	}

	for owner, pbs := range owners {
		for _, pb := range pbs {
			select {
			case at := <-pb.gone:
				// The Date header counts whole seconds, down: the notice
				// started no earlier.
				if at.Before(sentAt[owner].Add(notice)) {
					t.Errorf("%s deleted at %s, before the %s of notice its digest (%s) gave", pb.GetName(), at, notice, sentAt[owner])
				}
				if at.Before(pb.after(ttl)) {
					t.Errorf("%s deleted at %s, before it expired", pb.GetName(), at)
				}
			case <-time.After(time.Until(sentAt[owner].Add(notice + 30*time.Second))):
				t.Fatalf("%s of %s not deleted 30s after its notice ran", pb.GetName(), owner)
			}
		}
	}
	n := 0
	for owner := range owners {
		n += len(digestsIn(mb, owner))
	}
	if n > 2*len(owners) {
		t.Errorf("%d digests in all, want %d (%d with repeats)", n, len(owners), 2*len(owners))
	}
	fixture.Eventually(t, 10*time.Second, "the digest entries removed", func() (bool, error) {
		return storedDigests(t) == 0, nil
	})
}

// restart stops the controller and starts a new one.
func restart(t *testing.T) {
	t.Helper()
	if err := stopController(); err != nil {
		t.Fatal(err)
	}
	if _, err := startController(restConfig, testScheme); err != nil {
		t.Fatal(err)
	}
}
