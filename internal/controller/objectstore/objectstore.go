// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package objectstore

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// objectStore holds a record of each object of one governed kind, in
// place of an informer's copy of its metadata. client-go's Reflector
// keeps it current, as it keeps an informer's: a list (streamed, where
// the API server can), then a watch from its resourceVersion, resumed
// where it broke, and a new list after a 410 Gone; a restart starts with
// an empty store and a list.
//
// It says which objects to look at: each one added or deleted, and each
// one changed in what can change a plan (changed), once, after the store
// holds the change. A new list looks at what it adds, changes or no longer
// holds, and at nothing else, so that a relist amid a burst of expiries
// neither drops nor repeats a wake-up.
type objectStore struct {
	gvk      schema.GroupVersionKind
	resource schema.GroupResource
	// look is called, outside the lock, with each object to look at.
	look func(types.NamespacedName)

	mu sync.RWMutex
	// objects are the records by storeKey.
	objects map[string]*record
	// synced is closed once the first list is in.
	synced   chan struct{}
	syncOnce sync.Once
}

func newObjectStore(gvk schema.GroupVersionKind, resource schema.GroupResource, look func(types.NamespacedName)) *objectStore {
	return &objectStore{gvk: gvk, resource: resource, look: look,
		objects: map[string]*record{}, synced: make(chan struct{})}
}

var (
	_ toolscache.ReflectorStore    = &objectStore{}
	_ toolscache.TransformingStore = &objectStore{}
)

// reflector returns the Reflector that keeps s current through lw.
func (s *objectStore) reflector(lw toolscache.ListerWatcher) *toolscache.Reflector {
	return toolscache.NewReflectorWithOptions(lw, &metav1.PartialObjectMetadata{}, s,
		toolscache.ReflectorOptions{Name: "records of " + s.gvk.Kind, TypeDescription: s.gvk.String()})
}

// metadataListWatch lists and watches the metadata of resource.
func metadataListWatch(md metadata.Interface, resource schema.GroupVersionResource) *toolscache.ListWatch {
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return md.Resource(resource).List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return md.Resource(resource).Watch(ctx, opts)
		},
	}
}

// Transformer makes records of the objects the Reflector streams at
// start, before it hands them over: it never holds them whole.
func (s *objectStore) Transformer() toolscache.TransformFunc {
	return func(o any) (any, error) { return toRecord(o) }
}

func toRecord(o any) (*record, error) {
	switch o := o.(type) {
	case *record:
		return o, nil
	case *metav1.PartialObjectMetadata:
		return newRecord(o), nil
	case toolscache.DeletedFinalStateUnknown:
		return toRecord(o.Obj)
	}
	return nil, fmt.Errorf("a store of records got a %T", o)
}

// Add adds or replaces an object's record.
func (s *objectStore) Add(obj any) error { return s.put(obj) }

// Update adds or replaces an object's record.
func (s *objectStore) Update(obj any) error { return s.put(obj) }

