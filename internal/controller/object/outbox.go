// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

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

	"github.com/amphitheatre-app/timeout-controller/internal/controller/delivery"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/eval"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/outbox"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// NewOutbox builds the outbox that keeps r's expired and deleted messages
// in namespace, written through c, with objects and entries read from the
// API server through live, and the policies' channels as r builds them.
// Setup, the tests and the simulation wire it the same way.
func (r *Reconciler) NewOutbox(c client.Client, live client.Reader, namespace string, giveUpAfter time.Duration, log logr.Logger) *outbox.Outbox {
	return &outbox.Outbox{
		Store:       &outbox.Store{Client: c, Reader: live, Namespace: namespace},
		Deliverer:   delivery.OutboxDeliverer{Reader: r.Client, Channels: r.Channels, Links: r.Links},
		Objects:     live,
		Recorder:    r.Recorder,
		Audit:       r.Audit,
		Clock:       r.Clock,
		GiveUpAfter: giveUpAfter,
		Log:         log,
		Marker:      delivery.DigestMarker{Client: c, Reader: live, Expiry: r.lifetimeOf},
	}
}

// lifetimeOf is the expiry the reconcile would give obj now, for the
// digest marker.
func (r *Reconciler) lifetimeOf(ctx context.Context, key wakeup.Key, obj *metav1.PartialObjectMetadata) (time.Time, bool) {
	ev, err := r.evaluate(ctx, key, obj)
	if err != nil || ev == nil || ev.Life.Keep {
		return time.Time{}, false
	}
	return ev.Life.ExpiresAt, true
}

// digestsOn reports whether owners' reminders go out as digests: the
// outbox that sends them has a Marker to write their records with.
func (r *Reconciler) digestsOn() bool {
	return r.Outbox != nil && r.Outbox.Marker != nil
}

// digestOwner returns the address of the owner of the object of ev when
// its reminders reach the owner in a digest: the policy tells owners, an
// e-mail channel of it carries reminders, and the owner has an address.
// Empty otherwise: the owner, if told at all, is told per object.
func (r *Reconciler) digestOwner(ctx context.Context, ev *eval.Evaluation) string {
	owner := strings.TrimSpace(ev.Obj.Annotations[notify.AnnotationOwner])
	if !r.digestsOn() || !ev.Policy.Spec.Notifications.Owner || owner == "" || ev.Channels == nil || len(ev.Channels.EmailReminders) == 0 {
		return ""
	}
	address, err := r.Owners.Address(ctx, owner, ev.Channels.AllowedEmailDomains())
	if err != nil {
		return ""
	}
	return address
}

// digestCandidates are the objects, from the cache, of the kind of ev
// with the same owner under the same policy whose reminder stage has not
// reached the owner, evaluated as their own reconcile evaluates them.
func (r *Reconciler) digestCandidates(ctx context.Context, ev *eval.Evaluation, stage string) ([]outbox.Member, error) {
	lead, err := expiry.ParseDuration(stage)
	if err != nil {
		return nil, err
	}
	owner := ev.Obj.Annotations[notify.AnnotationOwner]
	// The records, not a list through the client: a list of a governed
	// kind there would start an informer holding every object's metadata.
	var same []*metav1.PartialObjectMetadata
	err = r.Watches.EachCached(ctx, ev.Key.GVK, "", func(o *metav1.PartialObjectMetadata) error {
		if o.Annotations[notify.AnnotationOwner] == owner && o.DeletionTimestamp.IsZero() {
			same = append(same, o.DeepCopy())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", ev.Key.GVK.Kind, err)
	}
	var out []outbox.Member
	for _, obj := range same {
		obj.SetGroupVersionKind(ev.Key.GVK)
		key := wakeup.Key{GVK: ev.Key.GVK, NamespacedName: types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}}
		other, err := r.evaluate(ctx, key, obj)
		if err != nil || other == nil || other.Policy.Name != ev.Policy.Name || other.Owner != ev.Owner ||
			other.Life.Keep || other.Record == nil || !other.Record.ExpiresAt.Equal(other.Life.ExpiresAt) ||
			!slices.Contains(other.Schedule.Reminders, lead) || slices.Contains(other.Record.Sent[stage].Channels, delivery.OwnerChannel) {
			continue
		}
		out = append(out, delivery.DigestMember(other, stage))
	}
	return out, nil
}
