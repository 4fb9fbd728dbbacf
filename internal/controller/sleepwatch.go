// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// ensureWorkloads starts, the first time a policy puts objects to sleep,
// a metadata watch on Deployments and StatefulSets: a workload created or
// scaled (a new generation) in a namespace that an object owns brings a
// look at that object, so that someone else scaling up a sleeping
// object's workload wakes it at once.
func (w *watches) ensureWorkloads() error {
	// Not under w.mu while the watch starts: its first events look the
	// owners up in w.kinds.
	w.workloadsOnce.Lock()
	defer w.workloadsOnce.Unlock()
	w.mu.Lock()
	started := w.workloads
	w.mu.Unlock()
	if started {
		return nil
	}
	for _, gvk := range workloadKinds {
		src := source.TypedKind(w.cache, newMetadata(gvk),
			handler.TypedFuncs[*metav1.PartialObjectMetadata, Key]{
				CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[*metav1.PartialObjectMetadata], _ queue) {
					w.lookAtOwners(ctx, e.Object.Namespace)
				},
				UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[*metav1.PartialObjectMetadata], _ queue) {
					w.lookAtOwners(ctx, e.ObjectNew.Namespace)
				},
			},
			predicate.TypedGenerationChangedPredicate[*metav1.PartialObjectMetadata]{})
		if err := w.controller.Watch(src); err != nil {
			return fmt.Errorf("watch %s: %w", gvk, err)
		}
	}
	w.mu.Lock()
	w.workloads = true
	w.mu.Unlock()
	return nil
}

// lookAtOwners queues the objects that own namespace ns.
func (w *watches) lookAtOwners(ctx context.Context, ns string) {
	obj := newMetadata(namespaceKind)
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	if err := w.reader.Get(ctx, types.NamespacedName{Name: ns}, obj); err != nil {
		return
	}
	for _, ref := range obj.OwnerReferences {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			continue
		}
		w.mu.Lock()
		k, ok := w.kinds[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]
		w.mu.Unlock()
		if ok && !k.namespaced {
			w.wakes.Now(Key{GVK: k.gvk, NamespacedName: types.NamespacedName{Name: ref.Name}})
		}
	}
}
