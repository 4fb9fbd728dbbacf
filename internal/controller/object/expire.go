// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/archive"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/channelset"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/delivery"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/eval"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/metrics"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// expire deletes an object that the cache says has expired. The cache may
// be behind a write that extended or kept the object, so the delete is
// conditional on the UID and resourceVersion the decision was made from:
// a write the cache has not seen yet makes it fail with a Conflict, and the
// object is looked at again once the cache has caught up. When the whole
// object is needed (for the title of the last message, or the archive) it
// is read from the API server, and the decision is made again from what
// that read shows.
func (r *Reconciler) expire(ctx context.Context, ev *eval.Evaluation) (ctrl.Result, error) {
	key, obj := ev.Key, ev.Obj
	log := logf.FromContext(ctx)

	var u *unstructured.Unstructured
	if ev.NeedsTitle(key) || ev.Archives(r.DryRun) {
		fresh, whole, err := kube.FreshRead(ctx, r.APIReader, key)
		if err != nil {
			if apierrors.IsNotFound(err) {
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, fmt.Errorf("get %s from the API server: %w", key, err)
		}
		if fresh.DeletionTimestamp != nil {
			return ctrl.Result{}, nil
		}
		var plan expiry.Plan
		ev, plan, err = r.decide(ctx, key, fresh)
		if errors.Is(err, errChannelsNotReady) {
			return ctrl.Result{RequeueAfter: channelset.ChannelsTTL}, nil
		}
		if err != nil || ev == nil {
			return ctrl.Result{}, err
		}
		switch plan.Action {
		case expiry.Keep:
			return ctrl.Result{}, nil
		case expiry.Wait:
			log.Info("expiry moved", "expiresAt", ev.Life.ExpiresAt, "source", ev.Life.Source)
			return ctrl.Result{RequeueAfter: expiry.After(plan.At, ev.Now)}, nil
		case expiry.Notify:
			// The fresh read shows something the cache had not: a message
			// due first (the record or the notice changed).
			return r.delivery().Notify(ctx, ev, plan)
		}
		// A spec edit the cache had not shown is use: under idleTTL it
		// moves the expiry, and the delete below, locked on this fresh
		// read, would otherwise win over it. It is recorded now (the
		// deletion is due, so it waits for no window), and its write
		// brings the next reconcile.
		if _, wrote, err := r.activity.RecordActivity(ctx, r.Client, ev, plan); wrote || err != nil {
			return ctrl.Result{}, err
		}
		obj, u = fresh, whole
	}
	policy, life := ev.Policy, ev.Life

	ref := kube.Reference(key.GVK, obj)
	if ev.NeedsTitle(key) {
		// No message has read the title yet, and after the delete there is
		// nothing left to read it from.
		ev.Record.Title = delivery.TitleOf(u)
	}
	if ev.DryRun(r.DryRun) {
		// The planner plans a deletion under a dry run only once the
		// rehearsal is on the record (the would-delete message): nothing is
		// left to do until the expiry or the dry run changes.
		return ctrl.Result{}, nil
	}
	if ev.Archives(r.DryRun) {
		if err := r.archive(ctx, ev, u); err != nil {
			return ctrl.Result{}, err
		}
	}

	propagation := policy.Spec.Deletion.PropagationPolicy
	if propagation == "" {
		propagation = metav1.DeletePropagationBackground
	}
	// A delete under way at SIGTERM finishes, so that what it did is
	// reported and announced, not mistaken for a failure.
	deleteCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kube.WriteTimeout)
	defer cancel()
	// The expired and deleted messages are written down before the
	// delete, so that a crash right after it loses neither, and handed to
	// the outbox's sender once it succeeded: a slow receiver must not
	// delay the next deletion. They were written a moment ahead (see
	// ahead) unless the object changed since, with what the namespaces it
	// owns hold, which is read before the delete: after it, garbage
	// collection starts taking it away.
	fw, written := r.farewells.get(key)
	r.farewells.forget(key)
	written = written && fw.stands(ev)
	owned, reclaimed := fw.owned, fw.reclaimed
	if !written {
		owned, reclaimed = r.census(ctx, ev)
		if farewell := r.delivery().Farewell(ctx, ev, reclaimed); farewell != nil {
			prepareCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kube.WriteTimeout)
			defer cancel()
			if err := r.Outbox.Prepare(prepareCtx, farewell); err != nil {
				return ctrl.Result{}, fmt.Errorf("keep the expired and deleted messages of %s: %w", key, err)
			}
			written = true
		}
	}
	// On the trail (synced) before the delete, so that a crash before its
	// outcome is written still leaves the attempt on record.
	r.audit(ctx, ev, audit.Record{Type: audit.Deleting, Result: audit.OK, Detail: "propagation " + string(propagation)})
	remains, err := r.delete(deleteCtx, obj, propagation)
	if written {
		if err != nil {
			r.Outbox.Cancel(deleteCtx, obj.UID)
		} else {
			r.Outbox.Confirm(obj.UID)
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		r.audit(ctx, ev, audit.Record{Type: audit.DeleteSuperseded, Result: audit.OK, Detail: "gone already"})
		return ctrl.Result{}, nil
	case apierrors.IsConflict(err):
		r.audit(ctx, ev, audit.Record{Type: audit.DeleteSuperseded, Result: audit.OK, Detail: "changed since it was read; evaluating again"})
		metrics.Deletions.WithLabelValues("conflict").Inc()
		log.V(1).Info("object changed before delete; evaluating again")
		return ctrl.Result{RequeueAfter: kube.ConflictRetry}, nil
	case err != nil:
		metrics.Deletions.WithLabelValues("failed").Inc()
		reason := string(apierrors.ReasonForError(err))
		r.audit(ctx, ev, audit.Record{Type: audit.DeletionFailed, Result: audit.Error, Error: err.Error()})
		r.Recorder.Eventf(ref, nil, corev1.EventTypeWarning, kube.ReasonDeletionFailed, kube.ActionDelete, "Delete failed: %s", reason)
		if _, reported := ev.Record.Reported[expiry.ReportDeletionFailed]; !reported {
			// Kept in the outbox before the record says it was told, so
			// that neither a failing receiver nor a restart loses it; a
			// restart between the two writes it again under the same
			// name and message ID.
			told := r.delivery().OutboxEntry(ctx, ev, []v1alpha1.EventType{v1alpha1.EventDeletionFailed}, expiry.ReportDeletionFailed, "the API server answered "+reason)
			if told != nil {
				if serr := r.Outbox.Send(deleteCtx, told); serr != nil {
					return ctrl.Result{}, fmt.Errorf("delete %s: %w; keep the deletion-failed message: %w", key, err, serr)
				}
			}
			r.delivery().ReportOnce(ctx, ev, expiry.ReportDeletionFailed)
		}
		return ctrl.Result{}, fmt.Errorf("delete %s: %w", key, err)
	}
	r.forget(key)
	now := r.Clock.Now()
	// Late by the time since the deletion fell due: the expiry, or the
	// time a postponement announced.
	due := life.ExpiresAt
	if ev.Record != nil && ev.Record.PostponedTo.After(due) {
		due = ev.Record.PostponedTo
	}
	lag := now.Sub(due)
	metrics.Deletions.WithLabelValues("deleted").Inc()
	metrics.DeletionLag.Observe(lag.Seconds())
	countReclaimed(reclaimed)
	detail := fmt.Sprintf("propagation %s, %s after it fell due", propagation, lag.Round(time.Millisecond))
	if remains {
		detail += "; in Terminating until its finalizers have run"
	}
	// On the trail before anything says it is done.
	r.audit(ctx, ev, audit.Record{Type: audit.Deleted, Result: audit.OK, Detail: detail, Reclaimed: reclaimed})
	// late and took split the lag: the wait for this reconcile to start,
	// and the reconcile's own work until the API server accepted the
	// delete (hack/bench reads them).
	log.Info("deleted", "expiresAt", life.ExpiresAt, "lag", lag, "late", ev.Now.Sub(due), "took", now.Sub(ev.Now),
		"policy", policy.Name, "terminating", remains, "ownedNamespaces", len(owned))
	r.departures.deleted(key, &departure{
		object: auditObject(key, obj), policy: policy.Name, due: due, expiresAt: life.ExpiresAt,
		accepted: now, namespaces: namespacesOf(owned), owned: len(owned),
	})
	// Recorded after the delete succeeded, so that a delete that loses a
	// race with an extension leaves no Expired Event behind.
	r.Recorder.Eventf(ref, nil, corev1.EventTypeNormal, kube.ReasonExpired, kube.ActionDelete,
		"Expired at %s (%s, policy %s)", life.ExpiresAt.UTC().Format(time.RFC3339), life.Source, policy.Name)
	note := fmt.Sprintf("Deleted %s after expiry (policy %s, propagation %s)", now.Sub(life.ExpiresAt).Round(time.Millisecond), policy.Name, propagation)
	if reclaimed != nil {
		note += "; its namespaces held " + reclaimed.String()
	}
	r.Recorder.Eventf(ref, nil, corev1.EventTypeNormal, kube.ReasonDeleted, kube.ActionDelete, "%s", note)
	if remains {
		r.Recorder.Eventf(ref, nil, corev1.EventTypeNormal, kube.ReasonDeletionPending, kube.ActionDelete,
			"Deletion accepted; the API server keeps it in Terminating until its finalizers have run")
	}
	return ctrl.Result{}, nil
}

