// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/eval"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/metrics"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// The warnings about an object's annotations (InvalidTimeout,
// InvalidRecipient) are given once while the values they complain about
// stay the same, and the record on the object says which were given
// (Record.Warned), so that a restart does not repeat them. The warnings
// about an expiry (failed messages, notice not given, deletion or archive
// failed) are in the record's Reported. RecordFailed alone is kept in
// memory: see writeFailed.

// warnInvalid emits one InvalidTimeout Event per invalid annotation value,
// and again only when the values change.
func (r *Reconciler) warnInvalid(ctx context.Context, ev *eval.Evaluation) {
	key, obj := ev.Key, ev.Obj
	life := ev.Life
	var sig strings.Builder
	for _, inv := range life.Invalid {
		sig.WriteString(inv.Annotation + "=" + inv.Value + "\n")
	}
	if !r.delivery().WarnOnce(ctx, ev, expiry.WarnedTimeout, sig.String()) {
		return
	}
	outcome := "it is kept"
	if !life.Keep {
		outcome = "it now expires at " + life.ExpiresAt.UTC().Format(time.RFC3339)
	}
	// One Event for all of them: the Events API folds Events with the same
	// object, reason and action into one series, whatever their notes.
	problems := make([]string, 0, len(life.Invalid))
	recs := make([]audit.Record, 0, len(life.Invalid))
	for _, inv := range life.Invalid {
		problems = append(problems, inv.Brief())
		logf.FromContext(ctx).Info("invalid annotation", "annotation", inv.Annotation, "value", inv.Value)
		label := inv.Annotation
		if inv.Unknown {
			// Keys are written by anyone: one series for all unknown ones.
			label = expiry.Prefix + "*"
		}
		metrics.InvalidAnnotations.WithLabelValues(label).Inc()
		recs = append(recs, audit.Record{Type: audit.InvalidAnnotation, Result: audit.Error, Error: inv.Error()})
	}
	r.audit(ctx, ev, recs...)
	r.Recorder.Eventf(kube.Reference(key.GVK, obj), nil, corev1.EventTypeWarning, kube.ReasonInvalidTimeout, kube.ActionEvaluate,
		"%s; %s", strings.Join(problems, "; "), outcome)
}
