// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

// Sleep in the world: each object owns a namespace holding one Deployment,
// which a sleep scales to zero and a wake back up; someone else may scale
// it up; a controller process may crash between the writes of a sleep or a
// wake. The world reads the sleep state the controller writes on the
// object with its own decoder, and works out from the policy's
// documentation, not from internal/expiry, when an object may sleep and
// when it may be deleted.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// The annotations the controller writes of a sleep, as the guide names them.
const (
	sleepAnnotation = "timeout.amphitheatre.app/sleep"
	// ownerIndex is the field index the controller lists the namespaces
	// an object owns by (controller.Setup registers it on the cache).
	ownerIndex = "timeout.amphitheatre.app/owner-uid"
	// workloadReplicas is what each object's Deployment runs awake.
	workloadReplicas = 2
)

// sleepRule is a policy's spec.sleep, read from the spec.
type sleepRule struct {
	afterIdle, after, deleteAfter time.Duration
}

// period is how long an object stays awake before it may sleep.
func (r sleepRule) period() time.Duration { return max(r.afterIdle, r.after) }

// sleepRuleOf reads spec.sleep; false when the policy does not sleep (or
// its sleep is not one the simulation writes).
func sleepRuleOf(spec v1alpha1.TimeoutPolicySpec) (sleepRule, bool) {
	s := spec.Sleep
	if s == nil {
		return sleepRule{}, false
	}
	var r sleepRule
	var err1, err2, err3 error
	if s.AfterIdle != "" {
		r.afterIdle, err1 = time.ParseDuration(string(s.AfterIdle))
	}
	if s.After != "" {
		r.after, err2 = time.ParseDuration(string(s.After))
	}
	r.deleteAfter, err3 = time.ParseDuration(string(s.DeleteAfter))
	if err1 != nil || err2 != nil || err3 != nil || r.deleteAfter <= 0 || (r.afterIdle > 0) == (r.after > 0) {
		return sleepRule{}, false
	}
	return r, true
}

// simSleep is the sleep state as the world decodes it from the annotation.
type simSleep struct {
	Phase string    `json:"phase"`
	Since time.Time `json:"since"`
	Woke  time.Time `json:"woke"`
}

func readSleep(cm *corev1.ConfigMap) simSleep {
	var s simSleep
	if v := cm.Annotations[sleepAnnotation]; v != "" {
		_ = json.Unmarshal([]byte(v), &s)
	}
	return s
}

// sleeping: the state says the object is asleep, or going to sleep.
func (s simSleep) sleeping() bool { return s.Phase == "Sleeping" || s.Phase == "Asleep" }

// usedAfter reports whether cm was used after t: surely (a use the
// controller may count no earlier than after t), or perhaps (one it may
// count in the second of t or later, which last-active cannot tell apart).
// The uses are those of lastUse (last-active, as far ahead of the clock as
// the controller lets it count; spec edits, counted when seen) and someone
// else scaling a workload up.
func (w *world) usedAfter(cm *corev1.ConfigMap, t time.Time) (surely, perhaps bool) {
	first, latest := w.lastUse(cm)
	from := t.Truncate(time.Second)
	surely, perhaps = first.After(t), !latest.Before(from)
	if up := w.scaledUp[cm.UID]; !up.IsZero() {
		surely, perhaps = surely || up.After(t), perhaps || !up.Before(from)
	}
	return surely, perhaps
}

