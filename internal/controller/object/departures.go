// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/metrics"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// stuckAfter is how long an object may stay in Terminating before the
// controller warns that its deletion is stuck (a finalizer nobody removes).
const stuckAfter = 10 * time.Minute

// departureTTL bounds how long a deleted object is followed: an owned
// namespace whose deletion this process never sees (it was deleted while
// another replica led) must not be remembered for good.
const departureTTL = time.Hour

// departure is an object this process deleted, followed until it and the
// namespaces it owned are gone from the API server.
type departure struct {
	object audit.Object
	policy string
	// due is when its deletion fell due; expiresAt its expiry.
	due, expiresAt time.Time
	accepted       time.Time
	// gone is when the object was seen gone; zero while it is not.
	gone time.Time
	// namespaces are the namespaces it owned that are still there.
	namespaces map[string]bool
	// owned is how many namespaces it owned.
	owned int
}

// departures follows deleted objects until they are gone, and the
// governed objects in Terminating. It is a cache: a restart forgets it,
// and the audit trail then lacks the gone and reclaimed records of the
// deletions under way, nothing else.
type departures struct {
	mu      sync.Mutex
	byKey   map[wakeup.Key]*departure
	byNS    map[string]wakeup.Key
	waiting map[wakeup.Key]terminating
}

// terminating is a governed object in Terminating.
type terminating struct {
	since  time.Time
	warned bool
}

// deleted starts following d, deleted under key.
func (ds *departures) deleted(key wakeup.Key, d *departure) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.byKey == nil {
		ds.byKey, ds.byNS = map[wakeup.Key]*departure{}, map[string]wakeup.Key{}
	}
	for k, old := range ds.byKey {
		if d.accepted.Sub(old.accepted) > departureTTL {
			ds.drop(k, old)
		}
	}
	ds.byKey[key] = d
	for ns := range d.namespaces {
		ds.byNS[ns] = key
	}
}

func (ds *departures) drop(key wakeup.Key, d *departure) {
	delete(ds.byKey, key)
	for ns := range d.namespaces {
		if ds.byNS[ns] == key {
			delete(ds.byNS, ns)
		}
	}
}

// objectGone says the object under key is gone at now. It returns its
// departure, if this process deleted it, and whether the namespaces it
// owned are gone too (then the departure is over).
func (ds *departures) objectGone(key wakeup.Key, now time.Time) (d departure, followed, done bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ds.stopWaiting(key)
	p, ok := ds.byKey[key]
	if !ok || !p.gone.IsZero() {
		return departure{}, false, false
	}
	p.gone = now
	if len(p.namespaces) == 0 {
		ds.drop(key, p)
		return *p, true, true
	}
	return *p, true, false
}

// namespaceGone says the namespace is gone at now. It returns the
// departure it completes: its object and every namespace it owned gone.
func (ds *departures) namespaceGone(name string) (d departure, done bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	key, ok := ds.byNS[name]
	if !ok {
		return departure{}, false
	}
	delete(ds.byNS, name)
	p := ds.byKey[key]
	delete(p.namespaces, name)
	if len(p.namespaces) > 0 || p.gone.IsZero() {
		return departure{}, false
	}
	ds.drop(key, p)
	return *p, true
}

// pendingNamespaces returns the namespaces of the departure under key that
// are still there.
func (ds *departures) pendingNamespaces(key wakeup.Key) []string {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if p, ok := ds.byKey[key]; ok {
		return slices.Sorted(maps.Keys(p.namespaces))
	}
	return nil
}

// inTerminating notes that the object under key has been in Terminating
// since then. It returns whether its deletion is stuck and nobody was told
// yet (the caller tells, and the object counts as told), and when to look
// at it again to find out.
func (ds *departures) inTerminating(key wakeup.Key, since, now time.Time) (warn bool, lookAgain time.Duration) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.waiting == nil {
		ds.waiting = map[wakeup.Key]terminating{}
	}
	t, ok := ds.waiting[key]
	if !ok || !t.since.Equal(since) {
		t = terminating{since: since}
	}
	stuckAt := since.Add(stuckAfter)
	if now.Before(stuckAt) {
		ds.waiting[key] = t
		ds.export()
		return false, stuckAt.Sub(now)
	}
	warn = !t.warned
	t.warned = true
	ds.waiting[key] = t
	ds.export()
	return warn, 0
}

// stopWaiting forgets that the object under key was in Terminating.
// Called with ds.mu held.
func (ds *departures) stopWaiting(key wakeup.Key) {
	if _, ok := ds.waiting[key]; ok {
		delete(ds.waiting, key)
		ds.export()
	}
}

