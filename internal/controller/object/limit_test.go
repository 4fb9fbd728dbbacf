// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

func capKey(i int) wakeup.Key {
	k := wakeup.Key{GVK: fixture.PlaybookGVK}
	k.Name = fmt.Sprintf("pb-%03d", i)
	return k
}

// 500 objects expiring in the same second under a cap of 100 a minute:
// every one gets a turn, in the order it came, 0.6 s apart, so that no
// minute sees more than 100 deletions and the last goes about 5 minutes
// later; none is skipped.
func TestCapSpreadsABurstInOrder(t *testing.T) {
	caps := newDeletionCaps(0)
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	expiry := now
	var turns []time.Time
	for i := range 500 {
		at, by, throttled := caps.admit(capKey(i), types.UID(fmt.Sprint(i)), expiry, "playbooks", 100, now)
		if i > 0 && (by != capPolicy || !throttled) {
			t.Fatalf("object %d: limited by %q, throttled %v", i, by, throttled)
		}
		turns = append(turns, at)
	}
	if !turns[0].Equal(now) {
		t.Fatalf("the first deletion waits until %s", turns[0])
	}
	for i := 1; i < len(turns); i++ {
		if gap := turns[i].Sub(turns[i-1]); gap != 600*time.Millisecond {
			t.Fatalf("turns %d and %d are %s apart", i-1, i, gap)
		}
	}
	for start := range turns {
		in := 0
		for _, at := range turns[start:] {
			if at.Sub(turns[start]) < time.Minute {
				in++
			}
		}
		if in > 100 {
			t.Fatalf("%d deletions in the minute from %s", in, turns[start])
		}
	}

	// At its turn the object goes, and a retry (the delete failed) keeps
	// the turn rather than queueing again.
	if at, _, throttled := caps.admit(capKey(250), "250", expiry, "playbooks", 100, turns[250]); !at.Equal(turns[250]) || throttled {
		t.Fatalf("at its turn the object got %s (throttled %v), want %s", at, throttled, turns[250])
	}
	retry := turns[250].Add(time.Second)
	if at, _, throttled := caps.admit(capKey(250), "250", expiry, "playbooks", 100, retry); !at.Equal(turns[250]) || throttled {
		t.Fatalf("retry got %s (throttled %v), want its turn %s", at, throttled, turns[250])
	}
	// An extension (another expiry) or a recreated object queues afresh.
	caps.forget(capKey(250))
	if at, _, _ := caps.admit(capKey(250), "other", expiry, "playbooks", 100, retry); !at.After(turns[499]) {
		t.Fatalf("a recreated object got %s, before the queue's end %s", at, turns[499])
	}
}

func TestGlobalCapSpansPolicies(t *testing.T) {
	caps := newDeletionCaps(60)
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	a, _, _ := caps.admit(capKey(1), "1", now, "a", 0, now)
	b, by, _ := caps.admit(capKey(2), "2", now, "b", 0, now)
	if !a.Equal(now) || b.Sub(a) != time.Second || by != capGlobal {
		t.Fatalf("turns %s and %s (limited by %q), want a second apart under the global cap", a, b, by)
	}
	// The stricter of the two caps sets the turn.
	c, by, _ := caps.admit(capKey(3), "3", now, "c", 6, now)
	d, by2, _ := caps.admit(capKey(4), "4", now, "c", 6, now)
	if c.Sub(b) != time.Second || by != capGlobal || d.Sub(c) != 10*time.Second || by2 != capPolicy {
		t.Fatalf("turns %s (%s), %s (%s)", c, by, d, by2)
	}
}

func TestNoCapNoTurn(t *testing.T) {
	caps := newDeletionCaps(0)
	now := time.Now()
	for i := range 1000 {
		if at, _, throttled := caps.admit(capKey(i), "u", now, "p", 0, now); !at.Equal(now) || throttled {
			t.Fatal("an uncapped deletion waited")
		}
	}
	if len(caps.turns) != 0 {
		t.Fatalf("%d turns kept without a cap", len(caps.turns))
	}
}

// capObject is an object the simulation deletes under the caps.
type capObject struct {
	policy string
	expiry time.Duration
	// late is how long after its expiry the reconciler first comes to it,
	// and lateForTurn how long after each turn.
	late, lateForTurn time.Duration
}

// capChange sets a policy's cap at a moment, and wakes its objects, as the
// policy watch does.
type capChange struct {
	at        time.Duration
	policy    string
	perMinute int32
}

