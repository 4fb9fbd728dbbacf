// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/archive"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/channelset"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/delivery"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/eval"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/metrics"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/objectstore"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/sleep"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/usage"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/outbox"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// outboxKind is the kind the outbox keeps its entries in.
var outboxKind = schema.GroupKind{Kind: "ConfigMap"}

// The rules the object controller needs for Playbooks, its default
// target. Each further target kind needs get, list, watch, patch (for the
// reminder record) and delete on its resource. The census of what a
// deleted object owned (reclaim.go) and sleep (internal/controller/sleep)
// keep theirs beside their code.
// +kubebuilder:rbac:groups=amphitheatre.app,resources=playbooks,verbs=get;list;watch;patch;delete
// Who may write the reminders record annotation, which the admission
// policy (config/admission) lets no one else write: a verb on a resource
// no API serves, so that it names this permission and nothing else.
// +kubebuilder:rbac:groups=timeout.amphitheatre.app,resources=reminders,verbs=record
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
//
// In its own namespace only: the outbox, one ConfigMap per deleted object
// whose expired and deleted messages are not out yet (listed by label,
// never cached):
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;create;update;delete,namespace=timeout-system
// And the cluster archive (--archive=cluster), one Secret per archived
// manifest, listed by label as metadata, never cached:
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;create;update;delete,namespace=timeout-system

// Reconciler deletes governed objects when they expire.
type Reconciler struct {
	// Client reads from the cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server, for the check before a delete.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	// Channels builds each policy's notification channels.
	Channels *channelset.Channels
	// Audit receives a record of every decision; nil writes none.
	Audit *audit.Log
	// MaxDeletionsPerMinute caps the deletions of all policies together;
	// 0 sets no such cap. Each policy's own cap applies either way.
	MaxDeletionsPerMinute int
	// SleepsPerSecond spaces the sleeps that begin (sleepTurns); 0 holds
	// none back.
	SleepsPerSecond int
	// DryRun deletes nothing, whatever the policies say.
	DryRun bool
	// Archive is where manifests are archived before deletion; nil when
	// the controller has none.
	Archive archive.Store
	// ClusterEventNamespace is where Events about cluster-scoped objects
	// go; "default" when empty.
	ClusterEventNamespace string
	// Owners gives the addresses of objects' owners; nil maps nobody, and
	// an owner is mailed only when the username is an e-mail address.
	Owners *delivery.Owners
	// Outbox keeps the expired and deleted messages until they are out.
	Outbox *outbox.Outbox
	// Wake, when set, asks for an object to be looked at at once: for a
	// message that found its channel busy, when a slot frees (SlotFreed).
	Wake func(wakeup.Key)
	// Links signs the links that messages carry; nil (no links) without
	// --actions-url. Set before NewOutbox, which hands them on.
	Links *delivery.Links

	// Watches start the watch of each target kind that a policy names,
	// set by SetupWithManager for the policy reconciler.
	Watches       *objectstore.Watches
	deliveryOnce  sync.Once
	deliveryState *delivery.Deliverer
	activity      usage.Activity
	capsOnce      sync.Once
	capsState     *deletionCaps
	turnsOnce     sync.Once
	turnsState    *sleepTurns
	departures    departures
	sleepOnce     sync.Once
	sleepState    *sleep.Sleeper
	farewells     farewells
}

