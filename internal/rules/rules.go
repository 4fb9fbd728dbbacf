// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"fmt"
	"maps"
	"time"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// Patch is a change to an object's annotations; a nil value removes one.
type Patch struct {
	Set map[string]*string
	// None says nothing needs writing; Verb says why.
	None bool
	// Verb says what was done, for the plugin's sentence: "kept",
	// "extended from …".
	Verb string
	// At is the expiry a change of expiry writes; zero for other changes.
	At time.Time
}

// Reason is why a rule refuses a change.
type Reason string

// The reasons a change is refused.
const (
	// BeforeCreation: the expiry asked for is before the object was
	// created (Limit), which the controller would ignore.
	BeforeCreation Reason = "BeforeCreation"
	// PastMaximum: the expiry asked for is past the policy's maxTTL
	// (Limit).
	PastMaximum Reason = "PastMaximum"
	// WouldShorten: the expiry asked for is before the current one
	// (Limit), and shortening was not asked for.
	WouldShorten Reason = "WouldShorten"
	// KeepForbidden: the policy says spec.keep: Forbidden.
	KeepForbidden Reason = "KeepForbidden"
	// UseNotCounted: the policy has neither idleTTL nor sleep.afterIdle,
	// so use changes nothing.
	UseNotCounted Reason = "UseNotCounted"
	// NeverSleeps: the policy has no spec.sleep.
	NeverSleeps Reason = "NeverSleeps"
	// AtMaximum: a link's extension finds the expiry at the policy's
	// maxTTL (Limit) already.
	AtMaximum Reason = "AtMaximum"
	// Kept: the object is kept (keep=true): it never expires, so there is
	// nothing a link's extension or deletion could change.
	Kept Reason = "Kept"
	// DryRun: the policy only rehearses deletions, so deleting now would
	// delete nothing.
	DryRun Reason = "DryRun"
	// DeleteForbidden: the policy does not let links delete (its
	// spec.actions.deleteNow is not Allowed).
	DeleteForbidden Reason = "DeleteForbidden"
	// PastLimits: the policy's extension limits (spec.extensions) refuse
	// the extension; Limits says how.
	PastLimits Reason = "PastLimits"
)

// Refusal is a change a rule refuses: an answer for the person who asked,
// not a failure.
type Refusal struct {
	Reason Reason
	// At is the expiry asked for; Limit the time the rule holds to (the
	// creation, the maximum, the current expiry), when the reason has one.
	At, Limit time.Time
	// Limits is, for PastLimits, what the extension limits say.
	Limits *expiry.Invalid
}

func (r *Refusal) Error() string {
	switch r.Reason {
	case PastLimits:
		return "refused by the extension limits: " + r.Limits.Expected
	case BeforeCreation, PastMaximum, WouldShorten, AtMaximum:
		return fmt.Sprintf("refused (%s): %s against %s", r.Reason, formatTime(r.At), formatTime(r.Limit))
	}
	return fmt.Sprintf("refused (%s)", r.Reason)
}

// Extend moves the expiry to target (given the current expiry and now),
// within the policy's maximum and, unless allowShorten, never earlier.
func Extend(ev *Evaluation, target func(current, now time.Time) time.Time, allowShorten bool) (*Patch, error) {
	current := ev.Unkept()
	at := target(current.ExpiresAt, ev.Now)
	if created := ev.Object.GetCreationTimestamp().Time; at.Before(created) {
		return nil, &Refusal{Reason: BeforeCreation, At: at, Limit: created}
	}
	if !current.Max.IsZero() && at.After(current.Max) {
		return nil, &Refusal{Reason: PastMaximum, At: at, Limit: current.Max}
	}
	if at.Before(current.ExpiresAt) && !allowShorten {
		return nil, &Refusal{Reason: WouldShorten, At: at, Limit: current.ExpiresAt}
	}
	if at.Equal(current.ExpiresAt) && current.Source == expiry.AnnotationExpiresAt {
		return &Patch{None: true, At: at, Verb: "already expires at " + formatTime(at)}, nil
	}
	verb := "extended"
	if at.Before(current.ExpiresAt) {
		verb = "shortened"
	}
	return &Patch{
		Set:  map[string]*string{expiry.AnnotationExpiresAt: ptr(at.UTC().Format(time.RFC3339))},
		At:   at,
		Verb: fmt.Sprintf("%s from %s", verb, formatTime(current.ExpiresAt)),
	}, nil
}

