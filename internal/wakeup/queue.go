// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package wakeup times each governed object's next look and hands the work queue what is due.
package wakeup

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Key identifies a governed object in the work queue: one queue serves
// every target kind.
type Key struct {
	GVK schema.GroupVersionKind
	types.NamespacedName
}

// String is the kind and the namespaced name, as logs show them.
func (k Key) String() string {
	return k.GVK.Kind + "/" + k.NamespacedName.String()
}

// Queue holds when each governed object is to be looked at next, in
// place of a RequeueAfter in controller-runtime's work queue, and hands
// the work queue only what is due, a few at a time.
//
// Why not RequeueAfter: every governed object waits for its next reminder
// or its expiry, so every one of them would sit in controller-runtime's
// priority queue, at about 540 bytes each in a heap profile at 10k (the
// queue's item, its readiness time, its map and B-tree entries, the queue
// metrics' map), and the
// queue's maps keep the size of their peak, which at start is every
// object at once. Here an object costs one 64-byte entry (a Wake), which
// the store of its kind keeps with the object's record when it has one
// (Locate), and the work queue never holds more than a few times the
// workers.
//
// The semantics are the work queue's: one pending look per object (the
// earliest asked for); a look asked for while the object is being
// reconciled comes after that reconcile; a reconcile's result replaces
// what was pending before it started. Durations are in real time, as
// RequeueAfter's are, whatever clock the reconciler plans with.
type Queue struct {
	clock clock.WithTicker
	// start is when the offsets in the entries count from.
	start time.Time
	// bound is how many objects may be in the work queue or in a
	// reconcile at once.
	bound int

	mu    sync.Mutex
	kinds map[schema.GroupVersionKind]int32
	gvks  []schema.GroupVersionKind
	// locate finds the Wake of an object of a kind whose store keeps
	// them, by the kind's index in gvks.
	locate map[int32]func(types.NamespacedName) *Wake
	// pending is every object with a look to come, in the order due.
	pending wakeHeap
	// loose are the Wakes that no store keeps: of a kind without one, or
	// of an object its store no longer holds (deleted).
	loose map[wakeKey]*Wake
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

// Wake is one object's next look: at is an offset from Queue.start;
// seq keeps the order in which looks due at the same moment were asked
// for. A store that keeps one for each of its objects (see Locate) makes
// it with NewWake and keeps the same one for as long as it holds the
// object, whatever version of it; only the Queue reads or writes its
// fields, under its lock.
type Wake struct {
	at    time.Duration
	seq   uint64
	key   wakeKey
	index int32
	// loose is set when the Wake is in Queue.loose.
	loose bool
}

// NewWake returns a Wake with no look pending.
func NewWake() *Wake { return &Wake{index: -1} }

// New returns an empty Queue that times the looks with clk and lets
// bound objects at most be in the work queue or in a reconcile at once.
func New(clk clock.WithTicker, bound int) *Queue {
	return &Queue{
		clock:  clk,
		start:  clk.Now(),
		bound:  max(bound, 1),
		kinds:  map[schema.GroupVersionKind]int32{},
		locate: map[int32]func(types.NamespacedName) *Wake{},
		loose:  map[wakeKey]*Wake{},
		handed: map[wakeKey]struct{}{},
		again:  map[wakeKey]time.Duration{},
		kick:   make(chan struct{}, 1),
	}
}

// Locate has the Queue keep the looks of gvk's objects in the Wakes that
// find returns, and in its own map only for a name find returns nil for.
// find is called with the Queue's lock held: it must not call the Queue.
// It returns the same Wake for an object for as long as it returns one.
func (w *Queue) Locate(gvk schema.GroupVersionKind, find func(types.NamespacedName) *Wake) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.locate[w.intern(Key{GVK: gvk}).kind] = find
}

// Now asks for key to be looked at as soon as possible.
func (w *Queue) Now(key Key) {
	w.After(key, 0)
}

// After asks for key to be looked at after d, unless an earlier look is
// pending already.
func (w *Queue) After(key Key, d time.Duration) {
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
func (w *Queue) Scheduled() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending) + len(w.handed)
}

// done takes the result of key's reconcile: what it asks for replaces what
// was pending before the reconcile started, and whatever was asked for
// during it still comes. A failed reconcile is retried by the work queue's
// rate limiter, as before, and asks nothing here.
func (w *Queue) done(key Key, res ctrl.Result, failed bool) {
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

// Start hands due objects to q until ctx is done. It is the object
// controller's source: it runs on the leader, with its workers.
func (w *Queue) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[Key]) error {
	go w.run(ctx, q)
	return nil
}

func (w *Queue) run(ctx context.Context, q workqueue.TypedRateLimitingInterface[Key]) {
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
func (w *Queue) takeDue() ([]Key, time.Duration) {
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
		k := next.key
		if next.loose {
			next.loose = false
			delete(w.loose, k)
		}
		if _, busy := w.handed[k]; busy {
			// A second Wake of an object handed already: one its store let
			// go (the object deleted, then made again under its name).
			if prev, ok := w.again[k]; !ok || next.at < prev {
				w.again[k] = next.at
			}
			continue
		}
		w.handed[k] = struct{}{}
		due = append(due, Key{GVK: w.gvks[k.kind], NamespacedName: k.NamespacedName})
	}
	return due, 0
}

func (w *Queue) pushLocked(k wakeKey, at time.Duration) {
	e := w.wakeLocked(k)
	if e.index >= 0 {
		if at < e.at {
			e.at = at
			heap.Fix(&w.pending, int(e.index))
		}
		return
	}
	w.seq++
	e.at, e.seq, e.key = at, w.seq, k
	heap.Push(&w.pending, e)
}

// wakeLocked returns k's Wake: the one its store keeps, or else a loose
// one.
func (w *Queue) wakeLocked(k wakeKey) *Wake {
	if find := w.locate[k.kind]; find != nil {
		if e := find(k.NamespacedName); e != nil {
			return e
		}
	}
	e, ok := w.loose[k]
	if !ok {
		e = NewWake()
		e.loose = true
		w.loose[k] = e
	}
	return e
}

func (w *Queue) intern(key Key) wakeKey {
	i, ok := w.kinds[key.GVK]
	if !ok {
		i = int32(len(w.gvks))
		w.kinds[key.GVK] = i
		w.gvks = append(w.gvks, key.GVK)
	}
	return wakeKey{kind: i, NamespacedName: key.NamespacedName}
}

func (w *Queue) signal() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// wakeHeap orders the pending looks by when they are due, then by when
// they were asked for.
type wakeHeap []*Wake

func (h wakeHeap) Len() int { return len(h) }
func (h wakeHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h wakeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = int32(i), int32(j) //nolint:gosec // far fewer than 2^31 objects
}
func (h *wakeHeap) Push(x any) {
	e := x.(*Wake)
	e.index = int32(len(*h)) //nolint:gosec // idem
	*h = append(*h, e)
}
func (h *wakeHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*h = old[:len(old)-1]
	return e
}

// Reconciler runs inner for the work queue and keeps the next look that
// each reconcile asks for in w instead of in the work queue.
func (w *Queue) Reconciler(inner reconcile.TypedReconciler[Key]) reconcile.TypedReconciler[Key] {
	return wakingReconciler{inner: inner, wakes: w}
}

type wakingReconciler struct {
	inner reconcile.TypedReconciler[Key]
	wakes *Queue
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
func (w *Queue) Due() int {
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
