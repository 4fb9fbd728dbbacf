// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

// What internal/sim needs to build an ObjectReconciler by hand, as Setup
// does, and to drive it one reconcile at a time.

// NewDeletionCaps returns the deletion caps Setup gives the object
// reconciler, with a global cap of perMinute deletions (0: none).
func NewDeletionCaps(perMinute int) *deletionCaps {
	return newDeletionCaps(perMinute)
}

// AnnounceInline makes the reconciler send one-off messages before
// Reconcile returns, as it does while shutting down, instead of in the
// background: a simulation must see every send happen in its own order.
func (r *ObjectReconciler) AnnounceInline() {
	r.drainAnnouncements()
}