// simulateCaps runs the reconciler's use of the caps on a fake clock: each
// object wakes at its expiry, asks for its turn, and is deleted when the
// turn has come or waits for it. It returns when each object was deleted,
// counted from start.
func simulateCaps(t *testing.T, global int, caps map[string]int32, objects []capObject, changes []capChange) []time.Duration {
	t.Helper()
	start := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	c := newDeletionCaps(global)
	perMinute := maps.Clone(caps)
	wake := make([]time.Time, len(objects))
	deleted := make([]time.Duration, len(objects))
	for i, o := range objects {
		wake[i] = start.Add(o.expiry + o.late)
		deleted[i] = -1
	}
	for steps := 0; ; steps++ {
		if steps > 100000 {
			t.Fatal("the simulation does not end")
		}
		// The next moment something happens: a wake-up or a change.
		next, who := time.Time{}, -1
		for i, w := range wake {
			if deleted[i] < 0 && (who < 0 || w.Before(next)) {
				next, who = w, i
			}
		}
		if len(changes) > 0 && (who < 0 || !start.Add(changes[0].at).After(next)) {
			ch := changes[0]
			changes = changes[1:]
			clk.SetTime(start.Add(ch.at))
			perMinute[ch.policy] = ch.perMinute
			for i, o := range objects {
				if deleted[i] < 0 && o.policy == ch.policy && start.Add(o.expiry).Before(clk.Now()) {
					wake[i] = clk.Now()
				}
			}
			continue
		}
		if who < 0 {
			return deleted
		}
		clk.SetTime(next)
		o := objects[who]
		at, _, _ := c.admit(capKey(who), types.UID(fmt.Sprint(who)), start.Add(o.expiry), o.policy, perMinute[o.policy], clk.Now())
		if at.After(clk.Now()) {
			wake[who] = at.Add(o.lateForTurn)
			continue
		}
		deleted[who] = clk.Since(start)
		c.forget(capKey(who))
	}
}

// checkCapInvariants checks what the caps promise: nothing deleted before
// it expired, every object deleted, and no two deletions under one cap
// closer than the cap allows.
func checkCapInvariants(t *testing.T, global int, caps map[string]int32, objects []capObject, deleted []time.Duration) {
	t.Helper()
	spaced := func(what string, perMinute int, times []time.Duration) {
		if perMinute <= 0 {
			return
		}
		slices.Sort(times)
		for i := 1; i < len(times); i++ {
			if gap := times[i] - times[i-1]; gap < time.Minute/time.Duration(perMinute) {
				t.Fatalf("%s: deletions at %s and %s, %s apart under a cap of %d a minute", what, times[i-1], times[i], gap, perMinute)
			}
		}
	}
	byPolicy := map[string][]time.Duration{}
	for i, o := range objects {
		if deleted[i] < 0 {
			t.Fatalf("object %d never deleted", i)
		}
		if deleted[i] < o.expiry {
			t.Fatalf("object %d deleted at %s, before its expiry at %s", i, deleted[i], o.expiry)
		}
		byPolicy[o.policy] = append(byPolicy[o.policy], deleted[i])
	}
	spaced("controller", global, slices.Clone(deleted))
	for p, times := range byPolicy {
		spaced("policy "+p, int(caps[p]), times)
	}
}

func TestCapsKeepEachPolicyToItsOwnPace(t *testing.T) {
	burst := func(policy string, n int, expiry time.Duration) []capObject {
		var objs []capObject
		for range n {
			objs = append(objs, capObject{policy: policy, expiry: expiry})
		}
		return objs
	}
	tests := []struct {
		name    string
		global  int
		caps    map[string]int32
		objects []capObject
		// want is when each object should be deleted, within slack.
		want []time.Duration
	}{{
		name:   "deletes an uncapped policy's object at its expiry while a capped policy's queue waits minutes",
		global: 600, caps: map[string]int32{"capped": 1},
		objects: append(burst("capped", 5, 0), capObject{policy: "free", expiry: 3 * time.Second}),
		want:    []time.Duration{0, time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 3 * time.Second},
	}, {
		name:   "keeps two capped policies each to its own pace",
		global: 600, caps: map[string]int32{"one": 1, "two": 2},
		objects: append(burst("one", 3, 0), burst("two", 3, 0)...),
		// The controller's cap puts the first of "two" 0.1 s late, and
		// its policy keeps its distance from that.
		want: []time.Duration{0, time.Minute, 2 * time.Minute,
			100 * time.Millisecond, 30*time.Second + 100*time.Millisecond, time.Minute + 100*time.Millisecond},
	}, {
		name:   "spaces a burst under the controller's cap alone",
		global: 60, caps: map[string]int32{},
		objects: burst("free", 4, time.Second),
		want:    []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second},
	}, {
		name:   "deletes at once an object that comes back after its turn",
		global: 600, caps: map[string]int32{"capped": 60},
		objects: []capObject{{policy: "capped"}, {policy: "capped", lateForTurn: 5 * time.Second}},
		want:    []time.Duration{0, 6 * time.Second},
	}, {
		name:   "spaces other policies' objects by the deletions actually due, not by a capped policy's queue",
		global: 60, caps: map[string]int32{"capped": 1},
		objects: append(burst("capped", 3, 0), burst("free", 3, 10*time.Second)...),
		want: []time.Duration{0, time.Minute, 2 * time.Minute,
			10 * time.Second, 11 * time.Second, 12 * time.Second},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			deleted := simulateCaps(t, tt.global, tt.caps, tt.objects, nil)
			checkCapInvariants(t, tt.global, tt.caps, tt.objects, deleted)
			for i, want := range tt.want {
				if deleted[i] != want {
					t.Errorf("object %d (policy %s) deleted at %s, want %s", i, tt.objects[i].policy, deleted[i], want)
				}
			}
		})
	}
}

