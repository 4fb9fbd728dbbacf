// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// CacheOptions are the options the manager's cache needs: the transform
// below for every object it holds.
func CacheOptions() cache.Options {
	return cache.Options{DefaultTransform: CacheTransform}
}

// CacheTransform is the cache's transform: it keeps of each governed
// object (cached as metadata) only what decisions read, and strips the
// managed fields of every other object.
//
// A governed object keeps its UID, resourceVersion, generation, creation
// and deletion times, all its labels (selectors, the outbox's own label)
// and of its annotations only the controller's own (expiry.Prefix) and the
// legacy ttl. Everything else, such as kubectl's
// last-applied-configuration (the whole manifest, often several KiB), owner
// references and finalizers, is dropped before it reaches the cache: the
// controller never reads it there, and reads the whole object from the
// API server when it needs more (a Playbook's title, an archive).
func CacheTransform(obj any) (any, error) {
	switch o := obj.(type) {
	case *metav1.PartialObjectMetadata:
		slim(&o.ObjectMeta)
		return o, nil
	case *metav1.PartialObjectMetadataList:
		for i := range o.Items {
			slim(&o.Items[i].ObjectMeta)
		}
		return o, nil
	}
	return toolscache.TransformFunc(stripManagedFields)(obj)
}

func stripManagedFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// slim drops what no decision reads. It is idempotent, as a transform
// must be: the informer may apply it to an object it already slimmed.
func slim(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	m.OwnerReferences = nil
	m.Finalizers = nil
	m.GenerateName = ""
	m.SelfLink = ""
	if len(m.Labels) == 0 {
		m.Labels = nil
	}
	m.Annotations = keptAnnotations(m.Annotations)
}

// keptAnnotations returns the annotations decisions read, in a map of
// their own so that the dropped values can be collected; nil when none.
func keptAnnotations(in map[string]string) map[string]string {
	n := 0
	for k := range in {
		if kept(k) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	if n == len(in) {
		return in
	}
	out := make(map[string]string, n)
	for k, v := range in {
		if kept(k) {
			out[k] = v
		}
	}
	return out
}

func kept(key string) bool {
	return strings.HasPrefix(key, expiry.Prefix) || key == expiry.AnnotationLegacyTTL
}
