// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/archive"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/outbox"
)

// Key identifies a governed object in the work queue: one queue serves
// every target kind.
type Key struct {
	GVK schema.GroupVersionKind
	types.NamespacedName
}

func (k Key) String() string {
	return k.GVK.Kind + "/" + k.NamespacedName.String()
}

// outboxKind is the kind the outbox keeps its entries in.
var outboxKind = schema.GroupKind{Kind: "ConfigMap"}

// conflictRetry is how soon an object is looked at again after a delete
// lost a race with a write to it.
const conflictRetry = 100 * time.Millisecond

// ObjectReconciler deletes governed objects when they expire.
type ObjectReconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server, for the check before a delete.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	// Channels builds each policy's notification channels.
	Channels *Channels
	// Audit receives a record of every decision; nil writes none.
	Audit *audit.Log
	// Caps holds the deletion caps and the turns they gave.
	Caps *deletionCaps
	// DryRun deletes nothing, whatever the policies say.
	DryRun bool
	// Archive is where manifests are archived before deletion; nil when
	// the controller has none.
	Archive archive.Store
	// ClusterEventNamespace is where Events about cluster-scoped objects
	// go; "default" when empty.
	ClusterEventNamespace string
	// Outbox keeps the expired and deleted messages until they are out.
	Outbox *outbox.Outbox

	mu            sync.Mutex
	seen          map[Key]reported
	retries       retries
	pending       pendingDeliveries
	announcing    sync.WaitGroup
	draining      bool
	announceSlots chan struct{}
}

// reported remembers which warnings about an object's annotations were
// given, so that a value that stays wrong is warned about once. Only
// objects with something to remember have an entry.
type reported struct {
	uid         types.UID
	invalid     string
	recipients  string
	writeFailed bool
}

// Reconcile plans the next action for one object and carries it out when
// it is due.
func (r *ObjectReconciler) Reconcile(ctx context.Context, key Key) (ctrl.Result, error) {
	log := logf.FromContext(ctx)

	obj := newMetadata(key.GVK)
	if err := r.Client.Get(ctx, key.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(key)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get %s: %w", key, err)
	}
	if obj.DeletionTimestamp != nil {
		r.forget(key)
		return ctrl.Result{}, nil
	}

	ev, err := r.evaluate(ctx, key, obj)
	if errors.Is(err, errChannelsNotReady) {
		// The policy's status says why; look again when the channels may
		// have been fixed (a Secret created), which no watch reports.
		return ctrl.Result{RequeueAfter: channelsTTL}, nil
	}
	if err != nil || ev == nil {
		return ctrl.Result{}, err
	}
	r.warnInvalid(ctx, key, obj, ev)
	if ev.recordReset {
		// An extension (or a shortening) starts a new record: write it now,
		// so that the moment it took effect stays put. The patch brings the
		// next reconcile.
		// Not cut short by a shutdown: a failure would be reported.
		writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		defer cancel()
		if err := r.recordDelivery(writeCtx, key, obj, ev, func(*expiry.Record) {}); err != nil {
			return ctrl.Result{}, r.writeFailed(key, obj, err)
		}
		if !ev.previous.IsZero() {
			r.audit(ctx, key, obj, ev, audit.Record{Type: audit.Extended, Result: audit.OK,
				Detail: "expiry moved from " + ev.previous.UTC().Format(time.RFC3339)})
		}
		return ctrl.Result{}, nil
	}
	if ev.unwritten {
		// Deliveries the object does not show are written again until they
		// stick; planning goes on from them meanwhile, so nothing waits on
		// the write and nothing is sent twice.
		if err := r.recordDelivery(ctx, key, obj, ev, func(*expiry.Record) {}); err != nil {
			log.Error(err, "record what was sent")
		}
	}

	plan := ev.plan()
	if plan.Action != expiry.Delete {
		r.Caps.forget(key)
	}
	switch plan.Action {
	case expiry.Wait:
		log.V(1).Info("waiting", "until", plan.At, "expiresAt", ev.life.ExpiresAt, "source", ev.life.Source, "policy", ev.policy.Name)
		return ctrl.Result{RequeueAfter: expiry.After(plan.At, ev.now)}, nil
	case expiry.Notify:
		return r.notify(ctx, key, obj, ev, plan)
	case expiry.Delete:
		if wait := r.turn(ctx, key, obj, ev); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		return r.expire(ctx, key, obj, ev)
	default:
		return ctrl.Result{}, nil
	}
}

