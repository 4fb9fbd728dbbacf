// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/sleep"
	"github.com/amphitheatre-app/timeout-controller/internal/outbox"
)

// The checks of the scenes of sleep and of the owner's digest, from the
// facts they gathered.

// checkSleep checks the scene of sleep: three sleeps, each afterIdle
// after the creation or the last wake; a wake by the plugin and one by
// alice's exec; the Deployments scaled to zero and back; the deletion
// deleteAfter after the last sleep; each message and Event once.
func checkSleep(t *testing.T, res *results) {
	f := res.sleep
	if f == nil || f.obj == nil {
		t.Fatal("the scene of sleep made no Playbook")
	}
	t.Run("sleeps three times, each afterIdle after its creation or its last wake, and not late", func(t *testing.T) {
		if len(f.sleeps) != sleeps {
			t.Fatalf("%d sleeps, want %d", len(f.sleeps), sleeps)
		}
		for i, st := range f.sleeps {
			due := st.from.Add(sleepAfter)
			// Due at the first whole second after.
			if st.at.Before(due) || st.seen.Sub(due) > time.Second+lateAfter {
				t.Errorf("sleep %d at %s (seen %s), due at %s", i+1, st.at, st.seen, due)
			}
			for name, n := range st.replicas {
				if n != 0 {
					t.Errorf("sleep %d: Deployment %s at %d replicas", i+1, name, n)
				}
			}
			if st.freed != 3 {
				t.Errorf("sleep %d freed %d replicas, want 3", i+1, st.freed)
			}
		}
	})
	t.Run("wakes by kubectl timeout wake, then by alice's exec, at once and with its Deployments restored", func(t *testing.T) {
		if len(f.wakes) != sleeps-1 {
			t.Fatalf("%d wakes, want %d", len(f.wakes), sleeps-1)
		}
		if by := f.wakes[0].by; !strings.HasPrefix(by, "use (") || strings.Contains(by, "exec") {
			t.Errorf("the first wake was by %q, want the use the plugin wrote", by)
		}
		if want := "use (exec by " + execUser + ")"; f.wakes[1].by != want {
			t.Errorf("the second wake was by %q, want %q", f.wakes[1].by, want)
		}
		for i, w := range f.wakes {
			if w.seen.Sub(w.from) > lateAfter {
				t.Errorf("wake %d seen %s after the use", i+1, w.seen.Sub(w.from))
			}
			if !maps.Equal(w.replicas, f.replicas) || len(f.replicas) != 2 {
				t.Errorf("wake %d: Deployments %v, want %v", i+1, w.replicas, f.replicas)
			}
		}
		if f.execErr == "" || f.execErr == "it succeeded" {
			t.Errorf("the exec: %q; want the API server's refusal for want of a kubelet", f.execErr)
		}
	})
	t.Run("is deleted once, deleteAfter after its last sleep, and not late", func(t *testing.T) {
		uid := f.obj.GetUID()
		deleting, deleted := res.deletesMade(uid), res.records(uid, audit.Deleted)
		if len(deleting) != 1 || len(deleted) != 1 || f.deletedAt.IsZero() {
			t.Fatalf("%d deleting and %d deleted records, seen deleted at %s; want one deletion", len(deleting), len(deleted), f.deletedAt)
		}
		due := f.lastSleep().Add(sleepDeleteAfter)
		if deleting[0].Time.Before(due) || deleted[0].Time.Sub(due) > lateAfter {
			t.Errorf("deleted at %s, due at %s", deleted[0].Time, due)
		}
	})
	t.Run("tells each sleep, wake, expiry and deletion once by webhook and each sleep and wake in an Event", func(t *testing.T) {
		got := map[v1alpha1.EventType]int{}
		// Every message, repeats included.
		for _, m := range res.messages {
			if m.name == f.obj.GetName() {
				got[m.event]++
			}
		}
		want := map[v1alpha1.EventType]int{v1alpha1.EventSlept: sleeps, v1alpha1.EventWoke: sleeps - 1, v1alpha1.EventExpired: 1, v1alpha1.EventDeleted: 1}
		if !maps.Equal(got, want) {
			t.Errorf("messages %v, want %v", got, want)
		}
		if f.events[sleep.ReasonSlept] != sleeps || f.events[sleep.ReasonWoke] != sleeps-1 {
			t.Errorf("Events %v, want %d %s and %d %s", f.events, sleeps, sleep.ReasonSlept, sleeps-1, sleep.ReasonWoke)
		}
	})
}

