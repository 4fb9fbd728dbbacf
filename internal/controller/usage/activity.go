// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package usage

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/amphitheatre-app/timeout-controller/internal/controller/eval"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// activityWrites counts the writes of observed activity, so that the
// throttle's cost can be watched.
var activityWrites = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "timeout_controller_activity_writes_total",
	Help: "Writes of the activity annotation: generation changes recorded as use under a policy with idleTTL, at most one per object per idleTTL/20.",
})

func init() {
	ctrlmetrics.Registry.MustRegister(activityWrites)
}

// Activity remembers, per object, when this process first saw its latest
// generation and when it last recorded one. It is a cache: lost at a
// restart, an unrecorded change counts from when it is seen again, which
// is later than it happened and so never shortens a lifetime.
type Activity struct {
	mu   sync.Mutex
	seen map[wakeup.Key]observed
}

type observed struct {
	uid        types.UID
	generation int64
	at         time.Time
	// wrote is when this process last recorded activity on the object.
	wrote time.Time
}

// observe returns what is known of the object's generation change, seen
// now at the latest.
func (a *Activity) observe(key wakeup.Key, uid types.UID, generation int64, now time.Time) observed {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, ok := a.seen[key]
	if !ok || o.uid != uid {
		o = observed{uid: uid}
	}
	if o.generation != generation {
		o.generation, o.at = generation, now
	}
	if a.seen == nil {
		a.seen = map[wakeup.Key]observed{}
	}
	a.seen[key] = o
	return o
}

func (a *Activity) wrote(key wakeup.Key, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if o, ok := a.seen[key]; ok {
		o.wrote = now
		a.seen[key] = o
	}
}

func (a *Activity) Forget(key wakeup.Key) {
	a.mu.Lock()
	delete(a.seen, key)
	a.mu.Unlock()
}

// RecordActivity persists a change of the object's generation, which
// counts as use under a policy with idleTTL, in the activity annotation.
// It writes at most once per ActivityWindow (idleTTL/20) per object, the
// changes in between wait for the end of the window, and returns when
// that is; but a change waits for nothing when a message or the deletion
// is due, so that nobody is warned about, and nothing is deleted for, an
// expiry the change has moved. wrote says a write was made: its watch
// event brings the next reconcile.
func (a *Activity) RecordActivity(ctx context.Context, c client.Client, ev *eval.Evaluation, plan expiry.Plan) (wake time.Time, wrote bool, err error) {
	key, obj := ev.Key, ev.Obj
	window := ev.Schedule.ActivityWindow()
	recorded, _ := expiry.ParseActivity(obj.Annotations[expiry.AnnotationActivity])
	// An object asleep that was scaled or patched itself changes
	// generation with the controller's own writes: use of it is someone
	// scaling it up or editing it, which observeWake sees.
	selfAsleep := ev.Life.Asleep && (ev.Life.Sleep.Replicas != nil || ev.Life.Sleep.Patch != nil)
	if window <= 0 || ev.Life.Keep || selfAsleep || obj.Generation <= recorded.Generation {
		a.Forget(key)
		return time.Time{}, false, nil
	}
	seen := a.observe(key, obj.UID, obj.Generation, ev.Now)
	last := recorded.At
	if seen.wrote.After(last) {
		last = seen.wrote
	}
	if last.IsZero() {
		last = obj.CreationTimestamp.Time
	}
	urgent := plan.Action == expiry.Notify || plan.Action == expiry.Delete || plan.Action == expiry.Sleep
	if next := last.Add(window); ev.Now.Before(next) && !urgent {
		return next, false, nil
	}

	value := expiry.Activity{Generation: obj.Generation, At: seen.at.UTC(), Ahead: recorded.Ahead}
	applied, err := writeActivity(ctx, c, ev, value)
	if err != nil {
		return time.Time{}, false, err
	}
	if applied {
		a.wrote(key, ev.Now)
		activityWrites.Inc()
		logf.FromContext(ctx).V(1).Info("activity recorded", "generation", value.Generation, "at", value.At, "policy", ev.Policy.Name)
	}
	return time.Time{}, true, nil
}

// SettleActivity notes on the object a time of use ahead of the clock
// (expiry.Settle): until it is noted it counts from now at every look,
// which would put the expiry off for ever. It writes at once, before
// anything is decided from the lifetime, and says whether it wrote: the
// watch event of the write brings the next reconcile.
func (a *Activity) SettleActivity(ctx context.Context, c client.Client, ev *eval.Evaluation) (bool, error) {
	if ev.Life.Keep {
		return false, nil
	}
	value, write := expiry.Settle(ev.Obj.Annotations, ev.Now)
	if !write {
		return false, nil
	}
	applied, err := writeActivity(ctx, c, ev, value)
	if err != nil {
		return false, err
	}
	if applied && value.Ahead != nil {
		logf.FromContext(ctx).Info("last-active ahead of the clock noted", "lastActive", value.Ahead.LastActive, "seen", value.Ahead.Seen, "policy", ev.Policy.Name)
	}
	return true, nil
}

// writeActivity writes the activity annotation. applied is false, with no
// error, when the object changed or went meanwhile: its event brings
// another look.
func writeActivity(ctx context.Context, c client.Client, ev *eval.Evaluation, value expiry.Activity) (applied bool, err error) {
	key, obj := ev.Key, ev.Obj
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		// On this object, not one recreated under its name. Not locked on
		// the resourceVersion: an object in use changes all the time, a
		// lock would lose most writes to conflicts, and nothing is lost
		// without it. Only the leader writes this annotation, from a cache
		// that never goes back, so the generation and time it writes only
		// grow; the other annotations are not touched.
		"uid":         obj.UID,
		"annotations": map[string]string{expiry.AnnotationActivity: value.String()},
	}})
	if err != nil {
		return false, fmt.Errorf("encode the activity of %s: %w", key, err)
	}
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kube.WriteTimeout)
	defer cancel()
	err = c.Patch(writeCtx, obj.DeepCopy(), client.RawPatch(types.MergePatchType, patch))
	switch {
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("record the activity of %s: %w", key, err)
	}
	return true, nil
}
