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

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	testfixture "github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// failingMarker is objects with some members' checks or marks failing.
type failingMarker struct {
	*objects
	mu         sync.Mutex
	currentErr map[types.UID]error
	markErr    map[types.UID]error
}

func (m *failingMarker) Current(ctx context.Context, d *Digest, mem Member) (bool, error) {
	m.mu.Lock()
	err := m.currentErr[mem.Object.UID]
	m.mu.Unlock()
	if err != nil {
		return false, err
	}
	return m.objects.Current(ctx, d, mem)
}

func (m *failingMarker) Mark(ctx context.Context, d *Digest, mem Member, at time.Time) error {
	m.mu.Lock()
	err := m.markErr[mem.Object.UID]
	m.mu.Unlock()
	if err != nil {
		return err
	}
	return m.objects.Mark(ctx, d, mem, at)
}

func (m *failingMarker) heal() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.currentErr, m.markErr = nil, nil
}

// trackedDigests reports how many digests f's outbox holds.
func (f *fixture) trackedDigests() int {
	f.o.mu.Lock()
	defer f.o.mu.Unlock()
	return len(f.o.digests)
}

// failingDeletes makes every delete of the store fail until healed.
func (f *fixture) failingDeletes() (heal func()) {
	var mu sync.Mutex
	failing := true
	c := f.intercepted(interceptor.Funcs{Delete: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return errAPI
		}
		return cl.Delete(ctx, obj, opts...)
	}})
	f.o.Store = &Store{Client: c, Reader: c, Namespace: namespace}
	return func() {
		mu.Lock()
		defer mu.Unlock()
		failing = false
	}
}

// TestADigestThatCannotBeRemovedIsRemovedLater: at each of the three
// places a digest is finished (its members all gone, no channel left to
// carry it, sent and marked), a removal the API server refuses keeps the
// digest in hand until a later pass removes it; one that succeeds lets
// it go at once.
func TestADigestThatCannotBeRemovedIsRemovedLater(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup func(f *fixture, objs *objects)
		// tries counts the deliveries tried, the refused one included.
		tries int
	}{
		{"whose members are all gone", func(_ *fixture, objs *objects) { delete(objs.expiry, "uid-pb-1") }, 0},
		{"that no channel carries", func(f *fixture, _ *objects) { f.deliver.always = map[string]error{"email": ErrNotCarried} }, 1},
		{"sent and marked", func(*fixture, *objects) {}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, objs := digestFixture(t, member("pb-1", t0))
			tt.setup(f, objs)
			f.addDigest(t, newDigest([]Member{member("pb-1", t0)}, "email"))
			heal := f.failingDeletes()
			f.pass()
			if f.trackedDigests() != 1 || len(f.digests()) != 1 {
				t.Fatalf("tracked %d, stored %d after a refused removal; want the digest kept", f.trackedDigests(), len(f.digests()))
			}
			heal()
			f.clock.Step(apiRetry)
			f.pass()
			if f.trackedDigests() != 0 || len(f.digests()) != 0 {
				t.Errorf("tracked %d, stored %d once the API server is back; want the digest gone", f.trackedDigests(), len(f.digests()))
			}
			if n := len(f.deliver.digestCalls()); n != tt.tries {
				t.Errorf("tried %d deliveries, want %d", n, tt.tries)
			}
		})
	}
}

// TestAMemberThatCannotBeCheckedHoldsTheDigest: a digest closes only once
// every member is known to be there or gone: one that cannot be checked
// is not taken for gone.
func TestAMemberThatCannotBeCheckedHoldsTheDigest(t *testing.T) {
	f, objs := digestFixture(t, member("pb-1", t0), member("pb-2", t0))
	m := &failingMarker{objects: objs, currentErr: map[types.UID]error{"uid-pb-2": errAPI}}
	f.o.Marker = m
	f.addDigest(t, newDigest([]Member{member("pb-1", t0), member("pb-2", t0)}, "email"))
	f.pass()
	if n := len(f.deliver.digestCalls()); n != 0 {
		t.Fatalf("sent %d times while a member could not be checked", n)
	}
	m.heal()
	f.clock.Step(apiRetry)
	f.pass()
	calls := f.deliver.digestCalls()
	if len(calls) != 1 || len(names(calls[0].digest)) != 2 {
		t.Errorf("deliveries %+v, want one digest of both members", calls)
	}
}

