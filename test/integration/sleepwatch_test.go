// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// announced counts the Events about the named object by reason, each as
// many times as it was emitted (an Event repeated is one Event whose
// series counts the repeats).
func announced(t *testing.T, namespace, name string, reasons ...string) map[string]int {
	t.Helper()
	list, err := clients.EventsV1().Events(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range reasons {
		got[r] = 0
	}
	for _, e := range list.Items {
		if _, counted := got[e.Reason]; !counted || e.Regarding.Name != name {
			continue
		}
		got[e.Reason]++
		if e.Series != nil && e.Series.Count > 1 {
			got[e.Reason] += int(e.Series.Count) - 1
		}
	}
	return got
}

// expectAnnounced waits until the Events in namespace about each of the
// named objects count want, by reason, and checks that no more come for a
// while.
func expectAnnounced(t *testing.T, namespace string, names []string, want map[string]int) {
	t.Helper()
	reasons := make([]string, 0, len(want))
	for r := range want {
		reasons = append(reasons, r)
	}
	check := func() (string, map[string]int) {
		for _, name := range names {
			if got := announced(t, namespace, name, reasons...); !maps.Equal(got, want) {
				return name, got
			}
		}
		return "", nil
	}
	name, got := check()
	for end := time.Now().Add(10 * time.Second); name != ""; name, got = check() {
		if time.Now().After(end) {
			t.Fatalf("Events %v about %s, want %v", got, name, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if name, got = check(); name != "" {
			t.Fatalf("Events %v about %s, want %v", got, name, want)
		}
	}
}

// restartController stops the suite's controller and starts a new one, as
// a new process.
func restartController(t *testing.T) {
	t.Helper()
	if err := stopController(); err != nil {
		t.Fatal(err)
	}
	if _, err := startController(restConfig, testScheme); err != nil {
		t.Fatal(err)
	}
}

// awaitNewPhase waits for the Playbook to be in phase, in a sleep or wake
// other than the one of st.
func awaitNewPhase(t *testing.T, name, phase string, st expiry.SleepState, within time.Duration) expiry.SleepState {
	t.Helper()
	var got expiry.SleepState
	fixture.Eventually(t, within, name+" "+phase+" again", func() (bool, error) {
		got = sleepStateOf(t, name)
		if got.Phase != phase {
			return false, nil
		}
		if phase == expiry.PhaseAwake {
			return !got.Woke.Equal(st.Woke), nil
		}
		return !got.Since.Equal(st.Since), nil
	})
	return got
}

// Each sleep and each wake is announced once (issue 32): one Slept and one
// Woke Event a cycle, two cycles, with a new process in the middle of
// each: after the sleep, and after the wake. Four Playbooks, so that a
// look that repeats a sleep or a wake, which depends on when the cache
// sees each write, has several chances to show.
func TestEachSleepAndWakeIsAnnouncedOnceAcrossRestarts(t *testing.T) {
	// Not parallel: it restarts the suite's controller.
	createPolicy(t, "sleep-once", sleepPolicy("sleep-once", "8s", "1h"))
	var names, namespaces []string
	for range 4 {
		pb, ns := deploySleepy(t, "sleep-once")
		names, namespaces = append(names, pb.GetName()), append(namespaces, ns)
	}
	states := make([]expiry.SleepState, len(names))
	each := func(phase string, within time.Duration) {
		t.Helper()
		for i, name := range names {
			states[i] = awaitNewPhase(t, name, phase, states[i], within)
		}
	}

	each(expiry.PhaseAsleep, 25*time.Second)
	expectAnnounced(t, eventNamespace, names, map[string]int{"Slept": 1, "Woke": 0})
	restartController(t)
	// The new process finds them asleep: nothing to announce.
	expectAnnounced(t, eventNamespace, names, map[string]int{"Slept": 1, "Woke": 0})
	for _, name := range names {
		touch(t, name)
	}
	each(expiry.PhaseAwake, 10*time.Second)
	expectAnnounced(t, eventNamespace, names, map[string]int{"Slept": 1, "Woke": 1})

	// The second cycle: asleep again after a fresh idle period.
	each(expiry.PhaseAsleep, 25*time.Second)
	expectAnnounced(t, eventNamespace, names, map[string]int{"Slept": 2, "Woke": 1})
	for _, name := range names {
		touch(t, name)
	}
	each(expiry.PhaseAwake, 10*time.Second)
	// No third sleep: the restart and the count below may take longer
	// than the idle period on a busy machine.
	patch := []byte(`{"spec":{"sleep":{"afterIdle":"1h"}}}`)
	if err := k8s.Patch(context.Background(), &v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "sleep-once"}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	restartController(t)
	expectAnnounced(t, eventNamespace, names, map[string]int{"Slept": 2, "Woke": 2})
	for _, ns := range namespaces {
		expectReplicas(t, web(ns), 2, "")
		expectReplicas(t, db(ns), 3, "")
	}
}

// asleepLabel returns the sleep's label on a workload, and whether it has
// one.
func asleepLabel(t *testing.T, obj client.Object) (string, bool) {
	t.Helper()
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	v, ok := obj.GetLabels()[expiry.LabelAsleep]
	return v, ok
}

// sleptAnnounced waits until the slept message is recorded and the
// Playbook has not changed for a second since: the looks that follow a
// sleep are over, and none comes until a use or the deletion.
func sleptAnnounced(t *testing.T, name string) {
	t.Helper()
	var version string
	var since time.Time
	fixture.Eventually(t, 10*time.Second, "the slept message about "+name+" recorded, and no write for a second", func() (bool, error) {
		pb, err := dyn.Resource(playbooks).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if pb.GetResourceVersion() != version {
			version, since = pb.GetResourceVersion(), time.Now()
		}
		return strings.Contains(pb.GetAnnotations()[expiry.AnnotationReminders], `"slept/`) && time.Since(since) > time.Second, nil
	})
}

// A scale-up by someone else is seen at once (issue 34): the Playbook
// awake within 2 seconds, its other workloads restored, one
// WokeExternally Event, and no label left.
func TestAScaleUpBySomeoneElseIsSeenWithinTwoSeconds(t *testing.T) {
	t.Parallel()
	createPolicy(t, "sleep-seen", sleepPolicy("sleep-seen", "2s", "1h"))
	pb, ns := deploySleepy(t, "sleep-seen")
	name := pb.GetName()
	awaitPhase(t, name, expiry.PhaseAsleep, 15*time.Second)
	expectReplicas(t, web(ns), 0, "2")
	expectReplicas(t, db(ns), 0, "3")
	for _, w := range []client.Object{web(ns), db(ns)} {
		if v, _ := asleepLabel(t, w); v != string(pb.GetUID()) {
			t.Fatalf("%s labelled %s=%q, want the Playbook's UID %q", w.GetName(), expiry.LabelAsleep, v, pb.GetUID())
		}
	}
	sleptAnnounced(t, name)

	scaled := time.Now()
	if err := k8s.SubResource("scale").Patch(context.Background(), web(ns),
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":1}}`))); err != nil {
		t.Fatal(err)
	}
	st := awaitPhase(t, name, expiry.PhaseAwake, 2*time.Second)
	t.Logf("awake %s after the scale-up", time.Since(scaled).Round(time.Millisecond))
	mustContain(t, st.WokeBy, "Deployment "+ns+"/web scaled up to 1")
	expectReplicas(t, web(ns), 1, "")
	expectReplicas(t, db(ns), 3, "")
	for _, w := range []client.Object{web(ns), db(ns)} {
		if v, ok := asleepLabel(t, w); ok {
			t.Errorf("%s still labelled %s=%q after the wake", w.GetName(), expiry.LabelAsleep, v)
		}
	}
	expectAnnounced(t, eventNamespace, []string{name}, map[string]int{"WokeExternally": 1, "Woke": 0})
}

// A target scaled itself (a Deployment) is watched as every governed
// object is: someone scaling it up wakes it as soon.
func TestADeploymentThatSleepsItselfScaledUpBySomeoneElseWakesWithinTwoSeconds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const test = "sleep-self-seen"
	sleepNamespace(t, test)
	spec := sleepPolicy(test, "2s", "1h")
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
	fixture.Eventually(t, 10*time.Second, "the slept message recorded", func() (bool, error) {
		asleep := state().Phase == expiry.PhaseAsleep
		return asleep && strings.Contains(d.Annotations[expiry.AnnotationReminders], `"slept/`), nil
	})

	scaled := time.Now()
	self := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: test, Name: "self"}}
	if err := k8s.SubResource("scale").Patch(ctx, self, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":2}}`))); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 2*time.Second, "the deployment awake", func() (bool, error) { return state().Phase == expiry.PhaseAwake, nil })
	t.Logf("awake %s after the scale-up", time.Since(scaled).Round(time.Millisecond))
	if *d.Spec.Replicas != 2 {
		t.Errorf("at %d replicas, want the 2 it was scaled up to", *d.Spec.Replicas)
	}
	expectAnnounced(t, test, []string{d.Name}, map[string]int{"WokeExternally": 1})
}

// Only the workloads a sleep scaled down are watched (issue 34): 200
// other Deployments are neither listed nor held.
func TestOnlyTheWorkloadsASleepScaledDownAreWatched(t *testing.T) {
	// Not parallel: the count of labelled workloads in the cluster holds
	// still while no other test runs.
	ctx := context.Background()
	const others = "sleep-others"
	sleepNamespace(t, others)
	labels := map[string]string{"app": "other"}
	for i := range 200 {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: others, Name: fmt.Sprintf("other-%03d", i)},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}},
			},
		}
		if err := k8s.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	createPolicy(t, "sleep-watched", sleepPolicy("sleep-watched", "2s", "1h"))
	pb, ns := deploySleepy(t, "sleep-watched")
	awaitPhase(t, pb.GetName(), expiry.PhaseAsleep, 15*time.Second)
	expectReplicas(t, web(ns), 0, "2")
	expectReplicas(t, db(ns), 0, "3")

	var watched, marked int
	fixture.Eventually(t, 10*time.Second, "the watched workloads are the labelled ones", func() (bool, error) {
		var deps appsv1.DeploymentList
		var sets appsv1.StatefulSetList
		if err := k8s.List(ctx, &deps, client.HasLabels{expiry.LabelAsleep}); err != nil {
			return false, err
		}
		if err := k8s.List(ctx, &sets, client.HasLabels{expiry.LabelAsleep}); err != nil {
			return false, err
		}
		marked = len(deps.Items) + len(sets.Items)
		m := metric(t, "timeout_controller_sleep_watched_workloads", nil)
		if m == nil {
			return false, nil
		}
		watched = int(m.GetGauge().GetValue())
		return watched == marked, nil
	})
	if marked < 2 || marked >= 200 {
		t.Fatalf("%d labelled workloads in the cluster; want this test's 2 and the few other sleeps left, not the 200 others", marked)
	}
	t.Logf("%d workloads watched, of %d+ in the cluster", watched, 200+marked)
}
