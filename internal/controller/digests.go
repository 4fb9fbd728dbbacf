// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/outbox"
)

// OwnerChannel is the channel name, in a record's deliveries, of an
// owner's digest: "@" keeps it apart from every NotificationChannel name.
const OwnerChannel = "@owner"

// digestMarker reads and writes the records of the members of owners'
// digests, from the API server.
type digestMarker struct {
	client client.Client
	reader client.Reader
}

var _ outbox.Marker = digestMarker{}

// read returns m's object and its record, nil when the object is gone
// or another took its name.
func (dm digestMarker) read(ctx context.Context, m outbox.Member) (*metav1.PartialObjectMetadata, *expiry.Record, error) {
	obj := newMetadata(schema.FromAPIVersionAndKind(m.Object.APIVersion, m.Object.Kind))
	err := dm.reader.Get(ctx, types.NamespacedName{Namespace: m.Object.Namespace, Name: m.Object.Name}, obj)
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
	if err != nil || rec == nil || !rec.ExpiresAt.Equal(m.ExpiresAt) {
		// Another expiry since (or a record nobody can read): the digest
		// is not about it.
		return nil, nil, nil
	}
	return obj, rec, nil
}

// Current reports whether m's object is there with the expiry m is about
// and its owner has not had the stage yet.
func (dm digestMarker) Current(ctx context.Context, d *outbox.Digest, m outbox.Member) (bool, error) {
	obj, rec, err := dm.read(ctx, m)
	if err != nil || obj == nil {
		return false, err
	}
	return !slices.Contains(rec.Sent[d.Stage].Channels, OwnerChannel), nil
}

// Mark records on m's object that d's stage reached its owner at at, as a
// delivery of the reminder over OwnerChannel: locked on the version read,
// and only while the expiry is still m's.
func (dm digestMarker) Mark(ctx context.Context, d *outbox.Digest, m outbox.Member, at time.Time) error {
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
		err = dm.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
		if err == nil || !apierrors.IsConflict(err) || attempt == 4 {
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("record the digest on %s %s: %w", m.Object.Kind, m.Object.Name, err)
			}
			return nil
		}
	}
}
