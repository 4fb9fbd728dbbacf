// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// TestAnOwnersDigestSurvivesAKill9 is TestAnOwnerGetsOneDigestPerStageAcrossRestarts
// with the controller binary run as a process that is killed with SIGKILL,
// not stopped: 12 Playbooks of one owner and 2 of another, whose only
// recipients are their owners, fall due together. The process is killed
// once both digests are written but not sent (the mail server refuses),
// and the next one as the first digest arrives (its records being
// written); a new process takes the Lease each time. Each owner gets one
// digest of the stage, listing its Playbooks (the same Message-ID twice at
// most, should the kill land between the acceptance and the entry saying
// so), no Playbook is deleted before the notice its digest gave nor
// before it expires, and the digest entries are gone at the end.
//
// Not parallel, as TestHAFailoverAndGracefulShutdown: the processes govern
// every TimeoutPolicy in the cluster, so the in-process controller is
// stopped meanwhile and no other test's policy may exist.
func TestAnOwnersDigestSurvivesAKill9(t *testing.T) {
	ctx := context.Background()
	suffix := rand.String(5)
	test := "owner-digest-kill-" + suffix
	ns := "timeout-kill-" + suffix
	// A notice long enough that a digest sent after a kill lets the
	// Playbooks go only after they expire: its Date, not the expiry,
	// bounds the deletions.
	const ttl, notice = 30 * time.Second, 18 * time.Second

	var others v1alpha1.TimeoutPolicyList
	if err := k8s.List(ctx, &others); err != nil {
		t.Fatal(err)
	}
	for _, p := range others.Items {
		t.Fatalf("policy %s exists: the controller process would govern its objects as well; this test must run alone", p.Name)
	}
	if n := storedDigests(t); n != 0 {
		t.Fatalf("%d digest entries exist before the test", n)
	}
	// Before the controller first reads the owner addresses, as every
	// test that tells owners.
	writeOwnerAddresses(t)
	standAlone(t)

	dir := t.TempDir()
	bin := buildController(t, dir)
	kubeconfig := writeKubeconfig(t, dir)
	// The Lease lives in a namespace of the test's own.
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	start := func(name string) *replica {
		r := startReplica(t, bin, dir, name, kubeconfig, ns,
			"--outbox-namespace="+outboxNamespace, "--owner-addresses="+ownerAddresses)
		fixture.Eventually(t, 20*time.Second, "replica "+name+" leads", func() (bool, error) {
			r.mustRun(t)
			if !r.loggedAcquire() {
				return false, errors.New("it has not said it acquired the Lease")
			}
			return true, nil
		})
		return r
	}
	began := time.Now()
	first := start("a")
	t.Logf("replica a leads %s after the build", time.Since(began).Round(time.Millisecond))

	mb := ownersOnlyPolicy(t, test, "20s", v1alpha1.Duration(notice.String()))
	mb.Refuse(true)
	owners := map[string][]*tracked{"alice.kill9@example.com": nil, "carol.kill9@example.com": nil}
	for owner, n := range map[string]int{"alice.kill9@example.com": 12, "carol.kill9@example.com": 2} {
		for range n {
			owners[owner] = append(owners[owner], create(t, playbooks,
				newPlaybook(test, "", map[string]string{expiry.AnnotationTTL: ttl.String(), notify.AnnotationOwner: owner})))
		}
	}
	created := time.Now()

	// Written, not sent: the first SIGKILL.
	fixture.Eventually(t, 40*time.Second, "both owners' digests written", func() (bool, error) {
		first.mustRun(t)
		return storedDigests(t) >= 2, nil
	})
	killAt := first.kill(t)
	if got := len(mb.Received()); got != 0 {
		t.Fatalf("%d mails accepted while the mail server refused", got)
	}
	t.Logf("SIGKILL of a %s after the Playbooks were created, both digests written and none sent", killAt.Sub(created).Round(time.Millisecond))
	mb.Refuse(false)
	second := start("b")

	// Sent, its records being written: the second SIGKILL.
	fixture.Eventually(t, 30*time.Second, "a digest received", func() (bool, error) {
		second.mustRun(t)
		n := 0
		for owner := range owners {
			n += len(digestsIn(mb, owner))
		}
		return n > 0, nil
	})
	killAt = second.kill(t)
	t.Logf("SIGKILL of b %s after the Playbooks were created, as the first digest arrived", killAt.Sub(created).Round(time.Millisecond))
	third := start("c")

	checkDigests(t, mb, owners, ttl, notice)
	third.mustRun(t)
	t.Logf("done %s after the Playbooks were created", time.Since(created).Round(time.Millisecond))
}
