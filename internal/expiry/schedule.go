// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

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
	// SleepAfterIdle or SleepAfter (one of them) say when an object is put
	// to sleep, and SleepDeleteAfter how long it sleeps before deletion;
	// all zero when the policy does not put objects to sleep.
	SleepAfterIdle, SleepAfter, SleepDeleteAfter time.Duration
	// SleepReminder is the lead of the sleeping message; 0 sends none.
	SleepReminder time.Duration
	// SleepPatch and WakePatch are the merge patches that put the object
	// itself to sleep and wake it, for a kind that suspends through a
	// field; nil scales instead.
	SleepPatch, WakePatch []byte
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
	if sl := spec.Sleep; sl != nil {
		s.SleepAfterIdle = positive(sl.AfterIdle, "spec.sleep.afterIdle", &errs)
		s.SleepAfter = positive(sl.After, "spec.sleep.after", &errs)
		s.SleepDeleteAfter = positive(sl.DeleteAfter, "spec.sleep.deleteAfter", &errs)
		s.SleepReminder = positive(sl.Reminder, "spec.sleep.reminder", &errs)
		s.SleepPatch = mergePatch(sl.Patch, "spec.sleep.patch", &errs)
		s.WakePatch = mergePatch(sl.WakePatch, "spec.sleep.wakePatch", &errs)
		if (s.SleepPatch == nil) != (s.WakePatch == nil) {
			errs = append(errs, errors.New("spec.sleep: patch and wakePatch go together"))
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

// MaxSleepPatch bounds spec.sleep.patch and wakePatch: the wake patch is
// kept in the sleep annotation of each object asleep.
const MaxSleepPatch = 4 << 10

// mergePatch checks an optional merge patch of spec.sleep: a JSON object
// that leaves metadata alone (the controller's own annotations live
// there).
func mergePatch(p *runtime.RawExtension, field string, errs *[]error) []byte {
	if p == nil || len(p.Raw) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	switch err := json.Unmarshal(p.Raw, &m); {
	case len(p.Raw) > MaxSleepPatch:
		*errs = append(*errs, fmt.Errorf("%s: %d bytes, more than %d", field, len(p.Raw), MaxSleepPatch))
	case err != nil:
		*errs = append(*errs, fmt.Errorf("%s: not a JSON object: %w", field, err))
	case len(m) == 0:
		*errs = append(*errs, fmt.Errorf("%s: empty: it would change nothing", field))
	case m["metadata"] != nil || m["apiVersion"] != nil || m["kind"] != nil:
		*errs = append(*errs, fmt.Errorf("%s: may not change metadata, apiVersion or kind", field))
	default:
		return p.Raw
	}
	return nil
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