// turn returns how long the object must wait for its turn under the
// deletion caps, and says so (once per expiry) when a cap holds it back.
// A dry run deletes nothing, so nothing waits for it.
func (r *ObjectReconciler) turn(ctx context.Context, key Key, obj *metav1.PartialObjectMetadata, ev *evaluation) time.Duration {
	if ev.dryRun(r.DryRun) {
		return 0
	}
	at, by, throttled := r.Caps.admit(key, obj.UID, ev.life.ExpiresAt, ev.policy.Name, ev.policy.Spec.Deletion.MaxPerMinute, ev.now)
	if !at.After(ev.now) {
		return 0
	}
	if throttled {
		deletionsThrottled.WithLabelValues(by).Inc()
		limit := fmt.Sprintf("the cap of %d deletions per minute of policy %s", ev.policy.Spec.Deletion.MaxPerMinute, ev.policy.Name)
		if by == capGlobal {
			limit = "the controller's cap (--max-deletions-per-minute)"
		}
		when := at.UTC().Format(time.RFC3339Nano)
		r.audit(ctx, key, obj, ev, audit.Record{Type: audit.Throttled, Result: audit.OK, Detail: "deletion waits until " + when + " under " + limit})
		r.Recorder.Eventf(reference(key.GVK, obj), nil, corev1.EventTypeNormal, ReasonDeletionThrottled, actionDelete,
			"Expired at %s; deletion waits until %s under %s", ev.life.ExpiresAt.UTC().Format(time.RFC3339), when, limit)
	}
	return expiry.After(at, ev.now)
}

// evaluation is what the controller makes of an object at one moment.
type evaluation struct {
	policy   *v1alpha1.TimeoutPolicy
	schedule expiry.Schedule
	life     expiry.Lifetime
	record   *expiry.Record
	// recordReset is set when the object's record is about another expiry
	// and record is the new one, not yet written.
	recordReset bool
	// unwritten is set when record holds deliveries the object does not
	// show: the cache lags, or writing them failed.
	unwritten bool
	channels  *channelSet
	now       time.Time
	// rehearse says deletions are only rehearsed: the policy's dryRun or
	// the controller's --dry-run.
	rehearse bool
	// previous is, when recordReset, the expiry the old record was about.
	previous time.Time
}

// dryRun reports whether the object's expiry deletes nothing.
func (ev *evaluation) dryRun(global bool) bool {
	return global || ev.policy.Spec.Deletion.DryRun
}

// archives reports whether the object's manifest is archived before it is
// deleted.
func (ev *evaluation) archives(globalDryRun bool) bool {
	return ev.policy.Spec.Deletion.Archive && !ev.dryRun(globalDryRun)
}

// errChannelsNotReady: the governing policy's channels cannot be built.
var errChannelsNotReady = errors.New("notification channels not ready")

// needsTitle reports whether a message about the object would lack its
// title: a Playbook none of whose messages has read it yet.
func (ev *evaluation) needsTitle(key Key) bool {
	return ev.record.Title == "" && key.GVK.GroupKind() == playbooks && len(ev.channels.notifiers) > 0
}

func (ev *evaluation) plan() expiry.Plan {
	return expiry.Next(expiry.Input{
		Life: ev.life, Schedule: ev.schedule, Record: ev.record, Channels: ev.channels.names, DryRun: ev.rehearse, Now: ev.now,
	})
}