// sleepFacts completes f, for an object of a policy that sleeps, with
// when it may sleep and the expiry its sleep gives: it is deleted no
// earlier than deleteAfter after it went to sleep (or, awake, after the
// earliest it may), never later than its maximum.
func (w *world) sleepFacts(cm *corev1.ConfigMap, rule sleepRule, f *Facts) (sleepSets bool) {
	f.Sleeps, f.SleepDeleteAfter, f.SleepPeriod = true, rule.deleteAfter, rule.period()
	st := readSleep(cm)
	first, latest := w.lastUse(cm)
	if rule.after > 0 {
		from := cm.CreationTimestamp.Time
		if st.Woke.After(from) {
			from = st.Woke
		}
		f.SleepAt = from.Add(rule.after)
		latest = f.SleepAt
	} else {
		f.SleepAt = first.Add(rule.afterIdle)
		latest = latest.Add(rule.afterIdle)
	}
	if st.sleeping() && !st.Since.IsZero() {
		f.SleptAt = st.Since
		f.UsedAsleep, f.MaybeUsedAsleep = w.usedAfter(cm, st.Since)
		if !f.UsedAsleep {
			f.SleepAt, latest = st.Since, st.Since
		}
	}
	exp, due := f.SleepAt.Add(rule.deleteAfter), latest.Add(rule.deleteAfter)
	if !f.MaxAt.IsZero() {
		exp, due = earliest(exp, f.MaxAt), earliest(due, f.MaxAt)
	}
	if exp.After(f.ExpiresAt) {
		f.ExpiresAt, sleepSets = exp, true
	}
	if due.After(f.DueBy) {
		f.DueBy = due
	}
	return sleepSets
}

// workloadNamespace is the namespace object uid owns.
func workloadNamespace(uid types.UID) string { return "ws-" + string(uid) }

// hasDB says whether the object named name owns a second workload, a
// StatefulSet named db beside its Deployment app: a sleep of it takes two
// workload writes, and may be half done between them.
func hasDB(name string) bool { return name == objName(3) || name == objName(4) }

// createWorkload gives a new object its namespace and workloads.
func (w *world) createWorkload(cm *corev1.ConfigMap) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:            workloadNamespace(cm.UID),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}},
	}}
	n := int32(workloadReplicas)
	objs := []client.Object{ns, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "app"}, Spec: appsv1.DeploymentSpec{Replicas: &n}}}
	if hasDB(cm.Name) {
		objs = append(objs, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "db"}, Spec: appsv1.StatefulSetSpec{Replicas: &n}})
	}
	for _, o := range objs {
		if err := w.store.Create(w.ctx, o); err != nil {
			panic(err)
		}
	}
	w.owner[ns.Name] = cm.UID
}

// workloadRef reads the workload name ("app", the Deployment; "db", the
// StatefulSet) of object uid, with a pointer to its spec.replicas.
func (w *world) workloadRef(uid types.UID, name string) (client.Object, **int32, bool) {
	var obj client.Object
	var replicas **int32
	if name == "db" {
		s := &appsv1.StatefulSet{}
		obj, replicas = s, &s.Spec.Replicas
	} else {
		d := &appsv1.Deployment{}
		obj, replicas = d, &d.Spec.Replicas
	}
	err := w.store.Get(w.ctx, types.NamespacedName{Namespace: workloadNamespace(uid), Name: name}, obj)
	return obj, replicas, err == nil
}

// scaleUp is someone else scaling a workload of the object up: Argo CD,
// an HPA, a person. Of a workload at zero, it is use: the object wakes.
// Val names the workload (db, else app) and how the controller hears of
// it: the watch of the workloads a sleep labelled tells it at once, even
// while its cache of the object lags (the watch is another informer);
// "late" DurMS later (a watch that dropped and reconnected); "lost" never
// (the controller learns at its next look for another reason). A
// workload without the label is not watched: nobody is told. A reapply
// is the same, by someone who writes the whole workload back (see
// scaleWorkloadUp).
func (w *world) scaleUp(s Step) {
	cm, ok := w.get(objName(s.Obj))
	if !ok {
		return
	}
	workload := "app"
	if strings.Contains(s.Val, "db") {
		workload = "db"
	}
	marked, ok := w.scaleWorkloadUp(cm.Name, cm.UID, workload, s.Kind == kReapply)
	if !ok || !marked {
		return
	}
	switch {
	case strings.Contains(s.Val, "lost"):
	case strings.Contains(s.Val, "late"):
		w.enqueue(cm.Name, w.now().Add(ms(s.DurMS)))
	default:
		w.enqueue(cm.Name, w.now())
	}
}

