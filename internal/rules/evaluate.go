// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package rules judges what a person asks to change about a governed
// object's lifetime (extend, keep, touch, wake, delete now), from the same
// evaluation of the object the controller's decisions give. The kubectl
// plugin and the actions server (links in messages) both call it, so that
// a link cannot do what the plugin would refuse, nor the other way round.
package rules

import (
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/decide"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// Evaluation is what the policies make of one object at one moment,
// worked out with the controller's own packages: internal/match for which
// policy governs it, internal/expiry for its lifetime, its record and
// what happens next.
type Evaluation struct {
	Object *unstructured.Unstructured
	GVK    schema.GroupVersionKind
	Now    time.Time

	// Verdicts say, for every policy, whether it governs the object and
	// why not; the governing one first.
	Verdicts []match.Verdict
	// Governing is the policy that governs the object; nil when none does.
	Governing *match.Candidate

	// Life, Record and Steps are set when a policy with a usable schedule
	// governs the object and its deletion has not begun.
	Life expiry.Lifetime
	// Record is the controller's record for the current expiry: what was
	// sent about it. A new one when the record on the object is about
	// another expiry (the controller has not seen an extension yet).
	Record *expiry.Record
	// RecordUnreadable is set when the record annotation does not parse;
	// the controller then plans as if there were none.
	RecordUnreadable bool
	// Channels name, per recorded message type, the channels that carry
	// it, as the controller names them.
	Channels map[v1alpha1.EventType][]string
	// Steps are what the controller will do, in order, if every message
	// is accepted at once and nobody uses the object: sleeps, wakes,
	// reminders, messages, and the deletion last.
	Steps []Step
	// Plan is what the controller's planner does about the object now.
	Plan expiry.Plan
}

// Step is one thing the controller will do.
type Step struct {
	At time.Time
	// Action is a message type (reminder, extended, postponed) or
	// "delete".
	Action string
	// Stage is the reminder's lead, such as "3d".
	Stage string
	// Announces is the deletion time a message announces.
	Announces time.Time
	Channels  []string
	// WokeBy says, for a wake, what wakes the object.
	WokeBy string
}

// Step.Action of the deletion, a sleep and a wake.
const (
	ActionDelete = "delete"
	ActionSleep  = "sleep"
	ActionWake   = "wake"
)

// maxSteps bounds the simulation; a policy has at most ten reminders.
const maxSteps = 64

// Evaluate works out what policies make of obj, of kind gvk, at now.
// nsLabels returns the labels of obj's namespace, when a namespace
// selector needs them.
func Evaluate(obj *unstructured.Unstructured, gvk schema.GroupVersionKind, namespaced bool, policies []v1alpha1.TimeoutPolicy,
	nsLabels func() (map[string]string, error), now time.Time) (*Evaluation, error) {
	ev := &Evaluation{Object: obj, GVK: gvk, Now: now}
	verdicts, err := match.Explain(policies, gvk, match.Object{Labels: obj.GetLabels(), Namespaced: namespaced, NamespaceLabels: nsLabels})
	if err != nil {
		return nil, err
	}
	ev.Verdicts = verdicts
	if len(verdicts) == 0 || !verdicts[0].Governs {
		return ev, nil
	}
	ev.Governing = verdicts[0].Candidate
	// The controller plans nothing for an object whose deletion has
	// begun: it only follows it until it is gone.
	if ev.Terminating() || ev.Governing.SpecErr != nil {
		return ev, nil
	}
	o := decide.Object{Created: obj.GetCreationTimestamp().Time, Annotations: obj.GetAnnotations()}
	d := decide.Evaluate(ev.Governing, o, now, nil)
	ev.Life = d.Life
	if ev.Life.Keep {
		// A kept object that sleeps is woken: that is all there is to plan.
		ev.Plan = d.Plan(nil, ev.Governing.Spec.Deletion.DryRun, now)
		return ev, nil
	}
	ev.Channels = notify.ChannelNames(ev.Governing.Spec.Notifications)
	ev.RecordUnreadable = d.RecordErr != nil
	ev.Record = d.Record
	ev.Plan = d.Plan(ev.Channels, ev.Governing.Spec.Deletion.DryRun, now)
	ev.Steps = simulate(ev.Governing, o, d, ev.Channels, now)
	return ev, nil
}

// simulate runs the controller's planner forward from now, as if every
// message were accepted by every channel the moment it falls due and
// nobody used the object. A sleep or a wake is followed by deciding again
// (decide.Evaluate) from the sleep annotation the controller writes then.
func simulate(c *match.Candidate, obj decide.Object, d decide.Decision, channels map[v1alpha1.EventType][]string, now time.Time) []Step {
	rec := d.Record.Clone()
	d.Record = rec
	t := now
	var steps []Step
	// redecide is the decision once the controller has written st at t.
	redecide := func(st expiry.SleepState) {
		a := maps.Clone(obj.Annotations)
		if a == nil {
			a = map[string]string{}
		}
		a[expiry.AnnotationSleep] = st.String()
		obj.Annotations = a
		d = decide.Evaluate(c, obj, t, func(*expiry.Record, time.Time) *expiry.Record { return rec })
		rec = d.Record
	}
	for range maxSteps {
		// Deletions are planned as if they were real: what a dry run
		// rehearses is shown by the dry-run flag.
		p := d.Plan(channels, false, t)
		switch p.Action {
		case expiry.Keep:
			return steps
		case expiry.Delete:
			return append(steps, Step{At: t, Action: ActionDelete})
		case expiry.Sleep:
			// What the controller writes once the workloads are down.
			st := d.Life.Sleep
			if st.Phase != expiry.PhaseSleeping {
				st = expiry.SleepState{Since: t.UTC(), Woke: st.Woke, WokeBy: st.WokeBy}
			}
			st.Phase = expiry.PhaseAsleep
			steps = append(steps, Step{At: t, Action: ActionSleep})
			redecide(st)
		case expiry.Wake:
			st := d.Life.Sleep
			if st.Phase != expiry.PhaseWaking {
				st.Woke, st.WokeBy = t.UTC(), p.WokeBy
			}
			st.Phase, st.Replicas, st.Freed, st.FreedCPUMillis, st.FreedMemoryBytes, st.External = expiry.PhaseAwake, nil, 0, 0, 0, false
			steps = append(steps, Step{At: t, Action: ActionWake, WokeBy: st.WokeBy})
			redecide(st)
		case expiry.Wait:
			if !p.At.After(t) {
				// Never expected; a planner that does not move on would
				// spin here.
				return steps
			}
			t = p.At
		case expiry.Notify:
			step := Step{At: t, Action: string(p.Event), Announces: p.At, Channels: p.Channels}
			if p.Event == v1alpha1.EventReminder {
				step.Stage = p.Key
			}
			steps = append(steps, step)
			rec.Delivered(p.Key, p.Event == v1alpha1.EventReminder, p.Channels, t)
			if p.Event == v1alpha1.EventPostponed {
				rec.PostponedTo = p.At
			}
		}
	}
	return steps
}

// Terminating reports whether the object's deletion has begun: it has a
// deletionTimestamp and stays until its finalizers have run.
func (ev *Evaluation) Terminating() bool {
	return ev.Object.GetDeletionTimestamp() != nil
}

// DeleteAt is when the object will be deleted, if every reminder goes
// out on time; zero when it never will.
func (ev *Evaluation) DeleteAt() time.Time {
	for _, s := range ev.Steps {
		if s.Action == ActionDelete {
			return s.At
		}
	}
	return time.Time{}
}

// Postponed reports whether the deletion waits past the expiry for the
// minimum notice. A wake planned before it moves the expiry itself (a
// wake restarts the idle clock): that is no postponement.
func (ev *Evaluation) Postponed() bool {
	d := ev.DeleteAt()
	return !d.IsZero() && d.After(ev.Life.ExpiresAt) &&
		!slices.ContainsFunc(ev.Steps, func(s Step) bool { return s.Action == ActionWake })
}

// SentStages are the reminder stages the record shows delivered for the
// current expiry, longest lead first.
func (ev *Evaluation) SentStages() []string {
	if ev.Record == nil {
		return nil
	}
	var out []string
	for _, lead := range ev.Governing.Schedule.Reminders {
		if _, ok := ev.Record.Sent[expiry.StageKey(lead)]; ok {
			out = append(out, expiry.StageKey(lead))
		}
	}
	// Stages of a reminder list since changed.
	for _, k := range slices.Sorted(maps.Keys(ev.Record.Sent)) {
		if expiry.IsStage(k) && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// Flags are short words for what is special about the object: keep,
// invalid, idle (use moved its expiry), max (maxTTL capped it), postponed,
// dry-run, not-ready, inactive; or terminating alone, since nothing the
// others describe applies to an object whose deletion has begun.
func (ev *Evaluation) Flags() []string {
	var f []string
	if ev.Governing == nil {
		return f
	}
	if ev.Terminating() {
		return append(f, "terminating")
	}
	switch ev.SleepState() {
	case SleepAsleep:
		f = append(f, "asleep")
	case SleepWaking:
		f = append(f, "waking")
	}
	if ev.Governing.SpecErr != nil {
		f = append(f, "inactive")
	}
	if ev.Life.Keep {
		f = append(f, "keep")
	}
	if len(ev.Life.Invalid) > 0 {
		f = append(f, "invalid")
	}
	if ev.Life.Idle() {
		f = append(f, "idle")
	}
	if ev.Life.Source == expiry.SourceMax {
		f = append(f, "max")
	}
	if ev.Postponed() {
		f = append(f, "postponed")
	}
	if ev.Governing.Spec.Deletion.DryRun {
		f = append(f, "dry-run")
	}
	// A policy the controller has not looked at yet counts as ready.
	if meta.IsStatusConditionFalse(ev.Governing.Status.Conditions, v1alpha1.ConditionReady) {
		f = append(f, "not-ready")
	}
	return f
}

// Sleep states of an object, as list, explain, wake and the pages say them.
const (
	// SleepAwake: its workloads run; under a policy that sleeps, it goes to
	// sleep at SleepsAt.
	SleepAwake = "awake"
	// SleepAsleep: its workloads are (being) scaled to zero.
	SleepAsleep = "asleep"
	// SleepWaking: the controller is restoring them, or does so now.
	SleepWaking = "waking"
)

// SleepState is whether the object is awake, asleep or waking, as the
// controller's planner has it now; "" when it is not governed, is being
// deleted, or its policy neither sleeps nor left it asleep.
func (ev *Evaluation) SleepState() string {
	if ev.Governing == nil || ev.Terminating() || ev.Governing.SpecErr != nil {
		return ""
	}
	st := ev.Life.Sleep
	switch {
	case ev.Plan.Action == expiry.Wake || st.Phase == expiry.PhaseWaking:
		return SleepWaking
	case ev.Life.Asleep || st.Sleeping():
		return SleepAsleep
	case ev.Governing.Schedule.Sleeps():
		return SleepAwake
	}
	return ""
}

// SleepsAt is when the planner puts the object to sleep next; zero when
// it does not.
func (ev *Evaluation) SleepsAt() time.Time {
	for _, s := range ev.Steps {
		if s.Action == ActionSleep {
			return s.At
		}
	}
	return time.Time{}
}
