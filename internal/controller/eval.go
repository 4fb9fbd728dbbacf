// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/decide"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// evaluation is what the controller makes of an object at one moment:
// the shared decision (internal/decide) and what only the controller
// knows, its channels, its clock and its deliveries not written yet.
//
// It is the state of one pass over one object, and what the steps of that
// pass (notify, expire, record, audit) take instead of a long argument
// list. It does not outlive the pass.
type evaluation struct {
	key Key
	// obj is the object as the decision read it: from the cache, or fresh
	// from the API server before a delete.
	obj *metav1.PartialObjectMetadata
	decide.Decision
	policy *v1alpha1.TimeoutPolicy
	// unwritten is set when Record holds deliveries the object does not
	// show: the cache lags, or writing them failed.
	unwritten bool
	channels  *channelSet
	now       time.Time
	// rehearse says deletions are only rehearsed: the policy's dryRun or
	// the controller's --dry-run.
	rehearse bool
	// wokeExternally says that what woke the sleeping object (WokeBy) was
	// someone else scaling a workload up.
	wokeExternally bool
	// owner is the address of the object's owner when its reminders
	// reach the owner in a digest (OwnerChannel), else empty.
	owner string
}

// dryRun reports whether the object's expiry deletes nothing.
func (ev *evaluation) dryRun(global bool) bool {
	return global || ev.policy.Spec.Deletion.DryRun
}

// archives reports whether the object's manifest is archived before it is
// deleted.
func (ev *evaluation) archives(globalDryRun bool) bool {
	return ev.policy.Spec.Deletion.Archive && !ev.dryRun(globalDryRun)
}

// needsTitle reports whether a message about the object would lack its
// title: a Playbook none of whose messages has read it yet.
func (ev *evaluation) needsTitle(key Key) bool {
	return ev.Record.Title == "" && decide.HasTitle(key.GVK.GroupKind()) && len(ev.channels.notifiers) > 0
}

// changedBy is who last changed the object's lifetime, and how, as its
// changed-by stamp says; empty when it has none.
func changedBy(annotations map[string]string) expiry.ChangedBy {
	c, _ := expiry.ParseChangedBy(annotations)
	return c
}
