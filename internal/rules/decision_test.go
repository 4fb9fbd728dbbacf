// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"errors"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// TestThePlanIsRehearsedOnlyUnderADryRunPolicy: what the plugin says the
// controller does now is the controller's own plan, with the policy's
// dry run: a report of the deletion under a dry run, the deletion itself
// otherwise.
func TestThePlanIsRehearsedOnlyUnderADryRunPolicy(t *testing.T) {
	for _, tt := range []struct {
		name   string
		dryRun bool
		want   expiry.Action
		event  v1alpha1.EventType
	}{
		{"reports the deletion a dry-run policy would make", true, expiry.Notify, v1alpha1.EventWouldDelete},
		{"deletes under a live policy", false, expiry.Delete, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := playbookPolicy("playbooks", func(s *v1alpha1.TimeoutPolicySpec) { s.Reminders, s.Deletion.DryRun = nil, tt.dryRun })
			ev := evaluateAt(t, playbook(nil), []v1alpha1.TimeoutPolicy{p}, t0.Add(15*expiry.Day))
			if ev.Plan.Action != tt.want || ev.Plan.Event != tt.event {
				t.Errorf("plan %s %q, want %s %q", ev.Plan.Action, ev.Plan.Event, tt.want, tt.event)
			}
		})
	}
}

// TestANamespaceSelectorAppliesToNamespacedObjectsOnly: a policy that
// selects namespaces governs a cluster-scoped object without reading any
// namespace, and a namespaced one only in a namespace it selects.
func TestANamespaceSelectorAppliesToNamespacedObjectsOnly(t *testing.T) {
	p := playbookPolicy("playbooks", func(s *v1alpha1.TimeoutPolicySpec) {
		s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}
	})
	prod := func() (map[string]string, error) { return map[string]string{"env": "prod"}, nil }
	for _, tt := range []struct {
		name       string
		namespaced bool
		nsLabels   func() (map[string]string, error)
		governs    bool
	}{
		{"governs a cluster-scoped object", false, func() (map[string]string, error) { return nil, errors.New("no namespace to read") }, true},
		{"does not govern an object in a namespace it does not select", true, prod, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := Evaluate(playbook(nil), playbookGVK, tt.namespaced, []v1alpha1.TimeoutPolicy{p}, tt.nsLabels, t0)
			if err != nil {
				t.Fatal(err)
			}
			if got := ev.Governing != nil; got != tt.governs {
				t.Errorf("governed %t, want %t", got, tt.governs)
			}
		})
	}
}

// TestOnlyAReminderGivesNoticeInThePlan: the slept message tells people
// of a sleep, not of the deletion; the minimum notice runs from the
// reminder, which here goes out an hour before the expiry.
func TestOnlyAReminderGivesNoticeInThePlan(t *testing.T) {
	p := playbookPolicy("playbooks", func(s *v1alpha1.TimeoutPolicySpec) {
		s.DefaultTTL, s.Reminders, s.MinimumNotice = "1d", []v1alpha1.Duration{"1h"}, "2h"
		s.Sleep = &v1alpha1.Sleep{After: "2h", DeleteAfter: "3h"}
	})
	ev := evaluateAt(t, playbook(nil), []v1alpha1.TimeoutPolicy{p}, t0)
	want := []step{
		{2 * time.Hour, ActionSleep, ""},
		{2 * time.Hour, string(v1alpha1.EventSlept), ""},
		{23 * time.Hour, "reminder", "1h"},
		{24 * time.Hour, "postponed", ""},
		{25 * time.Hour, ActionDelete, ""},
	}
	if got := steps(ev); !reflect.DeepEqual(got, want) {
		t.Errorf("steps %v, want %v", got, want)
	}
}

