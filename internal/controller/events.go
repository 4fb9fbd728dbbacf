// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/tools/events"
)

// Event reasons on governed objects.
const (
	ReasonExpired        = "Expired"
	ReasonDeleted        = "Deleted"
	ReasonWouldDelete    = "WouldDelete"
	ReasonDeletionFailed = "DeletionFailed"
	ReasonInvalidTimeout = "InvalidTimeout"
)

// Event reasons on TimeoutPolicies.
const (
	ReasonInvalidPolicy  = "InvalidPolicy"
	ReasonTargetNotFound = "TargetNotFound"
)

// Event actions, the events.k8s.io/v1 "action" field.
const (
	actionDelete   = "Delete"
	actionEvaluate = "Evaluate"
)

// clusterScopedSink writes the Events of cluster-scoped objects to a chosen
// namespace; client-go would put them in "default". The API server accepts
// only "default" and "kube-system" for them.
type clusterScopedSink struct {
	events.EventSink
	namespace string
}

func (s clusterScopedSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	if e.Regarding.Namespace == "" && s.namespace != "" {
		e = e.DeepCopy()
		e.Namespace = s.namespace
	}
	return s.EventSink.Create(ctx, e)
}
