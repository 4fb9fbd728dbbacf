// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
)

// governed is an object governed by policy p, expiring at t0+1h, with
// nothing owed.
func governed() Facts {
	return Facts{UID: "u1", Name: "o1", Policy: "p", ExpiresAt: t0.Add(time.Hour), Since: t0}
}

func at(d time.Duration) time.Time { return t0.Add(d) }

func reminderSent(d time.Duration, announced time.Time) Send {
	return Send{At: at(d), ID: "r", UID: "u1", Type: v1alpha1.EventReminder, Stage: "20m", Channel: "sim-0",
		Announced: announced, Accepted: true, Reported: true}
}

func wouldDeleteSent(d time.Duration) Send {
	return Send{At: at(d), ID: "w", UID: "u1", Type: v1alpha1.EventWouldDelete, Channel: "sim-0", Accepted: true, Reported: true}
}

func extendedSent(d time.Duration, announced time.Time) Send {
	return Send{At: at(d), ID: "e", UID: "u1", Type: v1alpha1.EventExtended, Channel: "sim-0", Announced: announced, Accepted: true, Reported: true}
}

func deletedAt(d time.Duration, edit func(*Facts)) Deletion {
	f := governed()
	if edit != nil {
		edit(&f)
	}
	return Deletion{At: at(d), Facts: f}
}

func fullAudit(deleteAt time.Duration) []audit.Record {
	o := audit.Object{UID: "u1"}
	return []audit.Record{{Time: at(deleteAt), Type: intentType, Object: o}, {Time: at(deleteAt), Type: audit.Deleted, Object: o}}
}

// sleepy is an object of a policy that sleeps 30 minutes after creation
// and deletes an hour after the sleep.
func sleepy(edit func(*Facts)) Facts {
	f := governed()
	f.Sleeps, f.SleepAt, f.SleepPeriod, f.SleepDeleteAfter = true, at(30*time.Minute), 30*time.Minute, time.Hour
	if edit != nil {
		edit(&f)
	}
	return f
}

func sleptSent(d time.Duration, reported bool) Send {
	return Send{At: at(d), ID: "s", UID: "u1", Type: v1alpha1.EventSlept, Channel: "sim-0", Cycle: at(30 * time.Minute),
		Accepted: true, Reported: reported}
}