// TestThePlanOfAnObjectThePluginAndTheLinksShow: the steps the plugin lists are
// the controller's, from what it reads on the object.
func TestThePlanOfAnObjectThePluginAndTheLinksShow(t *testing.T) {
	day := expiry.Day
	t.Run("holds a deletion a dry run rehearsed for the minimum notice from when the policy went live", func(t *testing.T) {
		expires := t0.Add(14 * day)
		rec := &expiry.Record{ExpiresAt: expires, Since: t0, Rehearsed: expires,
			Sent: map[string]expiry.Delivery{expiry.KeyWouldDelete: {At: expires, Channels: []string{"event"}}}}
		p := playbookPolicy("playbooks", func(s *v1alpha1.TimeoutPolicySpec) { s.Reminders = nil })
		now := t0.Add(15 * day)
		ev := evaluateAt(t, playbook(map[string]string{expiry.AnnotationReminders: rec.String()}), []v1alpha1.TimeoutPolicy{p}, now)
		want := []step{{15 * day, "postponed", ""}, {16 * day, ActionDelete, ""}}
		if got := steps(ev); !reflect.DeepEqual(got, want) {
			t.Errorf("steps %v, want %v", got, want)
		}
	})
	t.Run("wakes a kept object that sleeps, and plans nothing more", func(t *testing.T) {
		p := playbookPolicy("playbooks", sleepy)
		a := asleep(t0.Add(3 * time.Hour))
		a[expiry.AnnotationKeep] = "true"
		ev := evaluateAt(t, playbook(a), []v1alpha1.TimeoutPolicy{p}, t0.Add(6*time.Hour))
		if ev.Plan.Action != expiry.Wake || len(ev.Steps) != 0 {
			t.Errorf("plan %s, steps %v; want a wake and nothing listed", ev.Plan.Action, steps(ev))
		}
	})
	t.Run("returns the error of a namespace it cannot read", func(t *testing.T) {
		p := playbookPolicy("playbooks", func(s *v1alpha1.TimeoutPolicySpec) {
			s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}
		})
		boom := errors.New("forbidden")
		ev, err := Evaluate(playbook(nil), playbookGVK, true, []v1alpha1.TimeoutPolicy{p}, func() (map[string]string, error) { return nil, boom }, t0)
		if !errors.Is(err, boom) {
			t.Errorf("Evaluate = %+v, %v; want the namespace's error", ev, err)
		}
	})
	t.Run("flags nothing on an object no policy governs", func(t *testing.T) {
		p := playbookPolicy("playbooks", func(s *v1alpha1.TimeoutPolicySpec) {
			s.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}
		})
		ev := evaluateAt(t, playbook(nil), []v1alpha1.TimeoutPolicy{p}, t0)
		if f := ev.Flags(); ev.Governing != nil || len(f) != 0 {
			t.Errorf("governed by %v, flags %v; want none", ev.Governing, f)
		}
	})
}

// The helpers below are the plugin's tests', for the tests that moved here
// with the evaluation.

func playbookPolicy(name string, opts ...func(*v1alpha1.TimeoutPolicySpec)) v1alpha1.TimeoutPolicy {
	p := v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.TimeoutPolicySpec{
		Target:        v1alpha1.Target{APIVersion: "amphitheatre.app/v1", Kind: "Playbook"},
		DefaultTTL:    "14d",
		Reminders:     []v1alpha1.Duration{"3d", "2d"},
		MinimumNotice: "24h",
	}}
	for _, o := range opts {
		o(&p.Spec)
	}
	return p
}

func evaluateAt(t *testing.T, obj *unstructured.Unstructured, policies []v1alpha1.TimeoutPolicy, now time.Time) *Evaluation {
	t.Helper()
	ev, err := Evaluate(obj, playbookGVK, false, policies, func() (map[string]string, error) { return nil, errors.New("not namespaced") }, now)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

type step struct {
	at     time.Duration // after t0
	action string
	stage  string
}

func steps(ev *Evaluation) []step {
	var out []step
	for _, s := range ev.Steps {
		out = append(out, step{s.At.Sub(t0), s.Action, s.Stage})
	}
	return out
}

func sleepy(s *v1alpha1.TimeoutPolicySpec) {
	s.DefaultTTL = "1d"
	s.Sleep = &v1alpha1.Sleep{AfterIdle: "3h", DeleteAfter: "14d"}
}

// asleep is the sleep annotation the controller writes once it has put an
// object to sleep at since, scaling down 5 replicas.
func asleep(since time.Time) map[string]string {
	st := expiry.SleepState{Phase: expiry.PhaseAsleep, Since: since, Generation: 1, Freed: 5, FreedCPUMillis: 1500, FreedMemoryBytes: 2 << 30}
	return map[string]string{expiry.AnnotationSleep: st.String()}
}