// evaluate finds the policy that governs obj and what it makes of obj. It
// returns nil when no valid policy governs obj, which is then left alone.
func (r *ObjectReconciler) evaluate(ctx context.Context, key Key, obj *metav1.PartialObjectMetadata) (*evaluation, error) {
	gvk := key.GVK
	if gvk.GroupKind() == outboxKind && obj.Labels[outbox.LabelEntry] == "true" {
		// The outbox's own entries: a policy on ConfigMaps that selects
		// them must not delete the messages they hold.
		return nil, nil
	}
	var policies v1alpha1.TimeoutPolicyList
	// Read only: the evaluation keeps pointers into the list, and nothing
	// changes them.
	if err := r.Client.List(ctx, &policies, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list policies: %w", err)
	}
	matched, err := match.Matching(match.Candidates(policies.Items, gvk), r.describe(ctx, obj))
	if err != nil || len(matched) == 0 {
		return nil, err
	}
	c := matched[0]
	if c.SpecErr != nil {
		return nil, nil
	}
	channels, err := r.Channels.get(ctx, c.TimeoutPolicy)
	if err != nil {
		// Without its channels the policy cannot give the notice it
		// promises: the object waits for a fix.
		return nil, errChannelsNotReady
	}
	ev := &evaluation{
		policy:   c.TimeoutPolicy,
		schedule: c.Schedule,
		life:     expiry.Compute(obj.CreationTimestamp.Time, obj.Annotations, c.Schedule.DefaultTTL),
		channels: channels,
		now:      r.Clock.Now(),
		rehearse: r.DryRun || c.Spec.Deletion.DryRun,
	}
	record, err := expiry.ParseRecord(obj.Annotations[expiry.AnnotationReminders])
	if err != nil {
		// The record is the controller's own; if someone broke it, the
		// worst that follows is a repeated reminder, never a deletion
		// without one.
		logf.FromContext(ctx).Info("ignoring unreadable record", "error", err.Error())
	}
	if !ev.life.Keep {
		created := obj.CreationTimestamp.Time
		// Deliveries not written yet belong to the record they were about,
		// before an extension replaces it.
		base := r.pending.carry(key, obj.UID, record, created, ev.life.ExpiresAt)
		ev.record = base.For(ev.life.ExpiresAt, created, ev.now)
		ev.recordReset = base != nil && ev.record != base
		if ev.recordReset {
			ev.previous = base.ExpiresAt
		}
		if ev.record == record {
			// Planning must not change the record the object shows.
			ev.record = record.Clone()
		}
		ev.unwritten = r.pending.apply(key, obj.UID, record, ev.record)
	}
	return ev, nil
}

func (r *ObjectReconciler) describe(ctx context.Context, obj *metav1.PartialObjectMetadata) match.Object {
	return match.Object{
		Labels:     obj.Labels,
		Namespaced: obj.Namespace != "",
		// Read once, however many candidates select by namespace.
		NamespaceLabels: sync.OnceValues(func() (map[string]string, error) {
			return namespaceLabels(ctx, r.Client, obj.Namespace)
		}),
	}
}

