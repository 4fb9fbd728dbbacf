// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/outbox"
)

// NewOutbox builds the outbox that keeps r's expired and deleted messages
// in namespace, written through c, with objects and entries read from the
// API server through live, and the policies' channels as r builds them.
// Setup, the tests and the simulation wire it the same way.
func (r *ObjectReconciler) NewOutbox(c client.Client, live client.Reader, namespace string, giveUpAfter time.Duration, log logr.Logger) *outbox.Outbox {
	return &outbox.Outbox{
		Store:       &outbox.Store{Client: c, Reader: live, Namespace: namespace},
		Deliverer:   outboxDeliverer{reader: r.Client, channels: r.Channels, links: r.Links},
		Objects:     live,
		Recorder:    r.Recorder,
		Audit:       r.Audit,
		Clock:       r.Clock,
		GiveUpAfter: giveUpAfter,
		Log:         log,
		Marker:      digestMarker{client: c, reader: live, expiry: r.lifetimeOf},
	}
}

// lifetimeOf is the expiry the reconcile would give obj now, for the
// digest marker.
func (r *ObjectReconciler) lifetimeOf(ctx context.Context, key Key, obj *metav1.PartialObjectMetadata) (time.Time, bool) {
	ev, err := r.evaluate(ctx, key, obj)
	if err != nil || ev == nil || ev.Life.Keep {
		return time.Time{}, false
	}
	return ev.Life.ExpiresAt, true
}

// digestsOn reports whether owners' reminders go out as digests: the
// outbox that sends them has a Marker to write their records with.
func (r *ObjectReconciler) digestsOn() bool {
	return r.Outbox != nil && r.Outbox.Marker != nil
}

// digestOwner returns the address of the owner of the object of ev when
// its reminders reach the owner in a digest: the policy tells owners, an
// e-mail channel of it carries reminders, and the owner has an address.
// Empty otherwise: the owner, if told at all, is told per object.
func (r *ObjectReconciler) digestOwner(ctx context.Context, ev *evaluation) string {
	owner := strings.TrimSpace(ev.obj.Annotations[notify.AnnotationOwner])
	if !r.digestsOn() || !ev.policy.Spec.Notifications.Owner || owner == "" || ev.channels == nil || len(ev.channels.emailReminders) == 0 {
		return ""
	}
	address, err := r.Owners.Address(ctx, owner, ev.channels.allowedEmailDomains())
	if err != nil {
		return ""
	}
	return address
}

// digestCandidates are the objects, from the cache, of the kind of ev
// with the same owner under the same policy whose reminder stage has not
// reached the owner, evaluated as their own reconcile evaluates them.
func (r *ObjectReconciler) digestCandidates(ctx context.Context, ev *evaluation, stage string) ([]outbox.Member, error) {
	lead, err := expiry.ParseDuration(stage)
	if err != nil {
		return nil, err
	}
	owner := ev.obj.Annotations[notify.AnnotationOwner]
	// The records, not a list through the client: a list of a governed
	// kind there would start an informer holding every object's metadata.
	var same []*metav1.PartialObjectMetadata
	err = r.watches.eachCached(ctx, ev.key.GVK, "", func(o *metav1.PartialObjectMetadata) error {
		if o.Annotations[notify.AnnotationOwner] == owner && o.DeletionTimestamp.IsZero() {
			same = append(same, o.DeepCopy())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", ev.key.GVK.Kind, err)
	}
	var out []outbox.Member
	for _, obj := range same {
		obj.SetGroupVersionKind(ev.key.GVK)
		key := Key{GVK: ev.key.GVK, NamespacedName: types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}}
		other, err := r.evaluate(ctx, key, obj)
		if err != nil || other == nil || other.policy.Name != ev.policy.Name || other.owner != ev.owner ||
			other.Life.Keep || other.Record == nil || !other.Record.ExpiresAt.Equal(other.Life.ExpiresAt) ||
			!slices.Contains(other.Schedule.Reminders, lead) || slices.Contains(other.Record.Sent[stage].Channels, OwnerChannel) {
			continue
		}
		out = append(out, digestMember(other, stage))
	}
	return out, nil
}