// Unkept is the object's lifetime as its annotations other than keep give
// it: what an expiry written now changes, and what applies once keep goes.
func (ev *Evaluation) Unkept() expiry.Lifetime {
	if !ev.Life.Keep {
		return ev.Life
	}
	a := maps.Clone(ev.Object.GetAnnotations())
	delete(a, expiry.AnnotationKeep)
	return ev.Governing.Schedule.Lifetime(ev.Object.GetCreationTimestamp().Time, a, ev.Now)
}

// ExtendBy is a link's "keep it longer": the expiry moves step past the
// current one (or past now, when that has passed), capped at the policy's
// maxTTL and at the extension limits' step, and is never shortened. An
// object kept, or at its maximum already, is refused.
func ExtendBy(ev *Evaluation, step time.Duration) (*Patch, error) {
	if ev.Life.Keep {
		return nil, &Refusal{Reason: Kept}
	}
	current := ev.Life
	at := ceilSecond(later(current.ExpiresAt, ev.Now).Add(step))
	if l := ev.Governing.Schedule.Limits; l != nil && l.MaxStep > 0 {
		granted := current.ExpiresAt
		if e := current.Extensions; e != nil && !e.Granted.IsZero() {
			granted = e.Granted
		}
		if bound := granted.Add(l.MaxStep); at.After(bound) {
			at = bound
		}
	}
	if !current.Max.IsZero() && at.After(current.Max) {
		at = current.Max
	}
	if !at.After(current.ExpiresAt) {
		if !current.Max.IsZero() && !current.ExpiresAt.Before(current.Max) {
			return nil, &Refusal{Reason: AtMaximum, At: at, Limit: current.Max}
		}
		return &Patch{None: true, At: current.ExpiresAt, Verb: "already expires at " + formatTime(current.ExpiresAt)}, nil
	}
	return Extend(ev, func(time.Time, time.Time) time.Time { return at }, false)
}

// DeleteNow is a link's "I am done: delete it now": the expiry becomes
// now, a shortening the controller carries out as at any expiry (archive,
// audit, the deleted message), after the minimum notice when a reminder
// promised one. allowed is the policy's spec.actions.deleteNow.
func DeleteNow(ev *Evaluation, allowed bool) (*Patch, error) {
	switch {
	case !allowed:
		return nil, &Refusal{Reason: DeleteForbidden}
	case ev.Life.Keep:
		return nil, &Refusal{Reason: Kept}
	case ev.Governing.Spec.Deletion.DryRun:
		return nil, &Refusal{Reason: DryRun}
	}
	now := ceilSecond(ev.Now)
	if !ev.Life.ExpiresAt.After(now) {
		return &Patch{None: true, At: ev.Life.ExpiresAt, Verb: "has expired already"}, nil
	}
	return Extend(ev, func(time.Time, time.Time) time.Time { return now }, true)
}

// Keep sets the keep annotation, or with keep false removes it.
func Keep(ev *Evaluation, keep bool) (*Patch, error) {
	_, present := ev.Object.GetAnnotations()[expiry.AnnotationKeep]
	switch {
	case keep && ev.Governing.Schedule.KeepForbidden:
		return nil, &Refusal{Reason: KeepForbidden}
	case keep && ev.Life.Keep && ev.Object.GetAnnotations()[expiry.AnnotationKeep] == "true":
		return &Patch{None: true, Verb: "is already kept"}, nil
	case keep:
		return &Patch{Set: map[string]*string{expiry.AnnotationKeep: ptr("true")}, Verb: "kept"}, nil
	case !present:
		return &Patch{None: true, Verb: "is not kept"}, nil
	default:
		return &Patch{Set: map[string]*string{expiry.AnnotationKeep: nil}, Verb: "no longer kept"}, nil
	}
}