// expire deletes an object that the cache says has expired. The cache may
// be behind a write that extended or kept the object, so the delete is
// conditional on the UID and resourceVersion the decision was made from:
// a write the cache has not seen yet makes it fail with a Conflict, and the
// object is looked at again once the cache has caught up. When the whole
// object is needed (for the title of the last message, or the archive) it
// is read from the API server, and the decision is made again from what
// that read shows.
func (r *ObjectReconciler) expire(ctx context.Context, key Key, obj *metav1.PartialObjectMetadata, ev *evaluation) (ctrl.Result, error) {
	log := logf.FromContext(ctx)

	var u *unstructured.Unstructured
	if ev.needsTitle(key) || ev.archives(r.DryRun) {
		fresh, whole, err := r.freshRead(ctx, key)
		if err != nil {
			if apierrors.IsNotFound(err) {
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, fmt.Errorf("get %s from the API server: %w", key, err)
		}
		if fresh.DeletionTimestamp != nil {
			return ctrl.Result{}, nil
		}
		ev, err = r.evaluate(ctx, key, fresh)
		if errors.Is(err, errChannelsNotReady) {
			return ctrl.Result{RequeueAfter: channelsTTL}, nil
		}
		if err != nil || ev == nil {
			return ctrl.Result{}, err
		}
		plan := ev.plan()
		if plan.Action != expiry.Delete {
			r.Caps.forget(key)
		}
		switch plan.Action {
		case expiry.Keep:
			return ctrl.Result{}, nil
		case expiry.Wait:
			log.Info("expiry moved", "expiresAt", ev.life.ExpiresAt, "source", ev.life.Source)
			return ctrl.Result{RequeueAfter: expiry.After(plan.At, ev.now)}, nil
		case expiry.Notify:
			// The fresh read shows something the cache had not: a message
			// due first (the record or the notice changed).
			return r.notify(ctx, key, fresh, ev, plan)
		}
		obj, u = fresh, whole
	}
	policy, life := ev.policy, ev.life

	ref := reference(key.GVK, obj)
	if ev.needsTitle(key) {
		// No message has read the title yet, and after the delete there is
		// nothing left to read it from.
		ev.record.Title = titleOf(u)
	}
	if ev.dryRun(r.DryRun) {
		// The planner plans a deletion under a dry run only once the
		// rehearsal is on the record (the would-delete message): nothing is
		// left to do until the expiry or the dry run changes.
		return ctrl.Result{}, nil
	}
	if ev.archives(r.DryRun) {
		if err := r.archive(ctx, key, obj, u, ev); err != nil {
			return ctrl.Result{}, err
		}
	}

	propagation := policy.Spec.Deletion.PropagationPolicy
	if propagation == "" {
		propagation = metav1.DeletePropagationBackground
	}
	// A delete under way at SIGTERM finishes, so that what it did is
	// reported and announced, not mistaken for a failure.
	deleteCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	// The expired and deleted messages are written down before the
	// delete, so that a crash right after it loses neither, and handed to
	// the outbox's sender once it succeeded: a slow receiver must not
	// delay the next deletion.
	farewell := r.farewell(key, obj, ev)
	if farewell != nil {
		prepareCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		defer cancel()
		if err := r.Outbox.Prepare(prepareCtx, farewell); err != nil {
			return ctrl.Result{}, fmt.Errorf("keep the expired and deleted messages of %s: %w", key, err)
		}
	}
	// On the trail (synced) before the delete, so that a crash before its
	// outcome is written still leaves the attempt on record.
	r.audit(ctx, key, obj, ev, audit.Record{Type: audit.Deleting, Result: audit.OK, Detail: "propagation " + string(propagation)})
	err := r.Client.Delete(deleteCtx, obj,
		client.Preconditions{UID: &obj.UID, ResourceVersion: &obj.ResourceVersion},
		client.PropagationPolicy(propagation))
	if farewell != nil {
		if err != nil {
			r.Outbox.Cancel(deleteCtx, obj.UID)
		} else {
			r.Outbox.Confirm(obj.UID)
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		r.audit(ctx, key, obj, ev, audit.Record{Type: audit.DeleteSuperseded, Result: audit.OK, Detail: "gone already"})
		return ctrl.Result{}, nil
	case apierrors.IsConflict(err):
		r.audit(ctx, key, obj, ev, audit.Record{Type: audit.DeleteSuperseded, Result: audit.OK, Detail: "changed since it was read; evaluating again"})
		deletions.WithLabelValues("conflict").Inc()
		log.V(1).Info("object changed before delete; evaluating again")
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	case err != nil:
		deletions.WithLabelValues("failed").Inc()
		reason := string(apierrors.ReasonForError(err))
		r.audit(ctx, key, obj, ev, audit.Record{Type: audit.DeletionFailed, Result: audit.Error, Error: err.Error()})
		r.Recorder.Eventf(ref, nil, corev1.EventTypeWarning, ReasonDeletionFailed, actionDelete, "Delete failed: %s", reason)
		if r.reportOnce(ctx, key, obj, ev, expiry.ReportDeletionFailed)[expiry.ReportDeletionFailed] {
			r.announceLater(ctx, key, obj, ev, v1alpha1.EventDeletionFailed, "the API server answered "+reason)
		}
		return ctrl.Result{}, fmt.Errorf("delete %s: %w", key, err)
	}
	r.forget(key)
	now := r.Clock.Now()
	// Late by the time since the deletion fell due: the expiry, or the
	// time a postponement announced.
	due := life.ExpiresAt
	if ev.record != nil && ev.record.PostponedTo.After(due) {
		due = ev.record.PostponedTo
	}
	lag := now.Sub(due)
	deletions.WithLabelValues("deleted").Inc()
	deletionLag.Observe(lag.Seconds())
	// On the trail before anything says it is done.
	r.audit(ctx, key, obj, ev, audit.Record{Type: audit.Deleted, Result: audit.OK,
		Detail: fmt.Sprintf("propagation %s, %s after it fell due", propagation, lag.Round(time.Millisecond))})
	log.Info("deleted", "expiresAt", life.ExpiresAt, "lag", lag, "policy", policy.Name)
	// Recorded after the delete succeeded, so that a delete that loses a
	// race with an extension leaves no Expired Event behind.
	r.Recorder.Eventf(ref, nil, corev1.EventTypeNormal, ReasonExpired, actionDelete,
		"Expired at %s (%s, policy %s)", life.ExpiresAt.UTC().Format(time.RFC3339), life.Source, policy.Name)
	r.Recorder.Eventf(ref, nil, corev1.EventTypeNormal, ReasonDeleted, actionDelete,
		"Deleted %s after expiry (policy %s, propagation %s)", now.Sub(life.ExpiresAt).Round(time.Millisecond), policy.Name, propagation)
	return ctrl.Result{}, nil
}

// archive writes the object's manifest to the archive. When it cannot, it
// says so (once per expiry) and returns an error, so that the object is
// not deleted and is tried again with backoff.
func (r *ObjectReconciler) archive(ctx context.Context, key Key, obj *metav1.PartialObjectMetadata, u *unstructured.Unstructured, ev *evaluation) error {
	err := errNoArchive
	var where string
	if r.Archive != nil {
		where, err = r.Archive.Write(ctx, u, archive.Header{ArchivedAt: r.Clock.Now(), ExpiresAt: ev.life.ExpiresAt, Policy: ev.policy.Name})
	}
	if err != nil {
		archives.WithLabelValues(audit.Error).Inc()
		if r.reportOnce(ctx, key, obj, ev, expiry.ReportArchiveFailed)[expiry.ReportArchiveFailed] {
			r.audit(ctx, key, obj, ev, audit.Record{Type: audit.ArchiveFailed, Result: audit.Error, Error: err.Error()})
			r.Recorder.Eventf(reference(key.GVK, obj), nil, corev1.EventTypeWarning, ReasonArchiveFailed, actionDelete,
				"Expired at %s but not deleted: policy %s archives before deleting and the archive failed: %v; retrying with backoff",
				ev.life.ExpiresAt.UTC().Format(time.RFC3339), ev.policy.Name, err)
		}
		return fmt.Errorf("archive %s: %w", key, err)
	}
	archives.WithLabelValues(audit.OK).Inc()
	r.audit(ctx, key, obj, ev, audit.Record{Type: audit.Archived, Result: audit.OK, Detail: where})
	return nil
}

var errNoArchive = errors.New("the controller runs without an archive (--archive)")

// audit adds rec to the audit trail, filled in with the object, its policy
// and its expiry. A record that cannot be written is counted and logged:
// the action it is about has happened.
func (r *ObjectReconciler) audit(ctx context.Context, key Key, obj metav1.Object, ev *evaluation, recs ...audit.Record) {
	apiVersion, kind := key.GVK.ToAPIVersionAndKind()
	now := r.Clock.Now()
	for i := range recs {
		rec := &recs[i]
		rec.Time = now
		rec.Object = audit.Object{APIVersion: apiVersion, Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
		if ev != nil {
			rec.Policy = ev.policy.Name
			if !ev.life.Keep && rec.ExpiresAt == nil {
				at := ev.life.ExpiresAt
				rec.ExpiresAt = &at
			}
		}
	}
	if err := r.Audit.Write(recs...); err != nil {
		auditFailures.Add(float64(len(recs)))
		logf.FromContext(ctx).Error(err, "audit trail", "records", len(recs))
	}
}

// warnInvalid emits one InvalidTimeout Event per invalid annotation value,
// and again only when the values change.
func (r *ObjectReconciler) warnInvalid(ctx context.Context, key Key, obj *metav1.PartialObjectMetadata, ev *evaluation) {
	life := ev.life
	var sig strings.Builder
	for _, inv := range life.Invalid {
		sig.WriteString(inv.Annotation + "=" + inv.Value + "\n")
	}
	if !r.changed(key, obj.UID, sig.String(), func(s *reported) *string { return &s.invalid }) || sig.Len() == 0 {
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
	r.audit(ctx, key, obj, ev, recs...)
	r.Recorder.Eventf(reference(key.GVK, obj), nil, corev1.EventTypeWarning, ReasonInvalidTimeout, actionEvaluate,
		"%s; %s", strings.Join(problems, "; "), outcome)
}

// changed reports whether the warnings about the object, summed up in sig,
// differ from those field says were last given, and remembers sig.
func (r *ObjectReconciler) changed(key Key, uid types.UID, sig string, field func(*reported) *string) bool {
	return r.remember(key, uid, func(s *reported) bool {
		last := field(s)
		changed := *last != sig
		*last = sig
		return changed
	})
}

// remember applies update to what was reported about the object and
// returns update's result. A recreated object (new UID) starts afresh, and
// an entry left with nothing in it is dropped.
func (r *ObjectReconciler) remember(key Key, uid types.UID, update func(*reported) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.seen[key]
	if s.uid != uid {
		s = reported{uid: uid}
	}
	result := update(&s)
	if s == (reported{uid: uid}) {
		delete(r.seen, key)
	} else {
		if r.seen == nil {
			r.seen = map[Key]reported{}
		}
		r.seen[key] = s
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
	if !r.changed(key, obj.UID, sig.String(), func(s *reported) *string { return &s.recipients }) || sig.Len() == 0 {
		return
	}
	r.Recorder.Eventf(reference(key.GVK, obj), nil, corev1.EventTypeWarning, ReasonInvalidRecipient, actionNotify,
		"annotation %s: %s; the other recipients are still told", notify.AnnotationNotify, errors.Join(problems...).Error())
}

func (r *ObjectReconciler) forget(key Key) {
	r.mu.Lock()
	delete(r.seen, key)
	r.mu.Unlock()
	r.retries.forget(key)
	r.pending.forget(key)
	r.Caps.forget(key)
}

// freshRead reads the whole object from the API server, and its metadata
// from the same response.
func (r *ObjectReconciler) freshRead(ctx context.Context, key Key) (*metav1.PartialObjectMetadata, *unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(key.GVK)
	if err := r.APIReader.Get(ctx, key.NamespacedName, u); err != nil {
		return nil, nil, err
	}
	obj := newMetadata(key.GVK)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return nil, nil, fmt.Errorf("read the metadata of %s: %w", key, err)
	}
	return obj, u, nil
}

func newMetadata(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	return obj
}

func newMetadataList(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadataList {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return list
}

func reference(gvk schema.GroupVersionKind, obj metav1.Object) *corev1.ObjectReference {
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	return &corev1.ObjectReference{
		APIVersion:      apiVersion,
		Kind:            kind,
		Namespace:       obj.GetNamespace(),
		Name:            obj.GetName(),
		UID:             obj.GetUID(),
		ResourceVersion: obj.GetResourceVersion(),
	}
}

func namespaceLabels(ctx context.Context, c client.Reader, name string) (map[string]string, error) {
	ns := newMetadata(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := c.Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
		return nil, fmt.Errorf("get namespace %s: %w", name, err)
	}
	return ns.Labels, nil
}