// delete deletes obj on the condition that it is still the object the
// decision was made from. It reports whether the object remains, in
// Terminating, until its finalizers have run: it had finalizers, or the
// deletion is in the foreground.
//
// The API server answers a delete that leaves the object in place with
// the object itself, not a Status. controller-runtime's client decodes
// that answer with its scheme, which has no governed kind (they are read
// as metadata): the delete was accepted, but the client reports that the
// kind is not registered. That error means exactly this answer: a refused
// delete is an API error, and nothing else is decoded with the scheme.
func (r *Reconciler) delete(ctx context.Context, obj *metav1.PartialObjectMetadata, propagation metav1.DeletionPropagation) (remains bool, err error) {
	err = r.Client.Delete(ctx, obj,
		client.Preconditions{UID: &obj.UID, ResourceVersion: &obj.ResourceVersion},
		client.PropagationPolicy(propagation))
	if runtime.IsNotRegisteredError(err) {
		return true, nil
	}
	return err == nil && (len(obj.Finalizers) > 0 || propagation == metav1.DeletePropagationForeground), err
}

// census reads what the namespaces the object owns hold, before it is
// deleted. It never holds up the delete: what it cannot read is logged,
// and the deletion reports what was read.
func (r *Reconciler) census(ctx context.Context, ev *eval.Evaluation) ([]string, *notify.Reclaimed) {
	log := logf.FromContext(ctx)
	owned, err := kube.OwnedNamespaces(ctx, r.Client, ev.Obj.UID)
	if err != nil {
		log.Error(err, "find the namespaces it owns")
		return nil, nil
	}
	readCtx, cancel := context.WithTimeout(ctx, kube.WriteTimeout)
	defer cancel()
	reclaimed, err := census(readCtx, r.APIReader, owned)
	if err != nil {
		log.Error(err, "count what its namespaces hold", "namespaces", owned)
	}
	return owned, reclaimed
}