// scaleWorkloadUp scales the workload of uid up by someone else, and
// says whether it carried the sleep's label (the watch sees it, or its
// removal). With replace, they write the workload as its manifest has it
// (Argo CD replacing it, Amphitheatre re-applying an Actor's): its
// replicas, without the sleep's annotation and label.
//
// A scale-up from zero is use. So is any change of a workload after the
// controller read it for a sleep that then began (it records the
// generation of each workload it found, and takes one changed since,
// which it has not scaled down yet, for one someone else wants running):
// a change while the object says Sleeping counts at once, and one before
// counts when the sleep begins, if no read of the workloads came between
// (see sawSleep).
func (w *world) scaleWorkloadUp(name string, uid types.UID, workload string, replace bool) (marked, ok bool) {
	obj, replicas, ok := w.workloadRef(uid, workload)
	if !ok {
		return false, false
	}
	_, marked = obj.GetLabels()[expiry.LabelAsleep]
	key := client.ObjectKeyFromObject(obj).String()
	w.seq++
	sleeping := false
	at := w.now()
	if cm, found := w.get(name); found && cm.UID == uid {
		switch st := readSleep(cm); st.Phase {
		case expiry.PhaseSleeping, expiry.PhaseAsleep:
			// Use of the sleep under way or done, which counts from its
			// since: up to a second after it began (use is counted to
			// the second), so possibly still ahead.
			sleeping = st.Phase == expiry.PhaseSleeping
			if st.Since.After(at) {
				at = st.Since
			}
		}
	}
	if *replicas != nil && **replicas == 0 || sleeping {
		w.countScaleUp(uid, key, at, w.seq)
	} else {
		w.changed[uid] = append(w.changed[uid], change{workload: key, at: w.now(), seq: w.seq})
	}
	n := int32(workloadReplicas + 1)
	if replace {
		n = workloadReplicas
		obj.SetLabels(nil)
		obj.SetAnnotations(nil)
	}
	*replicas = &n
	// A change of the spec, which the API server counts (the fake does
	// not).
	obj.SetGeneration(obj.GetGeneration() + 1)
	if err := w.store.Update(w.ctx, obj); err != nil {
		panic(err)
	}
	w.tracef("%s scaled up %s/%s by someone else (marked %t, replaced %t)", uid, workloadNamespace(uid), workload, marked, replace)
	return marked, true
}

// countScaleUp records a scale-up of workload key of object uid that is
// use, at at, numbered seq.
func (w *world) countScaleUp(uid types.UID, key string, at time.Time, seq int) {
	w.scaledUp[uid] = at
	w.scaleUps[uid] = append(w.scaleUps[uid], scaleUpAt{at: at, seq: seq})
	w.scaledUpWorkload[key] = at
}

// change is someone else changing a running workload, numbered seq in the
// order of all scale-ups; it is use only if a sleep began that had read
// the workloads before it.
type change struct {
	workload string
	at       time.Time
	seq      int
}

// listWorkloads is the controller's read of the workloads of the object a
// namespace belongs to, numbered as the scale-ups are.
func (w *world) listWorkloads(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
	var o client.ListOptions
	o.ApplyOptions(opts)
	if uid, ok := w.owner[o.Namespace]; ok {
		switch list.(type) {
		case *appsv1.DeploymentList, *appsv1.StatefulSetList:
			w.seq++
			w.listed[uid] = w.seq
		}
	}
	return c.List(ctx, list, opts...)
}

// scaleUpAt is someone else scaling a workload of an object up from zero,
// numbered in the order of all of them.
type scaleUpAt struct {
	at  time.Time
	seq int
}

// scaledUpBefore is the latest scale-up from zero of uid's workloads that
// came before the controller's look numbered seq began.
func (w *world) scaledUpBefore(uid types.UID, seq int) time.Time {
	ups := w.scaleUps[uid]
	for i := len(ups) - 1; i >= 0; i-- {
		if ups[i].seq <= seq {
			return ups[i].at
		}
	}
	return time.Time{}
}

// race is someone else scaling a workload up in the middle of the
// controller's sleep or wake of its object: just before or just after
// the controller's nth write of it from now.
type race struct {
	name     string
	uid      types.UID
	workload string
	before   bool
	n        int
}

