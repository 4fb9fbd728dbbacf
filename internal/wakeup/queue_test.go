// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package wakeup

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

var playbookGVK = schema.GroupVersionKind{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook"}

func wakeKeyOf(name string) Key {
	return Key{GVK: playbookGVK, NamespacedName: types.NamespacedName{Name: name}}
}

// names returns the names of keys, in order.
func names(keys []Key) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.Name)
	}
	return out
}

func TestWakeupsHandOutWhatIsDueInTheOrderItIsDue(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	w := New(clk, 10)
	w.After(wakeKeyOf("c"), 3*time.Second)
	w.After(wakeKeyOf("a"), time.Second)
	w.After(wakeKeyOf("b"), 2*time.Second)
	w.Now(wakeKeyOf("now"))

	due, wait := w.takeDue()
	if got := names(due); !slices.Equal(got, []string{"now"}) || wait != time.Second {
		t.Fatalf("at 0s: handed %v, next in %v; want [now], next in 1s", got, wait)
	}
	clk.Step(time.Second - time.Nanosecond)
	if due, _ := w.takeDue(); len(due) != 0 {
		t.Fatalf("a nanosecond before a's time: handed %v, want nothing", names(due))
	}
	clk.Step(5 * time.Second)
	due, wait = w.takeDue()
	if got := names(due); !slices.Equal(got, []string{"a", "b", "c"}) || wait != 0 {
		t.Fatalf("after 5s: handed %v, next in %v; want [a b c], nothing left", got, wait)
	}
}

func TestWakeupsKeepTheEarliestLookOfAnObject(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	w := New(clk, 10)
	w.After(wakeKeyOf("x"), time.Hour)
	w.After(wakeKeyOf("x"), time.Minute)
	w.After(wakeKeyOf("x"), 2*time.Hour)
	if n := w.Scheduled(); n != 1 {
		t.Fatalf("scheduled %d looks for one object, want 1", n)
	}
	if due, wait := w.takeDue(); len(due) != 0 || wait != time.Minute {
		t.Fatalf("handed %v, next in %v; want nothing, next in 1m", names(due), wait)
	}
}

func TestWakeupsALookAskedDuringAReconcileComesAfterIt(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	w := New(clk, 10)
	w.Now(wakeKeyOf("x"))
	if due, _ := w.takeDue(); len(due) != 1 {
		t.Fatalf("handed %v, want x", names(due))
	}
	// A watch event while x is reconciled: not handed twice at once.
	w.Now(wakeKeyOf("x"))
	if due, _ := w.takeDue(); len(due) != 0 {
		t.Fatalf("handed %v while x was being reconciled, want nothing", names(due))
	}
	// The reconcile, which began before the event, plans an hour away: the
	// event still brings a look at once.
	w.done(wakeKeyOf("x"), ctrl.Result{RequeueAfter: time.Hour}, false)
	if due, _ := w.takeDue(); !slices.Equal(names(due), []string{"x"}) {
		t.Fatalf("after the reconcile: handed %v, want x (the event's look)", names(due))
	}
}

func TestWakeupsAReconcileReplacesTheLookPendingBeforeIt(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	w := New(clk, 10)
	w.Now(wakeKeyOf("x"))
	w.takeDue()
	w.done(wakeKeyOf("x"), ctrl.Result{RequeueAfter: time.Hour}, false)
	if due, wait := w.takeDue(); len(due) != 0 || wait != time.Hour {
		t.Fatalf("handed %v, next in %v; want nothing, next in 1h", names(due), wait)
	}
	// An edit brings a look, whose reconcile plans later (an extension):
	// the look an hour away, planned before, is gone.
	w.Now(wakeKeyOf("x"))
	w.takeDue()
	w.done(wakeKeyOf("x"), ctrl.Result{RequeueAfter: 2 * time.Hour}, false)
	if due, wait := w.takeDue(); len(due) != 0 || wait != 2*time.Hour {
		t.Fatalf("handed %v, next in %v; want nothing, next in 2h", names(due), wait)
	}
	// And one that plans nothing (the object is gone) leaves nothing.
	clk.Step(2 * time.Hour)
	w.takeDue()
	w.done(wakeKeyOf("x"), ctrl.Result{}, false)
	if n := w.Scheduled(); n != 0 {
		t.Fatalf("%d looks scheduled after a reconcile that asked none, want 0", n)
	}
}

