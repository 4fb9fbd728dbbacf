// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// sleepPolicy sleeps the test's Playbooks afterIdle past their last use
// and deletes them deleteAfter later; no reminders.
var deploymentsGVR = appsv1.SchemeGroupVersion.WithResource("deployments")

func sleepPolicy(test string, afterIdle, deleteAfter v1alpha1.Duration) v1alpha1.TimeoutPolicySpec {
	spec := playbookPolicy(test, "1s")
	spec.Reminders = []v1alpha1.Duration{}
	spec.MinimumNotice = "0s"
	spec.Sleep = &v1alpha1.Sleep{AfterIdle: afterIdle, DeleteAfter: deleteAfter}
	return spec
}

// deploySleepy deploys a Playbook as Amphitheatre does (its namespace,
// an Actor "web" with a Deployment of 2 replicas) and a StatefulSet "db"
// of 3 replicas beside it.
func deploySleepy(t *testing.T, test string) (*tracked, string) {
	t.Helper()
	ctx := context.Background()
	pb := newPlaybook(test, test, nil)
	if err := testenv.Deploy(ctx, k8s, pb, []testenv.Actor{{Name: "web", Replicas: 2, CPU: "100m", Memory: "64Mi"}}); err != nil {
		t.Fatal(err)
	}
	ns := testenv.Namespace(pb.GetName())
	labels := map[string]string{"app": "db"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
			// Its Pods never get ready here (no kubelet): all at once.
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "registry.k8s.io/pause:3.10"}}}},
		},
	}
	if err := k8s.Create(ctx, sts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pb) })
	tr := &tracked{Unstructured: pb, gone: make(chan time.Time, 1)}
	watchGone(t, tr)
	return tr, ns
}

// watchGone reports on tr.gone when the Playbook goes.
func watchGone(t *testing.T, tr *tracked) {
	t.Helper()
	go func() {
		for {
			err := k8s.Get(context.Background(), types.NamespacedName{Name: tr.GetName()}, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "amphitheatre.app/v1", "kind": "Playbook"}})
			if err != nil {
				tr.gone <- time.Now()
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
}

func sleepStateOf(t *testing.T, name string) expiry.SleepState {
	t.Helper()
	pb, err := dyn.Resource(playbooks).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := expiry.ParseSleep(pb.GetAnnotations()[expiry.AnnotationSleep])
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func awaitPhase(t *testing.T, name, phase string, within time.Duration) expiry.SleepState {
	t.Helper()
	var st expiry.SleepState
	fixture.Eventually(t, within, name+" "+phase, func() (bool, error) {
		st = sleepStateOf(t, name)
		return st.Phase == phase, nil
	})
	return st
}

// replicasOf returns a workload's spec.replicas and replicas annotation.
func replicasOf(t *testing.T, obj client.Object) (int32, string) {
	t.Helper()
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	saved := obj.GetAnnotations()[expiry.AnnotationReplicas]
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return *o.Spec.Replicas, saved
	case *appsv1.StatefulSet:
		return *o.Spec.Replicas, saved
	}
	t.Fatalf("not a workload: %T", obj)
	return 0, ""
}

func expectReplicas(t *testing.T, obj client.Object, want int32, wantSaved string) {
	t.Helper()
	fixture.Eventually(t, 10*time.Second, fmt.Sprintf("%s at %d replicas (saved %q)", obj.GetName(), want, wantSaved), func() (bool, error) {
		n, saved := replicasOf(t, obj)
		return n == want && saved == wantSaved, nil
	})
}

func web(ns string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
}

func db(ns string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}}
}

