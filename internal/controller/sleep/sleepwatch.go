// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package sleep

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/amphitheatre-app/timeout-controller/internal/controller/objectstore"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// markedStores are the stores of the running process's watches of marked
// workloads, for the gauge below.
var markedStores atomic.Pointer[[]toolscache.Store]

func init() {
	ctrlmetrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "timeout_controller_sleep_watched_workloads",
		Help: "Workloads the controller watches for a scale-up by someone else: those a sleep scaled to zero, which carry its label. Other workloads are neither listed nor watched.",
	}, func() float64 {
		n := 0
		if stores := markedStores.Load(); stores != nil {
			for _, s := range *stores {
				n += len(s.ListKeys())
			}
		}
		return float64(n)
	}))
}

// MarkedWatch watches, as metadata, the workloads that carry the sleep's
// label (expiry.LabelAsleep): the API server sends it those alone, so that
// what it holds and costs grows with the workloads asleep, not with the
// cluster's. A new generation of one (its spec changed: someone scaled it
// up) brings a look at the sleeping object that owns its namespace, which
// sees the scale-up and wakes it (observeWake). So does one that loses
// the label or goes, unless a wake of this process removed it.
type MarkedWatch struct {
	// watches are the object controller's watches of governed objects,
	// which this one joins.
	watches workloadWatches
	// look queues a look at the objects that own namespace ns; owner is
	// the UID the label names.
	look func(ctx context.Context, ns string, owner types.UID)
	// workloads says the watch was started; workloadsOnce serializes
	// starting it.
	workloads     bool
	workloadsOnce sync.Mutex
	// unmarking holds the UIDs of the workloads whose label a wake is
	// removing: the removal is no news.
	unmarking sync.Map
	// running says the watch runs, and will see the removals.
	running atomic.Bool
	// checks are what the watch lets a look at a sleeping object skip.
	checks wakeChecks
}

// wakeChecks remember, per sleeping object (by UID), that a look read its
// workloads and found none scaled up by someone else, and how much news
// the watch had brought about them by then: a later look with no news
// since need not read them again (observeWake). News is any change the
// watch sees to one of the object's marked workloads; counting it, rather
// than clearing a mark, keeps news that comes while a look is reading.
type wakeChecks struct {
	mu sync.Mutex
	m  map[types.UID]*wakeCheck
}

type wakeCheck struct {
	news      uint64
	checked   bool
	checkedAt uint64
}

// wakeCheckLimit bounds the objects remembered: past it all are
// forgotten, which costs a read each, never a missed wake.
const wakeCheckLimit = 100_000

func (c *wakeChecks) entry(uid types.UID) *wakeCheck {
	if c.m == nil || len(c.m) >= wakeCheckLimit {
		c.m = map[types.UID]*wakeCheck{}
	}
	e := c.m[uid]
	if e == nil {
		e = &wakeCheck{}
		c.m[uid] = e
	}
	return e
}

// news notes a change to a workload of the object uid.
func (c *wakeChecks) news(uid types.UID) {
	c.mu.Lock()
	c.entry(uid).news++
	c.mu.Unlock()
}

// begin returns the news count a read of the object's workloads starting
// now will have seen; done notes that it found no scale-up.
func (c *wakeChecks) begin(uid types.UID) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entry(uid).news
}

func (c *wakeChecks) done(uid types.UID, at uint64) {
	c.mu.Lock()
	e := c.entry(uid)
	e.checked, e.checkedAt = true, at
	c.mu.Unlock()
}

// fresh reports whether a read found no scale-up and no news came since.
func (c *wakeChecks) fresh(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[uid]
	return ok && e.checked && e.checkedAt == e.news
}

// drop forgets the object: it woke.
func (c *wakeChecks) drop(uid types.UID) {
	c.mu.Lock()
	delete(c.m, uid)
	c.mu.Unlock()
}

// unchanged reports whether a look at the sleeping object uid may skip
// reading its workloads: the watch runs, and has seen no change to them
// since a read found none scaled up.
func (m *MarkedWatch) unchanged(uid types.UID) bool {
	return m != nil && m.running.Load() && m.checks.fresh(uid)
}

// reading returns the function that notes a read of the workloads of uid,
// begun now, that found none scaled up.
func (m *MarkedWatch) reading(uid types.UID) (found func()) {
	if m == nil {
		return func() {}
	}
	at := m.checks.begin(uid)
	return func() { m.checks.done(uid, at) }
}

// woke forgets what the watch noted about uid.
func (m *MarkedWatch) woke(uid types.UID) {
	if m != nil {
		m.checks.drop(uid)
	}
}