// Touch records use now, under the controller's throttling rule.
func Touch(ev *Evaluation) (*Patch, error) {
	s := ev.Governing.Schedule
	// Use wakes an object asleep, whatever the policy's clocks.
	asleep := ev.SleepState() == SleepAsleep
	if s.IdleTTL <= 0 && s.SleepAfterIdle <= 0 && !asleep {
		return nil, &Refusal{Reason: UseNotCounted}
	}
	if since := ev.Now.Sub(ev.Life.LastActive); !asleep && since < s.ActivityWindow() {
		return &Patch{None: true, Verb: fmt.Sprintf("was last active at %s, less than %s ago (idleTTL/20, or sleep.afterIdle/20 when shorter): nothing written",
			formatTime(ev.Life.LastActive), expiry.FormatDuration(s.ActivityWindow()))}, nil
	}
	return Use(ev, "touched"), nil
}

// Wake records use now, as touch does, on an object asleep: use after the
// sleep began is what wakes it.
func Wake(ev *Evaluation) (*Patch, error) {
	switch ev.SleepState() {
	case SleepAsleep:
		return Use(ev, "woken"), nil
	case SleepWaking:
		return &Patch{None: true, Verb: "is already waking (woken by " + ev.WokenBy() + "): nothing written"}, nil
	}
	if !ev.Governing.Schedule.Sleeps() {
		return nil, &Refusal{Reason: NeverSleeps}
	}
	return &Patch{None: true, Verb: "is not asleep: nothing to wake"}, nil
}

// WokenBy is what wakes (or woke) an object waking.
func (ev *Evaluation) WokenBy() string {
	if ev.Plan.Action == expiry.Wake {
		return ev.Plan.WokeBy
	}
	return ev.Life.Sleep.WokeBy
}

// Use records use now in the last-active annotation, as Amphitheatre's API
// server does: touch and wake write it.
func Use(ev *Evaluation, verb string) *Patch {
	// Truncated: the annotation holds whole seconds, and a time ahead of
	// the clock is no use (the controller counts it from when it saw it).
	// Use in the second an object went to sleep wakes it all the same.
	now := ev.Now.Truncate(time.Second)
	return &Patch{
		Set:  map[string]*string{expiry.AnnotationLastActive: ptr(now.UTC().Format(time.RFC3339))},
		Verb: verb + ": last active " + formatTime(now),
	}
}

// After is the object's lifetime once p and the other annotations in
// extra are written, judged at the evaluation's moment by the controller's
// rules (the extension limits among them).
func (ev *Evaluation) After(p *Patch, extra map[string]string) expiry.Lifetime {
	a := maps.Clone(ev.Object.GetAnnotations())
	if a == nil {
		a = map[string]string{}
	}
	for k, v := range p.Set {
		if v == nil {
			delete(a, k)
		} else {
			a[k] = *v
		}
	}
	maps.Copy(a, extra)
	return ev.Governing.Schedule.Lifetime(ev.Object.GetCreationTimestamp().Time, a, ev.Now)
}

// Limited returns what the extension limits refuse in a lifetime, nil
// when they refuse nothing.
func Limited(l expiry.Lifetime) *expiry.Invalid {
	for i := range l.Invalid {
		if l.Invalid[i].Limited {
			return &l.Invalid[i]
		}
	}
	return nil
}

// CheckLimits refuses a change the extension limits would refuse once
// written with the annotations in extra (the writer's changed-by stamp):
// the controller would keep the old expiry, and the admission policy
// refuse the write.
func CheckLimits(ev *Evaluation, p *Patch, extra map[string]string) error {
	if inv := Limited(ev.After(p, extra)); inv != nil {
		return &Refusal{Reason: PastLimits, Limits: inv}
	}
	return nil
}

func formatTime(t time.Time) string {
	return t.UTC().Format(time.RFC3339)
}

// ceilSecond rounds t up to a whole second: the annotation holds whole
// seconds, and an extension must not come out a fraction shorter.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func ptr(s string) *string { return &s }
