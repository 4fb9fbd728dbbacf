// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
	"github.com/amphitheatre-app/timeout-controller/internal/outbox"
)

// evaluation is what the controller makes of an object at one moment.
type evaluation struct {
	policy   *v1alpha1.TimeoutPolicy
	schedule expiry.Schedule
	life     expiry.Lifetime
	record   *expiry.Record
	// recordReset is set when the object's record is about another expiry
	// and record is the new one, not yet written.
	recordReset bool
	// unwritten is set when record holds deliveries the object does not
	// show: the cache lags, or writing them failed.
	unwritten bool
	channels  *channelSet
	now       time.Time
	// rehearse says deletions are only rehearsed: the policy's dryRun or
	// the controller's --dry-run.
	rehearse bool
	// previous is, when recordReset, the expiry the old record was about.
	previous time.Time
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

// errChannelsNotReady: the governing policy's channels cannot be built.
var errChannelsNotReady = errors.New("notification channels not ready")

// needsTitle reports whether a message about the object would lack its
// title: a Playbook none of whose messages has read it yet.
func (ev *evaluation) needsTitle(key Key) bool {
	return ev.record.Title == "" && key.GVK.GroupKind() == playbooks && len(ev.channels.notifiers) > 0
}

func (ev *evaluation) plan() expiry.Plan {
	return expiry.Next(expiry.Input{
		Life: ev.life, Schedule: ev.schedule, Record: ev.record, Channels: ev.channels.names, DryRun: ev.rehearse, Now: ev.now,
	})
}

// evaluate finds the policy that governs obj and what it makes of obj. It
// returns nil when no valid policy governs obj, which is then left alone.
func (r *ObjectReconciler) evaluate(ctx context.Context, key Key, obj *metav1.PartialObjectMetadata) (*evaluation, error) {
	gvk := key.GVK
	if gvk.GroupKind() == outboxKind && obj.Labels[outbox.LabelEntry] == "true" {
		// The outbox's own entries: a policy on ConfigMaps that selects
		// them must not delete the messages they hold.
		return nil, nil
	}
	var policies v1alpha1.TimeoutPolicyList
	// Read only: the evaluation keeps pointers into the list, and nothing
	// changes them.
	if err := r.Client.List(ctx, &policies, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list policies: %w", err)
	}
	matched, err := match.Matching(match.Candidates(policies.Items, gvk), r.describe(ctx, obj))
	if err != nil || len(matched) == 0 {
		return nil, err
	}
	c := matched[0]
	if c.SpecErr != nil {
		return nil, nil
	}
	channels, err := r.Channels.get(ctx, c.TimeoutPolicy)
	if err != nil {
		// Without its channels the policy cannot give the notice it
		// promises: the object waits for a fix.
		return nil, errChannelsNotReady
	}
	ev := &evaluation{
		policy:   c.TimeoutPolicy,
		schedule: c.Schedule,
		life:     expiry.Compute(obj.CreationTimestamp.Time, obj.Annotations, c.Schedule.DefaultTTL),
		channels: channels,
		now:      r.Clock.Now(),
		rehearse: r.DryRun || c.Spec.Deletion.DryRun,
	}
	record, err := expiry.ParseRecord(obj.Annotations[expiry.AnnotationReminders])
	if err != nil {
		// The record is the controller's own; if someone broke it, the
		// worst that follows is a repeated reminder, never a deletion
		// without one.
		logf.FromContext(ctx).Info("ignoring unreadable record", "error", err.Error())
	}
	if !ev.life.Keep {
		created := obj.CreationTimestamp.Time
		// Deliveries not written yet belong to the record they were about,
		// before an extension replaces it.
		base := r.pending.carry(key, obj.UID, record, created, ev.life.ExpiresAt)
		ev.record = base.For(ev.life.ExpiresAt, created, ev.now)
		ev.recordReset = base != nil && ev.record != base
		if ev.recordReset {
			ev.previous = base.ExpiresAt
		}
		if ev.record == record {
			// Planning must not change the record the object shows.
			ev.record = record.Clone()
		}
		ev.unwritten = r.pending.apply(key, obj.UID, record, ev.record)
	}
	return ev, nil
}

func (r *ObjectReconciler) describe(ctx context.Context, obj *metav1.PartialObjectMetadata) match.Object {
	return match.Object{
		Labels:     obj.Labels,
		Namespaced: obj.Namespace != "",
		// Read once, however many candidates select by namespace.
		NamespaceLabels: sync.OnceValues(func() (map[string]string, error) {
			return namespaceLabels(ctx, r.Client, obj.Namespace)
		}),
	}
}
