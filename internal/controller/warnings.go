// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// givenWarnings is which warnings about one object this process gave:
// InvalidTimeout and InvalidRecipient, each summed up by the values it
// complained about, and RecordFailed. It guards against repeating a
// warning on every reconcile while a value stays wrong; only objects with
// something to remember have an entry.
//
// It is kept in memory only: after a restart each such warning that
// still applies is given once more (said twice, never lost). The
// warnings about an expiry (failed messages, notice not given, deletion
// or archive failed) are in the record's reported, and are not repeated.
type givenWarnings struct {
	uid types.UID
	// invalidAnnotations and refusedRecipients are the signatures of the
	// last InvalidTimeout and InvalidRecipient warnings.
	invalidAnnotations string
	refusedRecipients  string
	recordWriteFailed  bool
}

// warnInvalid emits one InvalidTimeout Event per invalid annotation value,
// and again only when the values change.
func (r *ObjectReconciler) warnInvalid(ctx context.Context, ev *evaluation) {
	key, obj := ev.key, ev.obj
	life := ev.Life
	var sig strings.Builder
	for _, inv := range life.Invalid {
		sig.WriteString(inv.Annotation + "=" + inv.Value + "\n")
	}
	if !r.warningsChanged(key, obj.UID, sig.String(), func(s *givenWarnings) *string { return &s.invalidAnnotations }) || sig.Len() == 0 {
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

// warningsChanged reports whether the warnings about the object, summed up in sig,
// differ from those field says were last given, and remembers sig.
func (r *ObjectReconciler) warningsChanged(key Key, uid types.UID, sig string, field func(*givenWarnings) *string) bool {
	return r.updateGivenWarnings(key, uid, func(s *givenWarnings) bool {
		last := field(s)
		changed := *last != sig
		*last = sig
		return changed
	})
}

// updateGivenWarnings applies update to what was reported about the object and
// returns update's result. A recreated object (new UID) starts afresh, and
// an entry left with nothing in it is dropped.
func (r *ObjectReconciler) updateGivenWarnings(key Key, uid types.UID, update func(*givenWarnings) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.warningsGiven[key]
	if s.uid != uid {
		s = givenWarnings{uid: uid}
	}
	result := update(&s)
	if s == (givenWarnings{uid: uid}) {
		delete(r.warningsGiven, key)
	} else {
		if r.warningsGiven == nil {
			r.warningsGiven = map[Key]givenWarnings{}
		}
		r.warningsGiven[key] = s
	}
	return result
}

// warnRecipients emits one InvalidRecipient Event per refused entry of
// the notify annotation, and again only when the refusals change.
func (r *ObjectReconciler) warnRecipients(key Key, obj *metav1.PartialObjectMetadata, problems []error) {
	var sig strings.Builder
	for _, p := range problems {
		sig.WriteString(p.Error() + "\n")
	}
	if !r.warningsChanged(key, obj.UID, sig.String(), func(s *givenWarnings) *string { return &s.refusedRecipients }) || sig.Len() == 0 {
		return
	}
	r.Recorder.Eventf(reference(key.GVK, obj), nil, corev1.EventTypeWarning, ReasonInvalidRecipient, actionNotify,
		"annotation %s: %s; the other recipients are still told", notify.AnnotationNotify, errors.Join(problems...).Error())
}
