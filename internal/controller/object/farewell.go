// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/internal/controller/delivery"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/eval"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// farewellLead is how long before a deletion falls due the controller
// writes its farewell (the expired and deleted messages, with what the
// namespaces the object owns hold) to the outbox, so that when it is due
// the delete is the only write left. The entry is written before the
// delete either way: a crash between the two loses no message, and an
// entry whose delete never came is dropped by the outbox's sender.
const farewellLead = time.Second

// farewellFresh is how long a farewell written ahead stands for the
// deletion: the outbox's sender drops a pending entry whose object is still
// there 15 s after it was written (a process that died before its delete),
// and the delete, which may take up to kube.WriteTimeout, must come well
// before that. A deletion that waits longer (for its turn under the
// deletion caps) writes its farewell again.
const farewellFresh = 5 * time.Second

// farewell is the entry written ahead of an object's deletion, and what
// it was written from: it stands only for a delete of the same object at
// the same version, under the same policy and expiry.
type farewell struct {
	uid             types.UID
	resourceVersion string
	policy          string
	expiresAt       time.Time
	owned           []string
	reclaimed       *notify.Reclaimed
	// written is when the entry was written.
	written time.Time
}

// stands reports whether fw was written for a delete ev decides, recently
// enough to stand for it (farewellFresh).
func (fw farewell) stands(ev *eval.Evaluation) bool {
	return fw.uid == ev.Obj.UID && fw.resourceVersion == ev.Obj.ResourceVersion &&
		fw.policy == ev.Policy.Name && fw.expiresAt.Equal(ev.Life.ExpiresAt) && ev.Now.Sub(fw.written) < farewellFresh
}

// farewells are the farewells written ahead, by object.
type farewells struct {
	mu sync.Mutex
	m  map[wakeup.Key]farewell
}

func (f *farewells) put(key wakeup.Key, fw farewell) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[wakeup.Key]farewell{}
	}
	f.m[key] = fw
}

func (f *farewells) get(key wakeup.Key) (farewell, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fw, ok := f.m[key]
	return fw, ok
}

func (f *farewells) forget(key wakeup.Key) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, key)
}

// deletesAt reports whether, as things stand, the plan at is the deletion.
func deletesAt(ev *eval.Evaluation, at time.Time) bool {
	now := ev.Now
	ev.Now = at
	defer func() { ev.Now = now }()
	return planOf(ev).Action == expiry.Delete
}

// ahead returns when to look at an object waiting until at next: a
// farewellLead earlier when a deletion is due then, and within the lead it
// writes the farewell first. A dry run deletes nothing, and a deletion
// that reads the whole object first (for the title of its messages, or
// the archive) writes its farewell from that read: both wait as they
// would. A farewell written ahead that no longer stands is withdrawn.
func (r *Reconciler) ahead(ctx context.Context, ev *eval.Evaluation, at time.Time) time.Time {
	fw, written := r.farewells.get(ev.Key)
	if written && !fw.stands(ev) {
		r.withdrawFarewell(ctx, ev.Key)
		written = false
	}
	if written || at.IsZero() || r.Outbox == nil || ev.DryRun(r.DryRun) || ev.Archives(r.DryRun) || ev.NeedsTitle(ev.Key) ||
		!delivery.SaysFarewell(ev) || !deletesAt(ev, at) {
		return at
	}
	if early := at.Add(-farewellLead); ev.Now.Before(early) {
		return early
	}
	owned, reclaimed := r.census(ctx, ev)
	if entry := r.delivery().Farewell(ctx, ev, reclaimed); entry != nil {
		prepareCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kube.WriteTimeout)
		defer cancel()
		if err := r.Outbox.Prepare(prepareCtx, entry); err != nil {
			// The deletion writes it then.
			logf.FromContext(ctx).Error(err, "write the farewell ahead of the deletion")
			return at
		}
	}
	r.farewells.put(ev.Key, farewell{uid: ev.Obj.UID, resourceVersion: ev.Obj.ResourceVersion, policy: ev.Policy.Name,
		expiresAt: ev.Life.ExpiresAt, owned: owned, reclaimed: reclaimed, written: ev.Now})
	return at
}

// withdrawFarewell removes the entry written ahead of a deletion that will
// not come as it was written for: the object went, or is going, by
// someone else's hand, or changed since.
func (r *Reconciler) withdrawFarewell(ctx context.Context, key wakeup.Key) {
	fw, ok := r.farewells.get(key)
	r.farewells.forget(key)
	if ok && r.Outbox != nil {
		r.Outbox.Cancel(ctx, fw.uid)
	}
}
