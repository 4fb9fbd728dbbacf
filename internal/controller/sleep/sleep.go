// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package sleep

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/amphitheatre-app/timeout-controller/internal/controller/eval"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// Sleep RBAC: the workloads in the namespaces a sleeping object owns are
// read, and scaled in the same patch that writes their replicas annotation
// and the sleep's label; those that carry the label are watched, as
// metadata (sleepwatch.go). Whether an object is scaled itself is asked
// of its scale subresource, which a Playbook does not have: the API server
// answers NotFound only to whoever may get it. Another kind with one needs
// get and patch on it (docs/guides/other-kinds.md).
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=amphitheatre.app,resources=playbooks/scale,verbs=get

// Events of sleep.
const (
	ReasonSlept          = "Slept"
	ReasonWoke           = "Woke"
	ReasonWokeExternally = "WokeExternally"
	actionSleep          = "Sleep"
	actionWake           = "Wake"
)

var (
	sleeps = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "timeout_controller_sleeps_total",
		Help: "Objects put to sleep (their workloads scaled to zero).",
	})
	wakes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "timeout_controller_wakes_total",
		Help: "Sleeping objects woken, by what woke them: use (activity, a spec edit, kubectl timeout wake), external (a workload scaled up by someone else), keep, policy (it no longer sleeps).",
	}, []string{"by"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(sleeps, wakes)
}

// Sleeper puts governed objects to sleep and wakes them: it scales the
// workloads in the namespaces they own to zero and back, and sees, through
// its watch of the workloads it scaled down, someone else scaling one up.
// The object reconciler decides when; the sleeper carries it out.
type Sleeper struct {
	// Client reads from the cache and writes to the API server; APIReader
	// reads from the API server.
	Client    client.Client
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Marked is the watch of the workloads a sleep scaled down; nil until
	// the object controller runs (unit tests: none).
	Marked *MarkedWatch
}

// workloadKinds are the kinds scaled to zero in the namespaces a sleeping
// object owns.
var workloadKinds = []schema.GroupVersionKind{
	appsv1.SchemeGroupVersion.WithKind("Deployment"),
	appsv1.SchemeGroupVersion.WithKind("StatefulSet"),
}

// workload is one Deployment or StatefulSet, as sleep and wake see it.
type workload struct {
	obj      client.Object
	kind     string
	replicas int32
	// saved is the replicas annotation, when the workload has one.
	saved    int32
	hasSaved bool
	// marked says it carries the sleep's label.
	marked   bool
	template corev1.PodSpec
}

func (w workload) String() string {
	return w.kind + " " + w.obj.GetNamespace() + "/" + w.obj.GetName()
}

// changedSince reports whether the sleep under way st has not scaled w
// down and someone else changed it since that sleep began.
func (w workload) changedSince(st expiry.SleepState) bool {
	return !w.hasSaved && st.ChangedSince(w.String(), w.obj.GetGeneration())
}

// workloads reads, from the API server, the Deployments and StatefulSets
// in the namespaces the object owns.
func (r *Sleeper) workloads(ctx context.Context, uid types.UID) ([]workload, error) {
	namespaces, err := kube.OwnedNamespaces(ctx, r.Client, uid)
	if err != nil {
		return nil, err
	}
	var out []workload
	for _, ns := range namespaces {
		var deps appsv1.DeploymentList
		if err := r.APIReader.List(ctx, &deps, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("list the deployments in %s: %w", ns, err)
		}
		for i := range deps.Items {
			d := &deps.Items[i]
			out = append(out, newWorkload(d, "Deployment", d.Spec.Replicas, d.Spec.Template.Spec))
		}
		var sets appsv1.StatefulSetList
		if err := r.APIReader.List(ctx, &sets, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("list the statefulsets in %s: %w", ns, err)
		}
		for i := range sets.Items {
			s := &sets.Items[i]
			out = append(out, newWorkload(s, "StatefulSet", s.Spec.Replicas, s.Spec.Template.Spec))
		}
	}
	return out, nil
}

func newWorkload(obj client.Object, kind string, replicas *int32, template corev1.PodSpec) workload {
	w := workload{obj: obj, kind: kind, replicas: 1, template: template}
	if replicas != nil {
		w.replicas = *replicas
	}
	if v, ok := obj.GetAnnotations()[expiry.AnnotationReplicas]; ok {
		w.saved, w.hasSaved = expiry.ParseReplicas(v)
	}
	_, w.marked = obj.GetLabels()[expiry.LabelAsleep]
	return w
}