// startRace arms the race of step s: Val is "before" or "after", with
// "db" for the StatefulSet; DurMS counts the writes.
func (w *world) startRace(s Step) {
	cm, ok := w.get(objName(s.Obj))
	if !ok {
		return
	}
	r := &race{name: cm.Name, uid: cm.UID, workload: "app", before: strings.Contains(s.Val, "before"), n: int(s.DurMS)}
	if strings.Contains(s.Val, "db") {
		r.workload = "db"
	}
	w.race = r
}

// raceWrite counts the controller's sleep and wake writes about the
// racing object and, at the one the race names, returns the scale-up to
// make before it or after it (the other is nothing). The watch tells the
// controller at once.
func (w *world) raceWrite(obj client.Object, p client.Patch) (before, after func()) {
	nothing := func() {}
	r := w.race
	if r == nil || !sleepWrite(obj, p) {
		return nothing, nothing
	}
	if obj.GetNamespace() != workloadNamespace(r.uid) && (obj.GetNamespace() != namespace || obj.GetName() != r.name) {
		return nothing, nothing
	}
	if r.n--; r.n > 0 {
		return nothing, nothing
	}
	w.race = nil
	up := func() {
		if marked, ok := w.scaleWorkloadUp(r.name, r.uid, r.workload, false); ok && marked {
			w.enqueue(r.name, w.now())
		}
	}
	if r.before {
		return up, nothing
	}
	return nothing, up
}

// crashWrite is the controller process dying at the write crashIn counts
// down to: the write fails, and a new process starts with nothing in
// memory.
func (w *world) crashWrite() error {
	if w.crashIn == 0 {
		return nil
	}
	if w.crashIn--; w.crashIn > 0 {
		return nil
	}
	w.crashed = true
	return errors.New("the controller process died")
}

// crashSleepWrite is crashWrite for a write of a sleep or a wake: of the
// sleep state, or of a workload's replicas. The process dies only in the
// middle of those: a crash anywhere else is a restart, which the other
// steps make.
func (w *world) crashSleepWrite(obj client.Object, p client.Patch) error {
	if w.crashIn == 0 || !sleepWrite(obj, p) {
		return nil
	}
	return w.crashWrite()
}

// sleepWrite says whether a patch is a write of a sleep or a wake: of the
// sleep state, or of a workload's replicas.
func sleepWrite(obj client.Object, p client.Patch) bool {
	data, err := p.Data(obj)
	return err == nil && (strings.Contains(string(data), sleepAnnotation) || strings.Contains(string(data), "timeout.amphitheatre.app/replicas"))
}

// restartIfCrashed starts a new process after a crash.
func (w *world) restartIfCrashed() {
	if !w.crashed {
		return
	}
	w.crashed = false
	w.ctrl = start(w)
	clear(w.fails)
	// The new leader takes over once the old one's lease runs out: until
	// then nothing runs, and a sleep or wake stays half done.
	w.downUntil = w.now().Add(w.failover)
	if w.downUntil.After(w.hist.Excused) {
		w.hist.Excused = w.downUntil
	}
	for name, at := range w.queue {
		w.queue[name] = later(at, w.downUntil)
	}
	w.enqueueAll()
}

// subResourceGet answers for the scale of a ConfigMap as the API server
// does for a kind without one: not found.
func (w *world) subResourceGet(ctx context.Context, c client.Client, sub string, obj, body client.Object, opts ...client.SubResourceGetOption) error {
	if sub == "scale" && obj.GetNamespace() == namespace {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps/scale"}, obj.GetName())
	}
	return c.SubResource(sub).Get(ctx, obj, body, opts...)
}

var replicasPatch = regexp.MustCompile(`"replicas":\s*(\d+)`)

// subResourcePatch is the controller scaling a workload: a scale to zero
// is recorded with what the world makes of its object then.
func (w *world) subResourcePatch(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	if sub != "scale" {
		return c.SubResource(sub).Patch(ctx, obj, p, opts...)
	}
	if err := w.crashWrite(); err != nil {
		return err
	}
	data, err := p.Data(obj)
	if err != nil {
		return err
	}
	m := replicasPatch.FindSubmatch(data)
	if m == nil {
		return apierrors.NewBadRequest(fmt.Sprintf("scale patch %s sets no replicas", data))
	}
	n, err := strconv.ParseInt(string(m[1]), 10, 32)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	// The fake client patches the scale it is handed, not the workload:
	// the scale subresource of a Deployment is done here, as the API
	// server does it.
	dep := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), dep); err != nil {
		return err
	}
	if n == 0 {
		if uid, ok := w.owner[obj.GetNamespace()]; ok {
			w.scaledDown(uid, client.ObjectKeyFromObject(obj))
		}
	}
	replicas := int32(n)
	dep.Spec.Replicas = &replicas
	return c.Update(ctx, dep)
}

