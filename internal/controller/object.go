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
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
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

	mu            sync.Mutex
	seen          map[Key]reported
	retries       retries
	pending       pendingDeliveries
	announcing    sync.WaitGroup
	announceSlots chan struct{}
}

// reported remembers what was said about an object, so that a value that
// stays wrong is warned about once and a dry run reports once per expiry.
// Only objects with something to remember have an entry.
type reported struct {
	uid            types.UID
	invalid        string
	recipients     string
	wouldDelete    time.Time
	postponed      time.Time
	deletionFailed time.Time
	noticeNotGiven time.Time
	writeFailed    bool
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
	r.warnInvalid(key, obj, ev.life)
	if ev.recordReset {
		// An extension (or a shortening) starts a new record: write it now,
		// so that the moment it took effect stays put. The patch brings the
		// next reconcile.
		if err := r.recordDelivery(ctx, key, obj, ev, func(*expiry.Record) {}); err != nil {
			return ctrl.Result{}, r.writeFailed(key, obj, err)
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
	switch plan.Action {
	case expiry.Wait:
		log.V(1).Info("waiting", "until", plan.At, "expiresAt", ev.life.ExpiresAt, "source", ev.life.Source, "policy", ev.policy.Name)
		return ctrl.Result{RequeueAfter: expiry.After(plan.At, ev.now)}, nil
	case expiry.Notify:
		return r.notify(ctx, key, obj, ev, plan)
	case expiry.Delete:
		return r.expire(ctx, key, ev.needsTitle(key))
	default:
		return ctrl.Result{}, nil
	}
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
		Life: ev.life, Schedule: ev.schedule, Record: ev.record, Channels: ev.channels.names, Now: ev.now,
	})
}

// evaluate finds the policy that governs obj and what it makes of obj. It
// returns nil when no valid policy governs obj, which is then left alone.
func (r *ObjectReconciler) evaluate(ctx context.Context, key Key, obj *metav1.PartialObjectMetadata) (*evaluation, error) {
	gvk := key.GVK
	var policies v1alpha1.TimeoutPolicyList
	if err := r.Client.List(ctx, &policies); err != nil {
		return nil, fmt.Errorf("list policies: %w", err)
	}
	matched, err := matching(candidates(policies.Items, gvk), r.describe(ctx, gvk, obj))
	if err != nil || len(matched) == 0 {
		return nil, err
	}
	c := matched[0]
	if c.scheduleErr != nil {
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
		schedule: c.schedule,
		life:     expiry.Compute(obj.CreationTimestamp.Time, obj.Annotations, c.schedule.DefaultTTL),
		channels: channels,
		now:      r.Clock.Now(),
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
		if ev.record == record {
			// Planning must not change the record the object shows.
			ev.record = record.Clone()
		}
		ev.unwritten = r.pending.apply(key, obj.UID, record, ev.record)
	}
	return ev, nil
}

func (r *ObjectReconciler) describe(ctx context.Context, gvk schema.GroupVersionKind, obj *metav1.PartialObjectMetadata) object {
	return object{
		labels:     obj.Labels,
		namespaced: obj.Namespace != "",
		nsLabels: func() (map[string]string, error) {
			return namespaceLabels(ctx, r.Client, obj.Namespace)
		},
	}
}

// expire deletes an object that the cache says has expired. The cache may
// be behind a write that extended or kept the object, so it reads the
// object again from the API server, evaluates it afresh and deletes it only
// if it has not changed since: the preconditions make a write that lands
// between the read and the delete win. withTitle reads the title in the
// same request.
func (r *ObjectReconciler) expire(ctx context.Context, key Key, withTitle bool) (ctrl.Result, error) {
	log := logf.FromContext(ctx)

	obj, title, err := r.freshRead(ctx, key, withTitle)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get %s from the API server: %w", key, err)
	}
	if obj.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	ev, err := r.evaluate(ctx, key, obj)
	if errors.Is(err, errChannelsNotReady) {
		return ctrl.Result{RequeueAfter: channelsTTL}, nil
	}
	if err != nil || ev == nil {
		return ctrl.Result{}, err
	}
	plan := ev.plan()
	switch plan.Action {
	case expiry.Keep:
		return ctrl.Result{}, nil
	case expiry.Wait:
		log.Info("expiry moved", "expiresAt", ev.life.ExpiresAt, "source", ev.life.Source)
		return ctrl.Result{RequeueAfter: expiry.After(plan.At, ev.now)}, nil
	case expiry.Notify:
		// The fresh read shows something the cache had not: a message due
		// first (the record or the notice changed).
		return r.notify(ctx, key, obj, ev, plan)
	}
	policy, life := ev.policy, ev.life

	ref := reference(key.GVK, obj)
	if ev.needsTitle(key) {
		// No message has read the title yet, and after the delete there is
		// nothing left to read it from.
		if !withTitle {
			title = r.title(ctx, key)
		}
		ev.record.Title = title
	}
	if policy.Spec.Deletion.DryRun {
		if r.firstWouldDelete(key, obj.UID, life.ExpiresAt) {
			log.Info("would delete", "expiresAt", life.ExpiresAt, "policy", policy.Name)
			r.Recorder.Eventf(ref, nil, corev1.EventTypeNormal, ReasonWouldDelete, actionDelete,
				"Expired at %s (%s, policy %s); not deleted because the policy is in dry-run mode",
				life.ExpiresAt.UTC().Format(time.RFC3339), life.Source, policy.Name)
			r.announceLater(ctx, key, obj, ev, v1alpha1.EventWouldDelete, "")
		}
		return ctrl.Result{}, nil
	}

	propagation := policy.Spec.Deletion.PropagationPolicy
	if propagation == "" {
		propagation = metav1.DeletePropagationBackground
	}
	err = r.Client.Delete(ctx, obj,
		client.Preconditions{UID: &obj.UID, ResourceVersion: &obj.ResourceVersion},
		client.PropagationPolicy(propagation))
	switch {
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, nil
	case apierrors.IsConflict(err):
		log.V(1).Info("object changed before delete; evaluating again")
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	case err != nil:
		reason := string(apierrors.ReasonForError(err))
		r.Recorder.Eventf(ref, nil, corev1.EventTypeWarning, ReasonDeletionFailed, actionDelete, "Delete failed: %s", reason)
		if r.firstDeletionFailure(key, obj.UID, life.ExpiresAt) {
			r.announceLater(ctx, key, obj, ev, v1alpha1.EventDeletionFailed, "the API server answered "+reason)
		}
		return ctrl.Result{}, fmt.Errorf("delete %s: %w", key, err)
	}
	r.forget(key)
	lag := r.Clock.Now().Sub(life.ExpiresAt)
	log.Info("deleted", "expiresAt", life.ExpiresAt, "lag", lag, "policy", policy.Name)
	// Recorded after the delete succeeded, so that a delete that loses a
	// race with an extension leaves no Expired Event behind.
	r.Recorder.Eventf(ref, nil, corev1.EventTypeNormal, ReasonExpired, actionDelete,
		"Expired at %s (%s, policy %s)", life.ExpiresAt.UTC().Format(time.RFC3339), life.Source, policy.Name)
	r.Recorder.Eventf(ref, nil, corev1.EventTypeNormal, ReasonDeleted, actionDelete,
		"Deleted %s after expiry (policy %s, propagation %s)", lag.Round(time.Millisecond), policy.Name, propagation)
	r.announceLater(ctx, key, obj, ev, v1alpha1.EventExpired, "")
	r.announceLater(ctx, key, obj, ev, v1alpha1.EventDeleted, "")
	return ctrl.Result{}, nil
}

