// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// objects stands in for the members' records: each UID's current expiry
// (absent: deleted) and the marks written.
type objects struct {
	mu      sync.Mutex
	expiry  map[types.UID]time.Time
	marked  map[types.UID][]time.Time
	failing error
}

func newObjects() *objects {
	return &objects{expiry: map[types.UID]time.Time{}, marked: map[types.UID][]time.Time{}}
}

func (s *objects) Current(_ context.Context, _ *Digest, m Member) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.expiry[m.Object.UID]
	return ok && at.Equal(m.ExpiresAt), nil
}

func (s *objects) Mark(_ context.Context, _ *Digest, m Member, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing != nil {
		return s.failing
	}
	if exp, ok := s.expiry[m.Object.UID]; ok && exp.Equal(m.ExpiresAt) {
		s.marked[m.Object.UID] = append(s.marked[m.Object.UID], at)
	}
	return nil
}

const lead = 72 * time.Hour

func member(name string, due time.Time) Member {
	return Member{Object: notify.Object{APIVersion: "amphitheatre.app/v1", Kind: "Playbook", Namespace: "apps", Name: name, UID: types.UID("uid-" + name)},
		ExpiresAt: due.Add(lead), Due: due, Extend: "kubectl annotate playbook " + name}
}

// digestFixture is an outbox with a marker over f's API server, and the
// members' objects all there with the expiry they are listed with.
func digestFixture(t *testing.T, members ...Member) (*fixture, *objects) {
	f := newFixture(t)
	objs := newObjects()
	for _, m := range members {
		objs.expiry[m.Object.UID] = m.ExpiresAt
	}
	f.o.Marker = objs
	return f, objs
}

func newDigest(members []Member, channels ...string) *Digest {
	d := &Digest{Created: t0, Policy: "playbooks", Owner: "alice@example.com", Stage: "3d", Start: t0, Members: members, Channels: map[string]*Delivery{}}
	for _, c := range channels {
		d.Channels[c] = &Delivery{}
	}
	return d
}

// addDigest writes d and hands it to the outbox, as the object
// controller does.
func (f *fixture) addDigest(t *testing.T, d *Digest) {
	t.Helper()
	if err := f.o.Store.CreateDigest(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	f.o.AddDigest(d)
}

func (f *fixture) digests() []*Digest {
	f.t.Helper()
	ds, errs, err := f.o.Store.ListDigests(context.Background())
	if err != nil || len(errs) > 0 {
		f.t.Fatal(err, errs)
	}
	return ds
}

// digestCalls are the digests delivered, in order.
func (s *scripted) digestCalls() []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []call
	for _, c := range s.calls {
		if c.digest != nil {
			out = append(out, c)
		}
	}
	return out
}

func names(d *notify.Digest) []string {
	var out []string
	for _, it := range d.Items {
		out = append(out, it.Object.Name)
	}
	return out
}

func TestWindowIsAQuarterOfTheLeadAndAnHourAtMost(t *testing.T) {
	for lead, want := range map[time.Duration]time.Duration{72 * time.Hour: time.Hour, 4 * time.Hour: time.Hour, 2 * time.Hour: 30 * time.Minute, time.Minute: 15 * time.Second} {
		if got := Window(lead); got != want {
			t.Errorf("Window(%s) = %s, want %s", lead, got, want)
		}
	}
}