func TestAChangedCapGivesWaitingObjectsNewTurns(t *testing.T) {
	objects := []capObject{{policy: "p"}, {policy: "p"}, {policy: "p"}, {policy: "p"}}
	tests := []struct {
		name     string
		from, to int32
		at       time.Duration
		wantLast time.Duration
	}{
		{name: "raising the cap brings the waiting objects forward", from: 1, to: 60, at: 10 * time.Second, wantLast: 12 * time.Second},
		{name: "lowering the cap spaces them from the last deletion", from: 60, to: 6, at: 500 * time.Millisecond, wantLast: 30 * time.Second},
		{name: "lifting the cap lets them all go at once", from: 1, to: 0, at: 10 * time.Second, wantLast: 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			deleted := simulateCaps(t, 0, map[string]int32{"p": tt.from}, objects, []capChange{{at: tt.at, policy: "p", perMinute: tt.to}})
			for i, at := range deleted {
				if at < 0 {
					t.Fatalf("object %d never deleted", i)
				}
			}
			// Spacing holds under the cap each deletion was made under.
			times := slices.Sorted(slices.Values(deleted))
			for i := 1; i < len(times); i++ {
				perMinute := tt.from
				if times[i] >= tt.at {
					perMinute = tt.to
				}
				if perMinute > 0 && times[i]-times[i-1] < time.Minute/time.Duration(perMinute) {
					t.Fatalf("deletions at %s and %s under a cap of %d a minute", times[i-1], times[i], perMinute)
				}
			}
			if last := times[len(times)-1]; last != tt.wantLast {
				t.Fatalf("the last deletion at %s, want %s (all at %v)", last, tt.wantLast, deleted)
			}
		})
	}
}

// Objects of random policies, caps and expiries, some reconciled late: the
// caps' promises hold whatever the schedule.
func TestCapsHoldUnderRandomSchedules(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		global := []int{0, 60, 600}[rng.IntN(3)]
		caps := map[string]int32{}
		for _, p := range []string{"a", "b", "c"} {
			caps[p] = []int32{0, 1, 6, 100}[rng.IntN(4)]
		}
		var objects []capObject
		for range 1 + rng.IntN(30) {
			objects = append(objects, capObject{
				policy: []string{"a", "b", "c"}[rng.IntN(3)],
				expiry: time.Duration(rng.IntN(120)) * time.Second,
				late:   time.Duration(rng.IntN(3)) * time.Duration(rng.IntN(2000)) * time.Millisecond,
			})
		}
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			deleted := simulateCaps(t, global, caps, objects, nil)
			checkCapInvariants(t, global, caps, objects, deleted)
		})
	}
}

// An object whose reconcile comes half a second after its turn goes at
// once, and the policy's later turns stay where they were: lateness under
// load does not pile up into a slower cap.
func TestALateReconcileDoesNotPushLaterTurnsBack(t *testing.T) {
	objects := []capObject{{policy: "p"}, {policy: "p", lateForTurn: 500 * time.Millisecond}, {policy: "p"}, {policy: "p"}}
	deleted := simulateCaps(t, 0, map[string]int32{"p": 60}, objects, nil)
	if want := []time.Duration{0, 1500 * time.Millisecond, 2 * time.Second, 3 * time.Second}; !slices.Equal(deleted, want) {
		t.Fatalf("deleted at %v, want %v", deleted, want)
	}
}
