// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package objectstore

import (
	"maps"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

func TestCacheTransform(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	applied := func() *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: "amphitheatre.app/v1", Kind: "Playbook"},
			ObjectMeta: metav1.ObjectMeta{
				Name: "p", UID: "u", ResourceVersion: "7", Generation: 3, CreationTimestamp: created,
				Labels: map[string]string{"team": "a"},
				Annotations: map[string]string{
					expiry.AnnotationExpiresAt:                         "2026-02-01T00:00:00Z",
					expiry.AnnotationLegacyTTL:                         "60",
					expiry.Prefix + "misspelt":                         "x",
					"kubectl.kubernetes.io/last-applied-configuration": `{"spec":{}}`,
				},
				Finalizers:      []string{"example.com/hold"},
				OwnerReferences: []metav1.OwnerReference{{Name: "owner"}},
				ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			},
		}
	}
	want := map[string]string{
		expiry.AnnotationExpiresAt: "2026-02-01T00:00:00Z",
		expiry.AnnotationLegacyTTL: "60",
		// Kept: an unknown key under the prefix is warned about.
		expiry.Prefix + "misspelt": "x",
	}

	t.Run("keeps of a governed object only what decisions read", func(t *testing.T) {
		out, err := CacheTransform(applied())
		if err != nil {
			t.Fatal(err)
		}
		o := out.(*metav1.PartialObjectMetadata)
		if o.Name != "p" || o.UID != "u" || o.ResourceVersion != "7" || o.Generation != 3 || !o.CreationTimestamp.Equal(&created) {
			t.Errorf("identity changed: %+v", o.ObjectMeta)
		}
		if o.Labels["team"] != "a" {
			t.Errorf("labels = %v, want them kept", o.Labels)
		}
		if !maps.Equal(o.Annotations, want) {
			t.Errorf("annotations = %v, want %v", o.Annotations, want)
		}
		if o.Finalizers != nil || o.OwnerReferences != nil || o.ManagedFields != nil {
			t.Errorf("finalizers %v, owners %v, managed fields %v: want none", o.Finalizers, o.OwnerReferences, o.ManagedFields)
		}
	})
	t.Run("gives the same result applied twice", func(t *testing.T) {
		once, _ := CacheTransform(applied())
		twice, _ := CacheTransform(once)
		if got := twice.(*metav1.PartialObjectMetadata).Annotations; !maps.Equal(got, want) {
			t.Errorf("annotations after two passes = %v, want %v", got, want)
		}
	})
	t.Run("keeps a deletion in progress", func(t *testing.T) {
		o := applied()
		now := metav1.NewTime(created.Add(time.Hour))
		o.DeletionTimestamp = &now
		out, _ := CacheTransform(o)
		if got := out.(*metav1.PartialObjectMetadata).DeletionTimestamp; got == nil || !got.Equal(&now) {
			t.Errorf("deletionTimestamp = %v, want %v", got, now)
		}
	})
	t.Run("keeps of a namespace's owner references only the UIDs, twice over", func(t *testing.T) {
		ns := &metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: "amp-p", Labels: map[string]string{"team": "a"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "amphitheatre.app/v1", Kind: "Playbook", Name: "p", UID: "u"}}},
		}
		once, _ := CacheTransform(ns)
		twice, _ := CacheTransform(once)
		got := twice.(*metav1.PartialObjectMetadata)
		if want := []metav1.OwnerReference{{UID: "u"}}; !reflect.DeepEqual(got.OwnerReferences, want) {
			t.Errorf("owner references %+v, want %+v", got.OwnerReferences, want)
		}
		if got.Labels["team"] != "a" {
			t.Errorf("labels = %v, want them kept for namespace selectors", got.Labels)
		}
		if uids := kube.IndexOwners(got); !reflect.DeepEqual(uids, []string{"u"}) {
			t.Errorf("indexed under %v, want [u]", uids)
		}
	})
	t.Run("keeps a policy whole but for its managed fields", func(t *testing.T) {
		p := fixture.Policy("p", fixture.Reminders("1h"))
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
		p.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}
		out, _ := CacheTransform(p)
		got := out.(*v1alpha1.TimeoutPolicy)
		if got.ManagedFields != nil || len(got.Spec.Reminders) != 1 || got.Annotations == nil {
			t.Errorf("policy after the transform: managed fields %v, reminders %v, annotations %v; want only the managed fields gone",
				got.ManagedFields, got.Spec.Reminders, got.Annotations)
		}
	})
}
