// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	testfixture "github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// lists counts the store's readings, and fails the first ones.
type lists struct {
	mu    sync.Mutex
	fail  int
	calls int
}

func (l *lists) funcs() interceptor.Funcs {
	return interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		l.mu.Lock()
		l.calls++
		fail := l.calls <= l.fail
		l.mu.Unlock()
		if fail {
			return errAPI
		}
		return c.List(ctx, list, opts...)
	}}
}

func (l *lists) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}

// start runs f's outbox as the leader until the test ends.
func (f *fixture) start() {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.o.Start(ctx) }()
	f.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			f.t.Error(err)
		}
	})
}

// eventually waits up to bound for cond.
func eventually(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(bound); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, bound)
		}
	}
}

func TestLoadReturnsTheErrorOfTheStore(t *testing.T) {
	f := newFixture(t)
	l := &lists{fail: 1}
	c := f.intercepted(l.funcs())
	f.o.Store = &Store{Client: c, Reader: c, Namespace: namespace}
	if err := f.o.Load(context.Background()); !errors.Is(err, errAPI) {
		t.Errorf("Load = %v, want the API server's error", err)
	}
}

// A new leader that cannot read the store at first keeps trying, one
// second and then two later, and then sends what it finds.
func TestANewLeaderRetriesReadingTheOutbox(t *testing.T) {
	f := newFixture(t)
	if err := f.o.Send(context.Background(), one("u1", "email")); err != nil {
		t.Fatal(err)
	}
	f.o = f.restart()
	l := &lists{fail: 2}
	c := f.intercepted(l.funcs())
	f.o.Store = &Store{Client: c, Reader: c, Namespace: namespace}
	began := time.Now()
	f.start()
	eventually(t, 30*time.Second, "the entry sent", func() bool { return f.deliver.count("email") == 1 })
	if took := time.Since(began); took < 3*time.Second {
		t.Errorf("sent %s after the start, want the reading tried after one second and then two", took)
	}
	if n := l.count(); n != 3 {
		t.Errorf("the store was read %d times, want 3", n)
	}
}

// Entries written by a deposed leader's last reconciles, after this one
// read the store, are found when it reads it again a minute later; it does
// not read it at every wake-up.
func TestTheLeaderReadsTheOutboxAgainAfterAMinute(t *testing.T) {
	f := newFixture(t)
	if err := f.o.Send(context.Background(), one("u1", "email")); err != nil {
		t.Fatal(err)
	}
	f.o = f.restart()
	l := &lists{}
	c := f.intercepted(l.funcs())
	f.o.Store = &Store{Client: c, Reader: c, Namespace: namespace}
	f.start()
	// Once the first entry went out, the leader has read the store.
	eventually(t, 10*time.Second, "the first entry sent", func() bool { return f.deliver.count("email") == 1 })

	late := one("u2", "email")
	late.State = Deleted
	if _, err := (&Store{Client: f.client, Reader: f.client, Namespace: namespace}).Create(context.Background(), late); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(idle)
	f.o.Confirm("none") // wakes the leader
	eventually(t, 10*time.Second, "the late entry sent", func() bool { return f.deliver.count("email") == 2 })

	read := l.count()
	for range 3 {
		f.o.Confirm("none")
		time.Sleep(50 * time.Millisecond)
	}
	if n := l.count(); n != read {
		t.Errorf("the store was read %d more times within the minute", n-read)
	}
}

// A leader says how many entries it takes over, and says nothing when
// there are none.
func TestLoadSaysWhatItResumes(t *testing.T) {
	for _, n := range []int{0, 1} {
		f := newFixture(t)
		if n == 1 {
			f.prepare(entry("u1", "email"))
		}
		f.o = f.restart()
		var logs testfixture.Logs
		f.o.Log = logs.Logger(0)
		if err := f.o.Load(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := logs.With(`"msg"="resuming the outbox"`)
		if n == 0 && len(got) != 0 || n == 1 && (len(got) != 1 || !strings.Contains(got[0], `"entries"=1`)) {
			t.Errorf("with %d entries stored, logged %q", n, got)
		}
	}
}