// Each check must be able to fail: a history that breaks it, and one
// that keeps it, per check.
func TestEachCheckFailsOnItsViolationAndOnlyThen(t *testing.T) {
	cases := []struct {
		check        string
		broken, kept History
	}{
		{
			check:  "keptNotDeleted",
			broken: History{Deletions: []Deletion{deletedAt(2*time.Hour, func(f *Facts) { f.Kept = true })}},
			kept:   History{Deletions: []Deletion{deletedAt(2*time.Hour, nil)}},
		},
		{
			check:  "deletedOnlyWhenGoverned",
			broken: History{Deletions: []Deletion{deletedAt(2*time.Hour, func(f *Facts) { f.Shadowed = true })}},
			kept:   History{Deletions: []Deletion{deletedAt(2*time.Hour, nil)}},
		},
		{
			check:  "notBeforeIdle",
			broken: History{Deletions: []Deletion{deletedAt(89*time.Minute, func(f *Facts) { f.IdleAt = at(90 * time.Minute) })}},
			kept:   History{Deletions: []Deletion{deletedAt(90*time.Minute, func(f *Facts) { f.IdleAt = at(90 * time.Minute) })}},
		},
		{
			check:  "notBeforeExpiry",
			broken: History{Deletions: []Deletion{deletedAt(59*time.Minute, nil)}},
			kept:   History{Deletions: []Deletion{deletedAt(time.Hour, nil)}},
		},
		{
			check: "notBeforeAnnounced",
			broken: History{Deletions: []Deletion{deletedAt(time.Hour, nil)},
				Sends: []Send{reminderSent(40*time.Minute, at(70*time.Minute))}},
			// Deleted at the time given, however the expiry moved since.
			kept: History{Deletions: []Deletion{deletedAt(70*time.Minute, func(f *Facts) { f.Since = at(45 * time.Minute) })},
				Sends: []Send{reminderSent(40*time.Minute, at(70*time.Minute))}},
		},
		{
			check: "noticeGiven",
			broken: History{Deletions: []Deletion{deletedAt(time.Hour, func(f *Facts) { f.MinimumNotice = 30 * time.Minute })},
				Sends: []Send{reminderSent(40*time.Minute, at(time.Hour))}},
			kept: History{Deletions: []Deletion{deletedAt(70*time.Minute, func(f *Facts) { f.MinimumNotice = 30 * time.Minute })},
				Sends: []Send{reminderSent(40*time.Minute, at(time.Hour))}},
		},
		{
			check: "liveAfterNotice",
			// Rehearsed at 40m, then extended at 45m to 1h, and gone at its
			// expiry: 15m after the first message since, 30m owed.
			broken: History{Deletions: []Deletion{deletedAt(time.Hour, func(f *Facts) { f.MinimumNotice = 30 * time.Minute })},
				Sends: []Send{wouldDeleteSent(40 * time.Minute), extendedSent(45*time.Minute, at(time.Hour))}},
			kept: History{Deletions: []Deletion{deletedAt(75*time.Minute, func(f *Facts) { f.MinimumNotice = 30 * time.Minute })},
				Sends: []Send{wouldDeleteSent(40 * time.Minute), extendedSent(45*time.Minute, at(time.Hour))}},
		},
		{
			check:  "stageAcceptedOnce",
			broken: History{Sends: []Send{reminderSent(40*time.Minute, at(time.Hour)), reminderSent(41*time.Minute, at(time.Hour))}},
			// The first was reset: the controller could not know.
			kept: History{Sends: []Send{func() Send { s := reminderSent(40*time.Minute, at(time.Hour)); s.Reported = false; return s }(),
				reminderSent(41*time.Minute, at(time.Hour))}},
		},
		{
			check: "remindsOfTheCurrentDate",
			broken: History{Sends: []Send{func() Send {
				s := reminderSent(40*time.Minute, at(time.Hour))
				s.IdleAt = at(65 * time.Minute)
				return s
			}()}},
			kept: History{Sends: []Send{func() Send {
				s := reminderSent(40*time.Minute, at(time.Hour))
				s.IdleAt = at(time.Hour)
				return s
			}()}},
		},
		{
			check: "extendedOnlyAfterNotice",
			broken: History{Sends: []Send{{At: at(time.Hour), ID: "e", UID: "u1", Type: v1alpha1.EventExtended, Channel: "sim-0",
				Announced: at(2 * time.Hour), Accepted: true, Reported: true}}},
			kept: History{Sends: []Send{reminderSent(40*time.Minute, at(time.Hour)),
				{At: at(time.Hour), ID: "e", UID: "u1", Type: v1alpha1.EventExtended, Channel: "sim-0", Announced: at(2 * time.Hour), Accepted: true, Reported: true}}},
		},
		{
			check:  "oneOffDelivered",
			broken: History{Settled: true, Sends: []Send{{At: at(time.Hour), ID: "x", UID: "u1", Type: v1alpha1.EventExpired, Channel: "sim-0"}}},
			kept: History{Settled: true, Sends: []Send{{At: at(time.Hour), ID: "x", UID: "u1", Type: v1alpha1.EventExpired, Channel: "sim-0"},
				{At: at(2 * time.Hour), ID: "x", UID: "u1", Type: v1alpha1.EventExpired, Channel: "sim-0", Accepted: true, Reported: true}}},
		},
		{
			check:  "deletedPromptly",
			broken: History{Healthy: true, Now: at(time.Hour + 1001*time.Millisecond), Live: []Facts{governed()}},
			kept:   History{Healthy: true, Now: at(time.Hour + time.Second), Live: []Facts{governed()}},
		},
		{
			check:  "auditIntentAndOutcome",
			broken: History{Deletions: []Deletion{deletedAt(time.Hour, nil)}, Audit: fullAudit(time.Hour)[1:]},
			kept:   History{Deletions: []Deletion{deletedAt(time.Hour, nil)}, Audit: fullAudit(time.Hour)},
		},
		{
			check:  "notAsleepEarly",
			broken: History{SleepStarts: []SleepStart{{At: at(29 * time.Minute), Facts: sleepy(nil)}}},
			kept:   History{SleepStarts: []SleepStart{{At: at(30 * time.Minute), Facts: sleepy(nil)}}},
		},
		{
			check: "deletedOnlyAsleep",
			// Asleep since 30m, for deleteAfter 1h.
			broken: History{Deletions: []Deletion{{At: at(89 * time.Minute), Facts: sleepy(func(f *Facts) { f.SleptAt = at(30 * time.Minute) })}}},
			kept:   History{Deletions: []Deletion{{At: at(90 * time.Minute), Facts: sleepy(func(f *Facts) { f.SleptAt = at(30 * time.Minute) })}}},
		},
		{
			check:  "noFight",
			broken: History{ScaleDowns: []ScaleDown{{At: at(40 * time.Minute), ScaledUp: at(20 * time.Minute), Facts: sleepy(nil)}}},
			kept:   History{ScaleDowns: []ScaleDown{{At: at(50 * time.Minute), ScaledUp: at(20 * time.Minute), Facts: sleepy(nil)}}},
		},
		{
			check:  "sleptWokeOnce",
			broken: History{Sends: []Send{sleptSent(40*time.Minute, true), sleptSent(41*time.Minute, true)}},
			// A repeat after a reset is the at-least-once edge.
			kept: History{Sends: []Send{sleptSent(40*time.Minute, false), sleptSent(41*time.Minute, true)}},
		},
		{
			check: "wokeAtNextLook",
			// Asleep since 30m, scaled up at 40m, still asleep after a look
			// at 41m that finished; one that retried after a conflict, or
			// one at the maximum, does not count.
			broken: History{Looks: []Look{{At: at(41 * time.Minute), Phase: "Asleep", SleptSince: at(30 * time.Minute), ScaledUp: at(40 * time.Minute),
				Finished: true, Facts: sleepy(nil)}}},
			kept: History{Looks: []Look{{At: at(41 * time.Minute), Phase: "Asleep", SleptSince: at(30 * time.Minute), ScaledUp: at(40 * time.Minute),
				Facts: sleepy(nil)}, {At: at(41 * time.Minute), Phase: "Asleep", SleptSince: at(30 * time.Minute), ScaledUp: at(40 * time.Minute),
				Finished: true, Facts: sleepy(func(f *Facts) { f.MaxAt = at(41 * time.Minute) })}}},
		},
		{
			check: "wokeExternallyNamed",
			// Asleep since 30m, scaled up at 40m, nothing else since 20m.
			broken: History{CycleEvents: []CycleEvent{{At: at(41 * time.Minute), UID: "u1", Reason: "Woke", Since: "2025-01-06T09:30:00Z",
				SinceAt: at(30 * time.Minute), ScaledUp: at(40 * time.Minute), OtherUse: at(20 * time.Minute)}}},
			kept: History{CycleEvents: []CycleEvent{{At: at(41 * time.Minute), UID: "u1", Reason: "WokeExternally", Since: "2025-01-06T09:30:00Z",
				SinceAt: at(30 * time.Minute), ScaledUp: at(40 * time.Minute), OtherUse: at(20 * time.Minute)}}},
		},
		{
			check:  "restoredOnWake",
			broken: History{WakeEnds: []WakeEnd{{At: at(time.Hour), UID: "u1", Name: "o1", Unrestored: []string{"db (replicas 0, labelled true, annotated true)"}}}},
			kept:   History{WakeEnds: []WakeEnd{{At: at(time.Hour), UID: "u1", Name: "o1"}}},
		},
		{
			check:  "keepsTheirReplicas",
			broken: History{Overrides: []Override{{At: at(time.Hour), Workload: "ws-u1/app", From: 3, To: 2}}},
			kept:   History{},
		},
	}
	for _, c := range cases {
		var fn func(*History) []Violation
		for _, ch := range checks {
			if ch.name == c.check {
				fn = ch.fn
			}
		}
		if fn == nil {
			t.Fatalf("no check %s", c.check)
		}
		t.Run(c.check+" fails on a history that breaks it", func(t *testing.T) {
			if vs := fn(&c.broken); len(vs) == 0 || vs[0].Check != c.check {
				t.Errorf("got %v, want a %s violation", vs, c.check)
			}
		})
		t.Run(c.check+" passes a history that keeps it", func(t *testing.T) {
			if vs := fn(&c.kept); len(vs) != 0 {
				t.Errorf("got %v, want none", vs)
			}
		})
	}
	if len(cases) != len(checks) {
		t.Errorf("%d checks, %d tested", len(checks), len(cases))
	}
}

