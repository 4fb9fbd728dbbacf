// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"container/heap"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// wakeups holds when each governed object is to be looked at next, in
// place of a RequeueAfter in controller-runtime's work queue, and hands
// the work queue only what is due, a few at a time.
//
// Why not RequeueAfter: every governed object waits for its next reminder
// or its expiry, so every one of them would sit in controller-runtime's
// priority queue, at about 540 bytes each in a heap profile at 10k (the
// queue's item, its readiness time, its map and B-tree entries, the queue
// metrics' map), and the
// queue's maps keep the size of their peak, which at start is every
// object at once. Here an object costs one 64-byte entry and its map slot,
// and the work queue never holds more than a few times the workers.
//
// The semantics are the work queue's: one pending look per object (the
// earliest asked for); a look asked for while the object is being
// reconciled comes after that reconcile; a reconcile's result replaces
// what was pending before it started. Durations are in real time, as
// RequeueAfter's are, whatever clock the reconciler plans with.
type wakeups struct {
	clock clock.WithTicker
	// start is when the offsets in the entries count from.
	start time.Time
	// bound is how many objects may be in the work queue or in a
	// reconcile at once.
	bound int

	mu    sync.Mutex
	kinds map[schema.GroupVersionKind]int32
	gvks  []schema.GroupVersionKind
	// pending is every object with a look to come, in the order due.
	pending wakeHeap
	byKey   map[wakeKey]*wake
	// handed are the objects given to the work queue whose reconcile has
	// not finished; again is when each asked to be looked at again
	// meanwhile.
	handed map[wakeKey]struct{}
	again  map[wakeKey]time.Duration
	seq    uint64
	kick   chan struct{}
}

// wakeKey is Key with its kind interned: one queue serves few kinds.
type wakeKey struct {
	kind int32
	types.NamespacedName
}

// wake is one object's next look: at is an offset from wakeups.start;
// seq keeps the order in which looks due at the same moment were asked
// for.
type wake struct {
	at    time.Duration
	seq   uint64
	key   wakeKey
	index int
}

func newWakeups(clk clock.WithTicker, bound int) *wakeups {
	return &wakeups{
		clock:  clk,
		start:  clk.Now(),
		bound:  max(bound, 1),
		kinds:  map[schema.GroupVersionKind]int32{},
		byKey:  map[wakeKey]*wake{},
		handed: map[wakeKey]struct{}{},
		again:  map[wakeKey]time.Duration{},
		kick:   make(chan struct{}, 1),
	}
}

// Now asks for key to be looked at as soon as possible.
func (w *wakeups) Now(key Key) {
	w.After(key, 0)
}

// After asks for key to be looked at after d, unless an earlier look is
// pending already.
func (w *wakeups) After(key Key, d time.Duration) {
	w.mu.Lock()
	at := w.clock.Since(w.start) + max(d, 0)
	k := w.intern(key)
	if _, busy := w.handed[k]; busy {
		if prev, ok := w.again[k]; !ok || at < prev {
			w.again[k] = at
		}
	} else {
		w.pushLocked(k, at)
	}
	w.mu.Unlock()
	w.signal()
}

// Scheduled returns how many objects have a look to come, handed to the
// work queue or not.
func (w *wakeups) Scheduled() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.byKey) + len(w.handed)
}

// done takes the result of key's reconcile: what it asks for replaces what
// was pending before the reconcile started, and whatever was asked for
// during it still comes. A failed reconcile is retried by the work queue's
// rate limiter, as before, and asks nothing here.
func (w *wakeups) done(key Key, res ctrl.Result, failed bool) {
	w.mu.Lock()
	k := w.intern(key)
	delete(w.handed, k)
	at, ok := w.again[k]
	delete(w.again, k)
	if !failed && (res.RequeueAfter > 0 || res.Requeue) { //nolint:staticcheck // Requeue is still a result some paths give.
		if next := w.clock.Since(w.start) + res.RequeueAfter; !ok || next < at {
			at, ok = next, true
		}
	}
	if ok {
		w.pushLocked(k, at)
	}
	w.mu.Unlock()
	w.signal()
}

// Start hands due objects to the work queue until ctx is done. It is the
// object controller's source: it runs on the leader, with its workers.
func (w *wakeups) Start(ctx context.Context, q queue) error {
	objectLooks.current.Store(w)
	go w.run(ctx, q)
	return nil
}

