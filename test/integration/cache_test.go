// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/objectstore"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// TestTheCacheKeepsOnlyWhatDecisionsRead watches Playbooks through a cache
// built with the controller's own options, as the manager builds it, and
// checks what it holds of one applied with kubectl: the fields decisions
// read, and not the several KiB of last-applied-configuration.
func TestTheCacheKeepsOnlyWhatDecisionsRead(t *testing.T) {
	t.Parallel()
	applied := `{"apiVersion":"amphitheatre.app/v1","kind":"Playbook","spec":{"title":"` + strings.Repeat("x", 4096) + `"}}`
	pb := newPlaybook("cache", "applied with kubectl", map[string]string{
		expiry.AnnotationTTL:                               "1h",
		expiry.AnnotationLegacyTTL:                         "7200",
		expiry.Prefix + "notify":                           "dev@example.com",
		"kubectl.kubernetes.io/last-applied-configuration": applied,
		"example.com/owner":                                "team-a",
	})
	pb.SetFinalizers([]string{"example.com/hold"})
	tr := create(t, playbooks, pb)
	t.Cleanup(func() { mergePatch(t, playbooks, "", tr.GetName(), `{"metadata":{"finalizers":null}}`) })

	opts := objectstore.CacheOptions()
	opts.Scheme = testScheme
	c, err := cache.New(restConfig, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Start(ctx) }()

	got := &metav1.PartialObjectMetadata{}
	got.SetGroupVersionKind(playbooks.GroupVersion().WithKind("Playbook"))
	fixture.Eventually(t, 30*time.Second, "the Playbook in the cache", func() (bool, error) {
		err := c.Get(ctx, types.NamespacedName{Name: tr.GetName()}, got)
		return err == nil, nil
	})

	if got.UID != tr.GetUID() || got.ResourceVersion != tr.GetResourceVersion() || got.Generation != tr.GetGeneration() ||
		!got.CreationTimestamp.Equal(&metav1.Time{Time: tr.GetCreationTimestamp().Time}) {
		t.Errorf("identity: got uid %s rv %s generation %d created %s, want %s %s %d %s", got.UID, got.ResourceVersion, got.Generation,
			got.CreationTimestamp, tr.GetUID(), tr.GetResourceVersion(), tr.GetGeneration(), tr.GetCreationTimestamp())
	}
	if got.Labels[testLabel] != "cache" {
		t.Errorf("labels: got %v, want the test label kept", got.Labels)
	}
	want := map[string]string{expiry.AnnotationTTL: "1h", expiry.AnnotationLegacyTTL: "7200", expiry.Prefix + "notify": "dev@example.com"}
	if len(got.Annotations) != len(want) {
		t.Errorf("annotations: got %d keys %v, want only %v", len(got.Annotations), keys(got.Annotations), keys(want))
	}
	for k, v := range want {
		if got.Annotations[k] != v {
			t.Errorf("annotation %s: got %q, want %q", k, got.Annotations[k], v)
		}
	}
	if len(got.Finalizers) != 0 || len(got.ManagedFields) != 0 {
		t.Errorf("got finalizers %v and %d managed fields, want neither cached", got.Finalizers, len(got.ManagedFields))
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestARecordFollowsAPlaybookMadeAgainUnderItsName checks the records the
// controller keeps of governed objects (objectstore.go), on the real API
// server, with the objects streamed at start: a Playbook applied with
// kubectl, its last-applied-configuration near the API server's limit on
// annotations, is kept; deleted and made again under the same name with a
// short ttl, the new one is deleted on time, so its record replaced the
// old one's; and its predecessor, which had a long one, was never deleted
// early.
func TestARecordFollowsAPlaybookMadeAgainUnderItsName(t *testing.T) {
	t.Parallel()
	createPolicy(t, "records", playbookPolicy("records", "1h"))

	applied := `{"apiVersion":"amphitheatre.app/v1","kind":"Playbook","spec":{"title":"` + strings.Repeat("x", 200<<10) + `"}}`
	first := create(t, playbooks, newPlaybook("records", "applied with kubectl", map[string]string{
		expiry.AnnotationTTL: "1h",
		"kubectl.kubernetes.io/last-applied-configuration": applied,
	}))
	awaitPolicy(t, "records", "tracking the Playbook", func(p *v1alpha1.TimeoutPolicy) bool { return p.Status.Tracked == 1 })
	first.expectKept(t, 2*time.Second)

	if err := dyn.Resource(playbooks).Delete(context.Background(), first.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.gone:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s not gone 30s after its deletion", first.GetName())
	}
	again := newPlaybook("records", "made again", map[string]string{
		expiry.AnnotationTTL: "3s",
		"kubectl.kubernetes.io/last-applied-configuration": applied,
	})
	again.SetName(first.GetName())
	second := create(t, playbooks, again)
	if second.GetUID() == first.GetUID() {
		t.Fatalf("the Playbook made again has its predecessor's UID %s", first.GetUID())
	}
	second.expectDeletedOnTime(t, second.after(3*time.Second))
}