func TestOneSeedPlaysTheSameHistoryTwice(t *testing.T) {
	for _, seed := range []uint64{3, 7} {
		steps := generate(seed, nil)
		histories := [2]*History{}
		for i := range histories {
			w := newWorld(map[string]string{})
			for _, s := range steps {
				w.apply(s)
				w.advance(ms(s.WaitMS))
			}
			histories[i] = w.history()
		}
		a, b := histories[0], histories[1]
		if len(a.Sends) == 0 && len(a.Deletions) == 0 {
			t.Fatalf("seed %d: nothing happened, nothing compared", seed)
		}
		if !reflect.DeepEqual(a.Deletions, b.Deletions) || !reflect.DeepEqual(sendSet(a), sendSet(b)) || !a.Now.Equal(b.Now) {
			t.Errorf("seed %d played two histories:\n%+v\n%+v", seed, a.Deletions, b.Deletions)
		}
	}
}

// sendSet counts the sends: channels of one message run in goroutines,
// so their order within one delivery is not fixed, their outcome is.
func sendSet(h *History) map[Send]int {
	out := map[Send]int{}
	for _, s := range h.Sends {
		out[s]++
	}
	return out
}

// The simulated API server refuses, as the real one does, a patch locked
// on an old resourceVersion and a delete whose preconditions fail.
func TestTheSimulatedAPIServerRefusesStaleWrites(t *testing.T) {
	w := newWorld(map[string]string{})
	w.apply(Step{Kind: kCreate, Val: "a"})
	cm, _ := w.get(objName(0))
	pom := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: *cm.ObjectMeta.DeepCopy()}
	w.apply(Step{Kind: kTTL, Val: "1h"})

	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": cm.ResourceVersion, "annotations": map[string]string{"x": "y"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.live.Patch(ctx, pom, client.RawPatch(types.MergePatchType, patch)); !apierrors.IsConflict(err) {
		t.Errorf("patch on an old resourceVersion: got %v, want a conflict", err)
	}
	if err := w.live.Delete(ctx, pom, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion}); !apierrors.IsConflict(err) {
		t.Errorf("delete on an old resourceVersion: got %v, want a conflict", err)
	}
	other := types.UID("someone-else")
	if err := w.live.Delete(ctx, pom, client.Preconditions{UID: &other}); !apierrors.IsConflict(err) {
		t.Errorf("delete of another UID: got %v, want a conflict", err)
	}
	if _, ok := w.get(objName(0)); !ok {
		t.Error("the object was deleted")
	}
}