func TestWakeupsLeaveAFailedReconcileToTheQueuesRetry(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	w := New(clk, 10)
	w.Now(wakeKeyOf("x"))
	w.takeDue()
	w.done(wakeKeyOf("x"), ctrl.Result{RequeueAfter: time.Second}, true)
	if n := w.Scheduled(); n != 0 {
		t.Fatalf("%d looks scheduled after a failed reconcile, want 0: the work queue retries it", n)
	}
	// An event during the failed reconcile still brings a look.
	w.Now(wakeKeyOf("y"))
	w.takeDue()
	w.Now(wakeKeyOf("y"))
	w.done(wakeKeyOf("y"), ctrl.Result{}, true)
	if due, _ := w.takeDue(); !slices.Equal(names(due), []string{"y"}) {
		t.Fatalf("handed %v, want y (the event during its failed reconcile)", names(due))
	}
}

func TestWakeupsHandTheQueueNoMoreThanTheBound(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	w := New(clk, 2)
	for _, n := range []string{"a", "b", "c", "d"} {
		w.Now(wakeKeyOf(n))
	}
	due, wait := w.takeDue()
	if !slices.Equal(names(due), []string{"a", "b"}) || wait != 0 {
		t.Fatalf("handed %v (next in %v), want [a b] and no timer: a finished reconcile makes room", names(due), wait)
	}
	if due, _ := w.takeDue(); len(due) != 0 {
		t.Fatalf("handed %v with the bound reached, want nothing", names(due))
	}
	w.After(wakeKeyOf("later"), time.Hour)
	if n := w.Due(); n != 2 {
		t.Fatalf("backlog %d, want 2 (c and d; not later)", n)
	}
	w.done(wakeKeyOf("a"), ctrl.Result{}, false)
	if due, _ := w.takeDue(); !slices.Equal(names(due), []string{"c"}) {
		t.Fatalf("after a finished: handed %v, want [c]", names(due))
	}
	if n := w.Scheduled(); n != 4 {
		t.Fatalf("scheduled %d (b, c in reconciles, d and later waiting), want 4", n)
	}
	if n := w.Due(); n != 1 {
		t.Fatalf("backlog %d, want 1 (d)", n)
	}
}

// recordingQueue is a work queue that records what it is given.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[Key]
	mu    sync.Mutex
	added []string
}

func (q *recordingQueue) Add(k Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.added = append(q.added, k.Name)
}

func (q *recordingQueue) got() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.added)
}