func (w *wakeups) run(ctx context.Context, q queue) {
	for {
		due, wait := w.takeDue()
		for _, key := range due {
			q.Add(key)
		}
		var fire <-chan time.Time
		var timer clock.Timer
		if wait > 0 {
			timer = w.clock.NewTimer(wait)
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-w.kick:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// takeDue takes the objects due now, as many as the bound lets through,
// and says how long until the next one is due (0 when there is none, or
// when the bound holds it back: a finished reconcile kicks).
func (w *wakeups) takeDue() ([]Key, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Since(w.start)
	var due []Key
	for len(w.pending) > 0 && len(w.handed) < w.bound {
		next := w.pending[0]
		if next.at > now {
			return due, next.at - now
		}
		heap.Pop(&w.pending)
		delete(w.byKey, next.key)
		w.handed[next.key] = struct{}{}
		due = append(due, Key{GVK: w.gvks[next.key.kind], NamespacedName: next.key.NamespacedName})
	}
	return due, 0
}

func (w *wakeups) pushLocked(k wakeKey, at time.Duration) {
	if e, ok := w.byKey[k]; ok {
		if at < e.at {
			e.at = at
			heap.Fix(&w.pending, e.index)
		}
		return
	}
	w.seq++
	e := &wake{at: at, seq: w.seq, key: k}
	w.byKey[k] = e
	heap.Push(&w.pending, e)
}

func (w *wakeups) intern(key Key) wakeKey {
	i, ok := w.kinds[key.GVK]
	if !ok {
		i = int32(len(w.gvks))
		w.kinds[key.GVK] = i
		w.gvks = append(w.gvks, key.GVK)
	}
	return wakeKey{kind: i, NamespacedName: key.NamespacedName}
}

func (w *wakeups) signal() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// wakeHeap orders the pending looks by when they are due, then by when
// they were asked for.
type wakeHeap []*wake

func (h wakeHeap) Len() int { return len(h) }
func (h wakeHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h wakeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *wakeHeap) Push(x any) {
	e := x.(*wake)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *wakeHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// wakingReconciler runs the object reconciler for the work queue and
// keeps its next look in wakeups instead of in the queue.
type wakingReconciler struct {
	inner reconcile.TypedReconciler[Key]
	wakes *wakeups
}

func (r wakingReconciler) Reconcile(ctx context.Context, key Key) (res ctrl.Result, err error) {
	finished := false
	defer func() {
		if !finished {
			// A panic: the work queue retries it as a failure.
			r.wakes.done(key, ctrl.Result{}, true)
		}
	}()
	res, err = r.inner.Reconcile(ctx, key)
	finished = true
	r.wakes.done(key, res, err != nil)
	if err != nil {
		return res, err
	}
	return ctrl.Result{}, nil
}

// Due returns how many objects are due and waiting for room in the work
// queue: the backlog, which the work queue's depth no longer shows.
func (w *wakeups) Due() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Since(w.start)
	// The due entries are the top of the heap: walk down while due.
	n, stack := 0, []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(w.pending) || w.pending[i].at > now {
			continue
		}
		n++
		stack = append(stack, 2*i+1, 2*i+2)
	}
	return n
}

// wakeupsCollector reports the looks to come of the object controller
// running in this process (on the leader; none on a standby).
type wakeupsCollector struct {
	current   atomic.Pointer[wakeups]
	scheduled *prometheus.Desc
	due       *prometheus.Desc
}

var objectLooks = &wakeupsCollector{
	scheduled: prometheus.NewDesc("timeout_controller_objects_scheduled",
		"Governed objects with a look to come (a reminder, an expiry, a retry), on the leader.", nil, nil),
	due: prometheus.NewDesc("timeout_controller_objects_due",
		"Governed objects due for a look and waiting for a worker: the backlog.", nil, nil),
}

func (c *wakeupsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.scheduled
	ch <- c.due
}

func (c *wakeupsCollector) Collect(ch chan<- prometheus.Metric) {
	var scheduled, due int
	if w := c.current.Load(); w != nil {
		scheduled, due = w.Scheduled(), w.Due()
	}
	ch <- prometheus.MustNewConstMetric(c.scheduled, prometheus.GaugeValue, float64(scheduled))
	ch <- prometheus.MustNewConstMetric(c.due, prometheus.GaugeValue, float64(due))
}