// selfScaled reports whether the object is scaled itself, through its
// scale subresource, and its replicas. A kind without one answers
// NotFound (or MethodNotSupported): it owns its workloads, or has none.
func (r *Sleeper) selfScaled(ctx context.Context, key wakeup.Key) (bool, int32, error) {
	scale := newScale()
	err := r.Client.SubResource("scale").Get(ctx, parent(key), scale)
	switch {
	case err == nil:
		n, _, _ := unstructured.NestedInt64(scale.Object, "spec", "replicas")
		return true, int32(n), nil
	case apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
		return false, 0, nil
	}
	return false, 0, fmt.Errorf("get the scale of %s: %w", key, err)
}

func newScale() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(autoscalingv1.SchemeGroupVersion.WithKind("Scale"))
	return u
}

// parent is the object as the scale subresource's parent.
func parent(key wakeup.Key) client.Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(key.GVK)
	u.SetNamespace(key.Namespace)
	u.SetName(key.Name)
	return u
}

// inverse reads the object and returns the merge patch that undoes patch
// on it: the values patch replaces, as the object has them now.
func (r *Sleeper) inverse(ctx context.Context, key wakeup.Key, uid types.UID, patch []byte) ([]byte, error) {
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, fmt.Errorf("spec.sleep.patch: %w", err)
	}
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(key.GVK)
	if err := r.APIReader.Get(ctx, key.NamespacedName, cur); err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	if cur.GetUID() != uid {
		return nil, fmt.Errorf("get %s: replaced by another object of that name", key)
	}
	wake, err := json.Marshal(expiry.Inverse(p, cur.Object))
	if err != nil {
		return nil, err
	}
	if len(wake) > 4*expiry.MaxSleepPatch {
		return nil, fmt.Errorf("the values spec.sleep.patch replaces on %s take %d bytes, more than the %d the sleep annotation keeps", key, len(wake), 4*expiry.MaxSleepPatch)
	}
	return wake, nil
}

// scaleTo scales an object that is scaled itself, through its scale
// subresource.
func scaleTo(ctx context.Context, c client.Client, key wakeup.Key, replicas int32) error {
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	return c.SubResource("scale").Patch(ctx, parent(key), client.RawPatch(types.MergePatchType, patch),
		client.WithSubResourceBody(newScale()))
}

// annotate merge-patches the annotations of obj (nil values remove them),
// locked on the resourceVersion it was read at.
func annotate(ctx context.Context, c client.Client, obj client.Object, annotations map[string]any) error {
	return annotateSpec(ctx, c, obj, annotations, nil)
}

// annotateSpec is annotate that also merge-patches the spec, when spec is
// not nil, in the same write.
func annotateSpec(ctx context.Context, c client.Client, obj client.Object, annotations, spec map[string]any) error {
	body := map[string]any{"metadata": map[string]any{
		"resourceVersion": obj.GetResourceVersion(),
		"annotations":     annotations,
	}}
	if spec != nil {
		body["spec"] = spec
	}
	patch, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
}

// replicasInSpec reports whether objects of kind gvk keep the replicas of
// their scale subresource at spec.replicas, so that a patch of the object
// can scale it and write its sleep state at once. Others are scaled
// through the subresource, in a write of its own.
func replicasInSpec(gvk schema.GroupVersionKind) bool {
	return gvk.Group == appsv1.GroupName && (gvk.Kind == "Deployment" || gvk.Kind == "StatefulSet" || gvk.Kind == "ReplicaSet")
}

// patchWorkload sets a workload's replicas annotation and the sleep's
// label, to the sleeping object's UID (nil removes both), and, unless
// replicas is negative, its replicas, in one write locked on the
// resourceVersion it was read at: the annotation says exactly whether this
// controller scaled the workload down, and the label has it watched while
// it is.
func patchWorkload(ctx context.Context, c client.Client, w workload, replicas int32, saved, owner any) error {
	body := map[string]any{"metadata": map[string]any{
		"resourceVersion": w.obj.GetResourceVersion(),
		"annotations":     map[string]any{expiry.AnnotationReplicas: saved},
		"labels":          map[string]any{expiry.LabelAsleep: owner},
	}}
	if replicas >= 0 {
		body["spec"] = map[string]any{"replicas": replicas}
	}
	patch, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return c.Patch(ctx, w.obj, client.RawPatch(types.MergePatchType, patch))
}

