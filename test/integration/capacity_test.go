// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// deployPlaybook creates a Playbook for test as Amphitheatre does, with
// its namespace, Actors, Deployments and Services, and waits for the
// Deployments' Pods: kube-controller-manager makes them.
func deployPlaybook(t *testing.T, test, title string, annotations map[string]string) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	pb := testenv.NewPlaybook(string(uuid.NewUUID()), title, annotations)
	pb.SetLabels(map[string]string{testLabel: test})
	if err := testenv.Deploy(ctx, k8s, pb, testenv.DefaultActors); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pb) })
	want := 0
	for _, a := range testenv.DefaultActors {
		want += int(a.Replicas)
	}
	fixture.Eventually(t, 30*time.Second, "the Pods of "+pb.GetName(), func() (bool, error) {
		pods := &corev1.PodList{}
		err := k8s.List(ctx, pods, client.InNamespace(testenv.Namespace(pb.GetName())))
		return len(pods.Items) == want, err
	})
	return pb
}

// awaitGone waits until obj is gone from the API server and returns when
// it was seen gone.
func awaitGone(t *testing.T, timeout time.Duration, obj client.Object) time.Time {
	t.Helper()
	fixture.Eventually(t, timeout, obj.GetName()+" gone", func() (bool, error) {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	return time.Now()
}

func TestAPlaybookAsAmphitheatreMakesItIsDeletedAndEverythingItOwnedIsGone(t *testing.T) {
	t.Parallel()
	rc := startReceiver(t, []byte("whsec-not-a-real-key-5c1e0b"))
	createPolicy(t, "capacity", reminderPolicy(t, "capacity", nil, "", nil, rc))

	pb := deployPlaybook(t, "capacity", "capacity comes back", map[string]string{expiry.AnnotationTTL: "5s"})
	expiresAt := pb.GetCreationTimestamp().Add(5 * time.Second)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testenv.Namespace(pb.GetName())}}

	gone := awaitGone(t, time.Until(expiresAt)+30*time.Second, pb.DeepCopy())
	if gone.Before(expiresAt) {
		t.Fatalf("deleted %s before its expiry", expiresAt.Sub(gone))
	}
	// The garbage collector deletes the namespace, the namespace
	// controller everything in it.
	nsGone := awaitGone(t, 60*time.Second, ns)
	t.Logf("Playbook gone %s after expiry, its namespace %s after", gone.Sub(expiresAt), nsGone.Sub(expiresAt))
	for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &corev1.PodList{}, &corev1.ServiceList{}} {
		if err := k8s.List(context.Background(), list, client.InNamespace(ns.Name)); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(items); n > 0 {
			t.Errorf("%d %T left in %s", n, list, ns.Name)
		}
	}

	// What the namespace held: 3 Pods, 2 each of Deployments, ReplicaSets,
	// Services and Actors; 2 × 250m + 500m CPU, 2 × 256Mi + 512Mi memory.
	want := notify.Reclaimed{Namespaces: []string{ns.Name}, Objects: 11, Pods: 3, CPUMillis: 1000, MemoryBytes: 1 << 30}
	note := findEvent(t, eventNamespace, pb.GetName(), "Deleted").Note
	mustContain(t, note, "its namespaces held 1 namespace, 11 objects (3 Pods), 1 CPU and 1Gi of memory requested")
	if reasons := events(t, eventNamespace, pb.GetName()); slices.Contains(reasons, "DeletionFailed") {
		t.Errorf("Events %v: the delete was reported as failed", reasons)
	}
	rc.expectOneID(t, pb.GetName(), "deleted", 10*time.Second)
	got := rc.events(pb.GetName(), "deleted")[0].Data["reclaimed"]
	wantJSON := map[string]any{"namespaces": []any{ns.Name}, "objects": 11.0, "pods": 3.0, "cpuMillis": 1000.0, "memoryBytes": float64(1 << 30)}
	if !reflect.DeepEqual(got, wantJSON) {
		t.Errorf("deleted event's reclaimed %v, want %v", got, wantJSON)
	}

	// The trail says when it was accepted, gone, and everything it owned gone.
	var recs []audit.Record
	fixture.Eventually(t, 10*time.Second, "a reclaimed record", func() (bool, error) {
		recs = withoutSuiteCapTurns(t, auditRecords(t, pb.GetUID()))
		return slices.ContainsFunc(recs, func(r audit.Record) bool { return r.Type == audit.Reclaimed }), nil
	})
	var trail []audit.Type
	for _, r := range recs {
		if r.Type != audit.Notified {
			// The expired and deleted messages go out meanwhile.
			trail = append(trail, r.Type)
		}
		if r.Type == audit.Deleted && (r.Reclaimed == nil || !reflect.DeepEqual(*r.Reclaimed, want)) {
			t.Errorf("deleted record reclaimed %+v, want %+v", r.Reclaimed, want)
		}
	}
	if wantTrail := []audit.Type{audit.Deleting, audit.Deleted, audit.Gone, audit.Reclaimed}; !slices.Equal(trail, wantTrail) {
		t.Errorf("audit trail %v, want %v", trail, wantTrail)
	}
}