// podsIn counts the Pods kube-controller-manager made in ns.
func podsIn(t *testing.T, ns string) int {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

func TestSleepScalesAPlaybooksWorkloadsToZeroAndUseRestoresThem(t *testing.T) {
	t.Parallel()
	// Idle long enough after the wake for kube-controller-manager to
	// bring the Pods back on a busy machine before the next sleep.
	createPolicy(t, "sleep-wake", sleepPolicy("sleep-wake", "6s", "1h"))
	pb, ns := deploySleepy(t, "sleep-wake")

	st := awaitPhase(t, pb.GetName(), expiry.PhaseAsleep, 20*time.Second)
	if early := pb.GetCreationTimestamp().Add(6 * time.Second).Sub(st.Since); early > 0 {
		t.Fatalf("slept at %s, %s before its idle time", st.Since, early)
	}
	expectReplicas(t, web(ns), 0, "2")
	expectReplicas(t, db(ns), 0, "3")
	fixture.Eventually(t, 20*time.Second, "no pods left", func() (bool, error) { return podsIn(t, ns) == 0, nil })
	mustContain(t, findEvent(t, eventNamespace, pb.GetName(), "Slept").Note, "5 replicas scaled to zero")
	if st.Freed != 5 {
		t.Errorf("freed %d replicas, want 5", st.Freed)
	}

	touch(t, pb.GetName())
	st = awaitPhase(t, pb.GetName(), expiry.PhaseAwake, 10*time.Second)
	mustContain(t, st.WokeBy, "use")
	expectReplicas(t, web(ns), 2, "")
	expectReplicas(t, db(ns), 3, "")
	fixture.Eventually(t, 20*time.Second, "pods back", func() (bool, error) { return podsIn(t, ns) > 0, nil })
	findEvent(t, eventNamespace, pb.GetName(), "Woke")
}

func TestAWorkloadScaledUpBySomeoneElseWakesThePlaybookWithoutAFight(t *testing.T) {
	t.Parallel()
	createPolicy(t, "sleep-external", sleepPolicy("sleep-external", "3s", "1h"))
	pb, ns := deploySleepy(t, "sleep-external")
	awaitPhase(t, pb.GetName(), expiry.PhaseAsleep, 15*time.Second)
	expectReplicas(t, web(ns), 0, "2")

	// As Amphitheatre re-applying the Actor's Deployment, or an HPA.
	scaled := time.Now()
	if err := k8s.SubResource("scale").Patch(context.Background(), web(ns),
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":1}}`))); err != nil {
		t.Fatal(err)
	}
	st := awaitPhase(t, pb.GetName(), expiry.PhaseAwake, 10*time.Second)
	findEvent(t, eventNamespace, pb.GetName(), "WokeExternally")
	mustContain(t, st.WokeBy, "Deployment "+ns+"/web scaled up to 1")
	// Its replicas are left as they were set; the others come back.
	expectReplicas(t, web(ns), 1, "")
	expectReplicas(t, db(ns), 3, "")
	// No fight: it stays up until a fresh idle period is over.
	for time.Since(scaled) < 2500*time.Millisecond {
		if n, _ := replicasOf(t, web(ns)); n != 1 {
			t.Fatalf("web scaled to %d %s after someone else scaled it up", n, time.Since(scaled))
		}
		time.Sleep(100 * time.Millisecond)
	}
	again := awaitPhase(t, pb.GetName(), expiry.PhaseAsleep, 10*time.Second)
	if again.Since.Before(st.Woke.Add(3 * time.Second)) {
		t.Fatalf("slept again at %s, before a fresh idle period from the wake at %s", again.Since, st.Woke)
	}
	expectReplicas(t, web(ns), 0, "1")
}

func TestASleepingPlaybookIsDeletedNoEarlierThanDeleteAfterAsleep(t *testing.T) {
	t.Parallel()
	createPolicy(t, "sleep-delete", sleepPolicy("sleep-delete", "2s", "4s"))
	pb, ns := deploySleepy(t, "sleep-delete")
	st := awaitPhase(t, pb.GetName(), expiry.PhaseAsleep, 15*time.Second)
	expectReplicas(t, web(ns), 0, "2")
	pb.expectDeletedOnTime(t, expiry.SleepDeletion(st.Since, 4*time.Second))
}

func TestSleepAndWakeCompleteAcrossARestart(t *testing.T) {
	// Not parallel: it stops the suite's controller.
	ctx := context.Background()
	if err := stopController(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	start := func() {
		if _, err := startController(restConfig, testScheme); err != nil {
			t.Fatal(err)
		}
		restarted = true
	}
	t.Cleanup(func() {
		if !restarted {
			start()
		}
	})
	createPolicy(t, "sleep-restart", sleepPolicy("sleep-restart", "1h", "1h"))
	pb, ns := deploySleepy(t, "sleep-restart")

	// What a leader that crashed in the middle of a sleep leaves: the
	// Playbook says Sleeping, web is scaled to zero with its replicas
	// written down (one patch), db untouched.
	// A sleep comes at least a second after the last use (here, the
	// creation).
	time.Sleep(time.Until(pb.GetCreationTimestamp().Add(1100 * time.Millisecond)))
	since := time.Now().UTC()
	mergePatch(t, playbooks, "", pb.GetName(), fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`,
		expiry.AnnotationSleep, expiry.SleepState{Phase: expiry.PhaseSleeping, Since: since, Generation: 1}.String()))
	mergePatch(t, deploymentsGVR, ns, "web", fmt.Sprintf(`{"metadata":{"annotations":{%q:"2"}},"spec":{"replicas":0}}`, expiry.AnnotationReplicas))

	start()
	st := awaitPhase(t, pb.GetName(), expiry.PhaseAsleep, 15*time.Second)
	if !st.Since.Equal(since) {
		t.Errorf("asleep since %s, want the since of the sleep under way %s", st.Since, since)
	}
	expectReplicas(t, web(ns), 0, "2")
	expectReplicas(t, db(ns), 0, "3")

	// And a wake cut short: the Playbook says Waking, web is back but
	// still annotated, db still at zero.
	if err := stopController(); err != nil {
		t.Fatal(err)
	}
	restarted = false
	st.Phase, st.Woke, st.WokeBy = expiry.PhaseWaking, time.Now().UTC(), "use"
	mergePatch(t, playbooks, "", pb.GetName(), fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, expiry.AnnotationSleep, st.String()))
	if err := k8s.SubResource("scale").Patch(ctx, web(ns), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":2}}`))); err != nil {
		t.Fatal(err)
	}
	start()
	awaitPhase(t, pb.GetName(), expiry.PhaseAwake, 15*time.Second)
	expectReplicas(t, web(ns), 2, "")
	expectReplicas(t, db(ns), 3, "")

	// A sleep cut short again, and before the next leader comes someone
	// scales web back up: the new leader takes that for use and wakes
	// the Playbook; it does not finish the sleep by scaling web down.
	if err := stopController(); err != nil {
		t.Fatal(err)
	}
	restarted = false
	time.Sleep(1100 * time.Millisecond) // a sleep comes a second after the last wake
	half := expiry.SleepState{Phase: expiry.PhaseSleeping, Since: time.Now().UTC(), Generation: 1}
	mergePatch(t, playbooks, "", pb.GetName(), fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, expiry.AnnotationSleep, half.String()))
	mergePatch(t, deploymentsGVR, ns, "web", fmt.Sprintf(`{"metadata":{"annotations":{%q:"2"}},"spec":{"replicas":0}}`, expiry.AnnotationReplicas))
	if err := k8s.SubResource("scale").Patch(ctx, web(ns), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":1}}`))); err != nil {
		t.Fatal(err)
	}
	start()
	woke := awaitPhase(t, pb.GetName(), expiry.PhaseAwake, 15*time.Second)
	mustContain(t, woke.WokeBy, "Deployment "+ns+"/web scaled up to 1")
	expectReplicas(t, web(ns), 1, "")
	expectReplicas(t, db(ns), 3, "")

	// Cut short once more, and before the next leader comes someone
	// writes web back as its manifest has it: 2 replicas, without the
	// sleep's annotation, as a workload the sleep has not reached looks.
	// Its generation is not the one the sleep recorded: the new leader
	// takes that for use too, and does not scale web down again.
	if err := stopController(); err != nil {
		t.Fatal(err)
	}
	restarted = false
	time.Sleep(1100 * time.Millisecond)
	generations := map[string]int64{}
	for _, w := range []client.Object{web(ns), db(ns)} {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
			t.Fatal(err)
		}
		generations[fmt.Sprintf("%T", w)] = w.GetGeneration()
	}
	half = expiry.SleepState{Phase: expiry.PhaseSleeping, Since: time.Now().UTC(), Generation: 1, Workloads: map[string]int64{
		"Deployment " + ns + "/web": generations["*v1.Deployment"], "StatefulSet " + ns + "/db": generations["*v1.StatefulSet"],
	}}
	mergePatch(t, playbooks, "", pb.GetName(), fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, expiry.AnnotationSleep, half.String()))
	mergePatch(t, deploymentsGVR, ns, "web", fmt.Sprintf(`{"metadata":{"annotations":{%q:"1"}},"spec":{"replicas":0}}`, expiry.AnnotationReplicas))
	mergePatch(t, deploymentsGVR, ns, "web", fmt.Sprintf(`{"metadata":{"annotations":{%q:null}},"spec":{"replicas":2}}`, expiry.AnnotationReplicas))
	start()
	woke = awaitPhase(t, pb.GetName(), expiry.PhaseAwake, 15*time.Second)
	mustContain(t, woke.WokeBy, "Deployment "+ns+"/web changed by someone else")
	expectReplicas(t, web(ns), 2, "")
	expectReplicas(t, db(ns), 3, "")
}