func TestWakeupsFeedTheQueueWhenTheTimeComes(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	w := New(clk, 10)
	q := &recordingQueue{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := w.Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	w.After(wakeKeyOf("later"), time.Minute)
	w.Now(wakeKeyOf("first"))
	fixture.Eventually(t, 5*time.Second, "first handed at once", func() (bool, error) { return slices.Equal(q.got(), []string{"first"}), nil })
	// Wait for the feeder to set its timer before moving the clock.
	fixture.Eventually(t, 5*time.Second, "a timer for the next look", func() (bool, error) { return clk.HasWaiters(), nil })
	clk.Step(time.Minute - time.Second)
	time.Sleep(50 * time.Millisecond) // bounded wait for what must not happen
	if got := q.got(); len(got) != 1 {
		t.Fatalf("a second before its time: queue got %v, want only [first]", got)
	}
	clk.Step(time.Second)
	fixture.Eventually(t, 5*time.Second, "later handed at its time", func() (bool, error) { return slices.Equal(q.got(), []string{"first", "later"}), nil })
}

func TestWakingReconcilerKeepsTheNextLookOutOfTheQueue(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	w := New(clk, 10)
	errBoom := errors.New("boom")
	results := map[string]struct {
		res ctrl.Result
		err error
	}{
		"waits":  {res: ctrl.Result{RequeueAfter: time.Hour}},
		"fails":  {res: ctrl.Result{RequeueAfter: time.Hour}, err: errBoom},
		"panics": {},
	}
	r := w.Reconciler(reconcilerFunc(func(_ context.Context, k Key) (ctrl.Result, error) {
		if k.Name == "panics" {
			panic("boom")
		}
		return results[k.Name].res, results[k.Name].err
	}))
	for name := range results {
		w.Now(wakeKeyOf(name))
	}
	w.takeDue()

	res, err := r.Reconcile(context.Background(), wakeKeyOf("waits"))
	if err != nil || res != (ctrl.Result{}) {
		t.Fatalf("waits: got %+v, %v; want an empty result for the queue", res, err)
	}
	if res, err := r.Reconcile(context.Background(), wakeKeyOf("fails")); !errors.Is(err, errBoom) {
		t.Fatalf("fails: got %+v, %v; want the error passed to the queue", res, err)
	}
	func() {
		defer func() { _ = recover() }()
		_, _ = r.Reconcile(context.Background(), wakeKeyOf("panics"))
	}()
	// Only "waits" has a look to come, an hour away; the others were let
	// go (the queue retries failures), so the bound is free again.
	if due, wait := w.takeDue(); len(due) != 0 || wait != time.Hour || w.Scheduled() != 1 {
		t.Fatalf("handed %v, next in %v, %d scheduled; want nothing, next in 1h, 1 scheduled", names(due), wait, w.Scheduled())
	}
}

type reconcilerFunc func(context.Context, Key) (ctrl.Result, error)

func (f reconcilerFunc) Reconcile(ctx context.Context, k Key) (ctrl.Result, error) { return f(ctx, k) }

// stores stands in for the stores of records: the Wake of each object it
// holds, which Locate hands the Queue.
type stores struct {
	mu    sync.Mutex
	wakes map[string]*Wake
}

func (s *stores) find(name types.NamespacedName) *Wake {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wakes[name.Name]
}

func TestWakeupsOfALocatedKindLiveInTheStoresWakesAndNoMap(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	w := New(clk, 10)
	s := &stores{wakes: map[string]*Wake{"a": NewWake(), "b": NewWake()}}
	w.Locate(playbookGVK, s.find)

	w.After(wakeKeyOf("a"), 2*time.Second)
	w.After(wakeKeyOf("b"), time.Second)
	w.After(wakeKeyOf("a"), time.Second+time.Millisecond)
	// Not held by the store (deleted): a loose Wake.
	w.After(wakeKeyOf("gone"), 3*time.Second)
	if len(w.loose) != 1 || w.loose[w.intern(wakeKeyOf("gone"))] == nil {
		t.Fatalf("loose Wakes %v, want only gone's", w.loose)
	}
	if n := w.Scheduled(); n != 3 {
		t.Fatalf("scheduled %d, want 3", n)
	}
	if s.wakes["a"].index < 0 || s.wakes["a"].at != time.Second+time.Millisecond {
		t.Fatalf("a's Wake %+v: want pending at 1.001s, the earlier look", *s.wakes["a"])
	}
	clk.Step(5 * time.Second)
	due, _ := w.takeDue()
	if got := names(due); !slices.Equal(got, []string{"b", "a", "gone"}) {
		t.Fatalf("handed %v, want [b a gone]", got)
	}
	if len(w.loose) != 0 || s.wakes["a"].index != -1 {
		t.Fatalf("after handing: loose %v, a's index %d; want none, -1", w.loose, s.wakes["a"].index)
	}
	for _, n := range []string{"a", "b", "gone"} {
		w.done(wakeKeyOf(n), ctrl.Result{}, false)
	}
	if n := w.Scheduled(); n != 0 {
		t.Fatalf("scheduled %d after every reconcile asked nothing, want 0", n)
	}
}

// An object deleted and made again under its name while its old Wake is
// still pending has two Wakes for a moment; it is still handed to the work
// queue once at a time, and looked at again after.
func TestWakeupsTwoWakesOfOneObjectHandItOnceAtATime(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	w := New(clk, 10)
	s := &stores{wakes: map[string]*Wake{"x": NewWake()}}
	w.Locate(playbookGVK, s.find)
	w.After(wakeKeyOf("x"), time.Second)
	s.mu.Lock()
	s.wakes["x"] = NewWake() // made again: a new record, a new Wake
	s.mu.Unlock()
	w.After(wakeKeyOf("x"), 2*time.Second)
	clk.Step(3 * time.Second)
	if due, _ := w.takeDue(); !slices.Equal(names(due), []string{"x"}) {
		t.Fatalf("handed %v, want x once", names(due))
	}
	w.done(wakeKeyOf("x"), ctrl.Result{}, false)
	if due, _ := w.takeDue(); !slices.Equal(names(due), []string{"x"}) {
		t.Fatalf("after the reconcile: handed %v, want x again (its second Wake)", names(due))
	}
	w.done(wakeKeyOf("x"), ctrl.Result{}, false)
	if n := w.Scheduled(); n != 0 {
		t.Fatalf("scheduled %d, want 0", n)
	}
}