func TestBatchTakesTheMembersDueWithinTheWindowEarliestFirst(t *testing.T) {
	end := t0.Add(Window(lead))
	cands := []Member{
		member("late", end.Add(time.Nanosecond)),
		member("last", end),
		member("b", t0.Add(time.Minute)),
		member("a", t0.Add(time.Minute)),
		member("before", t0.Add(-time.Nanosecond)),
		member("first", t0),
	}
	var got []string
	for _, m := range Batch(cands, lead, t0) {
		got = append(got, m.Object.Name)
	}
	if want := []string{"first", "a", "b", "last"}; !slices.Equal(got, want) {
		t.Errorf("Batch = %q, want %q: the window is [start, start+%s], and no member is told later than due", got, want, Window(lead))
	}
	d := newDigest(nil)
	d.State = DigestOpen
	if !d.Covers(lead, end) || d.Covers(lead, end.Add(time.Nanosecond)) || d.Covers(lead, t0.Add(-time.Nanosecond)) {
		t.Error("Covers disagrees with Batch on the window's edges")
	}
	d.State = DigestSending
	if d.Covers(lead, t0) {
		t.Error("a digest being sent covers a new member")
	}
}

func TestADigestIsSentOnceToTheOwnerAndMarksItsMembers(t *testing.T) {
	ms := []Member{member("pb-1", t0), member("pb-2", t0.Add(10*time.Minute)), member("extended", t0.Add(20*time.Minute)), member("deleted", t0.Add(30*time.Minute))}
	f, objs := digestFixture(t, ms...)
	objs.expiry["uid-extended"] = ms[2].ExpiresAt.Add(7 * 24 * time.Hour)
	delete(objs.expiry, "uid-deleted")
	d := newDigest(ms, "email")
	f.addDigest(t, d)
	f.pass()
	f.pass()

	calls := f.deliver.digestCalls()
	if len(calls) != 1 {
		t.Fatalf("delivered %d digests, want 1", len(calls))
	}
	if got := names(calls[0].digest); !slices.Equal(got, []string{"pb-1", "pb-2"}) {
		t.Errorf("the digest lists %q, want the members still there with the expiry they were listed with", got)
	}
	if !slices.Equal(calls[0].to, []string{"alice@example.com"}) || calls[0].id != strings.TrimPrefix(d.Name(), digestPrefix) {
		t.Errorf("digest went to %q with ID %q, want the owner and an ID from the entry's name", calls[0].to, calls[0].id)
	}
	for _, uid := range []types.UID{"uid-pb-1", "uid-pb-2"} {
		if got := objs.marked[uid]; len(got) != 1 || !got[0].Equal(t0) {
			t.Errorf("%s marked at %v, want once at the acceptance", uid, got)
		}
	}
	if len(objs.marked["uid-extended"]) > 0 {
		t.Error("a member extended before the send was marked as told")
	}
	if len(f.digests()) != 0 {
		t.Error("the digest is still stored after every member was marked")
	}
}

func TestADigestWhoseMembersAreAllGoneIsDroppedUnsent(t *testing.T) {
	f, objs := digestFixture(t, member("pb-1", t0))
	delete(objs.expiry, "uid-pb-1")
	d := newDigest([]Member{member("pb-1", t0)}, "email")
	f.addDigest(t, d)
	f.pass()
	if len(f.deliver.digestCalls()) != 0 || len(f.digests()) != 0 {
		t.Errorf("sent %d digests and kept %d, want none", len(f.deliver.digestCalls()), len(f.digests()))
	}
}