// The idle inputs reach the controller, and the world reads them as the
// documentation says: each schedule deletes its one object at a known
// time, which only the idle clock, the maximum or a forbidden keep gives.
func TestIdleExpiryMaximumAndForbiddenKeepDecideTheDeletionTime(t *testing.T) {
	const policy = "rem=,notice=0s,sel=,prio=0,dry=0,cap=0"
	cases := []struct {
		name  string
		steps []Step
		// deleted is when the object goes, from the start.
		deleted time.Duration
	}{
		{
			name: "a spec edit keeps an object idleTTL past it",
			steps: []Step{
				{Kind: kPolicyCreate, Val: "ttl=10m,idle=30m," + policy, WaitMS: 1000},
				{Kind: kCreate, Val: "a", WaitMS: 5 * 60_000},
				{Kind: kUse, WaitMS: 60 * 60_000},
			},
			deleted: 35*time.Minute + time.Second,
		},
		{
			name: "a future last-active counts from when it was written, not from the time it names",
			steps: []Step{
				{Kind: kPolicyCreate, Val: "ttl=10m,idle=30m," + policy, WaitMS: 1000},
				{Kind: kCreate, Val: "a", WaitMS: 1000},
				{Kind: kLastActive, Val: "+2h", WaitMS: 90 * 60_000},
			},
			deleted: 30*time.Minute + 2*time.Second,
		},
		{
			name: "use caps at the maximum",
			steps: []Step{
				{Kind: kPolicyCreate, Val: "ttl=10m,idle=30m,max=40m," + policy, WaitMS: 1000},
				{Kind: kCreate, Val: "a", WaitMS: 20 * 60_000},
				{Kind: kLastActive, Val: "now", WaitMS: 60 * 60_000},
			},
			deleted: 40*time.Minute + time.Second,
		},
		{
			name: "a last-active that is no time is ignored",
			steps: []Step{
				{Kind: kPolicyCreate, Val: "ttl=10m,idle=5m," + policy, WaitMS: 1000},
				{Kind: kCreate, Val: "a", WaitMS: 1000},
				{Kind: kLastActive, Val: "yesterday", WaitMS: 30 * 60_000},
			},
			deleted: 10*time.Minute + time.Second,
		},
		{
			name: "a forbidden keep is ignored",
			steps: []Step{
				{Kind: kPolicyCreate, Val: "ttl=10m,keep=Forbidden," + policy, WaitMS: 1000},
				{Kind: kCreate, Val: "a;keep=true", WaitMS: 30 * 60_000},
			},
			deleted: 10*time.Minute + time.Second,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(map[string]string{})
			for _, s := range c.steps {
				w.apply(s)
				w.advance(ms(s.WaitMS))
				if vs := w.check(); len(vs) > 0 {
					t.Fatalf("violations: %v", vs)
				}
			}
			h := w.history()
			if len(h.Deletions) != 1 {
				t.Fatalf("%d deletions, want 1", len(h.Deletions))
			}
			d := h.Deletions[0]
			if got := d.At.Sub(t0); got < c.deleted || got > c.deleted+promptness {
				t.Errorf("deleted at %s, want %s (within %s)", got, c.deleted, promptness)
			}
			if want := t0.Add(c.deleted); !d.ExpiresAt.Equal(want) {
				t.Errorf("the world read the expiry as %s, want %s", d.ExpiresAt.Sub(t0), c.deleted)
			}
		})
	}
}
