// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
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
func (r *ObjectReconciler) warnInvalid(ctx context.Context, ev *evaluation) {
	key, obj := ev.key, ev.obj
	life := ev.Life
	var sig strings.Builder
	for _, inv := range life.Invalid {
		sig.WriteString(inv.Annotation + "=" + inv.Value + "\n")
	}
	if !r.warnOnce(ctx, ev, expiry.WarnedTimeout, sig.String()) {
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
		invalidAnnotations.WithLabelValues(label).Inc()
		recs = append(recs, audit.Record{Type: audit.InvalidAnnotation, Result: audit.Error, Error: inv.Error()})
	}
	r.audit(ctx, ev, recs...)
	r.Recorder.Eventf(reference(key.GVK, obj), nil, corev1.EventTypeWarning, ReasonInvalidTimeout, actionEvaluate,
		"%s; %s", strings.Join(problems, "; "), outcome)
}

// warnOnce reports whether the warning kind about the values summed up in
// sig is to be given now: sig is not empty, and differs from what the
// record says was last given. It records sig on the object first, so that
// neither a retry nor a restart gives the warning again; when the record
// cannot be written nothing is said now, and the next pass tries again.
// An empty sig (the values were fixed) clears the entry, so that the same
// mistake made again is warned about again.
func (r *ObjectReconciler) warnOnce(ctx context.Context, ev *evaluation, kind, sig string) bool {
	digest := ""
	if sig != "" {
		sum := sha256.Sum256([]byte(sig))
		digest = hex.EncodeToString(sum[:8])
	}
	base := ev.Record
	if base == nil {
		// A kept object has no record of an expiry; the warnings about
		// it go on the record it shows, or on an empty one.
		base = ev.Shown.Clone()
		if base == nil {
			base = &expiry.Record{}
		}
	}
	if base.Warned[kind] == digest {
		return false
	}
	w := *ev
	w.Record = base
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	err := r.recordDelivery(writeCtx, &w, func(rec *expiry.Record) {
		if digest == "" {
			delete(rec.Warned, kind)
			return
		}
		if rec.Warned == nil {
			rec.Warned = map[string]string{}
		}
		rec.Warned[kind] = digest
	})
	if err != nil {
		logf.FromContext(ctx).Error(err, "record a warning", "warning", kind)
		return false
	}
	return digest != ""
}

// warnRecipients emits one InvalidRecipient Event per refused entry of
// the notify annotation, and again only when the refusals change.
func (r *ObjectReconciler) warnRecipients(ctx context.Context, ev *evaluation, problems []error) {
	key, obj := ev.key, ev.obj
	var sig strings.Builder
	for _, p := range problems {
		sig.WriteString(p.Error() + "\n")
	}
	if !r.warnOnce(ctx, ev, expiry.WarnedRecipients, sig.String()) {
		return
	}
	r.Recorder.Eventf(reference(key.GVK, obj), nil, corev1.EventTypeWarning, ReasonInvalidRecipient, actionNotify,
		"annotation %s: %s; the other recipients are still told", notify.AnnotationNotify, errors.Join(problems...).Error())
}
