// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/eval"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/metrics"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// audit adds rec to the audit trail, filled in with the object, its policy
// and its expiry. A record that cannot be written is counted and logged:
// the action it is about has happened.
func (r *Reconciler) audit(ctx context.Context, ev *eval.Evaluation, recs ...audit.Record) {
	object := auditObject(ev.Key, ev.Obj)
	now := r.Clock.Now()
	for i := range recs {
		rec := &recs[i]
		rec.Time = now
		rec.Object = object
		if ev != nil {
			rec.Policy = ev.Policy.Name
			if !ev.Life.Keep && rec.ExpiresAt == nil {
				at := ev.Life.ExpiresAt
				rec.ExpiresAt = &at
			}
			if ev.Life.Source == expiry.SourceIdle && rec.LastUse == nil {
				rec.LastUse = ev.Life.Use
			}
		}
	}
	r.writeAudit(ctx, recs...)
}

// writeAudit adds complete records to the audit trail.
func (r *Reconciler) writeAudit(ctx context.Context, recs ...audit.Record) {
	if err := r.Audit.Write(recs...); err != nil {
		metrics.AuditFailures.Add(float64(len(recs)))
		logf.FromContext(ctx).Error(err, "audit trail", "records", len(recs))
	}
}

// auditObject identifies obj, of key's kind, in audit records.
func auditObject(key wakeup.Key, obj metav1.Object) audit.Object {
	apiVersion, kind := key.GVK.ToAPIVersionAndKind()
	return audit.Object{APIVersion: apiVersion, Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
}