func countReclaimed(rec *notify.Reclaimed) {
	if rec == nil {
		return
	}
	metrics.ReclaimedPods.Add(float64(rec.Pods))
	metrics.ReclaimedObjects.Add(float64(rec.Objects))
	metrics.ReclaimedCPU.Add(float64(rec.CPUMillis) / 1000)
	metrics.ReclaimedMemory.Add(float64(rec.MemoryBytes))
}

// archive writes the object's manifest to the archive. When it cannot, it
// says so (once per expiry) and returns an error, so that the object is
// not deleted and is tried again with backoff.
func (r *Reconciler) archive(ctx context.Context, ev *eval.Evaluation, u *unstructured.Unstructured) error {
	key, obj := ev.Key, ev.Obj
	err := errNoArchive
	var where string
	if r.Archive != nil {
		where, err = r.Archive.Write(ctx, u, archive.Header{ArchivedAt: r.Clock.Now(), ExpiresAt: ev.Life.ExpiresAt, Policy: ev.Policy.Name})
	}
	if err != nil {
		metrics.Archives.WithLabelValues(audit.Error).Inc()
		if r.delivery().ReportOnce(ctx, ev, expiry.ReportArchiveFailed)[expiry.ReportArchiveFailed] {
			r.audit(ctx, ev, audit.Record{Type: audit.ArchiveFailed, Result: audit.Error, Error: err.Error()})
			r.Recorder.Eventf(kube.Reference(key.GVK, obj), nil, corev1.EventTypeWarning, kube.ReasonArchiveFailed, kube.ActionDelete,
				"Expired at %s but not deleted: policy %s archives before deleting and the archive failed: %v; retrying with backoff",
				ev.Life.ExpiresAt.UTC().Format(time.RFC3339), ev.Policy.Name, err)
		}
		return fmt.Errorf("archive %s: %w", key, err)
	}
	metrics.Archives.WithLabelValues(audit.OK).Inc()
	r.audit(ctx, ev, audit.Record{Type: audit.Archived, Result: audit.OK, Detail: where})
	return nil
}

var errNoArchive = errors.New("the controller runs without an archive (--archive)")