func (s *objectStore) put(obj any) error {
	r, err := toRecord(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	old := s.objects[r.storeKey()]
	if old != nil {
		r.wake = old.wake
	}
	s.objects[r.storeKey()] = r
	s.mu.Unlock()
	if old == nil || changed(old, r) {
		s.look(r.key())
	}
	return nil
}

// Delete forgets an object.
func (s *objectStore) Delete(obj any) error {
	r, err := toRecord(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.objects, r.storeKey())
	s.mu.Unlock()
	s.look(r.key())
	return nil
}

// Replace makes list the store's contents: a list at start, after a 410
// Gone or after a watch that could not be resumed.
func (s *objectStore) Replace(list []any, _ string) error {
	fresh := make(map[string]*record, len(list))
	for _, o := range list {
		r, err := toRecord(o)
		if err != nil {
			return err
		}
		fresh[r.storeKey()] = r
	}
	var looks []types.NamespacedName
	s.mu.Lock()
	for key, r := range fresh {
		old := s.objects[key]
		if old != nil {
			r.wake = old.wake
		}
		if old == nil || changed(old, r) {
			looks = append(looks, r.key())
		}
	}
	for key, old := range s.objects {
		if _, ok := fresh[key]; !ok {
			looks = append(looks, old.key())
		}
	}
	s.objects = fresh
	s.mu.Unlock()
	s.syncOnce.Do(func() { close(s.synced) })
	for _, key := range looks {
		s.look(key)
	}
	return nil
}

// wakeOf returns the Wake of the object under key, made on first use, or
// nil when the store does not hold it. The record's versions to come
// carry the same one (put, Replace). It is the wake-up queue's locator
// (wakeup.Queue.Locate): the queue calls it under its own lock, and the
// store never calls the queue under its lock.
func (s *objectStore) wakeOf(key types.NamespacedName) *wakeup.Wake {
	s.mu.RLock()
	r := s.objects[storeKey(key)]
	var e *wakeup.Wake
	if r != nil {
		e = r.wake
	}
	s.mu.RUnlock()
	if r == nil || e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r = s.objects[storeKey(key)]
	if r == nil {
		return nil
	}
	if r.wake == nil {
		r.wake = wakeup.NewWake()
	}
	return r.wake
}

// The collector's targets (GOGC), unless GOGC is set in the environment.
// Most of the heap is records, which live as long as their objects:
// collecting when the heap has grown by half (runningGCPercent) rather
// than doubled costs some CPU; the peak at 100,000 objects, which came
// after the start, fell from 130.6 to 101.9 MiB. While a store takes its
// first list, the target is lower still (listingGCPercent): each object
// arrives whole, kubectl's last-applied-configuration included, and is
// garbage as soon as it is a record (docs/performance.md).
const (
	runningGCPercent = 50
	listingGCPercent = 25
)

// SetGCPercent sets the collector's target to runningGCPercent, unless
// GOGC is set. The controller calls it once, at start.
func SetGCPercent() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(runningGCPercent)
	}
}

// listing lowers the collector's target to listingGCPercent while any
// store takes its first list, unless GOGC is set, and puts it back after.
var listing gcWhileListing

type gcWhileListing struct {
	mu   sync.Mutex
	n    int
	prev int
}

// during lowers the target until listed returns.
func (g *gcWhileListing) during(listed func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	g.mu.Lock()
	if g.n == 0 {
		g.prev = debug.SetGCPercent(listingGCPercent)
	}
	g.n++
	g.mu.Unlock()
	go func() {
		listed()
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.n--; g.n == 0 {
			debug.SetGCPercent(g.prev)
		}
	}()
}

// Resync does nothing: there is no periodic resync.
func (s *objectStore) Resync() error { return nil }

// hasSynced reports whether the first list is in.
func (s *objectStore) hasSynced() bool {
	select {
	case <-s.synced:
		return true
	default:
		return false
	}
}

// wait waits for the first list, at most listTimeout: an object is not
// reported missing before the store could know it.
func (s *objectStore) wait(ctx context.Context) error {
	if s.hasSynced() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, ListTimeout)
	defer cancel()
	select {
	case <-s.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the %s are not listed yet: %w", s.resource, ctx.Err())
	}
}

// get writes the record of the object under key into out, or returns
// NotFound.
func (s *objectStore) get(ctx context.Context, key types.NamespacedName, out *metav1.PartialObjectMetadata) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	s.mu.RLock()
	r := s.objects[storeKey(key)]
	s.mu.RUnlock()
	if r == nil {
		return apierrors.NewNotFound(s.resource, key.Name)
	}
	r.into(out.GroupVersionKind(), out)
	return nil
}

// each calls fn with each object, in namespace when it is not empty,
// until fn fails. The metadata fn gets is valid during the call only, and
// read only.
func (s *objectStore) each(ctx context.Context, namespace string, fn func(*metav1.PartialObjectMetadata) error) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	s.mu.RLock()
	records := make([]*record, 0, len(s.objects))
	for _, r := range s.objects {
		if namespace == "" || r.namespace() == namespace {
			records = append(records, r)
		}
	}
	s.mu.RUnlock()
	var o metav1.PartialObjectMetadata
	for _, r := range records {
		r.view(s.gvk, &o)
		if err := fn(&o); err != nil {
			return err
		}
	}
	return nil
}

// RecordReader reads governed objects' metadata from their records, and
// everything else through the client it wraps.
type RecordReader struct {
	client.Client
	Watches *Watches
}

// Get reads obj from its record when obj is the metadata of a governed
// kind.
func (c RecordReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		if s := c.Watches.store(m.GroupVersionKind().GroupKind()); s != nil {
			return s.get(ctx, key, m)
		}
	}
	return c.Client.Get(ctx, key, obj, opts...)
}