// SetupWithManager adds the object controller to mgr, with workers
// reconciles at once: one work queue for every target kind, fed by a
// wakeup.Queue, and the watches of namespace deletions and policies. The
// watch of each target kind starts when a policy first names it.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr manager.Manager, workers int) error {
	// Built once: every WithValues copies the logger's encoder and its
	// buffer, which for every reconcile adds up to most of what a cold
	// start allocates.
	objectLog := mgr.GetLogger().WithValues("controller", "object")
	// The objects' next looks are kept outside the work queue, which gets
	// only what is due, up to twice the workers at a time.
	wakes := wakeup.New(clock.RealClock{}, 2*workers)
	c, err := controller.NewTyped("object", mgr, controller.TypedOptions[wakeup.Key]{
		Reconciler:              wakes.Reconciler(r),
		MaxConcurrentReconciles: workers,
		LogConstructor: func(k *wakeup.Key) logr.Logger {
			if k == nil {
				return objectLog
			}
			return objectLog.WithValues("kind", k.GVK.Kind, "object", klog.KRef(k.Namespace, k.Name))
		},
	})
	if err != nil {
		return fmt.Errorf("create object controller: %w", err)
	}
	// A message that found its channel busy is tried again when a slot of
	// that channel frees, not at a guess.
	r.Wake = wakes.Now
	r.Channels.Limiter.OnFree(r.SlotFreed)
	if err := c.Watch(source.TypedFunc[wakeup.Key](func(ctx context.Context, q objectstore.Queue) error {
		metrics.ObjectLooks.Current.Store(wakes)
		return wakes.Start(ctx, q)
	})); err != nil {
		return fmt.Errorf("hand due objects to the object controller: %w", err)
	}
	// The namespaces a deleted object owns are found by their owner, and
	// the last one's deletion ends what the deletion freed.
	if err := mgr.GetFieldIndexer().IndexField(ctx, kube.NewMetadata(kube.NamespaceKind), kube.OwnerIndex, kube.IndexOwners); err != nil {
		return fmt.Errorf("index namespaces by owner: %w", err)
	}
	if err := c.Watch(source.TypedKind(mgr.GetCache(), kube.NewMetadata(kube.NamespaceKind),
		handler.TypedFuncs[*metav1.PartialObjectMetadata, wakeup.Key]{
			DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[*metav1.PartialObjectMetadata], _ objectstore.Queue) {
				r.namespaceGone(ctx, e.Object.Name)
			},
		})); err != nil {
		return fmt.Errorf("watch namespace deletions: %w", err)
	}
	md, err := metadata.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("create the metadata client: %w", err)
	}
	r.Watches = objectstore.NewWatches(mgr.GetCache(), mgr.GetClient(), md, c, wakes)
	// Governed objects are read from their records, not from the cache.
	r.Client = objectstore.RecordReader{Client: r.Client, Watches: r.Watches}
	// Built after the client it reads through.
	r.sleeper().Marked = sleep.NewMarkedWatch(r.Watches)
	if err := c.Watch(source.TypedKind(mgr.GetCache(), &v1alpha1.TimeoutPolicy{}, r.Watches.PolicyChanges())); err != nil {
		return fmt.Errorf("watch policies: %w", err)
	}
	return nil
}

// caps are the deletion caps and the turns they gave, built on first use
// from MaxDeletionsPerMinute.
func (r *Reconciler) caps() *deletionCaps {
	r.capsOnce.Do(func() { r.capsState = newDeletionCaps(r.MaxDeletionsPerMinute) })
	return r.capsState
}

// sleeper puts objects to sleep and wakes them, built on first use from
// the reconciler's fields, as caps is.
func (r *Reconciler) sleeper() *sleep.Sleeper {
	r.sleepOnce.Do(func() {
		r.sleepState = &sleep.Sleeper{Client: r.Client, APIReader: r.APIReader, Recorder: r.Recorder}
	})
	return r.sleepState
}

// Workloads is the watch of the workloads a sleep scaled down, which the
// policy reconciler starts when a policy first puts objects to sleep; nil
// before SetupWithManager.
func (r *Reconciler) Workloads() *sleep.MarkedWatch {
	return r.sleeper().Marked
}

// sleepTurns are the turns of the sleeps that begin, built on first use
// from SleepsPerSecond.
func (r *Reconciler) sleepTurns() *sleepTurns {
	r.turnsOnce.Do(func() { r.turnsState = newSleepTurns(r.SleepsPerSecond) })
	return r.turnsState
}

// delivery sends the messages and writes the records, built on first use
// from the reconciler's fields, as caps is: they are all set before the
// first reconcile.
func (r *Reconciler) delivery() *delivery.Deliverer {
	r.deliveryOnce.Do(func() {
		r.deliveryState = &delivery.Deliverer{
			Client:                r.Client,
			Reader:                r.APIReader,
			Recorder:              r.Recorder,
			Clock:                 r.Clock,
			Audit:                 r.audit,
			DryRun:                r.DryRun,
			ClusterEventNamespace: r.ClusterEventNamespace,
			Wake:                  r.Wake,
			Owners:                r.Owners,
			Outbox:                r.Outbox,
			Candidates:            r.digestCandidates,
			Links:                 r.Links,
		}
	})
	return r.deliveryState
}

// SlotFreed wakes the object that has waited longest for a slot of the
// channel, now that one was given back.
func (r *Reconciler) SlotFreed(channel string) {
	r.delivery().SlotFreed(channel)
}