// ObserveWake says what woke a sleeping object that its annotations do
// not show: a spec edit, or a workload someone else scaled up (Argo CD,
// an HPA, a person, Amphitheatre re-applying an Actor's Deployment).
// Either is use; the second is reported as external. A sleep under way
// (Sleeping, which a crashed leader may have left) is looked at too: a
// workload that carries its replicas annotation was scaled to zero by it,
// in the same write, so one that runs again was scaled up since.
func (r *Sleeper) ObserveWake(ctx context.Context, ev *eval.Evaluation) (string, bool, error) {
	st := ev.Life.Sleep
	if !st.Sleeping() || !ev.Life.Asleep {
		return "", false, nil
	}
	if st.Patch != nil {
		// Patched itself: someone editing it wakes it. A sleep under way
		// changes its generation itself.
		if st.Phase == expiry.PhaseAsleep && ev.Obj.Generation != st.Generation {
			return fmt.Sprintf("a spec edit (generation %d)", ev.Obj.Generation), false, nil
		}
		return "", false, nil
	}
	if st.Replicas != nil {
		// Scaled itself: someone scaling it up wakes it. Its generation
		// says nothing: a Deployment's changes with every annotation
		// written on it, the controller's own included. A sleep under
		// way may not have scaled it yet: at the replicas it had before,
		// it is taken for that.
		_, replicas, err := r.selfScaled(ctx, ev.Key)
		if err != nil || replicas == 0 || st.Phase == expiry.PhaseSleeping && replicas == *st.Replicas && !replicasInSpec(ev.Key.GVK) {
			return "", false, err
		}
		return fmt.Sprintf("scaled up to %d by someone else", replicas), true, nil
	}
	if st.Generation != 0 && ev.Obj.Generation != st.Generation {
		return fmt.Sprintf("a spec edit (generation %d)", ev.Obj.Generation), false, nil
	}
	// The watch of marked workloads says whether any changed since the
	// last read found none scaled up: the looks an object's own writes
	// bring do not read them again (sleepwatch.go).
	marked := r.Marked
	if st.Phase == expiry.PhaseAsleep && marked.unchanged(ev.Obj.UID) {
		return "", false, nil
	}
	found := marked.reading(ev.Obj.UID)
	ws, err := r.workloads(ctx, ev.Obj.UID)
	if err != nil {
		return "", false, err
	}
	for _, w := range ws {
		if w.replicas > 0 && (st.Phase == expiry.PhaseAsleep || w.hasSaved) {
			return fmt.Sprintf("%s scaled up to %d by someone else", w, w.replicas), true, nil
		}
		if w.changedSince(st) {
			// Written back by someone else while the sleep was under
			// way (re-applied without the sleep's annotation), or
			// changed before the sleep reached it.
			return fmt.Sprintf("%s changed by someone else during the sleep (generation %d)", w, w.obj.GetGeneration()), true, nil
		}
	}
	if st.Phase == expiry.PhaseAsleep {
		r.markUnmarked(ctx, ev.Obj.UID, ws)
		found()
	}
	return "", false, nil
}

// markUnmarked labels the workloads of a sleeping object that were scaled
// down without the sleep's label (by a version of the controller before
// it), so that they are watched from now on. A failure leaves it to the
// next look.
func (r *Sleeper) markUnmarked(ctx context.Context, uid types.UID, ws []workload) {
	for _, w := range ws {
		if !w.hasSaved || w.marked {
			continue
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": w.obj.GetResourceVersion(),
			"labels":          map[string]any{expiry.LabelAsleep: string(uid)},
		}})
		if err == nil {
			err = r.Client.Patch(ctx, w.obj, client.RawPatch(types.MergePatchType, patch))
		}
		if err != nil {
			logf.FromContext(ctx).V(1).Info("label a sleeping workload", "workload", w.String(), "error", err.Error())
		}
	}
}

