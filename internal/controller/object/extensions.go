// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/eval"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/decide"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// settleExtensions writes the extensions annotation that the policy's
// extension limits call for (expiry.Extensions): the expiry they allowed,
// the count used, the limits for the admission policy, and who made the
// last extension; or removes it when the policy has no limits. It writes
// at once, before anything is decided from the lifetime, and says
// whether it wrote: the watch event of the write brings the next
// reconcile. An extension refused is reported by warnInvalid, with the
// other problems of the annotations.
func (r *Reconciler) settleExtensions(ctx context.Context, ev *eval.Evaluation) (bool, error) {
	key, obj := ev.Key, ev.Obj
	old, has := obj.Annotations[expiry.AnnotationExtensions]
	var value any
	switch st := ev.Life.Extensions; {
	case st == nil && has:
		// Limits turned off: the count is forgotten.
	case st != nil && st.String() != old:
		value = st.String()
	default:
		return false, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		// Locked on the resourceVersion: the annotation is judged from the
		// lifetime annotations read with it, and an extension written
		// since must be judged in turn, not granted by this write.
		"uid":             obj.UID,
		"resourceVersion": obj.ResourceVersion,
		"annotations":     map[string]any{expiry.AnnotationExtensions: value},
	}})
	if err != nil {
		return false, fmt.Errorf("encode the extensions of %s: %w", key, err)
	}
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kube.WriteTimeout)
	defer cancel()
	err = r.Client.Patch(writeCtx, obj.DeepCopy(), client.RawPatch(types.MergePatchType, patch))
	switch {
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		// The object changed or went: its event brings another look.
		return true, nil
	case err != nil:
		return false, fmt.Errorf("record the extensions of %s: %w", key, err)
	}
	logf.FromContext(ctx).V(1).Info("extensions recorded", "value", value, "policy", ev.Policy.Name)
	return true, nil
}

// extendedRecord is the audit record of an expiry that d moved by a write
// (d.Written): from where to where, set by which annotation, and who
// wrote it, as the changed-by stamp names them when it says the write
// changed ttl or expires-at (an older stamp is about another change).
func extendedRecord(d decide.Decision, annotations map[string]string) audit.Record {
	rec := audit.Record{Type: audit.Extended, Result: audit.OK}
	if d.Previous.IsZero() {
		rec.Detail = "expiry set by " + d.Life.Source + "; no earlier expiry was recorded"
	} else {
		rec.Detail = "expiry moved from " + d.Previous.UTC().Format(time.RFC3339) + " by " + d.Life.Source
	}
	if c, ok := expiry.ParseChangedBy(annotations); ok && c.ChangedExpiry() {
		rec.By, rec.Groups, rec.Via = c.By, c.Groups, c.Via
	}
	return rec
}
