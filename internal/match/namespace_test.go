// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package match

import (
	"errors"
	"testing"

	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// TestAPolicyDoesNotSelectAnObjectWhoseNamespaceItCannotRead: without the
// namespace's labels a namespace selector cannot say yes; the error is
// returned beside the answer, which is no.
func TestAPolicyDoesNotSelectAnObjectWhoseNamespaceItCannotRead(t *testing.T) {
	boom := errors.New("forbidden")
	cs := Candidates(items(fixture.Policy("dev", fixture.InNamespaces(map[string]string{"env": "dev"}))), configMapGVK)
	if len(cs) != 1 {
		t.Fatalf("%d candidates, want 1", len(cs))
	}
	ok, err := cs[0].Matches(Object{Namespaced: true, NamespaceLabels: func() (map[string]string, error) { return nil, boom }})
	if ok || !errors.Is(err, boom) {
		t.Errorf("Matches = %t, %v; want false and the namespace's error", ok, err)
	}
}