// Sleep puts the object to sleep, or completes a sleep under way.
//
// The order makes a crash at any point leave what the next leader
// completes: first the object says Sleeping (with when, and for an object
// scaled itself its replicas), then each workload is scaled to zero in the
// same write that annotates it with its replicas, and last the object says
// Asleep. A crash before the first write changes nothing; after it, the
// next pass finds Sleeping and goes on with the workloads that have no
// annotation yet. A workload is never scaled down without its replicas
// written down, one that has them is never scaled down again (it runs
// only if someone scaled it up since, which wakes the object), nor is one
// whose generation changed since the sleep began (Sleeping records them:
// someone re-applied or scaled it, which wakes the object too), and a
// wake restores only workloads that carry them.
func (r *Sleeper) Sleep(ctx context.Context, ev *eval.Evaluation) (ctrl.Result, error) {
	key, now := ev.Key, ev.Now
	log := logf.FromContext(ctx)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kube.WriteTimeout)
	defer cancel()

	obj := ev.Obj.DeepCopy()
	st := ev.Life.Sleep
	sleepPatch := ev.Schedule.SleepPatch
	resumed := st.Phase == expiry.PhaseSleeping
	// known is the object as the API server has it, once this look has
	// read or written it.
	var known *metav1.PartialObjectMetadata
	if resumed {
		// A sleep under way goes on the way it began, whatever the policy
		// says since. It may be the one an earlier look completed, whose
		// last write the cache has not seen yet: only the API server says
		// whether it is still under way.
		sleepPatch = st.Patch
		var err error
		if known, err = r.underWay(ctx, key, obj.UID, st); err != nil || known == nil {
			return ctrl.Result{RequeueAfter: kube.ConflictRetry}, err
		}
	}
	self, replicas, err := r.sleepsItself(ctx, key, st, resumed, sleepPatch)
	if err != nil {
		return ctrl.Result{}, err
	}
	// ws are the workloads as this look read them: before the first write
	// of a sleep that begins, so that it records their generations.
	var ws []workload
	if sleepPatch == nil && !self {
		if ws, err = r.workloads(ctx, obj.UID); err != nil {
			return ctrl.Result{}, err
		}
	}
	if st.Phase != expiry.PhaseSleeping {
		// Use is counted to the second: use recorded in this very second
		// (a spec edit the look that brought this sleep recorded first,
		// under a sleep by age) would read as use since the sleep, and
		// wake it at once. The sleep counts from the next second then.
		since := now.UTC()
		if last := ev.Life.LastActive; !last.Before(since.Truncate(time.Second)) {
			since = last.UTC().Truncate(time.Second).Add(time.Second)
		}
		st = expiry.SleepState{Phase: expiry.PhaseSleeping, Since: since, Woke: st.Woke, WokeBy: st.WokeBy, Generation: obj.Generation}
		found := make([]expiry.Generation, 0, len(ws))
		for _, w := range ws {
			found = append(found, expiry.Generation{Name: w.String(), Generation: w.obj.GetGeneration()})
		}
		st.RecordWorkloads(found)
		if sleepPatch != nil {
			wake, err := r.inverse(ctx, key, obj.UID, sleepPatch)
			if err != nil {
				return ctrl.Result{}, err
			}
			st.Patch, st.WakePatch = sleepPatch, wake
		}
		var spec map[string]any
		if self {
			st.Replicas = ptr.To(replicas)
			if replicasInSpec(key.GVK) {
				// Said Sleeping and scaled in one write: at more than
				// zero, a sleep under way was scaled up since.
				spec, replicas = map[string]any{"replicas": 0}, 0
			}
		}
		if err := annotateSpec(ctx, r.Client, obj, map[string]any{expiry.AnnotationSleep: st.String()}, spec); err != nil {
			return r.sleepWriteFailed(key, err)
		}
		known = obj
	}

	var freed int32
	var cpu, mem int64
	switch {
	case sleepPatch != nil:
		// Merge patches are idempotent: a sleep under way applies it again.
		if err := r.Client.Patch(ctx, parent(key), client.RawPatch(types.MergePatchType, sleepPatch)); err != nil {
			return ctrl.Result{}, fmt.Errorf("apply spec.sleep.patch to %s: %w", key, err)
		}
	case self:
		if replicas > 0 && resumed && replicasInSpec(key.GVK) {
			// Scaled up since the write that scaled it down: use, which
			// the next pass sees.
			return ctrl.Result{RequeueAfter: kube.ConflictRetry}, nil
		}
		if replicas > 0 {
			if err := scaleTo(ctx, r.Client, key, 0); err != nil {
				return ctrl.Result{}, fmt.Errorf("scale %s to zero: %w", key, err)
			}
		}
		if st.Replicas != nil {
			freed = *st.Replicas
		}
	default:
		var use bool
		var err error
		if freed, cpu, mem, use, err = r.scaleDown(ctx, ws, st, obj.UID); err != nil {
			return ctrl.Result{}, err
		}
		if use {
			return ctrl.Result{RequeueAfter: kube.ConflictRetry}, nil
		}
	}

	// Asleep, at the generation the object has now: an object scaled or
	// patched itself changed generation with it, which is not use; its
	// activity annotation takes the new generation for the same reason.
	fresh, err := r.current(ctx, key, known, sleepPatch != nil || self && !replicasInSpec(key.GVK))
	if err != nil {
		return ctrl.Result{}, err
	}
	if fresh.UID != obj.UID {
		return ctrl.Result{}, nil
	}
	if !sameCycle(fresh, st) {
		// Completed (or undone) by another look since: the transition is
		// not this one's to announce.
		return ctrl.Result{RequeueAfter: kube.ConflictRetry}, nil
	}
	st.Phase, st.Generation, st.Freed, st.Workloads = expiry.PhaseAsleep, fresh.Generation, freed, nil
	st.FreedCPUMillis, st.FreedMemoryBytes = cpu, mem
	annotations := map[string]any{expiry.AnnotationSleep: st.String()}
	if self || st.Patch != nil {
		act, _ := expiry.ParseActivity(fresh.Annotations[expiry.AnnotationActivity])
		act.Generation = fresh.Generation
		annotations[expiry.AnnotationActivity] = act.String()
	}
	if err := annotate(ctx, r.Client, fresh, annotations); err != nil {
		return r.sleepWriteFailed(key, err)
	}
	sleeps.Inc()
	log.Info("slept", "since", st.Since, "replicas", freed, "patched", st.Patch != nil, "policy", ev.Policy.Name)
	what := fmt.Sprintf("%d replicas scaled to zero", freed)
	if st.Patch != nil {
		what = "spec.sleep.patch applied"
	}
	// The deletion time as the next look decides it, from what was written.
	written := maps.Clone(fresh.Annotations)
	if written == nil {
		written = map[string]string{}
	}
	for k, v := range annotations {
		written[k] = v.(string)
	}
	deleteAt := ev.Schedule.Lifetime(fresh.CreationTimestamp.Time, written, now).ExpiresAt
	r.Recorder.Eventf(kube.Reference(key.GVK, fresh), nil, corev1.EventTypeNormal, ReasonSlept, actionSleep,
		"Asleep since %s (policy %s): %s; use wakes it; deleted at %s unless used",
		st.Since.Format(time.RFC3339), ev.Policy.Name, what, deleteAt.UTC().Format(time.RFC3339))
	return ctrl.Result{}, nil
}

