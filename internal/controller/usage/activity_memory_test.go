// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package usage

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// The activity kept in memory dates a generation change from when it was
// first seen, and forgets what it saw of an object recreated under the
// same name.
func TestActivityDatesAGenerationFromWhenItWasFirstSeen(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	key := wakeup.Key{GVK: fixture.ConfigMapGVK, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cm"}}
	var a Activity

	if o := a.observe(key, "uid-1", 2, t0); o.generation != 2 || !o.at.Equal(t0) {
		t.Fatalf("first look: %+v, want generation 2 seen at %s", o, t0)
	}
	if o := a.observe(key, "uid-1", 2, t0.Add(time.Minute)); !o.at.Equal(t0) {
		t.Fatalf("the same generation again: seen at %s, want %s, when it was first seen", o.at, t0)
	}
	a.wrote(key, t0.Add(2*time.Minute))
	if o := a.observe(key, "uid-1", 3, t0.Add(3*time.Minute)); !o.at.Equal(t0.Add(3*time.Minute)) || !o.wrote.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("a new generation: %+v, want it seen at %s and the write at %s kept", o, t0.Add(3*time.Minute), t0.Add(2*time.Minute))
	}
	if o := a.observe(key, "uid-2", 3, t0.Add(4*time.Minute)); !o.at.Equal(t0.Add(4*time.Minute)) || !o.wrote.IsZero() {
		t.Fatalf("an object recreated under the same name, at the same generation: %+v, want it seen now and nothing written", o)
	}
	a.wrote(key, t0.Add(5*time.Minute))
	a.Forget(key)
	if o := a.observe(key, "uid-2", 3, t0.Add(6*time.Minute)); !o.at.Equal(t0.Add(6*time.Minute)) || !o.wrote.IsZero() {
		t.Fatalf("after Forget: %+v, want the generation seen now and nothing written", o)
	}
	other := wakeup.Key{GVK: fixture.ConfigMapGVK, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "other"}}
	a.wrote(other, t0)
	if o := a.observe(other, "uid-3", 1, t0.Add(time.Minute)); !o.wrote.IsZero() {
		t.Fatalf("a write noted before any look: %+v, want nothing written", o)
	}
}