// warnInvalid emits one InvalidTimeout Event per invalid annotation value,
// and again only when the values change.
func (r *ObjectReconciler) warnInvalid(key Key, obj *metav1.PartialObjectMetadata, life expiry.Lifetime) {
	var sig strings.Builder
	for _, inv := range life.Invalid {
		sig.WriteString(inv.Annotation + "=" + inv.Value + "\n")
	}
	if !r.remember(key, obj.UID, func(s *reported) bool {
		changed := s.invalid != sig.String()
		s.invalid = sig.String()
		return changed
	}) || sig.Len() == 0 {
		return
	}
	outcome := "it is kept"
	if !life.Keep {
		outcome = "it now expires at " + life.ExpiresAt.UTC().Format(time.RFC3339)
	}
	// One Event for all of them: the Events API folds Events with the same
	// object, reason and action into one series, whatever their notes.
	problems := make([]string, 0, len(life.Invalid))
	for _, inv := range life.Invalid {
		problems = append(problems, inv.Error())
	}
	r.Recorder.Eventf(reference(key.GVK, obj), nil, corev1.EventTypeWarning, ReasonInvalidTimeout, actionEvaluate,
		"%s; %s", strings.Join(problems, "; "), outcome)
}

func (r *ObjectReconciler) firstWouldDelete(key Key, uid types.UID, at time.Time) bool {
	return r.remember(key, uid, func(s *reported) bool {
		first := !s.wouldDelete.Equal(at)
		s.wouldDelete = at
		return first
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
	if !r.remember(key, obj.UID, func(s *reported) bool {
		changed := s.recipients != sig.String()
		s.recipients = sig.String()
		return changed
	}) || sig.Len() == 0 {
		return
	}
	r.Recorder.Eventf(reference(key.GVK, obj), nil, corev1.EventTypeWarning, ReasonInvalidRecipient, actionNotify,
		"annotation %s: %s; the other recipients are still told", notify.AnnotationNotify, errors.Join(problems...).Error())
}

func (r *ObjectReconciler) firstDeletionFailure(key Key, uid types.UID, at time.Time) bool {
	return r.remember(key, uid, func(s *reported) bool {
		first := !s.deletionFailed.Equal(at)
		s.deletionFailed = at
		return first
	})
}

func (r *ObjectReconciler) firstNoticeNotGiven(key Key, uid types.UID, at time.Time) bool {
	return r.remember(key, uid, func(s *reported) bool {
		first := !s.noticeNotGiven.Equal(at)
		s.noticeNotGiven = at
		return first
	})
}

func (r *ObjectReconciler) firstPostponement(key Key, uid types.UID, at time.Time) bool {
	return r.remember(key, uid, func(s *reported) bool {
		first := !s.postponed.Equal(at)
		s.postponed = at
		return first
	})
}

func (r *ObjectReconciler) forget(key Key) {
	r.mu.Lock()
	delete(r.seen, key)
	r.mu.Unlock()
	r.retries.forget(key)
	r.pending.forget(key)
}

// freshRead reads the object from the API server. withTitle reads the
// whole object, so that the title comes in the same response rather than
// in a second request.
func (r *ObjectReconciler) freshRead(ctx context.Context, key Key, withTitle bool) (*metav1.PartialObjectMetadata, string, error) {
	obj := newMetadata(key.GVK)
	if !withTitle {
		return obj, "", r.APIReader.Get(ctx, key.NamespacedName, obj)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(key.GVK)
	if err := r.APIReader.Get(ctx, key.NamespacedName, u); err != nil {
		return nil, "", err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return nil, "", fmt.Errorf("read the metadata of %s: %w", key, err)
	}
	return obj, titleOf(u), nil
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