// sleepsItself reports whether a sleep scales the object itself, through
// its scale subresource, and the object's replicas. A patched sleep does
// not. A sleep under way goes on as it began, which its state says (it
// keeps the replicas of such an object alone); one that begins asks the
// object's scale subresource.
func (r *Sleeper) sleepsItself(ctx context.Context, key wakeup.Key, st expiry.SleepState, resumed bool, sleepPatch []byte) (bool, int32, error) {
	if sleepPatch != nil || resumed && st.Replicas == nil {
		return false, 0, nil
	}
	return r.selfScaled(ctx, key)
}

// scaleDown scales each workload of a sleep under way that runs to zero,
// in the write that saves its replicas and labels it with the object's
// uid, and returns what the sleep freed: the replicas, and what their pod
// templates request. use is set, and nothing more is done, when a
// workload was scaled up since this sleep scaled it down, or changed by
// someone else before it got there (a conflict, or a generation other
// than the one the sleep recorded): use, which the next pass sees.
func (r *Sleeper) scaleDown(ctx context.Context, ws []workload, st expiry.SleepState, uid types.UID) (freed int32, cpu, mem int64, use bool, err error) {
	for _, w := range ws {
		n := w.replicas
		switch {
		case w.hasSaved && w.replicas > 0, w.changedSince(st):
			return 0, 0, 0, true, nil
		case w.hasSaved:
			n = w.saved
		case w.replicas > 0:
			if err := patchWorkload(ctx, r.Client, w, 0, strconv.Itoa(int(w.replicas)), string(uid)); err != nil {
				if apierrors.IsConflict(err) {
					return 0, 0, 0, true, nil
				}
				return 0, 0, 0, false, fmt.Errorf("scale %s to zero: %w", w, err)
			}
		}
		freed += n
		c, m := podSpecRequests(w.template)
		cpu += c * int64(n)
		mem += m * int64(n)
	}
	return freed, cpu, mem, false, nil
}

