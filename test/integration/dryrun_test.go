// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// The controller binary run with --dry-run deletes nothing, whatever the
// policy says, and says so. Not parallel: the suite's in-process
// controller, which has no --dry-run, is stopped meanwhile.
func TestTheGlobalDryRunDeletesNothing(t *testing.T) {
	ctx := context.Background()
	suffix := rand.String(5)
	test, ns := "dry-run-"+suffix, "timeout-dry-run-"+suffix

	var others v1alpha1.TimeoutPolicyList
	if err := k8s.List(ctx, &others); err != nil {
		t.Fatal(err)
	}
	for _, p := range others.Items {
		t.Fatalf("policy %s exists: the controller would govern its objects as well; this test must run alone", p.Name)
	}
	if err := stopController(); err != nil {
		t.Fatalf("stop the in-process controller: %v", err)
	}
	t.Cleanup(func() {
		if _, err := startController(restConfig, testScheme); err != nil {
			t.Errorf("restart the in-process controller: %v", err)
		}
	})
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	r := startReplica(t, buildController(t, dir), dir, "dry-run", writeKubeconfig(t, dir), ns, "--dry-run")
	r.waitReady(t, 20*time.Second)

	// A policy that does delete: only the flag holds the controller back.
	createPolicy(t, test, playbookPolicy(test, "1h"))
	pb := create(t, playbooks, newPlaybook(test, "spared", map[string]string{expiry.AnnotationTTL: "3s"}))
	pb.expectKept(t, time.Until(pb.after(6*time.Second)))

	would := findEvent(t, eventNamespace, pb.GetName(), "WouldDelete")
	mustContain(t, would.Note, "not deleted because the controller runs with --dry-run", "policy "+test)
	var found bool
	fixture.Eventually(t, 5*time.Second, "a would-delete audit record", func() (bool, error) {
		recs, err := audit.ReadFile(r.auditPath)
		for _, rec := range recs {
			if rec.Object.UID == pb.GetUID() {
				if rec.Type == audit.Deleted || rec.Type == audit.Deleting {
					t.Fatalf("audit record of a deletion under --dry-run: %+v", rec)
				}
				found = found || rec.Type == audit.WouldDelete
			}
		}
		return found, err
	})
	r.mustRun(t)
}

// A policy with dryRun, defaultTTL 6s, reminders [3s] and minimumNotice 8s
// reminds, postpones and reports would-delete; then dryRun is switched
// off. The notice given during the rehearsal led to no deletion: the
// Playbook is kept for the minimum notice from then, and a postponement
// names the time it goes.
func TestSwitchingADryRunOffGivesTheMinimumNoticeFromThen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	test := "going-live"
	spec := playbookPolicy(test, "6s")
	spec.Reminders = []v1alpha1.Duration{"3s"}
	spec.MinimumNotice = "8s"
	spec.Deletion.DryRun = true
	policy := createPolicy(t, test, spec)

	pb := create(t, playbooks, newPlaybook(test, "rehearsed", nil))
	fixture.Eventually(t, 20*time.Second, "the rehearsal on the record", func() (bool, error) {
		rec, err := recordOf(ctx, pb.GetName())
		if err != nil || rec == nil {
			return false, err
		}
		_, ok := rec.Sent[expiry.KeyWouldDelete]
		return ok, nil
	})

	live := time.Now()
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
		t.Fatal(err)
	}
	policy.Spec.Deletion.DryRun = false
	if err := k8s.Update(ctx, policy); err != nil {
		t.Fatal(err)
	}
	pb.expectKept(t, 7*time.Second)

	var postponedTo time.Time
	fixture.Eventually(t, 5*time.Second, "the postponement on going live on the record", func() (bool, error) {
		rec, err := recordOf(ctx, pb.GetName())
		if err != nil || rec == nil {
			return false, err
		}
		_, ok := rec.Sent[expiry.KeyLive]
		postponedTo = rec.PostponedTo
		return ok, nil
	})
	if postponedTo.Before(live.Add(8 * time.Second).Truncate(time.Second)) {
		t.Fatalf("postponed to %s, less than the minimum notice (8s) after going live at %s", postponedTo, live)
	}
	var named bool
	for _, note := range eventNotes(t, eventNamespace, pb.GetName(), "DeletionPostponed") {
		named = named || strings.Contains(note, "postponed to "+postponedTo.UTC().Format(time.RFC3339))
	}
	if !named {
		t.Errorf("no DeletionPostponed Event names %s: %q", postponedTo, eventNotes(t, eventNamespace, pb.GetName(), "DeletionPostponed"))
	}
	pb.expectDeletedOnTime(t, postponedTo)
}

// recordOf reads the record on the named Playbook from the API server.
func recordOf(ctx context.Context, name string) (*expiry.Record, error) {
	u, err := dyn.Resource(playbooks).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return expiry.ParseRecord(u.GetAnnotations()[expiry.AnnotationReminders])
}
