// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package sleep

import (
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// A look at a sleeping object skips reading its workloads only while the
// watch runs and has brought no news of them since a read found none
// scaled up; news that comes while a read is under way counts.
func TestALookSkipsTheWorkloadsOnlyWithoutNewsSinceTheLastRead(t *testing.T) {
	const uid = types.UID("owner")
	m := &MarkedWatch{}
	if found := m.reading(uid); found != nil {
		found()
	}
	if m.unchanged(uid) {
		t.Fatal("skipped while the watch does not run")
	}
	m.running.Store(true)
	if !m.unchanged(uid) {
		t.Fatal("read again after a read that found nothing, with no news since")
	}

	m.checks.news(uid)
	if m.unchanged(uid) {
		t.Fatal("skipped after news of a workload")
	}

	// News while the read is under way: it may not have seen the change.
	found := m.reading(uid)
	m.checks.news(uid)
	found()
	if m.unchanged(uid) {
		t.Fatal("skipped after news that came during the read")
	}
	m.reading(uid)()
	if !m.unchanged(uid) {
		t.Fatal("read again after a read with no news during or since")
	}

	// A wake forgets it; so does the limit, which only costs a read.
	m.woke(uid)
	if m.unchanged(uid) {
		t.Fatal("skipped after the object woke")
	}
	m.reading(uid)()
	for i := range wakeCheckLimit {
		m.checks.news(types.UID(strconv.Itoa(i)))
	}
	if m.unchanged(uid) {
		t.Fatal("remembered past the limit")
	}
	var none *MarkedWatch
	if none.unchanged(uid) {
		t.Fatal("skipped without a watch")
	}
	none.reading(uid)()
	none.woke(uid)
}
