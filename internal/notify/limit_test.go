// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package notify

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// blocking is a channel whose sends last until release is closed.
type blocking struct {
	name    string
	started chan struct{}
	release chan struct{}
	mu      sync.Mutex
	sent    int
}

func (b *blocking) Name() string                    { return b.name }
func (b *blocking) Accepts(v1alpha1.EventType) bool { return true }
func (b *blocking) Send(ctx context.Context, _ Message, _ Content) error {
	b.started <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.mu.Lock()
	b.sent++
	b.mu.Unlock()
	return nil
}

func newBlocking(name string) *blocking {
	return &blocking{name: name, started: make(chan struct{}, 16), release: make(chan struct{})}
}

func TestLimiter(t *testing.T) {
	t.Run("answers busy at once, without sending, when the channel's slots are taken", func(t *testing.T) {
		slow := newBlocking("smtp")
		l := NewLimiter(2)
		n := l.Limit(slow)
		errs := make(chan error, 2)
		for range 2 {
			go func() { errs <- n.Send(context.Background(), Message{}, Content{}) }()
			<-slow.started
		}
		if _, _, ok := Reserve(n); ok {
			t.Error("Reserve took a slot with both slots taken")
		}
		if err := n.Send(context.Background(), Message{}, Content{}); !errors.Is(err, ErrBusy) {
			t.Fatalf("third send = %v, want ErrBusy", err)
		}
		close(slow.release)
		for range 2 {
			if err := <-errs; err != nil {
				t.Errorf("send = %v", err)
			}
		}
		if slow.sent != 2 {
			t.Errorf("%d sent, want the 2 that had a slot", slow.sent)
		}
		held, release, ok := Reserve(n)
		if !ok {
			t.Fatal("Reserve found no slot once the sends ended")
		}
		if err := n.Send(context.Background(), Message{}, Content{}); err != nil {
			t.Errorf("send with one slot reserved and one free = %v, want it sent", err)
		}
		_, other, ok := Reserve(n)
		if !ok {
			t.Fatal("Reserve found no slot with one reserved and the other free again")
		}
		other()
		if err := held.Send(context.Background(), Message{}, Content{}); err != nil {
			t.Errorf("send on a reservation = %v", err)
		}
		release()
		var releases []func()
		for range 2 {
			_, release, ok := Reserve(n)
			if !ok {
				t.Fatal("a slot was not given back after its send or its release")
			}
			releases = append(releases, release)
		}
		for _, release := range releases {
			release()
		}
		if err := n.Send(context.Background(), Message{}, Content{}); err != nil {
			t.Errorf("send after the others ended = %v, want it sent", err)
		}
	})
	t.Run("shares one limit among the notifiers of one channel, not among channels", func(t *testing.T) {
		a1, a2, b := newBlocking("a"), newBlocking("a"), newBlocking("b")
		l := NewLimiter(1)
		done := make(chan error, 1)
		go func() { done <- l.Limit(a1).Send(context.Background(), Message{}, Content{}) }()
		<-a1.started
		if err := l.Limit(a2).Send(context.Background(), Message{}, Content{}); !errors.Is(err, ErrBusy) {
			t.Errorf("another policy's notifier for channel a = %v, want ErrBusy", err)
		}
		close(b.release)
		go func() { <-b.started }()
		if err := l.Limit(b).Send(context.Background(), Message{}, Content{}); err != nil {
			t.Errorf("channel b = %v, want sent", err)
		}
		close(a1.release)
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	t.Run("waits for a slot under WaitForSlot, as long as the context allows", func(t *testing.T) {
		slow := newBlocking("smtp")
		n := NewLimiter(1).Limit(slow)
		first := make(chan error, 1)
		go func() { first <- n.Send(context.Background(), Message{}, Content{}) }()
		<-slow.started

		ctx, cancel := context.WithTimeout(WaitForSlot(context.Background()), 50*time.Millisecond)
		defer cancel()
		if err := n.Send(ctx, Message{}, Content{}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("waiting send past its deadline = %v, want the deadline", err)
		}
		second := make(chan error, 1)
		go func() { second <- n.Send(WaitForSlot(context.Background()), Message{}, Content{}) }()
		close(slow.release)
		for _, ch := range []chan error{first, second} {
			select {
			case err := <-ch:
				if err != nil {
					t.Error(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("a send never ended")
			}
		}
		if slow.sent != 2 {
			t.Errorf("%d sent, want 2", slow.sent)
		}
	})
	t.Run("leaves the channel alone without a limit", func(t *testing.T) {
		slow := newBlocking("smtp")
		if n := NewLimiter(0).Limit(slow); n != Notifier(slow) {
			t.Errorf("Limit without a limit = %T, want the channel itself", n)
		}
		var l *Limiter
		if n := l.Limit(slow); n != Notifier(slow) {
			t.Errorf("a nil Limiter's Limit = %T, want the channel itself", n)
		}
	})
}

func TestLimiterTellsOnFreeOnceForEachSlotGivenBack(t *testing.T) {
	l := NewLimiter(1)
	freed := make(chan string, 4)
	l.OnFree(func(channel string) { freed <- channel })
	slow := newBlocking("smtp")
	n := l.Limit(slow)

	// A send takes the slot and gives it back when it returns.
	done := make(chan error, 1)
	go func() { done <- n.Send(context.Background(), Message{}, Content{}) }()
	<-slow.started
	if got := len(freed); got != 0 {
		t.Fatalf("told %d times while the slot was taken, want 0", got)
	}
	close(slow.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-freed:
		if got != "smtp" {
			t.Fatalf("told %q, want smtp", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not told when the send gave its slot back")
	}

	// A reservation released twice (not sent, then harmlessly again)
	// gives its slot back once.
	_, release, ok := Reserve(n)
	if !ok {
		t.Fatal("no slot to reserve after the send returned")
	}
	release()
	release()
	if got := len(freed); got != 1 {
		t.Fatalf("told %d times for one reservation released twice, want 1", got)
	}
	// And a busy channel, which gave nothing back, tells nothing.
	_, release, _ = Reserve(n)
	if _, _, ok := Reserve(n); ok {
		t.Fatal("a second reservation got the only slot")
	}
	if got := len(freed); got != 1 {
		t.Fatalf("told %d times after a refused reservation, want still 1", got)
	}
	release()
}
