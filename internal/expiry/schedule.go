// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// Schedule is a TimeoutPolicy's durations, parsed and checked.
type Schedule struct {
	DefaultTTL time.Duration
	// Reminders are the distinct lead times, longest first.
	Reminders     []time.Duration
	MinimumNotice time.Duration
	// IdleTTL is how long an object lives after its last activity; zero
	// when lifetimes do not follow use.
	IdleTTL time.Duration
	// MaxTTL is the ceiling on lifetimes, counted from creation; zero
	// when there is none.
	MaxTTL time.Duration
	// KeepForbidden says the keep annotation is ignored.
	KeepForbidden bool
	// Limits are the extension limits; nil when the policy sets none.
	Limits *Limits
	// SleepAfterIdle or SleepAfter (one of them) say when an object is put
	// to sleep, and SleepDeleteAfter how long it sleeps before deletion;
	// all zero when the policy does not put objects to sleep.
	SleepAfterIdle, SleepAfter, SleepDeleteAfter time.Duration
	// SleepReminder is the lead of the sleeping message; 0 sends none.
	SleepReminder time.Duration
	// SleepPatch is the merge patch that puts the object itself to sleep,
	// for a kind that suspends through a field; nil scales instead.
	SleepPatch []byte
	// ExtendBy is spec.actions.extendBy, zero when absent: see LinkStep.
	ExtendBy time.Duration
	// DeleteNow says the links in messages may delete the object at once
	// (spec.actions.deleteNow: Allowed).
	DeleteNow bool
}

// DefaultLinkStep is how far a link extends under a policy that names no
// step and limits none.
const DefaultLinkStep = Day

// LinkStep is how far "Keep it longer" in a message moves the expiry past
// the current one: spec.actions.extendBy, else spec.extensions.maxStep,
// else DefaultLinkStep; never more than maxStep.
func (s Schedule) LinkStep() time.Duration {
	var maxStep time.Duration
	if s.Limits != nil {
		maxStep = s.Limits.MaxStep
	}
	step := cmp.Or(s.ExtendBy, maxStep, DefaultLinkStep)
	if maxStep > 0 {
		step = min(step, maxStep)
	}
	return step
}

// ActivityWindow is how stale a recorded activity may be before new
// activity is worth a write: idleTTL/20, so that an object used every
// second costs one write an hour under a one-day idleTTL, and the idle
// expiry it gives is never more than 5% of idleTTL short of the true one.
// Zero when lifetimes do not follow use. A sleep after idle follows use
// too: the shorter of its clock and idleTTL sets the window.
func (s Schedule) ActivityWindow() time.Duration {
	idle := s.IdleTTL
	if s.Sleeps() && s.SleepAfterIdle > 0 && (idle == 0 || s.SleepAfterIdle < idle) {
		idle = s.SleepAfterIdle
	}
	return idle / 20
}

// LongestReminder is the earliest a reminder can be due before expiry, or 0.
func (s Schedule) LongestReminder() time.Duration {
	if len(s.Reminders) == 0 {
		return 0
	}
	return s.Reminders[0]
}