// patchWorkload is the controller patching a workload: a patch that
// scales it to zero is recorded with what the world makes of its object
// then, and one that sets the replicas of a workload running at others
// as an override.
func (w *world) patchWorkload(ctx context.Context, c client.Client, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	data, err := p.Data(obj)
	if err != nil {
		return err
	}
	var body struct {
		Spec struct {
			Replicas *int32 `json:"replicas"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(obj)
	var before *int32
	if uid, ok := w.owner[key.Namespace]; ok {
		if _, replicas, ok := w.workloadRef(uid, key.Name); ok {
			before = *replicas
		}
	}
	if err := c.Patch(ctx, obj, p, opts...); err != nil {
		w.tracef("the controller's write of %s failed: %v", key, err)
		return err
	}
	w.tracef("the controller wrote %s: %s", key, data)
	if n := body.Spec.Replicas; n != nil && *n > 0 && before != nil && *before > 0 && *before != *n {
		w.mu.Lock()
		w.hist.Overrides = append(w.hist.Overrides, Override{At: w.now(), Workload: key.String(), From: *before, To: *n})
		w.mu.Unlock()
	}
	if body.Spec.Replicas != nil && *body.Spec.Replicas == 0 {
		if uid, ok := w.owner[key.Namespace]; ok {
			w.scaledDown(uid, key)
		}
	}
	return nil
}

// scaledDown records the controller scaling workload key of uid to zero,
// with the last scale-up by someone else it should have heeded: of that
// workload, or of another of the object's before the look began (a look
// under way when it came cannot have seen it).
func (w *world) scaledDown(uid types.UID, key client.ObjectKey) {
	var l corev1.ConfigMapList
	if err := w.store.List(w.ctx, &l, client.InNamespace(namespace)); err != nil {
		panic(err)
	}
	up := w.scaledUpWorkload[key.String()]
	if other := w.scaledUpBefore(uid, w.lookSeq); other.After(up) {
		up = other
	}
	for i := range l.Items {
		if cm := &l.Items[i]; cm.UID == uid {
			sd := ScaleDown{At: w.now(), ScaledUp: up, Workload: key.String(), Facts: w.facts(cm, w.policies())}
			w.mu.Lock()
			w.hist.ScaleDowns = append(w.hist.ScaleDowns, sd)
			w.mu.Unlock()
			return
		}
	}
}

// sawWake records, after the controller wrote the sleep annotation of an
// object that was waking, a wake that ends: with the workloads it left
// scaled down or marked.
func (w *world) sawWake(before *corev1.ConfigMap) {
	after, ok := w.get(before.Name)
	if !ok || after.UID != before.UID || readSleep(before).Phase != expiry.PhaseWaking || readSleep(after).Phase != expiry.PhaseAwake {
		return
	}
	end := WakeEnd{At: w.now(), UID: after.UID, Name: after.Name}
	for _, name := range []string{"app", "db"} {
		obj, replicas, ok := w.workloadRef(after.UID, name)
		if !ok {
			continue
		}
		_, marked := obj.GetLabels()[expiry.LabelAsleep]
		_, saved := obj.GetAnnotations()[expiry.AnnotationReplicas]
		n := int32(1)
		if *replicas != nil {
			n = **replicas
		}
		if n == 0 || marked || saved {
			end.Unrestored = append(end.Unrestored, fmt.Sprintf("%s (replicas %d, labelled %t, annotated %t)", name, n, marked, saved))
		}
	}
	w.mu.Lock()
	w.hist.WakeEnds = append(w.hist.WakeEnds, end)
	w.mu.Unlock()
}

// sawSleep records, after the controller wrote the sleep annotation of an
// object that was before, a sleep that starts: with what the world made
// of the object just before.
func (w *world) sawSleep(before *corev1.ConfigMap) {
	after, ok := w.get(before.Name)
	if !ok || after.UID != before.UID {
		return
	}
	old, cur := readSleep(before), readSleep(after)
	if cur.Phase != "Sleeping" || old.sleeping() && old.Since.Equal(cur.Since) {
		return
	}
	// Changes to running workloads after the last read, which the sleep
	// recorded generations from, are use of the sleep that begins.
	for _, c := range w.changed[after.UID] {
		if c.seq > w.listed[after.UID] {
			w.countScaleUp(after.UID, c.workload, later(c.at, cur.Since), c.seq)
		}
	}
	delete(w.changed, after.UID)
	f := w.facts(before, w.policies())
	w.mu.Lock()
	w.hist.SleepStarts = append(w.hist.SleepStarts, SleepStart{At: w.now(), Since: cur.Since, Facts: f})
	w.mu.Unlock()
	w.tracef("sleeps %s: %+v", before.Name, f)
}

// cycleOf is the sleep (or wake) a slept (or woke) message about name is
// about, as the object says now.
func (w *world) cycleOf(name string, uid types.UID, t v1alpha1.EventType) time.Time {
	cm, ok := w.get(name)
	if !ok || cm.UID != uid {
		return time.Time{}
	}
	st := readSleep(cm)
	if t == v1alpha1.EventSlept {
		return st.Since
	}
	return st.Woke
}

var sleepEventSince = regexp.MustCompile(`since (\d{4}-\S+?Z)`)

// sawSleepEvent keeps the Slept and Woke Events, by the sleep they are
// about.
func (w *world) sawSleepEvent(uid types.UID, reason, text string) {
	m := sleepEventSince.FindStringSubmatch(text)
	since := ""
	var sinceAt time.Time
	if m != nil {
		since = m[1]
		sinceAt, _ = time.Parse(time.RFC3339, since)
	}
	w.tracef("event %s about %s: %s", reason, uid, text)
	other := w.otherUse[uid]
	if w.policyChanged.After(other) {
		other = w.policyChanged
	}
	w.mu.Lock()
	w.hist.CycleEvents = append(w.hist.CycleEvents, CycleEvent{At: w.now(), UID: uid, Reason: reason, Since: since,
		SinceAt: sinceAt, ScaledUp: w.scaledUp[uid], OtherUse: other})
	w.mu.Unlock()
}

// The sleep invariants.

// notAsleepEarly: an object is put to sleep only under a valid policy that
// sleeps, not kept, not in dry run, and no earlier than its last activity
// plus afterIdle (or its creation or last wake plus after).
func notAsleepEarly(h *History) []Violation {
	var out []Violation
	for _, s := range h.SleepStarts {
		f := s.Facts
		switch {
		case f.Shadowed || f.Policy == "" || !f.Sleeps:
			out = append(out, violation("notAsleepEarly", "%s put to sleep at %s under no policy that sleeps (%q)", f.Name, s.At.Format(time.RFC3339Nano), f.Policy))
		case f.Kept || f.DryRun:
			out = append(out, violation("notAsleepEarly", "%s put to sleep at %s although kept (%t) or in dry run (%t)", f.Name, s.At.Format(time.RFC3339Nano), f.Kept, f.DryRun))
		case s.At.Before(f.SleepAt):
			out = append(out, violation("notAsleepEarly", "%s put to sleep at %s, %s before it may sleep (%s)",
				f.Name, s.At.Format(time.RFC3339Nano), f.SleepAt.Sub(s.At), f.SleepAt.Format(time.RFC3339Nano)))
		}
	}
	return out
}

// deletedOnlyAsleep: under a policy that sleeps, an object is deleted
// only asleep (not used since it went to sleep), no earlier than
// deleteAfter after it went to sleep, unless at its maximum.
func deletedOnlyAsleep(h *History) []Violation {
	var out []Violation
	for _, d := range h.Deletions {
		if !d.Sleeps || d.Kept || !d.MaxAt.IsZero() && !d.At.Before(d.MaxAt) {
			continue
		}
		switch {
		case d.SleptAt.IsZero() || d.UsedAsleep:
			out = append(out, violation("deletedOnlyAsleep", "%s deleted at %s awake (asleep since %s, used since %t), before its maximum",
				d.Name, d.At.Format(time.RFC3339Nano), d.SleptAt.Format(time.RFC3339Nano), d.UsedAsleep))
		case d.At.Before(d.SleptAt.Add(d.SleepDeleteAfter)):
			out = append(out, violation("deletedOnlyAsleep", "%s deleted at %s, %s before it had slept deleteAfter %s",
				d.Name, d.At.Format(time.RFC3339Nano), d.SleptAt.Add(d.SleepDeleteAfter).Sub(d.At), d.SleepDeleteAfter))
		}
	}
	return out
}

// noFight: a workload someone scaled up while its object slept is not
// scaled down again before a fresh sleep period has passed.
func noFight(h *History) []Violation {
	var out []Violation
	for _, s := range h.ScaleDowns {
		if s.ScaledUp.IsZero() {
			continue
		}
		if s.At.Before(s.ScaledUp.Add(s.SleepPeriod)) {
			out = append(out, violation("noFight", "%s of %s scaled down at %s, %s after someone scaled it up (sleep period %s)",
				s.Workload, s.Name, s.At.Format(time.RFC3339Nano), s.At.Sub(s.ScaledUp), s.SleepPeriod))
		}
	}
	return out
}

// sleptWokeOnce: the sleeping, slept and woke messages reach each channel
// at most once per sleep time, sleep and wake (the at-least-once edge of a reset aside), and
// the Slept and Woke Events are emitted once per sleep.
func sleptWokeOnce(h *History) []Violation {
	type key struct {
		uid     types.UID
		typ     v1alpha1.EventType
		channel string
		cycle   time.Time
	}
	reported := map[key]bool{}
	var out []Violation
	for _, s := range h.Sends {
		if !s.Accepted || !cycleType(s.Type) || s.Cycle.IsZero() {
			continue
		}
		k := key{s.UID, s.Type, s.Channel, s.Cycle.UTC()}
		if reported[k] {
			out = append(out, violation("sleptWokeOnce", "%s message about %s (of %s) reached %s again at %s",
				s.Type, s.UID, s.Cycle.Format(time.RFC3339Nano), s.Channel, s.At.Format(time.RFC3339Nano)))
		}
		if s.Reported {
			reported[k] = true
		}
	}
	type ekey struct {
		uid           types.UID
		reason, since string
	}
	seen := map[ekey]bool{}
	for _, e := range h.CycleEvents {
		reason := e.Reason
		if reason == "WokeExternally" {
			reason = "Woke"
		}
		k := ekey{e.UID, reason, e.Since}
		if seen[k] && e.Since != "" {
			out = append(out, violation("sleptWokeOnce", "%s Event about %s (the sleep since %s) emitted again at %s", e.Reason, e.UID, e.Since, e.At.Format(time.RFC3339Nano)))
		}
		seen[k] = true
	}
	return out
}

// wokeAtNextLook: once the controller has looked at a governed object
// after someone else scaled one of its workloads up from zero during its
// sleep (told by the watch at once, late, or not at all), the object is
// no longer in that sleep: the look woke it. A look that could not see
// (its cache of the object lagging) or did not finish (an error, or
// another look it asks for within a second: after a conflict, or the
// watch of a write of its own) does not count; nor does one at or past
// the object's maximum, where its deletion comes first and nothing wakes
// it (expiry.nextSleep), however long the notice owed holds it.
func wokeAtNextLook(h *History) []Violation {
	var out []Violation
	for _, l := range h.Looks {
		if !l.Finished || l.Policy == "" || l.Shadowed || !l.MaxAt.IsZero() && !l.At.Before(l.MaxAt) {
			continue
		}
		out = append(out, violation("wokeAtNextLook", "%s still %s (since %s) after a look at %s, though someone scaled a workload up at %s",
			l.Name, l.Phase, l.SleptSince.Format(time.RFC3339Nano), l.At.Format(time.RFC3339Nano), l.ScaledUp.Format(time.RFC3339Nano)))
	}
	return out
}

// wokeExternallyNamed: a sleep that only someone else's scale-up ended is
// reported by a WokeExternally Event, not Woke; and a WokeExternally Event
// is about a sleep someone else scaled a workload up in.
func wokeExternallyNamed(h *History) []Violation {
	var out []Violation
	for _, e := range h.CycleEvents {
		if e.SinceAt.IsZero() {
			continue
		}
		scaled := !e.ScaledUp.IsZero() && !e.ScaledUp.Before(e.SinceAt)
		other := !e.OtherUse.Before(e.SinceAt)
		switch {
		case e.Reason == "Woke" && scaled && !other:
			out = append(out, violation("wokeExternallyNamed", "Woke Event about %s (the sleep since %s) at %s, though only someone else's scale-up at %s woke it",
				e.UID, e.Since, e.At.Format(time.RFC3339Nano), e.ScaledUp.Format(time.RFC3339Nano)))
		case e.Reason == "WokeExternally" && !scaled:
			out = append(out, violation("wokeExternallyNamed", "WokeExternally Event about %s (the sleep since %s) at %s, though nobody scaled a workload up since",
				e.UID, e.Since, e.At.Format(time.RFC3339Nano)))
		}
	}
	return out
}

// restoredOnWake: when a wake ends (the object says Awake), every workload
// the sleep scaled down runs again, without the sleep's annotation or label.
func restoredOnWake(h *History) []Violation {
	var out []Violation
	for _, e := range h.WakeEnds {
		if len(e.Unrestored) > 0 {
			out = append(out, violation("restoredOnWake", "%s awake at %s with workloads not restored: %s",
				e.Name, e.At.Format(time.RFC3339Nano), strings.Join(e.Unrestored, ", ")))
		}
	}
	return out
}

// keepsTheirReplicas: the controller never sets the replicas of a workload
// that runs (someone scaled it up) to other replicas: a wake restores only
// workloads still at zero.
func keepsTheirReplicas(h *History) []Violation {
	var out []Violation
	for _, o := range h.Overrides {
		out = append(out, violation("keepsTheirReplicas", "%s set from %d to %d replicas at %s", o.Workload, o.From, o.To, o.At.Format(time.RFC3339Nano)))
	}
	return out
}

// Look is the controller's look at an object that leaves it in a sleep
// someone else had scaled a workload up in before the look began.
type Look struct {
	At time.Time
	// Phase and SleptSince are the sleep the object is left in, and
	// ScaledUp the scale-up the look should have seen.
	Phase      string
	SleptSince time.Time
	ScaledUp   time.Time
	// Finished: the look could see the object as it is (its cache did not
	// lag) and ran to its end (no error, no retry after a conflict).
	Finished bool
	Facts
}

// WakeEnd is the controller ending a wake: writing Awake.
type WakeEnd struct {
	At   time.Time
	UID  types.UID
	Name string
	// Unrestored are the object's workloads still at zero, labelled or
	// annotated by the sleep.
	Unrestored []string
}

// Override is the controller setting the replicas of a running workload.
type Override struct {
	At       time.Time
	Workload string
	From, To int32
}

// SleepStart is the controller starting a sleep: writing Sleeping.
type SleepStart struct {
	At, Since time.Time
	// Facts are the world's reading of the object just before.
	Facts
}

// ScaleDown is the controller scaling a workload of an object to zero.
type ScaleDown struct {
	At time.Time
	// ScaledUp is when someone else last scaled this workload up from
	// zero, or another of the object's before the look that scales it
	// down began; zero when nobody has. Workload is its namespace/name.
	ScaledUp time.Time
	Workload string
	Facts
}

// CycleEvent is a Slept, Woke or WokeExternally Event.
type CycleEvent struct {
	At     time.Time
	UID    types.UID
	Reason string
	// Since is the sleep it is about, as the Event gives it, and SinceAt
	// that time read.
	Since   string
	SinceAt time.Time
	// ScaledUp is when someone else last scaled a workload of the object
	// up from zero, and OtherUse when anything else that may wake it
	// last happened (an edit of the object, a policy change).
	ScaledUp, OtherUse time.Time
}
