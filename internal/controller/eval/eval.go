// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package eval

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/channelset"
	"github.com/amphitheatre-app/timeout-controller/internal/decide"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// Evaluation is what the controller makes of an object at one moment:
// the shared decision (internal/decide) and what only the controller
// knows, its channels, its clock and its deliveries not written yet.
//
// It is the state of one pass over one object, and what the steps of that
// pass (notify, expire, record, audit) take instead of a long argument
// list. It does not outlive the pass.
type Evaluation struct {
	Key wakeup.Key
	// Obj is the object as the decision read it: from the cache, or fresh
	// from the API server before a delete.
	Obj *metav1.PartialObjectMetadata
	decide.Decision
	Policy *v1alpha1.TimeoutPolicy
	// Unwritten is set when Record holds deliveries the object does not
	// show: the cache lags, or writing them failed.
	Unwritten bool
	Channels  *channelset.ChannelSet
	Now       time.Time
	// Rehearse says deletions are only rehearsed: the policy's dryRun or
	// the controller's --dry-run.
	Rehearse bool
	// WokeExternally says that what woke the sleeping object (WokeBy) was
	// someone else scaling a workload up.
	WokeExternally bool
	// Owner is the address of the object's owner when its reminders
	// reach the owner in a digest (OwnerChannel), else empty.
	Owner string
}

// DryRun reports whether the object's expiry deletes nothing.
func (ev *Evaluation) DryRun(global bool) bool {
	return global || ev.Policy.Spec.Deletion.DryRun
}

// Archives reports whether the object's manifest is archived before it is
// deleted.
func (ev *Evaluation) Archives(globalDryRun bool) bool {
	return ev.Policy.Spec.Deletion.Archive && !ev.DryRun(globalDryRun)
}

// NeedsTitle reports whether a message about the object would lack its
// title: a Playbook none of whose messages has read it yet.
func (ev *Evaluation) NeedsTitle(key wakeup.Key) bool {
	return ev.Record.Title == "" && decide.HasTitle(key.GVK.GroupKind()) && len(ev.Channels.Notifiers) > 0
}

// ChangedBy is who last changed the object's lifetime, and how, as its
// changed-by stamp says; empty when it has none.
func ChangedBy(annotations map[string]string) expiry.ChangedBy {
	c, _ := expiry.ParseChangedBy(annotations)
	return c
}