// Wake restores what the sleep changed, or completes a wake under way.
//
// The order mirrors sleep's: first the object says Waking (with when and
// why, which restarts its idle clock), then each workload that carries
// its replicas annotation and is still at zero is scaled back to them,
// and its annotation removed; last the object says Awake. A crash at any
// point leaves Waking or annotated workloads, which the next pass
// restores; a workload someone else scaled up meanwhile keeps its
// replicas: a wake never fights them.
func (r *Sleeper) Wake(ctx context.Context, ev *eval.Evaluation, wokeBy string) (ctrl.Result, error) {
	key, now := ev.Key, ev.Now
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kube.WriteTimeout)
	defer cancel()

	obj := ev.Obj.DeepCopy()
	st := ev.Life.Sleep
	var known *metav1.PartialObjectMetadata
	if st.Phase == expiry.PhaseWaking {
		// As with a sleep under way: it may be done already.
		var err error
		if known, err = r.underWay(ctx, key, obj.UID, st); err != nil || known == nil {
			return ctrl.Result{RequeueAfter: kube.ConflictRetry}, err
		}
	} else {
		st.Phase, st.Woke, st.WokeBy, st.External = expiry.PhaseWaking, now.UTC(), wokeBy, ev.WokeExternally
		if err := annotate(ctx, r.Client, obj, map[string]any{expiry.AnnotationSleep: st.String()}); err != nil {
			return r.sleepWriteFailed(key, err)
		}
		known = obj
	}

	// The wake undoes what the sleep did, as its state says: the sleep
	// kept the replicas of an object scaled itself, and of no other (a
	// patched one keeps its patch instead). What the object's kind offers
	// now (a scale subresource added to a CRD since) does not change which.
	patched := st.Patch != nil
	self := st.Replicas != nil
	var scaled bool
	var replicas int32
	if self {
		var err error
		if scaled, replicas, err = r.selfScaled(ctx, key); err != nil {
			return ctrl.Result{}, err
		}
	}
	switch {
	case patched:
		if err := r.Client.Patch(ctx, parent(key), client.RawPatch(types.MergePatchType, st.WakePatch)); err != nil {
			return ctrl.Result{}, fmt.Errorf("apply the wake patch to %s: %w", key, err)
		}
	case self:
		if scaled && replicas == 0 && *st.Replicas > 0 {
			if err := scaleTo(ctx, r.Client, key, *st.Replicas); err != nil {
				return ctrl.Result{}, fmt.Errorf("scale %s back to %d: %w", key, *st.Replicas, err)
			}
		}
	default:
		ws, err := r.workloads(ctx, obj.UID)
		if err != nil {
			return ctrl.Result{}, err
		}
		for _, w := range ws {
			if !w.hasSaved && !w.marked {
				continue
			}
			// Back to its replicas, unless someone scaled it up meanwhile.
			replicas := int32(-1)
			if w.hasSaved && w.replicas == 0 && w.saved > 0 {
				replicas = w.saved
			}
			done := func(bool) {}
			if w.marked {
				done = r.Marked.unmark(w.obj.GetUID())
			}
			err := patchWorkload(ctx, r.Client, w, replicas, nil, nil)
			done(err == nil)
			if err != nil {
				if apierrors.IsConflict(err) {
					return ctrl.Result{RequeueAfter: kube.ConflictRetry}, nil
				}
				return ctrl.Result{}, fmt.Errorf("scale %s back to %d: %w", w, w.saved, err)
			}
		}
	}

	fresh, err := r.current(ctx, key, known, patched || self)
	if err != nil {
		return ctrl.Result{}, err
	}
	if fresh.UID != obj.UID {
		return ctrl.Result{}, nil
	}
	if !sameCycle(fresh, st) {
		return ctrl.Result{RequeueAfter: kube.ConflictRetry}, nil
	}
	external := st.External
	st.Phase, st.Replicas, st.Freed, st.FreedCPUMillis, st.FreedMemoryBytes, st.External = expiry.PhaseAwake, nil, 0, 0, 0, false
	st.Patch, st.WakePatch = nil, nil
	annotations := map[string]any{expiry.AnnotationSleep: st.String()}
	if self || patched {
		act, _ := expiry.ParseActivity(fresh.Annotations[expiry.AnnotationActivity])
		act.Generation = fresh.Generation
		annotations[expiry.AnnotationActivity] = act.String()
	}
	if err := annotate(ctx, r.Client, fresh, annotations); err != nil {
		return r.sleepWriteFailed(key, err)
	}
	by, reason := wakeLabel(st.WokeBy, external), ReasonWoke
	if external {
		reason = ReasonWokeExternally
	}
	r.Marked.woke(obj.UID)
	wakes.WithLabelValues(by).Inc()
	logf.FromContext(ctx).Info("woke", "by", st.WokeBy, "external", external, "policy", ev.Policy.Name)
	r.Recorder.Eventf(kube.Reference(key.GVK, fresh), nil, corev1.EventTypeNormal, reason, actionWake,
		"Woke: %s; what the sleep since %s changed is restored", st.WokeBy, st.Since.Format(time.RFC3339))
	return ctrl.Result{}, nil
}