// informer returns the informer of the marked workloads of resource.
func (m *MarkedWatch) informer(resource schema.GroupVersionResource) (toolscache.SharedIndexInformer, error) {
	inf := metadatainformer.NewFilteredMetadataInformer(m.watches.MetadataClient(), resource, metav1.NamespaceAll, 0, toolscache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = expiry.LabelAsleep }).Informer()
	if err := inf.SetTransform(objectstore.CacheTransform); err != nil {
		return nil, err
	}
	ctx := context.Background()
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		// Added: labelled by a sleep, which scaled it down in the same
		// write, or listed at start, when every governed object is looked
		// at anyway. Either is news, not worth a look: the next look at
		// its owner reads the workloads again.
		AddFunc: func(obj any) {
			if a, ok := obj.(*metav1.PartialObjectMetadata); ok {
				m.checks.news(types.UID(a.Labels[expiry.LabelAsleep]))
			}
		},
		UpdateFunc: func(before, after any) {
			b, okB := before.(*metav1.PartialObjectMetadata)
			a, okA := after.(*metav1.PartialObjectMetadata)
			if okB && okA && a.Generation != b.Generation {
				m.checks.news(types.UID(a.Labels[expiry.LabelAsleep]))
				m.look(ctx, a.Namespace, types.UID(a.Labels[expiry.LabelAsleep]))
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			o, ok := obj.(*metav1.PartialObjectMetadata)
			if !ok {
				return
			}
			if _, ours := m.unmarking.LoadAndDelete(o.UID); ours {
				return
			}
			m.checks.news(types.UID(o.Labels[expiry.LabelAsleep]))
			m.look(ctx, o.Namespace, types.UID(o.Labels[expiry.LabelAsleep]))
		},
	})
	return inf, err
}

// unmark says that a wake is about to remove the label of the workload
// uid; done says whether it did (else the removal is forgotten).
func (m *MarkedWatch) unmark(uid types.UID) (done func(ok bool)) {
	if m == nil || !m.running.Load() {
		return func(bool) {}
	}
	m.unmarking.Store(uid, struct{}{})
	return func(ok bool) {
		if !ok {
			m.unmarking.Delete(uid)
		}
	}
}

// workloadWatches is what the watch of marked workloads needs of the
// object controller's watches: their metadata client, a way to add a
// source to the object controller, the version a kind is watched at, and
// a look at an object now.
type workloadWatches interface {
	MetadataClient() metadata.Interface
	Watch(src source.TypedSource[wakeup.Key]) error
	WatchedKind(gk schema.GroupKind) (gvk schema.GroupVersionKind, namespaced, ok bool)
	LookNow(key wakeup.Key)
}

// NewMarkedWatch returns the watch of marked workloads that joins w.
func NewMarkedWatch(w workloadWatches) *MarkedWatch {
	m := &MarkedWatch{watches: w}
	m.look = m.lookAtOwners
	return m
}

// EnsureWorkloads starts, the first time a policy puts objects to sleep,
// the watch of the workloads a sleep scaled down.
func (m *MarkedWatch) EnsureWorkloads() error {
	if m == nil {
		return nil
	}
	m.workloadsOnce.Lock()
	defer m.workloadsOnce.Unlock()
	if m.workloads || m.watches.MetadataClient() == nil {
		return nil
	}
	stores := make([]toolscache.Store, 0, len(workloadKinds))
	for _, gvk := range workloadKinds {
		resource := gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind) + "s")
		inf, err := m.informer(resource)
		if err != nil {
			return fmt.Errorf("watch the %s a sleep scaled down: %w", resource.Resource, err)
		}
		src := source.TypedFunc[wakeup.Key](func(ctx context.Context, _ objectstore.Queue) error {
			go inf.RunWithContext(ctx)
			return nil
		})
		if err := m.watches.Watch(src); err != nil {
			return fmt.Errorf("watch the %s a sleep scaled down: %w", resource.Resource, err)
		}
		stores = append(stores, inf.GetStore())
	}
	markedStores.Store(&stores)
	m.running.Store(true)
	m.workloads = true
	return nil
}

// lookAtOwners queues the objects that own namespace ns: the one whose
// UID is owner, when one is, else all of them. The namespace is read from
// the API server, since the cache keeps only the UIDs of its owners.
func (m *MarkedWatch) lookAtOwners(ctx context.Context, ns string, owner types.UID) {
	ctx, cancel := context.WithTimeout(ctx, objectstore.ListTimeout)
	defer cancel()
	obj, err := m.watches.MetadataClient().Resource(corev1.SchemeGroupVersion.WithResource("namespaces")).Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		logf.FromContext(ctx).V(1).Info("the owners of a sleeping workload's namespace are not known", "namespace", ns, "error", err.Error())
		return
	}
	refs := obj.OwnerReferences
	for _, ref := range refs {
		if ref.UID == owner {
			refs = []metav1.OwnerReference{ref}
			break
		}
	}
	for _, ref := range refs {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			continue
		}
		gvk, namespaced, ok := m.watches.WatchedKind(schema.GroupKind{Group: gv.Group, Kind: ref.Kind})
		if ok && !namespaced {
			m.watches.LookNow(wakeup.Key{GVK: gvk, NamespacedName: types.NamespacedName{Name: ref.Name}})
		}
	}
}