// TestAMemberMarkedIsNotMarkedAgain: when one member's record cannot be
// written, the others written are not written again at the retry, and
// what was written is recorded without a word in the log.
func TestAMemberMarkedIsNotMarkedAgain(t *testing.T) {
	f, objs := digestFixture(t, member("pb-1", t0), member("pb-2", t0))
	m := &failingMarker{objects: objs, markErr: map[types.UID]error{"uid-pb-2": errAPI}}
	f.o.Marker = m
	var lines testfixture.Logs
	f.o.Log = lines.Logger(0)
	f.addDigest(t, newDigest([]Member{member("pb-1", t0), member("pb-2", t0)}, "email"))
	f.pass()
	m.heal()
	f.clock.Step(apiRetry)
	f.pass()
	for _, uid := range []types.UID{"uid-pb-1", "uid-pb-2"} {
		if n := len(objs.marked[uid]); n != 1 {
			t.Errorf("%s marked %d times, want once", uid, n)
		}
	}
	if got := lines.With("record the digest's marked members"); len(got) != 0 {
		t.Errorf("logged %q, want nothing: the marks were recorded", got)
	}
}

// TestADigestChannelIsNotTriedBeforeItsBackoffEnds: each channel of a
// digest backs off on its own, and Pass says when the soonest is due,
// sooner than its idle minute.
func TestADigestChannelIsNotTriedBeforeItsBackoffEnds(t *testing.T) {
	f, _ := digestFixture(t, member("pb-1", t0))
	d := newDigest([]Member{member("pb-1", t0)}, "a-mail", "b-mail")
	f.addDigest(t, d)
	d.State = DigestSending
	d.Channels["a-mail"] = &Delivery{Attempts: 1, NextAttempt: t0.Add(20 * time.Second)}
	d.Channels["b-mail"] = &Delivery{Attempts: 4, NextAttempt: t0.Add(40 * time.Second)}
	if err := f.o.Store.UpdateDigest(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if wait := f.o.Pass(context.Background()); wait != 20*time.Second {
		t.Errorf("Pass waits %s, want the 20s until a-mail is due", wait)
	}
	f.deliver.always = map[string]error{"a-mail": errors.New("421 try later")}
	f.clock.Step(20 * time.Second)
	wait := f.o.Pass(context.Background())
	f.o.Wait()
	var tried []string
	for _, c := range f.deliver.digestCalls() {
		tried = append(tried, c.channel)
	}
	if strings.Join(tried, ",") != "a-mail" {
		t.Errorf("tried %q, want only a-mail: b-mail backs off for 40s", tried)
	}
	if want := 20 * time.Second; wait > want {
		t.Errorf("Pass waits %s after a-mail failed again, want at most the %s until b-mail is due", wait, want)
	}
}

// TestADigestAttemptCutShortByShutdownDoesNotCount: a leader that stops
// mid-send has had no answer; the attempt is not counted or backed off.
func TestADigestAttemptCutShortByShutdownDoesNotCount(t *testing.T) {
	f, _ := digestFixture(t, member("pb-1", t0))
	ctx, cancel := context.WithCancel(context.Background())
	f.o.Deliverer = deliverFunc(func(_ context.Context, _ string, _ notify.Message, channels []string) (map[string]error, error) {
		cancel()
		return map[string]error{channels[0]: context.Canceled}, nil
	})
	d := newDigest([]Member{member("pb-1", t0)}, "email")
	f.addDigest(t, d)
	f.o.Pass(ctx)
	f.o.Wait()
	if c := d.Channels["email"]; c.Attempts != 0 || !c.NextAttempt.IsZero() {
		t.Errorf("channel %+v, want the attempt not counted", c)
	}
}

// TestALeaderThatCannotListTheOutboxDoesNotStart: Load fails when the
// digests or the entries cannot be listed, so that no leader sends from
// a partial outbox.
func TestALeaderThatCannotListTheOutboxDoesNotStart(t *testing.T) {
	for _, what := range []string{LabelDigest, LabelEntry} {
		t.Run(what, func(t *testing.T) {
			f, _ := digestFixture(t)
			c := f.intercepted(interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				lo := &client.ListOptions{}
				lo.ApplyOptions(opts)
				if lo.LabelSelector != nil && strings.Contains(lo.LabelSelector.String(), what) {
					return errAPI
				}
				return cl.List(ctx, list, opts...)
			}})
			f.o.Store = &Store{Client: c, Reader: c, Namespace: namespace}
			if err := f.o.Load(context.Background()); !errors.Is(err, errAPI) {
				t.Errorf("Load: %v, want the API server's error", err)
			}
		})
	}
}
