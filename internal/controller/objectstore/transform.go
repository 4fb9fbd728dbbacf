// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package objectstore

import (
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// CacheOptions are the options the manager's cache needs: the transform
// below for every object it holds.
func CacheOptions() cache.Options {
	return cache.Options{DefaultTransform: CacheTransform}
}

// CacheTransform is the cache's transform: it keeps of each object cached
// as metadata (namespaces, and the workloads sleep watches; governed
// objects are not in this cache but kept as records, objectstore.go) only
// what decisions read, and strips the managed fields of every other
// object.
//
// Such an object keeps its UID, resourceVersion, generation, creation
// and deletion times, all its labels (selectors, the outbox's own label)
// and of its annotations only the controller's own (expiry.Prefix) and the
// legacy ttl. Everything else, such as kubectl's
// last-applied-configuration (the whole manifest, often several KiB), owner
// references (but a namespace's owners' UIDs) and finalizers, is dropped
// before it reaches the cache: the
// controller never reads it there, and reads the whole object from the
// API server when it needs more (a Playbook's title, an archive).
func CacheTransform(obj any) (any, error) {
	switch o := obj.(type) {
	case *metav1.PartialObjectMetadata:
		slim(&o.TypeMeta, &o.ObjectMeta)
		return o, nil
	case *metav1.PartialObjectMetadataList:
		for i := range o.Items {
			slim(&o.Items[i].TypeMeta, &o.Items[i].ObjectMeta)
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
func slim(tm *metav1.TypeMeta, m *metav1.ObjectMeta) {
	// Every object of a kind carries the same two strings: one copy.
	tm.APIVersion, tm.Kind = intern(tm.APIVersion), intern(tm.Kind)
	m.ManagedFields = nil
	m.OwnerReferences = ownerUIDs(tm, m.OwnerReferences)
	m.Finalizers = nil
	m.GenerateName = ""
	if len(m.Labels) == 0 {
		m.Labels = nil
	}
	m.Annotations = keptAnnotations(m.Annotations)
}

// ownerUIDs keeps of a namespace's owner references the UIDs, by which
// the namespaces a deleted object owned are found (ownerIndex); other
// objects keep none.
func ownerUIDs(tm *metav1.TypeMeta, refs []metav1.OwnerReference) []metav1.OwnerReference {
	if len(refs) == 0 || tm.Kind != kube.NamespaceKind.Kind || tm.APIVersion != "v1" {
		return nil
	}
	kept := make([]metav1.OwnerReference, len(refs))
	for i, ref := range refs {
		kept[i] = metav1.OwnerReference{UID: ref.UID}
	}
	return kept
}

// keptAnnotations returns the annotations decisions read, in a map of
// their own so that the dropped values can be collected, and with the
// keys the controller knows sharing one copy; nil when none is kept.
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
	out := make(map[string]string, n)
	for k, v := range in {
		if kept(k) {
			out[knownKey(k)] = v
		}
	}
	return out
}

func kept(key string) bool {
	return strings.HasPrefix(key, expiry.Prefix) || key == expiry.AnnotationLegacyTTL
}

// knownKeys are the annotation keys the controller reads, as constants:
// a decoded object holds its own copy of each, 48 bytes per key and
// object.
var knownKeys = func() map[string]string {
	m := map[string]string{expiry.AnnotationLegacyTTL: expiry.AnnotationLegacyTTL}
	for _, k := range expiry.KnownAnnotations {
		m[k] = k
	}
	return m
}()

// knownKey is key's constant when the controller knows it, else key.
func knownKey(key string) string {
	if k, ok := knownKeys[key]; ok {
		return k
	}
	return key
}

var (
	internMu sync.Mutex
	interned = map[string]string{}
)

// intern returns one copy of s, for the few strings (API versions and
// kinds) that every cached object repeats. It stops adding past a bound,
// so that it cannot grow without end.
func intern(s string) string {
	internMu.Lock()
	defer internMu.Unlock()
	if v, ok := interned[s]; ok {
		return v
	}
	if len(interned) < 256 {
		interned[s] = s
	}
	return s
}
