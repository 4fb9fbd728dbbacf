// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func capKey(i int) Key {
	k := Key{GVK: playbooks.WithVersion("v1")}
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

	// A retry keeps its turn rather than queueing again.
	at, _, throttled := caps.admit(capKey(250), "250", expiry, "playbooks", 100, now.Add(time.Hour))
	if !at.Equal(turns[250]) || throttled {
		t.Fatalf("retry got %s (throttled %v), want its turn %s", at, throttled, turns[250])
	}
	// An extension (another expiry) or a recreated object queues afresh.
	caps.forget(capKey(250))
	if at, _, _ := caps.admit(capKey(250), "other", expiry, "playbooks", 100, now); !at.After(turns[499]) {
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
