// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/metrics"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

func TestDeparturesFollowADeletionUntilEverythingItOwnedIsGone(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	key := wakeup.Key{GVK: kube.NamespaceKind, NamespacedName: types.NamespacedName{Name: "pb"}}
	newDeparture := func(namespaces ...string) *departure {
		return &departure{due: t0, expiresAt: t0, accepted: t0, namespaces: namespacesOf(namespaces), owned: len(namespaces)}
	}

	t.Run("is done when the last namespace goes after the object", func(t *testing.T) {
		var ds departures
		ds.deleted(key, newDeparture("amp-a", "amp-b"))
		if _, followed, done := ds.objectGone(key, t0.Add(time.Second)); !followed || done {
			t.Fatalf("object gone: followed %t, done %t; want followed, not done", followed, done)
		}
		if _, done := ds.namespaceGone("amp-a"); done {
			t.Fatal("done with amp-b still there")
		}
		d, done := ds.namespaceGone("amp-b")
		if !done || d.owned != 2 || !d.gone.Equal(t0.Add(time.Second)) {
			t.Fatalf("last namespace gone: done %t, departure %+v", done, d)
		}
		if _, done := ds.namespaceGone("amp-b"); done {
			t.Error("a second deletion event of the namespace completed it again")
		}
	})
	t.Run("is done when the object goes after its namespaces, as in the foreground", func(t *testing.T) {
		var ds departures
		ds.deleted(key, newDeparture("amp-a"))
		if _, done := ds.namespaceGone("amp-a"); done {
			t.Fatal("done before the object is gone")
		}
		if _, followed, done := ds.objectGone(key, t0); !followed || !done {
			t.Fatalf("object gone: followed %t, done %t; want both", followed, done)
		}
	})
	t.Run("follows only what this process deleted", func(t *testing.T) {
		var ds departures
		if _, followed, _ := ds.objectGone(key, t0); followed {
			t.Error("an object nobody here deleted is reported gone")
		}
		if _, done := ds.namespaceGone("amp-a"); done {
			t.Error("a namespace nobody here followed completed a departure")
		}
	})
	t.Run("forgets departures older than departureTTL", func(t *testing.T) {
		var ds departures
		ds.deleted(key, newDeparture("amp-old"))
		other := wakeup.Key{GVK: kube.NamespaceKind, NamespacedName: types.NamespacedName{Name: "later"}}
		later := newDeparture("amp-new")
		later.accepted = t0.Add(departureTTL + time.Second)
		ds.deleted(other, later)
		if len(ds.byKey) != 1 || len(ds.byNS) != 1 {
			t.Errorf("%d departures and %d namespaces followed, want the later one only", len(ds.byKey), len(ds.byNS))
		}
	})
}

func TestATerminatingObjectIsReportedStuckOncePerDeletion(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	key := wakeup.Key{GVK: kube.NamespaceKind, NamespacedName: types.NamespacedName{Name: "pb"}}
	var ds departures

	warn, again := ds.inTerminating(key, t0, t0.Add(time.Minute))
	if warn || again != stuckAfter-time.Minute {
		t.Errorf("a minute in: warn %t, look again in %s; want no warning, in %s", warn, again, stuckAfter-time.Minute)
	}
	if n := fixture.GaugeValue(t, metrics.ObjectsTerminating); n != 1 {
		t.Errorf("objects terminating %v, want 1", n)
	}
	if ts := fixture.GaugeValue(t, metrics.OldestTerminating); ts != float64(t0.Unix()) {
		t.Errorf("oldest terminating %v, want %d", ts, t0.Unix())
	}
	if warn, _ := ds.inTerminating(key, t0, t0.Add(stuckAfter)); !warn {
		t.Error("not reported stuck after stuckAfter")
	}
	if warn, again := ds.inTerminating(key, t0, t0.Add(2*stuckAfter)); warn || again != 0 {
		t.Errorf("reported stuck twice (warn %t, again %s)", warn, again)
	}
	// The same name deleted anew is another deletion.
	if warn, _ := ds.inTerminating(key, t0.Add(time.Hour), t0.Add(time.Hour+stuckAfter)); !warn {
		t.Error("a new deletion of the same name was not reported stuck")
	}
	ds.objectGone(key, t0.Add(2*time.Hour))
	if n, ts := fixture.GaugeValue(t, metrics.ObjectsTerminating), fixture.GaugeValue(t, metrics.OldestTerminating); n != 0 || ts != 0 {
		t.Errorf("after it is gone: objects terminating %v, oldest %v; want 0, 0", n, ts)
	}
}
