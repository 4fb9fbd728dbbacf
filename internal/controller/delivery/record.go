// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/internal/controller/eval"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// Record applies update to the object's record and writes it with
// a merge patch locked on the resourceVersion. On a conflict it reads the
// object again and applies the update to the fresh record, as long as that
// record is about the same expiry: a delivery is never lost to a race.
func (d *Deliverer) Record(ctx context.Context, ev *eval.Evaluation, update func(*expiry.Record)) error {
	key, obj := ev.Key, ev.Obj
	rec := ev.Record
	// Locked on the version the record was read from; patched through a
	// copy so that the caller's object keeps it.
	obj = obj.DeepCopy()
	for attempt := 0; ; attempt++ {
		update(rec)
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": obj.ResourceVersion,
			"annotations":     map[string]string{expiry.AnnotationReminders: rec.String()},
		}})
		if err != nil {
			return fmt.Errorf("encode the record of %s: %w", key, err)
		}
		err = d.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
		if err == nil || !apierrors.IsConflict(err) || attempt == 4 {
			if err != nil {
				return fmt.Errorf("record delivery on %s: %w", key, err)
			}
			return nil
		}
		uid := obj.UID
		obj = kube.NewMetadata(key.GVK)
		if err := d.Reader.Get(ctx, key.NamespacedName, obj); err != nil {
			return fmt.Errorf("get %s: %w", key, err)
		}
		if obj.UID != uid {
			// Another object under the same name: what was sent is not
			// about it.
			return nil
		}
		fresh, _ := expiry.ParseRecord(obj.Annotations[expiry.AnnotationReminders])
		life := ev.Schedule.Lifetime(obj.CreationTimestamp.Time, obj.Annotations, ev.Now)
		if life.Keep || !life.ExpiresAt.Equal(rec.ExpiresAt) {
			// The object changed under us (kept, extended): the new plan
			// supersedes what was just sent.
			return nil
		}
		next := fresh.ForLife(life, obj.CreationTimestamp.Time, ev.Now)
		next.Title = rec.Title
		rec = next
	}
}

// pendingDelivery is a delivery this process made that the cache may not
// show yet.
type pendingDelivery struct {
	uid         types.UID
	expiresAt   time.Time
	key         string
	reminder    bool
	channels    []string
	at          time.Time
	postponedTo time.Time
	// announced is the deletion time the message gave.
	announced time.Time
}

// applyTo records the delivery in rec.
func (d pendingDelivery) applyTo(rec *expiry.Record) {
	rec.Delivered(d.key, d.reminder, d.channels, d.at)
	if !d.postponedTo.IsZero() {
		rec.PostponedTo = d.postponedTo
	}
	rec.Announce(d.announced)
}

// pendingDeliveries keeps each object's recent deliveries until its record,
// as the cache shows it, holds them.
type pendingDeliveries struct {
	mu sync.Mutex
	m  map[wakeup.Key][]pendingDelivery
}

func (p *pendingDeliveries) add(k wakeup.Key, d pendingDelivery) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[wakeup.Key][]pendingDelivery{}
	}
	p.m[k] = append(p.m[k], d)
}

// Carry returns rec (the record as the object shows it, nil when it shows
// none) with the deliveries this process made about an expiry other than
// expiresAt and has not written yet: when an extension is about to replace
// the record, they must come along, for the notice and the extension
// message depend on them. rec itself is not changed.
func (p *pendingDeliveries) Carry(k wakeup.Key, uid types.UID, rec *expiry.Record, created, expiresAt time.Time) *expiry.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range p.m[k] {
		if d.uid != uid || d.expiresAt.Equal(expiresAt) {
			continue
		}
		switch {
		case rec == nil || rec.ExpiresAt.IsZero():
			rec = &expiry.Record{ExpiresAt: d.expiresAt, Since: created}
		case !d.expiresAt.Equal(rec.ExpiresAt):
			continue
		default:
			rec = rec.Clone()
		}
		d.applyTo(rec)
	}
	return rec
}