func TestADeploymentWithAScaleSubresourceSleepsItself(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const test = "sleep-self"
	sleepNamespace(t, test)
	spec := sleepPolicy(test, "3s", "1h")
	spec.Target = v1alpha1.Target{APIVersion: "apps/v1", Kind: "Deployment"}
	createPolicy(t, test, spec)
	d := selfDeployment(t, test)
	state := func() expiry.SleepState {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			t.Fatal(err)
		}
		st, _ := expiry.ParseSleep(d.Annotations[expiry.AnnotationSleep])
		return st
	}
	fixture.Eventually(t, 15*time.Second, "the deployment asleep", func() (bool, error) { return state().Phase == expiry.PhaseAsleep, nil })
	if st := state(); st.Replicas == nil || *st.Replicas != 3 || *d.Spec.Replicas != 0 {
		t.Fatalf("asleep with %d replicas, saved %v; want 0, saved 3", *d.Spec.Replicas, st.Replicas)
	}
	// Asleep, it stays asleep: its own scale-down is no use of it.
	time.Sleep(time.Second)
	if st := state(); st.Phase != expiry.PhaseAsleep {
		t.Fatalf("woke by its own scale-down: %+v", st)
	}
	mergePatch(t, deploymentsGVR, test, "self", fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`,
		expiry.AnnotationLastActive, time.Now().UTC().Format(time.RFC3339)))
	fixture.Eventually(t, 10*time.Second, "the deployment awake at 3", func() (bool, error) {
		st := state()
		return st.Phase == expiry.PhaseAwake && *d.Spec.Replicas == 3, nil
	})
}

// TestTheSleepingMessageArrivesOnceBeforeTheSleep: with sleep.reminder,
// a webhook receiver that verifies the signature gets one sleeping event,
// lead before the sleep, even when its first delivery fails with a 503;
// then one slept event.
func TestTheSleepingMessageArrivesOnceBeforeTheSleep(t *testing.T) {
	t.Parallel()
	rc := startReceiver(t, []byte("whsec-not-a-real-key-71c3d2"))
	spec := reminderPolicy(t, "sleep-notice", []v1alpha1.Duration{}, "0s", nil, rc)
	spec.Sleep = &v1alpha1.Sleep{AfterIdle: "5s", DeleteAfter: "1h", Reminder: "3s"}
	createPolicy(t, "sleep-notice", spec)
	pb, ns := deploySleepy(t, "sleep-notice")
	rc.breakNext(pb.GetName(), "sleeping", breakUnavailable)

	st := awaitPhase(t, pb.GetName(), expiry.PhaseAsleep, 20*time.Second)
	got := rc.expectEvents(t, pb.GetName(), "sleeping", 1, 5*time.Second)
	sleepAt := pb.GetCreationTimestamp().Add(5 * time.Second)
	if at := got[0].arrived; at.Before(sleepAt.Add(-3*time.Second)) || at.After(st.Since) {
		t.Errorf("the sleeping event arrived at %s, want between %s and the sleep at %s", at, sleepAt.Add(-3*time.Second), st.Since)
	}
	if want := sleepAt.UTC().Format(time.RFC3339); got[0].Data["expiresAt"] != want {
		t.Errorf("the sleeping event says %v, want the sleep time %s", got[0].Data["expiresAt"], want)
	}
	rc.expectEvents(t, pb.GetName(), "slept", 1, 10*time.Second)
	expectReplicas(t, web(ns), 0, "2")
}

// TestACronJobSleepsByItsSuspendField: a policy for CronJobs sleeps them
// with spec.sleep.patch (spec.suspend true), and the wake puts back what
// the patch replaced. Asleep, its own patch is no use of it; someone
// setting suspend back to false is a spec edit, which wakes it; the wake
// undoes the sleep even once the policy no longer sleeps; and a CronJob
// its owner had suspended stays suspended after a wake.
func TestACronJobSleepsByItsSuspendField(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const test = "sleep-cronjob"
	sleepNamespace(t, test)
	spec := sleepPolicy(test, "3s", "1h")
	spec.Target = v1alpha1.Target{APIVersion: "batch/v1", Kind: "CronJob"}
	spec.Sleep.Patch = &runtime.RawExtension{Raw: []byte(`{"spec":{"suspend":true}}`)}
	policy := createPolicy(t, test, spec)
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: test, Name: "nightly", Labels: map[string]string{testLabel: test}},
		Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "job", Image: "registry.k8s.io/pause:3.10"}}}}}}},
	}
	if err := k8s.Create(ctx, cj); err != nil {
		t.Fatal(err)
	}
	state := func() (expiry.SleepState, bool) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(cj), cj); err != nil {
			t.Fatal(err)
		}
		st, _ := expiry.ParseSleep(cj.Annotations[expiry.AnnotationSleep])
		return st, ptr.Deref(cj.Spec.Suspend, false)
	}
	fixture.Eventually(t, 15*time.Second, "the CronJob asleep and suspended", func() (bool, error) {
		st, suspended := state()
		return st.Phase == expiry.PhaseAsleep && suspended, nil
	})
	time.Sleep(time.Second)
	if st, _ := state(); st.Phase != expiry.PhaseAsleep {
		t.Fatalf("woke by its own patch: %+v", st)
	}

	// Someone resumes it by hand: a spec edit, which wakes it.
	if err := k8s.Patch(ctx, cj, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":false}}`))); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 10*time.Second, "the CronJob awake after a spec edit", func() (bool, error) {
		st, suspended := state()
		return st.Phase == expiry.PhaseAwake && !suspended && strings.Contains(st.WokeBy, "generation"), nil
	})

	// Asleep again, then the policy drops its patch (and sleep): the
	// wake still undoes the sleep with the patch kept on the object.
	fixture.Eventually(t, 15*time.Second, "the CronJob asleep again", func() (bool, error) {
		st, suspended := state()
		return st.Phase == expiry.PhaseAsleep && suspended, nil
	})
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
		t.Fatal(err)
	}
	policy.Spec.Sleep = nil
	if err := k8s.Update(ctx, policy); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 10*time.Second, "the CronJob awake and resumed", func() (bool, error) {
		st, suspended := state()
		return st.Phase == expiry.PhaseAwake && !suspended && st.WokeBy == expiry.WokeByPolicy, nil
	})

	// Suspended by its owner, then put to sleep: the wake leaves it
	// suspended, as it was.
	paused := cj.DeepCopy()
	paused.Name, paused.ResourceVersion, paused.Annotations, paused.Spec.Suspend = "paused", "", nil, ptr.To(true)
	if err := k8s.Create(ctx, paused); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
		t.Fatal(err)
	}
	policy.Spec.Sleep = spec.Sleep
	if err := k8s.Update(ctx, policy); err != nil {
		t.Fatal(err)
	}
	pausedState := func() expiry.SleepState {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(paused), paused); err != nil {
			t.Fatal(err)
		}
		st, _ := expiry.ParseSleep(paused.Annotations[expiry.AnnotationSleep])
		return st
	}
	fixture.Eventually(t, 15*time.Second, "the paused CronJob asleep", func() (bool, error) {
		return pausedState().Phase == expiry.PhaseAsleep, nil
	})
	mergePatch(t, cronJobsGVR, test, "paused", fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`,
		expiry.AnnotationLastActive, time.Now().UTC().Format(time.RFC3339)))
	fixture.Eventually(t, 10*time.Second, "the paused CronJob awake", func() (bool, error) {
		return pausedState().Phase == expiry.PhaseAwake, nil
	})
	if !ptr.Deref(paused.Spec.Suspend, false) {
		t.Errorf("the wake resumed a CronJob its owner had suspended")
	}
}

var cronJobsGVR = batchv1.SchemeGroupVersion.WithResource("cronjobs")

// TestADeploymentScaledBackUpDuringAHalfDoneSleepWakes: a leader dies
// right after the write that said Sleeping and scaled a Deployment target
// to zero; during the failover someone scales it back to exactly the
// replicas it had. The next leader takes that for use: it wakes the
// Deployment and leaves it at 3, rather than finishing the sleep.
func TestADeploymentScaledBackUpDuringAHalfDoneSleepWakes(t *testing.T) {
	// Not parallel: it stops the suite's controller.
	ctx := context.Background()
	const test = "sleep-self-crash"
	if err := stopController(); err != nil {
		t.Fatal(err)
	}
	started := false
	start := func() {
		if _, err := startController(restConfig, testScheme); err != nil {
			t.Fatal(err)
		}
		started = true
	}
	t.Cleanup(func() {
		if !started {
			start()
		}
	})
	sleepNamespace(t, test)
	spec := sleepPolicy(test, "1h", "1h")
	spec.Target = v1alpha1.Target{APIVersion: "apps/v1", Kind: "Deployment"}
	createPolicy(t, test, spec)
	d := selfDeployment(t, test)
	time.Sleep(time.Until(d.CreationTimestamp.Add(1100 * time.Millisecond)))
	half := expiry.SleepState{Phase: expiry.PhaseSleeping, Since: time.Now().UTC(), Generation: d.Generation, Replicas: ptr.To[int32](3)}
	mergePatch(t, deploymentsGVR, test, "self", fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"replicas":0}}`, expiry.AnnotationSleep, half.String()))
	someone := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: test, Name: "self"}}
	if err := k8s.SubResource("scale").Patch(ctx, someone, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`))); err != nil {
		t.Fatal(err)
	}
	start()
	var st expiry.SleepState
	fixture.Eventually(t, 15*time.Second, "the deployment awake", func() (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			return false, err
		}
		st, _ = expiry.ParseSleep(d.Annotations[expiry.AnnotationSleep])
		return st.Phase == expiry.PhaseAwake, nil
	})
	mustContain(t, st.WokeBy, "scaled up to 3")
	if *d.Spec.Replicas != 3 {
		t.Errorf("the deployment at %d replicas after the wake, want the 3 someone set", *d.Spec.Replicas)
	}
}

// sleepNamespace creates the namespace test, deleted after the test.
func sleepNamespace(t *testing.T, test string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: test}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
}

// selfDeployment creates, in namespace test, the Deployment "self" of 3
// replicas, labelled for test: a target that is scaled itself.
func selfDeployment(t *testing.T, test string) *appsv1.Deployment {
	t.Helper()
	labels := map[string]string{"app": "self"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: test, Name: "self", Labels: map[string]string{testLabel: test}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}},
		},
	}
	if err := k8s.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	return d
}
