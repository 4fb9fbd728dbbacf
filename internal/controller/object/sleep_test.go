// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// sleepyPolicy puts ConfigMaps to sleep an hour after their last use and
// deletes them a day later; no reminders.
func sleepyPolicy() *v1alpha1.TimeoutPolicy {
	return fixture.Policy("sleepy", fixture.Reminders(), func(p *v1alpha1.TimeoutPolicy) {
		p.Spec.MinimumNotice = "0s"
		p.Spec.Sleep = &v1alpha1.Sleep{AfterIdle: "1h", DeleteAfter: "1d"}
	})
}

// sleepyObjects are a ConfigMap that owns the namespace amp-a, where a
// Deployment "web" runs 2 replicas: an environment as Amphitheatre makes
// one, with a ConfigMap for its Playbook.
func sleepyObjects() (*corev1.ConfigMap, []client.Object) {
	cm := fixture.NewConfigMap("env", firstGeneration)
	ns := fixture.NewNamespace("amp-a", nil)
	ns.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}}
	labels := map[string]string{"app": "web"}
	web := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "amp-a", Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web"}}}},
		},
	}
	return cm, []client.Object{sleepyPolicy(), cm, ns, web}
}

// sleepStored returns the sleep state the stored object shows.
func (h *harness) sleepStored(cm *corev1.ConfigMap) expiry.SleepState {
	h.t.Helper()
	st, err := expiry.ParseSleep(h.stored(cm).Annotations[expiry.AnnotationSleep])
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// showInCache makes the cache show the object's sleep state as st, with
// the resourceVersion it had then: a cache that saw the first write of a
// sleep or wake and not yet the last.
func (h *harness) showInCache(cm *corev1.ConfigMap, st expiry.SleepState, resourceVersion string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cacheView = func(m *metav1.PartialObjectMetadata) error {
		if m.UID == cm.UID {
			m.Annotations[expiry.AnnotationSleep] = st.String()
			m.ResourceVersion = resourceVersion
		}
		return nil
	}
}

func (h *harness) replicasOfWeb() (int32, string) {
	h.t.Helper()
	var d appsv1.Deployment
	if err := h.client.Get(context.Background(), client.ObjectKey{Namespace: "amp-a", Name: "web"}, &d); err != nil {
		h.t.Fatal(err)
	}
	return *d.Spec.Replicas, d.Annotations[expiry.AnnotationReplicas]
}

func countOf(evs []string, kind string) int {
	return len(slices.DeleteFunc(fixture.Kinds(evs), func(k string) bool { return k != kind }))
}

// A look after a sleep or a wake often reads the object from a cache that
// has seen only the first of its writes (Sleeping, Waking): it must not
// perform the transition again, nor announce it a second time.
func TestASleepAndAWakeAreAnnouncedOnceWhenTheCacheLags(t *testing.T) {
	cm, objs := sleepyObjects()
	h := newHarness(t, fixture.T0.Add(time.Hour+time.Second), objs...)

	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	asleep := h.sleepStored(cm)
	if asleep.Phase != expiry.PhaseAsleep {
		t.Fatalf("phase %s, want Asleep", asleep.Phase)
	}
	if n, saved := h.replicasOfWeb(); n != 0 || saved != "2" {
		t.Fatalf("web at %d replicas (saved %q), want 0 (saved 2)", n, saved)
	}
	evs := fixture.Drain(h.rec)
	if got := countOf(evs, "Normal Slept"); got != 1 {
		t.Fatalf("%d Slept Events, want 1", got)
	}
	// At the first whole second after a day asleep, as the next look
	// decides it.
	if want := "deleted at 2026-03-02T10:00:02Z unless used"; !strings.Contains(evs[0], want) {
		t.Errorf("Slept Event %q, want %q", evs[0], want)
	}

	// The cache has seen the sleep begin, not end.
	sleeping := asleep
	sleeping.Phase, sleeping.Generation, sleeping.Freed = expiry.PhaseSleeping, 1, 0
	sleeping.FreedCPUMillis, sleeping.FreedMemoryBytes = 0, 0
	h.showInCache(cm, sleeping, "1")
	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	if evs := fixture.Drain(h.rec); countOf(evs, "Normal Slept") != 0 {
		t.Fatalf("Events %v after the sleep, as a lagging cache shows it; want no second Slept", evs)
	}
	if st := h.sleepStored(cm); st.Phase != expiry.PhaseAsleep || !st.Since.Equal(asleep.Since) {
		t.Fatalf("state %+v, want asleep since %s", st, asleep.Since)
	}

	// A use wakes it.
	h.mu.Lock()
	h.cacheView = nil
	h.mu.Unlock()
	h.clock.Step(time.Minute)
	h.annotate(cm, expiry.AnnotationLastActive, h.clock.Now().UTC().Format(time.RFC3339))
	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	awake := h.sleepStored(cm)
	if awake.Phase != expiry.PhaseAwake {
		t.Fatalf("phase %s, want Awake", awake.Phase)
	}
	if n, saved := h.replicasOfWeb(); n != 2 || saved != "" {
		t.Fatalf("web at %d replicas (saved %q), want 2 (none saved)", n, saved)
	}
	if got := countOf(fixture.Drain(h.rec), "Normal Woke"); got != 1 {
		t.Fatalf("%d Woke Events, want 1", got)
	}

	// The cache has seen the wake begin, not end.
	waking := asleep
	waking.Phase, waking.Woke, waking.WokeBy = expiry.PhaseWaking, awake.Woke, awake.WokeBy
	h.showInCache(cm, waking, "1")
	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	if evs := fixture.Drain(h.rec); countOf(evs, "Normal Woke") != 0 {
		t.Fatalf("Events %v after the wake, as a lagging cache shows it; want no second Woke", evs)
	}
	if st := h.sleepStored(cm); st.Phase != expiry.PhaseAwake || !st.Woke.Equal(awake.Woke) {
		t.Fatalf("state %+v, want awake since %s", st, awake.Woke)
	}
}

func (h *harness) web() *appsv1.Deployment {
	h.t.Helper()
	var d appsv1.Deployment
	if err := h.client.Get(context.Background(), client.ObjectKey{Namespace: "amp-a", Name: "web"}, &d); err != nil {
		h.t.Fatal(err)
	}
	return &d
}

// The label is what has a workload watched: the sleep sets it in the
// write that scales the workload down, the wake removes it in the write
// that scales it back, and a workload gets no other write.
func TestASleepMarksWhatItScaledDownInTheSameWrite(t *testing.T) {
	cm, objs := sleepyObjects()
	h := newHarness(t, fixture.T0.Add(time.Hour+time.Second), objs...)
	before := h.web().ResourceVersion

	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	web := h.web()
	if got := web.Labels[expiry.LabelAsleep]; got != string(cm.UID) {
		t.Errorf("web labelled %s=%q, want the sleeping object's UID %q", expiry.LabelAsleep, got, cm.UID)
	}
	if writes := resourceVersionsBetween(t, before, web.ResourceVersion); writes != 1 || *web.Spec.Replicas != 0 {
		t.Errorf("web at %d replicas after %d writes, want 0 after 1", *web.Spec.Replicas, writes)
	}

	before = web.ResourceVersion
	h.clock.Step(time.Minute)
	h.annotate(cm, expiry.AnnotationLastActive, h.clock.Now().UTC().Format(time.RFC3339))
	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	web = h.web()
	if v, ok := web.Labels[expiry.LabelAsleep]; ok {
		t.Errorf("web still labelled %s=%q after the wake", expiry.LabelAsleep, v)
	}
	if writes := resourceVersionsBetween(t, before, web.ResourceVersion); writes != 1 || *web.Spec.Replicas != 2 {
		t.Errorf("web at %d replicas after %d writes, want 2 after 1", *web.Spec.Replicas, writes)
	}
}

// A workload that an earlier version put to sleep carries the replicas
// annotation and no label: the first look at its sleeping owner labels
// it, so that it is watched from then on.
func TestALookLabelsWhatAnEarlierVersionScaledDown(t *testing.T) {
	cm, objs := sleepyObjects()
	since := fixture.T0.Add(time.Hour + time.Second)
	fixture.Annotated(expiry.AnnotationSleep, expiry.SleepState{Phase: expiry.PhaseAsleep, Since: since, Generation: 1, Freed: 2}.String())(cm)
	web := objs[3].(*appsv1.Deployment)
	web.Spec.Replicas = ptr.To[int32](0)
	web.Annotations = map[string]string{expiry.AnnotationReplicas: "2"}
	h := newHarness(t, since.Add(time.Hour), objs...)

	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	got := h.web()
	if got.Labels[expiry.LabelAsleep] != string(cm.UID) || *got.Spec.Replicas != 0 || got.Annotations[expiry.AnnotationReplicas] != "2" {
		t.Errorf("web labels %v, annotations %v, at %d replicas; want it labelled with %q, and as it was", got.Labels, got.Annotations, *got.Spec.Replicas, cm.UID)
	}
	if evs := fixture.Drain(h.rec); countOf(evs, "Normal Woke") != 0 || countOf(evs, "Normal WokeExternally") != 0 {
		t.Errorf("Events %v: labelling is no wake", evs)
	}
}

// resourceVersionsBetween is how many writes the fake API server made
// between two resourceVersions of an object.
func resourceVersionsBetween(t *testing.T, before, after string) int {
	t.Helper()
	b, err1 := strconv.Atoi(before)
	a, err2 := strconv.Atoi(after)
	if err1 != nil || err2 != nil {
		t.Fatalf("resourceVersions %q, %q are no numbers", before, after)
	}
	return a - b
}