// export sets the Terminating gauges. Called with ds.mu held.
func (ds *departures) export() {
	var oldest time.Time
	for _, t := range ds.waiting {
		if oldest.IsZero() || t.since.Before(oldest) {
			oldest = t.since
		}
	}
	metrics.ObjectsTerminating.Set(float64(len(ds.waiting)))
	if oldest.IsZero() {
		metrics.OldestTerminating.Set(0)
	} else {
		metrics.OldestTerminating.Set(float64(oldest.UnixNano()) / 1e9)
	}
}

// namespacesOf returns a set of names.
func namespacesOf(names []string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

// departed reports an object gone from the API server, when this process
// deleted it: a gone record, and a reclaimed one when the namespaces it
// owned are gone too.
func (r *Reconciler) departed(ctx context.Context, key wakeup.Key) {
	now := r.Clock.Now()
	d, followed, done := r.departures.objectGone(key, now)
	if !followed {
		return
	}
	lag := now.Sub(d.due)
	metrics.GoneLag.WithLabelValues("object").Observe(lag.Seconds())
	r.writeAudit(ctx, d.record(now, audit.Gone, fmt.Sprintf("%s after it fell due, %s after the delete was accepted",
		lag.Round(time.Millisecond), now.Sub(d.accepted).Round(time.Millisecond))))
	logf.FromContext(ctx).V(1).Info("gone", "lag", lag)
	if done && d.owned > 0 {
		r.reclaimed(ctx, d, now)
	}
}

// namespaceGone reports a namespace gone from the API server; when it was
// the last that a deleted object owned, and the object is gone, what it
// held is reclaimed.
func (r *Reconciler) namespaceGone(ctx context.Context, name string) {
	if d, done := r.departures.namespaceGone(name); done {
		r.reclaimed(ctx, d, r.Clock.Now())
	}
}

func (r *Reconciler) reclaimed(ctx context.Context, d departure, now time.Time) {
	lag := now.Sub(d.due)
	metrics.GoneLag.WithLabelValues("owned").Observe(lag.Seconds())
	r.writeAudit(ctx, d.record(now, audit.Reclaimed, fmt.Sprintf("the last of %s it owned gone %s after it fell due",
		notify.Plural(d.owned, "namespace"), lag.Round(time.Millisecond))))
}

// record is an audit record about d.
func (d departure) record(now time.Time, t audit.Type, detail string) audit.Record {
	at := d.expiresAt
	return audit.Record{Time: now, Type: t, Object: d.object, Policy: d.policy, ExpiresAt: &at, Result: audit.OK, Detail: detail}
}

// terminating follows an object in Terminating, and warns once when it
// has been there for stuckAfter, naming the finalizers left.
func (r *Reconciler) terminating(ctx context.Context, key wakeup.Key, obj *metav1.PartialObjectMetadata) ctrl.Result {
	if !r.governed(ctx, key, obj) {
		// Another's object: neither counted nor warned about.
		return ctrl.Result{}
	}
	warn, again := r.departures.inTerminating(key, obj.DeletionTimestamp.Time, r.Clock.Now())
	if !warn {
		return ctrl.Result{RequeueAfter: again}
	}
	// The cache keeps no finalizers: read them.
	fresh := kube.NewMetadata(key.GVK)
	finalizers := "unknown"
	if err := r.APIReader.Get(ctx, key.NamespacedName, fresh); err == nil {
		finalizers = strings.Join(fresh.Finalizers, ", ")
	}
	msg := fmt.Sprintf("In Terminating for %s: finalizers %s have not run, so neither it nor what it owns is freed",
		r.Clock.Since(obj.DeletionTimestamp.Time).Round(time.Second), finalizers)
	if ns := r.departures.pendingNamespaces(key); len(ns) > 0 {
		msg += " (namespaces " + strings.Join(ns, ", ") + ")"
	}
	r.Recorder.Eventf(kube.Reference(key.GVK, obj), nil, corev1.EventTypeWarning, kube.ReasonDeletionStuck, kube.ActionDelete, "%s", msg)
	return ctrl.Result{}
}

// governed reports whether a policy governs obj, as it stands: for an
// object in Terminating, whether one did when it was deleted. An error
// reading the policies counts as no.
func (r *Reconciler) governed(ctx context.Context, key wakeup.Key, obj *metav1.PartialObjectMetadata) bool {
	c, err := r.Governing(ctx, key.GVK, obj)
	return err == nil && c != nil
}
