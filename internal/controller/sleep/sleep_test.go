// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package sleep

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

func TestReplicasInSpecAreTheAppsKindsWithSpecReplicas(t *testing.T) {
	for _, tt := range []struct {
		gvk  schema.GroupVersionKind
		want bool
	}{
		{appsv1.SchemeGroupVersion.WithKind("Deployment"), true},
		{appsv1.SchemeGroupVersion.WithKind("StatefulSet"), true},
		{appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), true},
		{appsv1.SchemeGroupVersion.WithKind("DaemonSet"), false},
		{schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Deployment"}, false},
		{schema.GroupVersionKind{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook"}, false},
	} {
		t.Run(tt.gvk.String(), func(t *testing.T) {
			if got := replicasInSpec(tt.gvk); got != tt.want {
				t.Errorf("replicasInSpec(%s) = %t, want %t", tt.gvk, got, tt.want)
			}
		})
	}
}

func TestAWakeIsCountedByWhatWokeIt(t *testing.T) {
	for _, tt := range []struct {
		name     string
		wokeBy   string
		external bool
		want     string
	}{
		{"someone else scaling a workload up is external", expiry.WokeByKeep, true, "external"},
		{"keep is keep", expiry.WokeByKeep, false, "keep"},
		{"a policy that no longer sleeps is policy", expiry.WokeByPolicy, false, "policy"},
		{"anything else is use", "kubectl", false, "use"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := wakeLabel(tt.wokeBy, tt.external); got != tt.want {
				t.Errorf("wakeLabel(%q, %t) = %q, want %q", tt.wokeBy, tt.external, got, tt.want)
			}
		})
	}
}

func TestTheSameCycleIsTheSamePhaseBegunAtTheSameTime(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	with := func(st expiry.SleepState) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{expiry.AnnotationSleep: st.String()}}}
	}
	sleeping := expiry.SleepState{Phase: expiry.PhaseSleeping, Since: t0}
	waking := expiry.SleepState{Phase: expiry.PhaseWaking, Since: t0, Woke: t0.Add(time.Hour)}
	for _, tt := range []struct {
		name string
		obj  *metav1.PartialObjectMetadata
		st   expiry.SleepState
		want bool
	}{
		{"a sleep begun at the same time", with(sleeping), sleeping, true},
		{"a sleep begun at another time", with(expiry.SleepState{Phase: expiry.PhaseSleeping, Since: t0.Add(time.Second)}), sleeping, false},
		{"another phase", with(expiry.SleepState{Phase: expiry.PhaseAsleep, Since: t0}), sleeping, false},
		{"a wake that woke at the same time", with(waking), waking, true},
		{"a wake of the same sleep that woke at another time", with(expiry.SleepState{Phase: expiry.PhaseWaking, Since: t0, Woke: t0.Add(2 * time.Hour)}), waking, false},
		{"no sleep annotation", &metav1.PartialObjectMetadata{}, sleeping, false},
		{"an annotation that does not parse", &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{expiry.AnnotationSleep: "{"}}}, sleeping, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := sameCycle(tt.obj, tt.st); got != tt.want {
				t.Errorf("sameCycle = %t, want %t", got, tt.want)
			}
		})
	}
}
