// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/eval"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/outbox"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// OwnerChannel is the channel name, in a record's deliveries, of an
// owner's digest: "@" keeps it apart from every NotificationChannel name.
const OwnerChannel = "@owner"

// DigestMarker reads and writes the records of the members of owners'
// digests, from the API server.
type DigestMarker struct {
	Client client.Client
	Reader client.Reader
	// Expiry, when set, is the expiry an object's policy and annotations
	// give it now, and false when none governs it: a member whose lifetime
	// changed since the digest listed it is not told of the old one.
	Expiry func(ctx context.Context, key wakeup.Key, obj *metav1.PartialObjectMetadata) (time.Time, bool)
}

var _ outbox.Marker = DigestMarker{}

// read returns m's object and its record, nil when the object is gone
// or another took its name.
func (dm DigestMarker) read(ctx context.Context, m outbox.Member) (*metav1.PartialObjectMetadata, *expiry.Record, error) {
	obj := kube.NewMetadata(schema.FromAPIVersionAndKind(m.Object.APIVersion, m.Object.Kind))
	err := dm.Reader.Get(ctx, types.NamespacedName{Namespace: m.Object.Namespace, Name: m.Object.Name}, obj)
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get %s %s: %w", m.Object.Kind, m.Object.Name, err)
	}
	if obj.UID != m.Object.UID {
		return nil, nil, nil
	}
	rec, err := expiry.ParseRecord(obj.Annotations[expiry.AnnotationReminders])
	if err == nil && rec == nil {
		// Nothing delivered about it yet: the digest starts its record.
		rec = &expiry.Record{ExpiresAt: m.ExpiresAt, Since: obj.CreationTimestamp.Time}
	}
	if err != nil || !rec.ExpiresAt.Equal(m.ExpiresAt) || !dm.expiresAt(ctx, m, obj) {
		// Another expiry since (or a record nobody can read): the digest
		// is not about it.
		return nil, nil, nil
	}
	return obj, rec, nil
}

// expiresAt reports whether obj still expires at m.ExpiresAt, as its
// policy and annotations say now.
func (dm DigestMarker) expiresAt(ctx context.Context, m outbox.Member, obj *metav1.PartialObjectMetadata) bool {
	if dm.Expiry == nil {
		return true
	}
	key := wakeup.Key{GVK: obj.GroupVersionKind(), NamespacedName: types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}}
	at, ok := dm.Expiry(ctx, key, obj)
	return ok && at.Equal(m.ExpiresAt)
}

// Current reports whether m's object is there with the expiry m is about
// and its owner has not had the stage yet.
func (dm DigestMarker) Current(ctx context.Context, d *outbox.Digest, m outbox.Member) (bool, error) {
	obj, rec, err := dm.read(ctx, m)
	if err != nil || obj == nil {
		return false, err
	}
	return !slices.Contains(rec.Sent[d.Stage].Channels, OwnerChannel), nil
}

// Mark records on m's object that d's stage reached its owner at at, as a
// delivery of the reminder over OwnerChannel: locked on the version read,
// and only while the expiry is still m's.
func (dm DigestMarker) Mark(ctx context.Context, d *outbox.Digest, m outbox.Member, at time.Time) error {
	for attempt := 0; ; attempt++ {
		obj, rec, err := dm.read(ctx, m)
		if err != nil || obj == nil {
			return err
		}
		if slices.Contains(rec.Sent[d.Stage].Channels, OwnerChannel) {
			return nil
		}
		rec.Delivered(d.Stage, true, []string{OwnerChannel}, at)
		rec.Announce(m.ExpiresAt)
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": obj.ResourceVersion,
			"annotations":     map[string]string{expiry.AnnotationReminders: rec.String()},
		}})
		if err != nil {
			return fmt.Errorf("encode the record of %s %s: %w", m.Object.Kind, m.Object.Name, err)
		}
		err = dm.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
		if err == nil || !apierrors.IsConflict(err) || attempt == 4 {
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("record the digest on %s %s: %w", m.Object.Kind, m.Object.Name, err)
			}
			return nil
		}
	}
}

// digestPoll is how soon an object whose owner's digest is under way is
// looked at again, should the record the digest writes not bring it back
// first.
const digestPoll = 30 * time.Second

// ReminderChannels are the channels a reminder about the object of ev is
// due on: the policy's, and OwnerChannel when its owner is told in a
// digest. E-mail channels that would reach nobody but the owner are left
// to the digest.
func ReminderChannels(ev *eval.Evaluation) []string {
	names := ev.Channels.Names[v1alpha1.EventReminder]
	if ev.Owner == "" {
		return names
	}
	if ev.Channels.RemindsNobody(ev.Obj.Annotations, "") {
		return []string{OwnerChannel}
	}
	return append(slices.Clone(names), OwnerChannel)
}

