// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// TestTheSleepStateAPageShows: whether an object is awake, asleep or
// waking, and when it sleeps, as the planner has it; the pages links open
// offer "Wake it" from it.
func TestTheSleepStateAPageShows(t *testing.T) {
	phase := func(p string) map[string]string {
		st := expiry.SleepState{Phase: p, Since: t0.Add(3 * time.Hour), Generation: 1}
		return map[string]string{expiry.AnnotationSleep: st.String()}
	}
	kept := asleep(t0.Add(3 * time.Hour))
	kept[expiry.AnnotationKeep] = "true"
	for _, tt := range []struct {
		name        string
		policy      func(*v1alpha1.TimeoutPolicySpec)
		annotations map[string]string
		terminating bool
		now         time.Time
		want        string
		sleepsAt    time.Time
		// anySleep: the planner's next sleep is not what the case is about.
		anySleep bool
	}{
		{name: "is none under a policy that never sleeps", policy: func(*v1alpha1.TimeoutPolicySpec) {}, now: t0, want: ""},
		{name: "is awake under a policy that sleeps, with the sleep ahead", policy: sleepy, now: t0, want: SleepAwake, sleepsAt: t0.Add(3 * time.Hour)},
		{name: "is asleep once the controller put it to sleep", policy: sleepy, annotations: asleep(t0.Add(3 * time.Hour)), now: t0.Add(4 * time.Hour), want: SleepAsleep},
		{name: "is asleep while the sleep is under way", policy: sleepy, annotations: phase(expiry.PhaseSleeping), now: t0.Add(4 * time.Hour), want: SleepAsleep, anySleep: true},
		{name: "is waking while the wake is under way", policy: sleepy, annotations: phase(expiry.PhaseWaking), now: t0.Add(4 * time.Hour), want: SleepWaking, anySleep: true},
		{name: "is waking when the planner wakes it (kept while asleep)", policy: sleepy, annotations: kept, now: t0.Add(4 * time.Hour), want: SleepWaking},
		{name: "is waking under a policy that no longer sleeps: the controller wakes it", policy: func(s *v1alpha1.TimeoutPolicySpec) { s.DefaultTTL = "1d" }, annotations: asleep(t0.Add(3 * time.Hour)), now: t0.Add(4 * time.Hour), want: SleepWaking},
		{name: "is none while it is being deleted", policy: sleepy, annotations: asleep(t0.Add(3 * time.Hour)), terminating: true, now: t0.Add(4 * time.Hour), want: ""},
		{name: "is none under a policy whose spec cannot be used", policy: func(s *v1alpha1.TimeoutPolicySpec) { sleepy(s); s.DefaultTTL = "soon" }, annotations: asleep(t0.Add(3 * time.Hour)), now: t0.Add(4 * time.Hour), want: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := playbook(tt.annotations)
			if tt.terminating {
				obj.SetDeletionTimestamp(&metav1.Time{Time: tt.now})
			}
			ev := evaluateAt(t, obj, []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks", tt.policy)}, tt.now)
			if ev.Governing == nil {
				t.Fatal("not governed")
			}
			if got := ev.SleepState(); got != tt.want {
				t.Errorf("SleepState %q, want %q (plan %s, phase %q, asleep %t)", got, tt.want, ev.Plan.Action, ev.Life.Sleep.Phase, ev.Life.Asleep)
			}
			if got := ev.SleepsAt(); !tt.anySleep && !got.Equal(tt.sleepsAt) {
				t.Errorf("SleepsAt %s, want %s", got, tt.sleepsAt)
			}
		})
	}
	t.Run("is none for an object no policy governs", func(t *testing.T) {
		p := playbookPolicy("playbooks", sleepy)
		p.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}
		if got := evaluateAt(t, playbook(nil), []v1alpha1.TimeoutPolicy{p}, t0).SleepState(); got != "" {
			t.Errorf("SleepState %q, want none", got)
		}
	})
}