// checkDigest checks the scene of the owner's digest: one digest to the
// owner alone, listing their three Playbooks and not the fourth, sent
// when the first one's reminder fell due; each Playbook's own reminder to
// the policy's address only; each deleted once, on time.
func checkDigest(t *testing.T, res *results) {
	f := res.digest
	if f == nil || len(f.cast) != len(digestTitles)+1 {
		t.Fatal("the scene of the owner's digest made no Playbooks")
	}
	var digests []message
	for _, m := range res.messages {
		if isDigest(m) {
			digests = append(digests, m)
		}
	}
	t.Run("mails the owner one digest listing their Playbooks and no other", func(t *testing.T) {
		if len(digests) != 1 {
			t.Fatalf("%d digests, want 1", len(digests))
		}
		d := digests[0]
		if n := len(digestItems(d)); n != len(digestTitles) {
			t.Errorf("the digest lists %d Playbooks, want %d:\n%s", n, len(digestTitles), d.text)
		}
		for _, r := range f.cast {
			if listed := strings.Contains(d.text, r.obj.GetName()); listed != r.owned {
				t.Errorf("the digest lists %s: %t, want %t", r.title, listed, r.owned)
			}
		}
	})
	t.Run("sends the digest when the first reminder falls due, within the window before the others", func(t *testing.T) {
		if len(digests) == 0 {
			t.Skip("no digest")
		}
		for _, r := range f.cast {
			if !r.owned {
				continue
			}
			due := r.obj.GetCreationTimestamp().Add(digestLife - digestLead)
			// The creation time counts whole seconds, down.
			if at := digests[0].arrived; at.Before(due.Add(-outbox.Window(digestLead))) || at.Sub(due) > time.Second+lateAfter {
				t.Errorf("the digest came at %s; %s's reminder was due at %s", at, r.title, due)
			}
		}
	})
	t.Run("reminds the policy's address of each Playbook, never the owner but by the digest", func(t *testing.T) {
		for _, r := range f.cast {
			got := res.received(r.obj.GetName(), viaMail, v1alpha1.EventReminder)
			own := slices.DeleteFunc(slices.Clone(got), isDigest)
			if len(own) != 1 || !slices.Equal(own[0].to, []string{mailTo}) {
				t.Errorf("%s: reminders of its own %v, want one to %s alone", r.title, own, mailTo)
			}
		}
	})
	t.Run("deletes each once, at its expiry, and tells the owner of theirs", func(t *testing.T) {
		for _, r := range f.cast {
			uid := r.obj.GetUID()
			deleting, deleted := res.deletesMade(uid), res.records(uid, audit.Deleted)
			if len(deleting) != 1 || len(deleted) != 1 {
				t.Errorf("%s: %d deleting and %d deleted records, want 1 each", r.title, len(deleting), len(deleted))
				continue
			}
			due := r.obj.GetCreationTimestamp().Add(digestLife)
			if deleting[0].Time.Before(due) || deleted[0].Time.Sub(due) > lateAfter {
				t.Errorf("%s deleted at %s, due at %s", r.title, deleted[0].Time, due)
			}
			for _, typ := range []v1alpha1.EventType{v1alpha1.EventExpired, v1alpha1.EventDeleted} {
				got := res.received(r.obj.GetName(), viaMail, typ)
				if len(got) != 1 || slices.Contains(got[0].to, digestOwner) != r.owned {
					t.Errorf("%s: %s mails %v, want one, to %s only if theirs (%t)", r.title, typ, got, digestOwner, r.owned)
				}
			}
		}
	})
}