// underWay returns the object as the API server has it when it shows the
// object in the sleep or wake under way that st describes, else nil.
func (r *Sleeper) underWay(ctx context.Context, key wakeup.Key, uid types.UID, st expiry.SleepState) (*metav1.PartialObjectMetadata, error) {
	fresh := kube.NewMetadata(key.GVK)
	if err := r.APIReader.Get(ctx, key.NamespacedName, fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	if fresh.UID != uid || !sameCycle(fresh, st) {
		return nil, nil
	}
	return fresh, nil
}

// current returns the object as the API server has it, to lock the last
// write of a sleep or wake on: known is the object as the look's own
// write (or its read of the API server) left it, which stands while only
// its workloads were written since; after a patch or a scale of the object
// itself, it is read again.
func (r *Sleeper) current(ctx context.Context, key wakeup.Key, known *metav1.PartialObjectMetadata, changedItself bool) (*metav1.PartialObjectMetadata, error) {
	if known != nil && !changedItself {
		return known, nil
	}
	fresh := kube.NewMetadata(key.GVK)
	if err := r.APIReader.Get(ctx, key.NamespacedName, fresh); err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return fresh, nil
}

// sameCycle reports whether obj's sleep annotation says it is in the sleep
// or wake under way that st describes: the same phase, begun at the same
// time. Only the look that moves it on from there (with a write locked on
// the resourceVersion read here) makes the transition, and announces it;
// any other finds it moved on, and says nothing.
func sameCycle(obj *metav1.PartialObjectMetadata, st expiry.SleepState) bool {
	cur, err := expiry.ParseSleep(obj.Annotations[expiry.AnnotationSleep])
	if err != nil || cur.Phase != st.Phase {
		return false
	}
	if st.Phase == expiry.PhaseWaking {
		return cur.Woke.Equal(st.Woke)
	}
	return cur.Since.Equal(st.Since)
}

func wakeLabel(wokeBy string, external bool) string {
	switch {
	case external:
		return "external"
	case wokeBy == expiry.WokeByKeep:
		return "keep"
	case wokeBy == expiry.WokeByPolicy:
		return "policy"
	}
	return "use"
}

// sleepWriteFailed handles a failed write of the sleep state: a conflict
// means the object changed (used, extended), and it is looked at again.
func (r *Sleeper) sleepWriteFailed(key wakeup.Key, err error) (ctrl.Result, error) {
	switch {
	case apierrors.IsConflict(err):
		return ctrl.Result{RequeueAfter: kube.ConflictRetry}, nil
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, fmt.Errorf("write the sleep state of %s: %w", key, err)
}

// podSpecRequests is a pod template's CPU (millicores) and memory
// requests, as podRequests counts them.
func podSpecRequests(spec corev1.PodSpec) (int64, int64) {
	return kube.PodRequests(&corev1.Pod{Spec: spec})
}
