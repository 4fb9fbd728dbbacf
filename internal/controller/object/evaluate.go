// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/delivery"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/eval"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/decide"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
	"github.com/amphitheatre-app/timeout-controller/internal/outbox"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// errChannelsNotReady: the governing policy's channels cannot be built.
var errChannelsNotReady = errors.New("notification channels not ready")

// planOf is what happens next, as internal/decide plans it with the
// policy's channels.
func planOf(ev *eval.Evaluation) expiry.Plan {
	names := ev.Channels.Names
	if ev.Owner != "" {
		names = maps.Clone(names)
		names[v1alpha1.EventReminder] = delivery.ReminderChannels(ev)
	}
	return ev.Plan(names, ev.Rehearse, ev.Now)
}

// decide evaluates obj and plans what happens next: Reconcile calls it on
// the cached object, and expire again on the one it read fresh before a
// delete, so that both decide alike. It returns a nil evaluation when no
// valid policy governs obj, which is then left alone, and
// errChannelsNotReady when the governing policy's channels cannot be
// built.
func (r *Reconciler) decide(ctx context.Context, key wakeup.Key, obj *metav1.PartialObjectMetadata) (*eval.Evaluation, expiry.Plan, error) {
	ev, err := r.evaluate(ctx, key, obj)
	if err != nil || ev == nil {
		return nil, expiry.Plan{}, err
	}
	// Use of a sleeping object that its annotations do not show.
	if ev.WokeBy, ev.WokeExternally, err = r.sleeper().ObserveWake(ctx, ev); err != nil {
		return nil, expiry.Plan{}, err
	}
	plan := planOf(ev)
	if plan.Action != expiry.Delete {
		// A turn under the deletion caps is for an object due now.
		r.caps().forget(key)
	}
	return ev, plan, nil
}

// Governing returns the policy that governs obj of kind gvk, nil when none
// does.
func (r *Reconciler) Governing(ctx context.Context, gvk schema.GroupVersionKind, obj *metav1.PartialObjectMetadata) (*match.Candidate, error) {
	var policies v1alpha1.TimeoutPolicyList
	// Read only: the evaluation keeps pointers into the list, and nothing
	// changes them.
	if err := r.Client.List(ctx, &policies, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list policies: %w", err)
	}
	return decide.Governing(policies.Items, gvk, r.describe(ctx, obj))
}

// evaluate finds the policy that governs obj and what it makes of obj. It
// returns nil when no valid policy governs obj, which is then left alone.
func (r *Reconciler) evaluate(ctx context.Context, key wakeup.Key, obj *metav1.PartialObjectMetadata) (*eval.Evaluation, error) {
	gvk := key.GVK
	if gvk.GroupKind() == outboxKind && (obj.Labels[outbox.LabelEntry] == "true" || obj.Labels[outbox.LabelDigest] == "true") {
		// The outbox's own entries: a policy on ConfigMaps that selects
		// them must not delete the messages they hold.
		return nil, nil
	}
	c, err := r.Governing(ctx, gvk, obj)
	if err != nil || c == nil {
		return nil, err
	}
	if c.SpecErr != nil {
		return nil, nil
	}
	channels, err := r.Channels.Get(ctx, c.TimeoutPolicy)
	if err != nil {
		// Without its channels the policy cannot give the notice it
		// promises: the object waits for a fix.
		return nil, errChannelsNotReady
	}
	now := r.Clock.Now()
	// Deliveries not written yet belong to the record they were about,
	// before an extension replaces it.
	unwritten := func(shown *expiry.Record, expiresAt time.Time) *expiry.Record {
		return r.delivery().Pending.Carry(key, obj.UID, shown, obj.CreationTimestamp.Time, expiresAt)
	}
	ev := &eval.Evaluation{
		Key:      key,
		Obj:      obj,
		Decision: decide.Evaluate(c, decide.Object{Created: obj.CreationTimestamp.Time, Annotations: obj.Annotations}, now, unwritten),
		Policy:   c.TimeoutPolicy,
		Channels: channels,
		Now:      now,
		Rehearse: r.DryRun || c.Spec.Deletion.DryRun,
	}
	ev.Owner = r.digestOwner(ctx, ev)
	if ev.RecordErr != nil {
		logf.FromContext(ctx).Info("ignoring unreadable record", "error", ev.RecordErr.Error())
	}
	if !ev.Life.Keep {
		ev.Unwritten = r.delivery().Pending.Apply(key, obj.UID, ev.Shown, ev.Record)
	}
	return ev, nil
}

func (r *Reconciler) describe(ctx context.Context, obj *metav1.PartialObjectMetadata) match.Object {
	return match.Object{
		Labels:     obj.Labels,
		Namespaced: obj.Namespace != "",
		// Read once, however many candidates select by namespace.
		NamespaceLabels: sync.OnceValues(func() (map[string]string, error) {
			return kube.NamespaceLabels(ctx, r.Client, obj.Namespace)
		}),
	}
}