// A finalizer nobody removes keeps a deleted Playbook in Terminating: the
// deletion is reported as pending, not failed and not gone, until the
// finalizer goes.
func TestAPlaybookHeldInTerminatingIsReportedPendingUntilItIsGone(t *testing.T) {
	// Not parallel: the Terminating gauge is the process's, and the
	// in-process controllers of parallel tests (restarts, failovers) set
	// it from what they track, 0 once their own objects are gone.
	const hold = "e2e.timeout.amphitheatre.app/hold"
	spec := playbookPolicy("terminating", "1h")
	spec.MinimumNotice = "0s"
	createPolicy(t, "terminating", spec)

	pb := deployPlaybook(t, "terminating", "held", map[string]string{expiry.AnnotationTTL: "3s"})
	pb.SetFinalizers(append(pb.GetFinalizers(), hold))
	if err := k8s.Update(context.Background(), pb); err != nil {
		t.Fatal(err)
	}
	findEvent(t, eventNamespace, pb.GetName(), "DeletionPending")
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pb), pb); err != nil {
		t.Fatalf("the Playbook is gone though a finalizer holds it: %v", err)
	}
	if pb.GetDeletionTimestamp() == nil {
		t.Fatal("DeletionPending reported, but the Playbook has no deletionTimestamp")
	}
	if reasons := events(t, eventNamespace, pb.GetName()); slices.Contains(reasons, "DeletionFailed") {
		t.Errorf("Events %v: the delete was reported as failed", reasons)
	}
	types := func() []audit.Type {
		var trail []audit.Type
		for _, r := range withoutSuiteCapTurns(t, auditRecords(t, pb.GetUID())) {
			trail = append(trail, r.Type)
		}
		return trail
	}
	// Still held: not gone.
	time.Sleep(time.Second)
	if trail := types(); !slices.Equal(trail, []audit.Type{audit.Deleting, audit.Deleted}) {
		t.Errorf("audit trail while held %v, want deleting, deleted", trail)
	}
	if n := metric(t, "timeout_controller_objects_terminating", nil).GetGauge().GetValue(); n < 1 {
		t.Errorf("timeout_controller_objects_terminating %v while the Playbook is held", n)
	}

	pb.SetFinalizers(slices.DeleteFunc(pb.GetFinalizers(), func(f string) bool { return f == hold }))
	if err := k8s.Update(context.Background(), pb); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 60*time.Second, "gone and reclaimed records", func() (bool, error) {
		return slices.Equal(types(), []audit.Type{audit.Deleting, audit.Deleted, audit.Gone, audit.Reclaimed}), nil
	})
}