// Each crash window: a new leader over the same API server finishes the
// digest, and the owner gets it once (twice with the same Message-ID in
// the one window between acceptance and its record).
func TestADigestSurvivesANewLeaderAtEachStep(t *testing.T) {
	ms := []Member{member("pb-1", t0), member("pb-2", t0.Add(time.Minute))}
	for _, tc := range []struct {
		name string
		// stop makes the first leader stop where the case says.
		stop func(f *fixture, objs *objects)
		// wantTries counts the deliveries tried, refused ones included.
		wantTries int
	}{
		{"written, never looked at", func(*fixture, *objects) {}, 1},
		{"closed, channel refused", func(f *fixture, _ *objects) {
			f.deliver.answers = map[string][]error{"email": {errors.New("421 try later")}}
		}, 2},
		{"accepted, state sent not written", nil, 2},
		{"sent, records not written", func(_ *fixture, objs *objects) { objs.failing = errors.New("etcd leader changed") }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, objs := digestFixture(t, ms...)
			apiServer := f.client
			if tc.stop == nil {
				f.client = f.intercepted(interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
					if cm, ok := obj.(*corev1.ConfigMap); ok && strings.Contains(cm.Data[dataKey], `"state":"sent"`) {
						return errAPI
					}
					return c.Update(ctx, obj, opts...)
				}})
				f.o.Store.Client = f.client
			}
			d := newDigest(slices.Clone(ms), "email")
			if err := f.o.Store.CreateDigest(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			if tc.stop != nil {
				tc.stop(f, objs)
			}
			if !strings.HasPrefix(tc.name, "written") {
				f.o.AddDigest(d)
				f.pass()
			}
			// The first leader is gone; the next reads the API server.
			objs.failing = nil
			f.client = apiServer
			f.o = f.restart()
			f.o.Marker = objs
			f.clock.Step(time.Minute)
			if err := f.o.Load(context.Background()); err != nil {
				t.Fatal(err)
			}
			f.pass()
			f.pass()

			calls := f.deliver.digestCalls()
			if len(calls) != tc.wantTries {
				t.Fatalf("delivered %d times, want %d", len(calls), tc.wantTries)
			}
			for _, c := range calls {
				if c.id != calls[0].id || !slices.Equal(names(c.digest), []string{"pb-1", "pb-2"}) {
					t.Errorf("delivery %+v differs from the first: a resend must be the same mail", c)
				}
			}
			for _, uid := range []types.UID{"uid-pb-1", "uid-pb-2"} {
				if len(objs.marked[uid]) != 1 {
					t.Errorf("%s marked %d times, want once", uid, len(objs.marked[uid]))
				}
			}
			if len(f.digests()) != 0 {
				t.Error("the digest is still stored")
			}
		})
	}
}

func TestAMemberIsNeverMarkedBeforeTheDigestIsAccepted(t *testing.T) {
	f, objs := digestFixture(t, member("pb-1", t0))
	f.deliver.always = map[string]error{"email": errors.New("550 mailbox unavailable")}
	d := newDigest([]Member{member("pb-1", t0)}, "email")
	f.addDigest(t, d)
	for range 5 {
		f.pass()
		f.clock.Step(maxBackoff)
	}
	if len(objs.marked["uid-pb-1"]) != 0 {
		t.Error("a member was marked while its digest was refused")
	}
	if ds := f.digests(); len(ds) != 1 || ds[0].State != DigestSending || ds[0].Channels["email"].Attempts != 5 {
		t.Errorf("stored %+v, want the digest kept sending with its attempts", ds)
	}
}

func TestTheOwnerGetsOneDigestWhenTheFirstChannelRefusesIt(t *testing.T) {
	f, _ := digestFixture(t, member("pb-1", t0))
	f.deliver.always = map[string]error{"a-mail": errors.New("421 try later")}
	d := newDigest([]Member{member("pb-1", t0)}, "a-mail", "b-mail", "c-mail")
	f.addDigest(t, d)
	f.pass()
	var got []string
	for _, c := range f.deliver.digestCalls() {
		got = append(got, c.channel)
	}
	if !slices.Equal(got, []string{"a-mail", "b-mail"}) {
		t.Errorf("tried %q, want the next channel after a refusal and none after an acceptance", got)
	}
}

