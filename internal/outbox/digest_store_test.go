// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestADigestKeepsItsNameAcrossVersions: two leaders of different
// versions during an upgrade must find the same digest for the same
// owner, policy, stage and window: the name is the first 16 bytes of the
// SHA-256 of those, in hex.
func TestADigestKeepsItsNameAcrossVersions(t *testing.T) {
	// sha256("playbooks\x00alice@example.com\x003d\x002026-11-01T09:00:00Z")
	const want = "timeout-digest-98e21bca797535755b9f737655091024"
	if got := DigestName("playbooks", "alice@example.com", "3d", time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)); got != want {
		t.Errorf("DigestName = %q, want %q", got, want)
	}
}

// TestTheDigestsStoredAreReadStrictly: a digest that does not decode is
// reported, not read as an empty one, and one that is not there is
// NotFound.
func TestTheDigestsStoredAreReadStrictly(t *testing.T) {
	f := newFixture(t)
	f.o.Marker = newObjects()
	f.addDigest(t, newDigest([]Member{member("pb-1", t0)}, "email"))
	broken := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: digestPrefix + "broken", Labels: map[string]string{LabelManagedBy: ManagedBy, LabelDigest: "true"}},
		Data:       map[string]string{dataKey: "{"},
	}
	if err := f.client.Create(context.Background(), broken); err != nil {
		t.Fatal(err)
	}
	t.Run("skips and reports a digest that does not decode", func(t *testing.T) {
		ds, errs, err := f.o.Store.ListDigests(context.Background())
		if err != nil || len(ds) != 1 || len(errs) != 1 {
			t.Errorf("ListDigests = %d digests, errors %v, %v; want the good one and the broken one reported", len(ds), errs, err)
		}
	})
	t.Run("says NotFound of a digest that is not there", func(t *testing.T) {
		if d, err := f.o.Store.GetDigest(context.Background(), digestPrefix+"gone"); !apierrors.IsNotFound(err) {
			t.Errorf("GetDigest = %+v, %v; want NotFound", d, err)
		}
	})
}