// Reconcile plans the next action for one object and carries it out when
// it is due. It reads the object from the cache, decides, records what
// the record must hold before anything else happens, and acts.
func (r *Reconciler) Reconcile(ctx context.Context, key wakeup.Key) (ctrl.Result, error) {
	log := logf.FromContext(ctx)

	// Read.
	obj := kube.NewMetadata(key.GVK)
	if err := r.Client.Get(ctx, key.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.withdrawFarewell(ctx, key)
			r.forget(key)
			r.departed(ctx, key)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get %s: %w", key, err)
	}
	if obj.DeletionTimestamp != nil {
		r.withdrawFarewell(ctx, key)
		r.forget(key)
		return r.terminating(ctx, key, obj), nil
	}

	// Decide.
	ev, plan, err := r.decide(ctx, key, obj)
	if errors.Is(err, errChannelsNotReady) {
		// The policy's status says why; look again when the channels may
		// have been fixed (a Secret created), which no watch reports.
		return ctrl.Result{RequeueAfter: channelset.ChannelsTTL}, nil
	}
	if err != nil || ev == nil {
		return ctrl.Result{}, err
	}
	if wrote, err := r.activity.SettleActivity(ctx, r.Client, ev); wrote || err != nil {
		return ctrl.Result{}, err
	}
	if wrote, err := r.settleExtensions(ctx, ev); wrote || err != nil {
		return ctrl.Result{}, err
	}
	r.warnInvalid(ctx, ev)

	// Record.
	if ev.Replaced {
		// An extension (or a shortening) starts a new record: write it now,
		// so that the moment it took effect stays put. The patch brings the
		// next reconcile.
		// Not cut short by a shutdown: a failure would be reported.
		writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kube.WriteTimeout)
		defer cancel()
		if err := r.delivery().Record(writeCtx, ev, func(*expiry.Record) {}); err != nil {
			return ctrl.Result{}, r.delivery().WriteFailed(ev, err)
		}
		if ev.Written {
			r.audit(ctx, ev, extendedRecord(ev.Decision, ev.Obj.Annotations))
		}
		return ctrl.Result{}, nil
	}
	if ev.Unwritten {
		// Deliveries the object does not show are written again until they
		// stick; planning goes on from them meanwhile, so nothing waits on
		// the write and nothing is sent twice.
		if err := r.delivery().Record(ctx, ev, func(*expiry.Record) {}); err != nil {
			log.Error(err, "record what was sent")
		}
	}

	// Use: a spec edit the object does not show as recorded.
	wake, wrote, err := r.activity.RecordActivity(ctx, r.Client, ev, plan)
	if wrote || err != nil {
		return ctrl.Result{}, err
	}
	if plan.Action == expiry.Wait {
		plan.At = r.ahead(ctx, ev, plan.At)
	}
	if plan.Action == expiry.Wait && !wake.IsZero() && wake.Before(plan.At) {
		plan.At = wake
	}

	// Act.
	switch plan.Action {
	case expiry.Wait:
		log.V(1).Info("waiting", "until", plan.At, "expiresAt", ev.Life.ExpiresAt, "source", ev.Life.Source, "policy", ev.Policy.Name)
		// Counted from now, not from when the look began: the look may
		// have written (a farewell ahead of a deletion), and the next one
		// is due at plan.At, not that much later.
		return ctrl.Result{RequeueAfter: expiry.After(plan.At, r.Clock.Now())}, nil
	case expiry.Notify:
		return r.delivery().Notify(ctx, ev, plan)
	case expiry.Sleep:
		if ev.Life.Sleep.Phase != expiry.PhaseSleeping {
			if at := r.sleepTurns().admit(key, ev.Now); at.After(ev.Now) {
				log.V(1).Info("sleep waits its turn", "at", at, "policy", ev.Policy.Name)
				return ctrl.Result{RequeueAfter: at.Sub(ev.Now)}, nil
			}
		}
		return r.sleeper().Sleep(ctx, ev)
	case expiry.Wake:
		return r.sleeper().Wake(ctx, ev, plan.WokeBy)
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
func (r *Reconciler) deletionTurn(ctx context.Context, ev *eval.Evaluation) time.Duration {
	key, obj := ev.Key, ev.Obj
	if ev.DryRun(r.DryRun) {
		return 0
	}
	at, by, throttled := r.caps().admit(key, obj.UID, ev.Life.ExpiresAt, ev.Policy.Name, ev.Policy.Spec.Deletion.MaxPerMinute, ev.Now)
	if !at.After(ev.Now) {
		return 0
	}
	if throttled {
		metrics.DeletionsThrottled.WithLabelValues(by).Inc()
		limit := fmt.Sprintf("the cap of %d deletions per minute of policy %s", ev.Policy.Spec.Deletion.MaxPerMinute, ev.Policy.Name)
		if by == capGlobal {
			limit = "the controller's cap (--max-deletions-per-minute)"
		}
		when := at.UTC().Format(time.RFC3339Nano)
		r.audit(ctx, ev, audit.Record{Type: audit.Throttled, Result: audit.OK, Detail: "deletion waits until " + when + " under " + limit})
		r.Recorder.Eventf(kube.Reference(key.GVK, obj), nil, corev1.EventTypeNormal, kube.ReasonDeletionThrottled, kube.ActionDelete,
			"Expired at %s; deletion waits until %s under %s", ev.Life.ExpiresAt.UTC().Format(time.RFC3339), when, limit)
	}
	return expiry.After(at, ev.Now)
}

func (r *Reconciler) forget(key wakeup.Key) {
	r.delivery().Forget(key)
	r.caps().forget(key)
	r.sleepTurns().forget(key)
	r.activity.Forget(key)
}
