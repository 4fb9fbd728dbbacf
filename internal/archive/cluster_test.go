// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package archive

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func newCluster(t *testing.T) (*Cluster, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	return &Cluster{Kube: Kube{Reader: c, Writer: c}, Namespace: "timeout-system"}, c
}

func TestClusterStoreKeepsOneSecretPerObject(t *testing.T) {
	ctx := context.Background()
	store, c := newCluster(t)
	long := strings.Repeat("a", 250) + ".x"
	obj := served("Playbook", "amphitheatre.app/v1", "", long, "0b8c7d3e-5f4a-4e2b-9c1d-7a6b5c4d3e2f")

	where, err := store.Write(ctx, obj, Header{ArchivedAt: t0, Policy: "weekend-demos"})
	if err != nil {
		t.Fatal(err)
	}
	if again, err := store.Write(ctx, obj, Header{ArchivedAt: t0.Add(time.Minute), Policy: "weekend-demos"}); err != nil || again != where {
		t.Fatalf("archiving again: %q, %v; want the same Secret %q replaced", again, err, where)
	}
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: "timeout-system", Name: where}, &s); err != nil {
		t.Fatal(err)
	}
	if len(validation.IsDNS1123Subdomain(s.Name)) > 0 || len(s.Name) > 63 {
		t.Errorf("Secret name %q", s.Name)
	}
	for k, v := range s.Labels {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("label %s=%q: %v", k, v, errs)
		}
	}
	if s.Labels[LabelName] != LabelValue(long) || !strings.HasPrefix(s.Labels[LabelName], "sha256-") || s.Labels[LabelPolicy] != "weekend-demos" {
		t.Errorf("labels %v", s.Labels)
	}

	entries, err := store.List(ctx)
	if err != nil || len(entries) != 1 {
		t.Fatalf("List = %v, %v; want one entry", entries, err)
	}
	if e := entries[0]; e.Name != long || e.Title != "Weekend demo" || e.Path != where || !e.ModTime.Equal(t0.Add(time.Minute)) {
		t.Errorf("entry %+v", e)
	}
	got, h, err := store.Read(ctx, where)
	if err != nil || got.GetName() != long || h.Policy != "weekend-demos" {
		t.Fatalf("Read = %v, %+v, %v", got, h, err)
	}

	if n, err := store.Prune(ctx, t0); err != nil || n != 0 {
		t.Fatalf("Prune before the archive: %d, %v", n, err)
	}
	if n, err := store.Prune(ctx, t0.Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("Prune after the archive: %d, %v; want 1", n, err)
	}
	if entries, _ := store.List(ctx); len(entries) != 0 {
		t.Errorf("after Prune: %v", entries)
	}
}

func TestClusterStoreRefusesAManifestOverOneMebibyte(t *testing.T) {
	ctx := context.Background()
	store, c := newCluster(t)
	obj := served("Playbook", "amphitheatre.app/v1", "", "big", "0b8c7d3e-5f4a-4e2b-9c1d-7a6b5c4d3e2f")
	obj.Object["spec"].(map[string]any)["description"] = strings.Repeat("a", MaxClusterManifest)

	_, err := store.Write(ctx, obj, Header{})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "S3 or a directory") {
		t.Fatalf("Write = %v, want ErrTooLarge naming the alternatives", err)
	}
	var list corev1.SecretList
	if err := c.List(ctx, &list); err != nil || len(list.Items) != 0 {
		t.Fatalf("Secrets after the refusal: %d, %v", len(list.Items), err)
	}
}