// Apply adds to rec, the record that planning goes on from, the
// deliveries this process made about rec's expiry that are missing from
// shown, the record as the object shows it. It reports whether there were
// any: they still have to be written. It drops the deliveries that are no
// longer needed: those shown holds, those about an earlier object of the
// same name, and those about another expiry once shown is about a third
// one (the record Carry moved them into was written).
//
// A delivery about the expiry an extension replaced stays until then: the
// look that first sees the extension may stop before writing its record
// (to write the extensions' count first), and the next look must still
// carry it, or the notice and the extension message it owes are lost.
func (p *pendingDeliveries) Apply(k wakeup.Key, uid types.UID, shown, rec *expiry.Record) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	var keep []pendingDelivery
	unwritten := false
	for _, d := range p.m[k] {
		if d.uid != uid || recordHolds(shown, d) {
			continue
		}
		if !d.expiresAt.Equal(rec.ExpiresAt) {
			if shown == nil || shown.ExpiresAt.IsZero() || shown.ExpiresAt.Equal(d.expiresAt) {
				keep = append(keep, d)
			}
			continue
		}
		d.applyTo(rec)
		keep = append(keep, d)
		unwritten = true
	}
	if len(keep) == 0 {
		delete(p.m, k)
	} else {
		p.m[k] = keep
	}
	return unwritten
}

// recordHolds reports whether rec holds delivery d.
func recordHolds(rec *expiry.Record, d pendingDelivery) bool {
	if rec == nil || !rec.ExpiresAt.Equal(d.expiresAt) {
		return false
	}
	for _, c := range d.channels {
		if !slices.Contains(rec.Sent[d.key].Channels, c) {
			return false
		}
	}
	return true
}

func (p *pendingDeliveries) forget(k wakeup.Key) {
	p.mu.Lock()
	delete(p.m, k)
	p.mu.Unlock()
}

// WriteFailed reports a record that could not be written, once per object:
// the deliveries stay in memory meanwhile, and planning goes on from them.
//
// That it was reported is kept in memory, not in the record: the record
// is what could not be written. After a restart the warning is given once
// more if the write still fails, and that is right: the deliveries it
// warns about were lost with the memory, and the new process may send
// them again, which is what the warning says.
func (d *Deliverer) WriteFailed(ev *eval.Evaluation, err error) error {
	key, obj := ev.Key, ev.Obj
	d.mu.Lock()
	reported := d.recordWriteFailed[key] == obj.UID
	if !reported {
		if d.recordWriteFailed == nil {
			d.recordWriteFailed = map[wakeup.Key]types.UID{}
		}
		d.recordWriteFailed[key] = obj.UID
	}
	d.mu.Unlock()
	if !reported {
		d.Recorder.Eventf(kube.Reference(key.GVK, obj), nil, corev1.EventTypeWarning, kube.ReasonRecordFailed, kube.ActionNotify,
			"Could not record on the object what was sent (%s): a restart of the controller would send it again", apierrors.ReasonForError(err))
	}
	return err
}

// ReportOnce records on the object that the warnings whats are being said
// about its current expiry, and returns those that had not been said
// before: only they are said, and only once the record holds them, so that
// neither a retry nor a restart says them again. When the record cannot be
// written nothing is said now; the next pass tries again.
func (d *Deliverer) ReportOnce(ctx context.Context, ev *eval.Evaluation, whats ...string) map[string]bool {
	var fresh []string
	for _, what := range whats {
		if _, ok := ev.Record.Reported[what]; !ok {
			fresh = append(fresh, what)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	said := map[string]bool{}
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kube.WriteTimeout)
	defer cancel()
	err := d.Record(writeCtx, ev, func(rec *expiry.Record) {
		// Applied again to a fresh record after a conflict: what another
		// writer recorded meanwhile is not said twice.
		clear(said)
		for _, what := range fresh {
			if rec.Report(what, ev.Now) {
				said[what] = true
			}
		}
	})
	if err != nil {
		logf.FromContext(ctx).Error(err, "record a warning", "warnings", fresh)
		return nil
	}
	return said
}

// WarnOnce reports whether the warning kind about the values summed up in
// sig is to be given now: sig is not empty, and differs from what the
// record says was last given. It records sig on the object first, so that
// neither a retry nor a restart gives the warning again; when the record
// cannot be written nothing is said now, and the next pass tries again.
// An empty sig (the values were fixed) clears the entry, so that the same
// mistake made again is warned about again.
func (d *Deliverer) WarnOnce(ctx context.Context, ev *eval.Evaluation, kind, sig string) bool {
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
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kube.WriteTimeout)
	defer cancel()
	err := d.Record(writeCtx, &w, func(rec *expiry.Record) {
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
