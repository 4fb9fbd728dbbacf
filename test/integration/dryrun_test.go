// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
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
	eventually(t, 5*time.Second, "a would-delete audit record", func() (bool, error) {
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