// digest hands the reminder stage plan is about to the owner's digest:
// left alone while a digest lists the object, joined to an open one that
// covers when its stage fell due, or else a new one with the owner's
// other objects whose stage falls due within its window. It returns when
// to look at the object again; the digest's record brings it back sooner.
func (d *Deliverer) digest(ctx context.Context, ev *eval.Evaluation, plan expiry.Plan) (time.Duration, error) {
	lead, err := expiry.ParseDuration(plan.Key)
	if err != nil {
		return 0, fmt.Errorf("reminder stage %q: %w", plan.Key, err)
	}
	store := d.Outbox.Store
	digests, _, err := store.ListDigests(ctx)
	if err != nil {
		return 0, err
	}
	due := reminderDue(ev.Record, plan.Key)
	ours := func(dg *outbox.Digest) bool {
		return dg.Policy == ev.Policy.Name && dg.Owner == ev.Owner && dg.Stage == plan.Key
	}
	for _, dg := range digests {
		if ours(dg) && dg.Lists(ev.Obj.UID, ev.Record.ExpiresAt) {
			// In flight: the digest records the stage when it is out.
			d.Outbox.AddDigest(dg)
			return digestPoll, nil
		}
	}
	self := DigestMember(ev, plan.Key)
	for _, dg := range digests {
		if !ours(dg) || !dg.Covers(lead, due) {
			continue
		}
		joined, err := store.JoinDigest(ctx, dg.Name(), self)
		if errors.Is(err, outbox.ErrDigestClosed) {
			continue
		}
		if err != nil {
			return 0, err
		}
		d.Outbox.AddDigest(joined)
		return digestPoll, nil
	}
	if d.recordedFresh(ctx, ev, plan.Key) {
		// A digest went out and was removed, and the cache does not show
		// its record yet: nothing to write again.
		return time.Second, nil
	}
	candidates, err := d.Candidates(ctx, ev, plan.Key)
	if err != nil {
		return 0, err
	}
	if !slices.ContainsFunc(candidates, func(m outbox.Member) bool { return m.Object.UID == ev.Obj.UID }) {
		candidates = append(candidates, self)
	}
	dg := &outbox.Digest{Created: d.Clock.Now(), Policy: ev.Policy.Name, Owner: ev.Owner, Stage: plan.Key, Start: due,
		OwnerName: strings.TrimSpace(ev.Obj.Annotations[notify.AnnotationOwner]),
		Members:   outbox.Batch(candidates, lead, due), Channels: map[string]*outbox.Delivery{}}
	for _, name := range ev.Channels.EmailReminders {
		dg.Channels[name] = &outbox.Delivery{}
	}
	if err := store.CreateDigest(ctx, dg); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Another pass wrote it first: the next one joins it.
			return time.Second, nil
		}
		return 0, err
	}
	logf.FromContext(ctx).Info("owner's digest written", "digest", dg.Name(), "stage", plan.Key, "members", len(dg.Members))
	d.Outbox.AddDigest(dg)
	return digestPoll, nil
}

// recordedFresh reports whether the object of ev, read from the API
// server, shows stage delivered over OwnerChannel for its expiry.
func (d *Deliverer) recordedFresh(ctx context.Context, ev *eval.Evaluation, stage string) bool {
	obj := kube.NewMetadata(ev.Key.GVK)
	if err := d.Reader.Get(ctx, ev.Key.NamespacedName, obj); err != nil || obj.UID != ev.Obj.UID {
		return false
	}
	rec, err := expiry.ParseRecord(obj.Annotations[expiry.AnnotationReminders])
	return err == nil && rec != nil && rec.ExpiresAt.Equal(ev.Record.ExpiresAt) && slices.Contains(rec.Sent[stage].Channels, OwnerChannel)
}

// DigestMember is the object of ev as a member of a digest of stage.
func DigestMember(ev *eval.Evaluation, stage string) outbox.Member {
	apiVersion, kind := ev.Key.GVK.ToAPIVersionAndKind()
	return outbox.Member{
		Object: notify.Object{APIVersion: apiVersion, Kind: kind, Name: ev.Obj.Name, Namespace: ev.Obj.Namespace,
			UID: ev.Obj.UID, Title: ev.Record.Title},
		ExpiresAt: ev.Record.ExpiresAt,
		Due:       reminderDue(ev.Record, stage),
		Extend:    extendHint(ev.Key, ev.Obj, ev.Record.ExpiresAt),
	}
}
