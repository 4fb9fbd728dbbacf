// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package objectstore

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

type Queue = workqueue.TypedRateLimitingInterface[wakeup.Key]

// Watches starts a metadata-only watch on each target kind the first time a
// policy names it, feeding the one object controller. A watch stays until
// the process exits: objects no policy governs are simply left alone.
type Watches struct {
	cache  cache.Cache
	reader client.Reader
	// metadata lists and watches the governed kinds' metadata; nil in
	// unit tests, which read governed objects through reader.
	metadata   metadata.Interface
	controller controller.TypedController[wakeup.Key]
	// wakes is where the objects' looks are queued.
	wakes *wakeup.Queue

	mu sync.Mutex
	// kinds maps each watched kind to the version it is watched at.
	kinds      map[schema.GroupKind]watched
	stores     map[schema.GroupKind]*objectStore
	namespaces bool
}

type watched struct {
	gvk        schema.GroupVersionKind
	namespaced bool
}

// NewWatches returns the watches that feed the object controller ctrl,
// whose looks are queued in wakes. They list and watch the governed kinds'
// metadata through md, watch namespaces in the cache c, and read what they
// do not hold through reader; md, c and wakes may be nil in unit tests,
// which read governed objects through reader.
func NewWatches(c cache.Cache, reader client.Reader, md metadata.Interface, ctrl controller.TypedController[wakeup.Key], wakes *wakeup.Queue) *Watches {
	return &Watches{cache: c, reader: reader, metadata: md, controller: ctrl, wakes: wakes}
}

// ListTimeout bounds a read from the cache: an informer that cannot sync
// (no list permission on a kind) must not hang a handler or a reconcile.
const ListTimeout = 30 * time.Second

// Ensure starts watching gvk's kind, served as resource, unless it is
// watched already, and returns the version it is watched at: the first
// one a policy named. The kind's objects are kept as records
// (objectStore), which bring a look at each object added, deleted or
// changed.
func (w *Watches) Ensure(gvk schema.GroupVersionKind, resource schema.GroupVersionResource, namespaced bool) (schema.GroupVersionKind, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if k, ok := w.kinds[gvk.GroupKind()]; ok {
		return k.gvk, nil
	}
	var (
		reflector *toolscache.Reflector
		synced    <-chan struct{}
	)
	if w.metadata != nil {
		s := newObjectStore(gvk, resource.GroupResource(), func(name types.NamespacedName) {
			w.wakes.Now(wakeup.Key{GVK: gvk, NamespacedName: name})
		})
		reflector = s.reflector(metadataListWatch(w.metadata, resource))
		w.wakes.Locate(gvk, s.wakeOf)
		synced = s.synced
		if w.stores == nil {
			w.stores = map[schema.GroupKind]*objectStore{}
		}
		w.stores[gvk.GroupKind()] = s
	}
	src := source.TypedFunc[wakeup.Key](func(ctx context.Context, _ Queue) error {
		if reflector != nil {
			listing.during(func() {
				select {
				case <-synced:
				case <-ctx.Done():
				}
			})
			go reflector.RunWithContext(ctx)
		}
		return nil
	})
	if err := w.controller.Watch(src); err != nil {
		delete(w.stores, gvk.GroupKind())
		return gvk, fmt.Errorf("watch %s: %w", gvk, err)
	}
	if namespaced && !w.namespaces {
		// Namespace selectors read namespace labels: when they change, the
		// objects in that namespace may change policy.
		ns := source.TypedKind(w.cache, kube.NewMetadata(corev1.SchemeGroupVersion.WithKind("Namespace")),
			handler.TypedFuncs[*metav1.PartialObjectMetadata, wakeup.Key]{
				UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[*metav1.PartialObjectMetadata], _ Queue) {
					if !maps.Equal(e.ObjectOld.Labels, e.ObjectNew.Labels) {
						w.enqueueNamespace(ctx, e.ObjectNew.Name)
					}
				},
			})
		if err := w.controller.Watch(ns); err != nil {
			return gvk, fmt.Errorf("watch namespaces: %w", err)
		}
		w.namespaces = true
	}
	if w.kinds == nil {
		w.kinds = map[schema.GroupKind]watched{}
	}
	w.kinds[gvk.GroupKind()] = watched{gvk: gvk, namespaced: namespaced}
	return gvk, nil
}

// MetadataClient is the client the watches list and watch metadata with;
// nil in unit tests.
func (w *Watches) MetadataClient() metadata.Interface { return w.metadata }