// A policy changed so that a channel no longer carries reminders: the
// digest goes over the others, and is dropped, its members unmarked, when
// none is left, rather than retried for ever.
func TestADigestLeavesTheChannelsThatNoLongerCarryIt(t *testing.T) {
	f, objs := digestFixture(t, member("pb-1", t0))
	f.deliver.always = map[string]error{"a-mail": ErrNotCarried}
	d := newDigest([]Member{member("pb-1", t0)}, "a-mail", "b-mail")
	f.addDigest(t, d)
	f.pass()
	var got []string
	for _, c := range f.deliver.digestCalls() {
		got = append(got, c.channel)
	}
	if !slices.Equal(got, []string{"a-mail", "b-mail"}) || len(objs.marked["uid-pb-1"]) != 1 {
		t.Fatalf("tried %q and marked pb-1 %d times; want a-mail, then b-mail, which took it, and one mark", got, len(objs.marked["uid-pb-1"]))
	}

	f, objs = digestFixture(t, member("pb-2", t0))
	f.deliver.always = map[string]error{"a-mail": ErrNotCarried, "b-mail": ErrNotCarried}
	d = newDigest([]Member{member("pb-2", t0)}, "a-mail", "b-mail")
	f.addDigest(t, d)
	f.pass()
	if n := len(f.digests()); n != 0 {
		t.Fatalf("%d digests kept after no channel carried it, want it dropped", n)
	}
	if len(objs.marked["uid-pb-2"]) != 0 {
		t.Fatalf("pb-2 marked reminded by a digest that went nowhere")
	}
	f.pass()
	if n := len(f.deliver.digestCalls()); n != 2 {
		t.Fatalf("%d attempts, want the 2 of the first pass and none after", n)
	}
}

func TestJoiningADigest(t *testing.T) {
	f, objs := digestFixture(t, member("pb-1", t0), member("pb-2", t0.Add(time.Minute)), member("pb-3", t0.Add(2*time.Minute)))
	d := newDigest([]Member{member("pb-1", t0)}, "email")
	if err := f.o.Store.CreateDigest(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if err := f.o.Store.CreateDigest(context.Background(), newDigest(nil, "email")); err == nil {
		t.Error("a second digest of the same name was written")
	}
	// The sender read it; then another object joined before it closed it.
	if err := f.o.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.o.Store.JoinDigest(context.Background(), d.Name(), member("pb-2", t0.Add(time.Minute))); err != nil {
		t.Fatal(err)
	}
	joined, err := f.o.Store.JoinDigest(context.Background(), d.Name(), member("pb-2", t0.Add(time.Minute)))
	if err != nil || len(joined.Members) != 2 {
		t.Fatalf("joining twice: %v, %d members; want the member once", err, len(joined.Members))
	}
	f.pass()
	if n := len(f.deliver.digestCalls()); n != 0 {
		t.Fatalf("sent %d digests from a version older than the join", n)
	}
	f.clock.Step(apiRetry)
	f.pass()
	f.pass()
	calls := f.deliver.digestCalls()
	if len(calls) != 1 || !slices.Equal(names(calls[0].digest), []string{"pb-1", "pb-2"}) {
		t.Fatalf("delivered %+v, want one digest with the member that joined", calls)
	}
	if len(objs.marked["uid-pb-2"]) != 1 {
		t.Error("the member that joined was not marked")
	}
	// Sent and removed: a later object needs a digest of its own.
	if _, err := f.o.Store.JoinDigest(context.Background(), d.Name(), member("pb-3", t0.Add(2*time.Minute))); err == nil {
		t.Error("joined a digest already sent")
	}
}

func TestAClosedDigestTakesNoMember(t *testing.T) {
	f, _ := digestFixture(t, member("pb-1", t0))
	f.deliver.always = map[string]error{"email": errors.New("421 try later")}
	d := newDigest([]Member{member("pb-1", t0)}, "email")
	f.addDigest(t, d)
	f.pass()
	_, err := f.o.Store.JoinDigest(context.Background(), d.Name(), member("pb-2", t0))
	if !errors.Is(err, ErrDigestClosed) {
		t.Errorf("JoinDigest = %v, want %v", err, ErrDigestClosed)
	}
	if ds := f.digests(); len(ds) != 1 || !ds[0].Lists("uid-pb-1", member("pb-1", t0).ExpiresAt) || ds[0].Lists("uid-pb-1", t0) {
		t.Error("Lists does not tell the member by its UID and expiry")
	}
}
