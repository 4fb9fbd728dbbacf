// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"fmt"
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

	"github.com/amphitheatre-app/timeout-controller/internal/archive"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
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
	// MaxDeletionsPerMinute caps the deletions of all policies together;
	// 0 sets no such cap. Each policy's own cap applies either way.
	MaxDeletionsPerMinute int
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
	// Wake, when set, asks for an object to be looked at at once: for a
	// message that found its channel busy, when a slot frees (SlotFreed).
	Wake func(Key)

	mu sync.Mutex
	// recordWriteFailed holds the objects whose failure to write their
	// record was reported (see writeFailed), by the UID it was about.
	recordWriteFailed map[Key]types.UID
	retries           retries
	pending           pendingDeliveries
	activity          activity
	slotWaiters       slotWaiters
	capsOnce          sync.Once
	capsState         *deletionCaps
	departures        departures
}

// caps are the deletion caps and the turns they gave, built on first use
// from MaxDeletionsPerMinute.
func (r *ObjectReconciler) caps() *deletionCaps {
	r.capsOnce.Do(func() { r.capsState = newDeletionCaps(r.MaxDeletionsPerMinute) })
	return r.capsState
}

// Reconcile plans the next action for one object and carries it out when
// it is due. It reads the object from the cache, decides, records what
// the record must hold before anything else happens, and acts.
func (r *ObjectReconciler) Reconcile(ctx context.Context, key Key) (ctrl.Result, error) {
	log := logf.FromContext(ctx)

	// Read.
	obj := newMetadata(key.GVK)
	if err := r.Client.Get(ctx, key.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(key)
			r.departed(ctx, key)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get %s: %w", key, err)
	}
	if obj.DeletionTimestamp != nil {
		r.forget(key)
		return r.terminating(ctx, key, obj), nil
	}

	// Decide.
	ev, plan, err := r.decide(ctx, key, obj)
	if errors.Is(err, errChannelsNotReady) {
		// The policy's status says why; look again when the channels may
		// have been fixed (a Secret created), which no watch reports.
		return ctrl.Result{RequeueAfter: channelsTTL}, nil
	}
	if err != nil || ev == nil {
		return ctrl.Result{}, err
	}
	if wrote, err := r.settleActivity(ctx, ev); wrote || err != nil {
		return ctrl.Result{}, err
	}
	r.warnInvalid(ctx, ev)

	// Record.
	if ev.Replaced {
		// An extension (or a shortening) starts a new record: write it now,
		// so that the moment it took effect stays put. The patch brings the
		// next reconcile.
		// Not cut short by a shutdown: a failure would be reported.
		writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		defer cancel()
		if err := r.recordDelivery(writeCtx, ev, func(*expiry.Record) {}); err != nil {
			return ctrl.Result{}, r.writeFailed(ev, err)
		}
		if !ev.Previous.IsZero() {
			r.audit(ctx, ev, audit.Record{Type: audit.Extended, Result: audit.OK,
				Detail: "expiry moved from " + ev.Previous.UTC().Format(time.RFC3339)})
		}
		return ctrl.Result{}, nil
	}
	if ev.unwritten {
		// Deliveries the object does not show are written again until they
		// stick; planning goes on from them meanwhile, so nothing waits on
		// the write and nothing is sent twice.
		if err := r.recordDelivery(ctx, ev, func(*expiry.Record) {}); err != nil {
			log.Error(err, "record what was sent")
		}
	}

	// Use: a spec edit the object does not show as recorded.
	wake, wrote, err := r.recordActivity(ctx, ev, plan)
	if wrote || err != nil {
		return ctrl.Result{}, err
	}
	if plan.Action == expiry.Wait && !wake.IsZero() && wake.Before(plan.At) {
		plan.At = wake
	}

	// Act.
	switch plan.Action {
	case expiry.Wait:
		log.V(1).Info("waiting", "until", plan.At, "expiresAt", ev.Life.ExpiresAt, "source", ev.Life.Source, "policy", ev.policy.Name)
		return ctrl.Result{RequeueAfter: expiry.After(plan.At, ev.now)}, nil
	case expiry.Notify:
		return r.notify(ctx, ev, plan)
	case expiry.Sleep:
		return r.sleep(ctx, ev)
	case expiry.Wake:
		return r.wake(ctx, ev, plan.WokeBy)
	case expiry.Delete:
		if wait := r.deletionTurn(ctx, ev); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		return r.expire(ctx, ev)
	default:
		return ctrl.Result{}, nil
	}
}

// deletionTurn returns how long the object must wait for its turn under the
// deletion caps, and says so (once per expiry) when a cap holds it back.
// A dry run deletes nothing, so nothing waits for it.
func (r *ObjectReconciler) deletionTurn(ctx context.Context, ev *evaluation) time.Duration {
	key, obj := ev.key, ev.obj
	if ev.dryRun(r.DryRun) {
		return 0
	}
	at, by, throttled := r.caps().admit(key, obj.UID, ev.Life.ExpiresAt, ev.policy.Name, ev.policy.Spec.Deletion.MaxPerMinute, ev.now)
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
		r.audit(ctx, ev, audit.Record{Type: audit.Throttled, Result: audit.OK, Detail: "deletion waits until " + when + " under " + limit})
		r.Recorder.Eventf(reference(key.GVK, obj), nil, corev1.EventTypeNormal, ReasonDeletionThrottled, actionDelete,
			"Expired at %s; deletion waits until %s under %s", ev.Life.ExpiresAt.UTC().Format(time.RFC3339), when, limit)
	}
	return expiry.After(at, ev.now)
}

func (r *ObjectReconciler) forget(key Key) {
	r.mu.Lock()
	delete(r.recordWriteFailed, key)
	r.mu.Unlock()
	r.retries.forget(key)
	r.pending.forget(key)
	r.caps().forget(key)
	r.activity.forget(key)
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