// Watch adds src to the object controller.
func (w *Watches) Watch(src source.TypedSource[wakeup.Key]) error { return w.controller.Watch(src) }

// WatchedKind returns the version gk is watched at and whether its
// objects are namespaced, if it is watched.
func (w *Watches) WatchedKind(gk schema.GroupKind) (gvk schema.GroupVersionKind, namespaced, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k, ok := w.kinds[gk]
	return k.gvk, k.namespaced, ok
}

// LookNow asks for a look at key at once.
func (w *Watches) LookNow(key wakeup.Key) { w.wakes.Now(key) }

// store returns the records of kind, nil when it is not watched.
func (w *Watches) store(kind schema.GroupKind) *objectStore {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stores[kind]
}

// Synced reports whether every watched kind's first list is in.
func (w *Watches) Synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.stores {
		if !s.hasSynced() {
			return false
		}
	}
	return true
}

// enqueueKind queues every object of gvk's kind, when it is watched.
func (w *Watches) enqueueKind(ctx context.Context, gvk schema.GroupVersionKind) {
	w.mu.Lock()
	k, ok := w.kinds[gvk.GroupKind()]
	w.mu.Unlock()
	if ok {
		w.enqueueList(ctx, k.gvk, "")
	}
}

func (w *Watches) enqueueNamespace(ctx context.Context, namespace string) {
	w.mu.Lock()
	var kinds []schema.GroupVersionKind
	for _, k := range w.kinds {
		if k.namespaced {
			kinds = append(kinds, k.gvk)
		}
	}
	w.mu.Unlock()
	for _, gvk := range kinds {
		w.enqueueList(ctx, gvk, namespace)
	}
}

// enqueueList queues every object of gvk's kind, in namespace when it is
// not empty.
func (w *Watches) enqueueList(ctx context.Context, gvk schema.GroupVersionKind, namespace string) {
	err := w.EachCached(ctx, gvk, namespace, func(o *metav1.PartialObjectMetadata) error {
		w.wakes.Now(wakeup.Key{GVK: gvk, NamespacedName: types.NamespacedName{Namespace: o.Namespace, Name: o.Name}})
		return nil
	})
	if err != nil {
		logf.FromContext(ctx).Error(err, "list from cache to re-plan", "kind", gvk.String())
	}
}

// EachCached calls fn with each watched object of gvk's kind, in
// namespace when it is not empty, until fn fails. What fn gets is valid
// during the call only, and read only: at 100,000 objects, a copy of each
// would be megabytes of garbage for each policy's status refresh.
func (w *Watches) EachCached(ctx context.Context, gvk schema.GroupVersionKind, namespace string, fn func(*metav1.PartialObjectMetadata) error) error {
	if s := w.store(gvk.GroupKind()); s != nil {
		return s.each(ctx, namespace, fn)
	}
	// No records (unit tests, without an API server): the client's list.
	ctx, cancel := context.WithTimeout(ctx, ListTimeout)
	defer cancel()
	list := kube.NewMetadataList(gvk)
	if err := w.reader.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list %s from cache: %w", gvk.Kind, err)
	}
	for i := range list.Items {
		if err := fn(&list.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

// PolicyChanges re-plans the objects of the kinds a policy names (before
// and after an edit) when its spec changes, it appears or it goes away.
func (w *Watches) PolicyChanges() handler.TypedEventHandler[*v1alpha1.TimeoutPolicy, wakeup.Key] {
	return handler.TypedFuncs[*v1alpha1.TimeoutPolicy, wakeup.Key]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[*v1alpha1.TimeoutPolicy], _ Queue) {
			w.enqueueKind(ctx, match.TargetGVK(e.Object))
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[*v1alpha1.TimeoutPolicy], _ Queue) {
			if e.ObjectOld.Generation == e.ObjectNew.Generation && e.ObjectOld.DeletionTimestamp.Equal(e.ObjectNew.DeletionTimestamp) {
				return
			}
			old, cur := match.TargetGVK(e.ObjectOld), match.TargetGVK(e.ObjectNew)
			w.enqueueKind(ctx, cur)
			if old.GroupKind() != cur.GroupKind() {
				w.enqueueKind(ctx, old)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[*v1alpha1.TimeoutPolicy], _ Queue) {
			w.enqueueKind(ctx, match.TargetGVK(e.Object))
		},
	}
}