// NewSchedule parses the durations of a policy spec. The error names every
// field that is wrong.
func NewSchedule(spec v1alpha1.TimeoutPolicySpec) (Schedule, error) {
	var s Schedule
	var errs []error

	ttl := spec.DefaultTTL
	if ttl == "" {
		ttl = "14d"
	}
	d, err := ParseDuration(string(ttl))
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("spec.defaultTTL: %w", err))
	case d <= 0:
		errs = append(errs, fmt.Errorf("spec.defaultTTL: %q must be greater than zero", ttl))
	default:
		s.DefaultTTL = d
	}

	for i, r := range spec.Reminders {
		d, err := ParseDuration(string(r))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("spec.reminders[%d]: %w", i, err))
		case d <= 0:
			errs = append(errs, fmt.Errorf("spec.reminders[%d]: %q must be greater than zero", i, r))
		case slices.Contains(s.Reminders, d):
		case slices.ContainsFunc(s.Reminders, func(o time.Duration) bool { return StageKey(o) == StageKey(d) }):
			// Records know stages by their lead to the second.
			errs = append(errs, fmt.Errorf("spec.reminders[%d]: %q is within a second of another reminder", i, r))
		default:
			s.Reminders = append(s.Reminders, d)
		}
	}
	slices.SortFunc(s.Reminders, func(a, b time.Duration) int { return cmp.Compare(b, a) })

	notice := spec.MinimumNotice
	if notice == "" {
		notice = "24h"
	}
	if d, err := ParseDuration(string(notice)); err != nil {
		errs = append(errs, fmt.Errorf("spec.minimumNotice: %w", err))
	} else {
		s.MinimumNotice = d
	}

	s.IdleTTL = positive(spec.IdleTTL, "spec.idleTTL", &errs)
	s.MaxTTL = positive(spec.MaxTTL, "spec.maxTTL", &errs)
	if s.MaxTTL > 0 && s.DefaultTTL > s.MaxTTL {
		// A default nobody may reach would clamp every object: the policy
		// says two things at once.
		errs = append(errs, fmt.Errorf("spec.maxTTL: %q is shorter than spec.defaultTTL %q", spec.MaxTTL, ttl))
	}
	s.KeepForbidden = spec.Keep == v1alpha1.KeepForbidden
	if e := spec.Extensions; e != nil {
		s.Limits = newLimits(*e, &errs)
	}
	if a := spec.Actions; a != nil {
		s.ExtendBy = positive(a.ExtendBy, "spec.actions.extendBy", &errs)
		s.DeleteNow = a.DeleteNow == v1alpha1.DeleteNowAllowed
		if s.Limits != nil && s.Limits.MaxStep > 0 && s.ExtendBy > s.Limits.MaxStep {
			// A link would promise a step the limits then refuse.
			errs = append(errs, fmt.Errorf("spec.actions.extendBy: %q is longer than spec.extensions.maxStep %q",
				a.ExtendBy, spec.Extensions.MaxStep))
		}
	}
	if sl := spec.Sleep; sl != nil {
		s.SleepAfterIdle = positive(sl.AfterIdle, "spec.sleep.afterIdle", &errs)
		s.SleepAfter = positive(sl.After, "spec.sleep.after", &errs)
		s.SleepDeleteAfter = positive(sl.DeleteAfter, "spec.sleep.deleteAfter", &errs)
		s.SleepReminder = positive(sl.Reminder, "spec.sleep.reminder", &errs)
		if sl.Patch != nil {
			var err error
			if s.SleepPatch, err = CheckMergePatch(sl.Patch.Raw); err != nil {
				errs = append(errs, fmt.Errorf("spec.sleep.patch: %w", err))
			}
		}
		switch {
		case (sl.AfterIdle == "") == (sl.After == ""):
			errs = append(errs, errors.New("spec.sleep: needs exactly one of afterIdle and after"))
		case sl.DeleteAfter == "":
			errs = append(errs, errors.New("spec.sleep.deleteAfter: required"))
		case s.SleepAfterIdle+s.SleepAfter < time.Second:
			errs = append(errs, errors.New("spec.sleep: afterIdle or after must be at least 1s"))
		case s.MaxTTL > 0 && s.SleepAfterIdle+s.SleepAfter >= s.MaxTTL:
			// Nothing would ever sleep: maxTTL deletes it first.
			errs = append(errs, fmt.Errorf("spec.sleep: objects would reach spec.maxTTL %q before they sleep", spec.MaxTTL))
		}
	}

	return s, errors.Join(errs...)
}

// MaxSleepPatch bounds spec.sleep.patch, and the values it replaces that
// the sleep annotation keeps for the wake.
const MaxSleepPatch = 4 << 10

// CheckMergePatch checks a merge patch of an object itself, as spec.sleep
// names one and the sleep annotation keeps its inverse: a JSON object of
// at most MaxSleepPatch bytes that leaves metadata (the controller's own
// annotations live there), apiVersion and kind alone and removes no
// top-level field.
func CheckMergePatch(raw []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if len(raw) > MaxSleepPatch {
		return nil, fmt.Errorf("%d bytes, more than %d", len(raw), MaxSleepPatch)
	}
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("not a JSON object: %s", cmp.Or(errString(err), "null"))
	}
	if len(m) == 0 {
		return nil, errors.New("empty: it would change nothing")
	}
	for k, v := range m {
		switch {
		case k == "metadata" || k == "apiVersion" || k == "kind":
			return nil, errors.New("may not change metadata, apiVersion or kind")
		case string(v) == "null":
			return nil, fmt.Errorf("may not remove the field %q", k)
		}
	}
	return raw, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// positive parses an optional duration field that must be positive when
// set; an empty one is zero.
func positive(v v1alpha1.Duration, field string, errs *[]error) time.Duration {
	if v == "" {
		return 0
	}
	d, err := ParseDuration(string(v))
	switch {
	case err != nil:
		*errs = append(*errs, fmt.Errorf("%s: %w", field, err))
	case d <= 0:
		*errs = append(*errs, fmt.Errorf("%s: %q must be greater than zero", field, v))
	default:
		return d
	}
	return 0
}

// newLimits parses spec.extensions. A limit that cannot be read is an
// error of the whole policy, which then governs nothing until it is fixed
// (the object keeps what it has; nothing expires early because of it).
func newLimits(e v1alpha1.Extensions, errs *[]error) *Limits {
	l := &Limits{MaxCount: -1, MaxStep: positive(e.MaxStep, "spec.extensions.maxStep", errs)}
	if e.MaxCount != nil {
		if *e.MaxCount < 0 {
			*errs = append(*errs, fmt.Errorf("spec.extensions.maxCount: %d is negative", *e.MaxCount))
		}
		l.MaxCount = int(max(*e.MaxCount, 0))
	}
	if e.MaxStep == "" && e.MaxCount == nil {
		*errs = append(*errs, errors.New("spec.extensions: needs maxStep, maxCount or both"))
	}
	for i, g := range e.ExemptGroups {
		if g == "" || g == none || strings.ContainsAny(g, " \t\n\r,") {
			*errs = append(*errs, fmt.Errorf("spec.extensions.exemptGroups[%d]: %q: expected a group name without spaces or commas", i, g))
			continue
		}
		if !slices.Contains(l.Exempt, g) {
			l.Exempt = append(l.Exempt, g)
		}
	}
	return l
}
