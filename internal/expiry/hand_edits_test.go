// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"strings"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// TestValuesWrittenByHandAreReadStrictly: a duration, a patch, a group or
// a record of use that is not what it should be is refused, never taken
// at a guess.
func TestValuesWrittenByHandAreReadStrictly(t *testing.T) {
	t.Run("refuses a duration with a second dot in its number", func(t *testing.T) {
		for _, v := range []string{"1..5h", "1./h", "2.-1d"} {
			if d, err := ParseDuration(v); err == nil {
				t.Errorf("ParseDuration(%q) = %s, want an error", v, d)
			}
		}
	})
	t.Run("refuses a sleep patch that changes apiVersion", func(t *testing.T) {
		if _, err := CheckMergePatch([]byte(`{"apiVersion":"v2"}`)); err == nil {
			t.Error("CheckMergePatch accepted a patch of apiVersion")
		}
	})
	t.Run("refuses a sleep annotation whose patch changes the apiVersion or the kind", func(t *testing.T) {
		for _, field := range []string{"apiVersion", "kind"} {
			v := `{"phase":"Asleep","patch":{"` + field + `":"v2"},"wakePatch":{"` + field + `":"v1"}}`
			if s, err := ParseSleep(v); err == nil {
				t.Errorf("ParseSleep(%s) = %+v, want an error", v, s)
			}
		}
	})
	t.Run("refuses an empty exempt group", func(t *testing.T) {
		spec := v1alpha1.TimeoutPolicySpec{Extensions: &v1alpha1.Extensions{MaxStep: "1d", ExemptGroups: []string{""}}}
		if _, err := NewSchedule(spec); err == nil || !strings.Contains(err.Error(), "exemptGroups[0]") {
			t.Errorf("NewSchedule: %v, want exemptGroups[0] refused", err)
		}
	})
	t.Run("takes extension limits with only a maxStep", func(t *testing.T) {
		spec := v1alpha1.TimeoutPolicySpec{Extensions: &v1alpha1.Extensions{MaxStep: "1d"}}
		if s, err := NewSchedule(spec); err != nil || s.Limits == nil || s.Limits.MaxStep != Day || s.Limits.MaxCount >= 0 {
			t.Errorf("NewSchedule = %+v, %v; want a step of 1d and no count", s.Limits, err)
		}
	})
	t.Run("refuses a record of use without its time, or with a field of the wrong type", func(t *testing.T) {
		for _, v := range []string{`{"via":"exec","by":"alice"}`, `{"at":"2026-11-01T09:00:00Z","via":"exec","by":5}`} {
			if u, err := ParseUse(v); err == nil {
				t.Errorf("ParseUse(%s) = %+v, want an error", v, u)
			}
		}
	})
}

// TestBriefCutsAnyValue: an Event's note quotes a long annotation value
// cut on a character boundary; bytes that start no character at all
// (a value that is not UTF-8) are cut as they come.
func TestBriefCutsAnyValue(t *testing.T) {
	v := strings.Repeat("\x80", 2*briefLen)
	if got := brief(v); !strings.HasSuffix(got, "…(128 bytes)") {
		t.Errorf("brief = %q, want the value cut and its length", got)
	}
}

// TestSettleDropsANoteWhoseLastActiveIsGone: the note of a last-active
// ahead of the clock goes with the annotation, whatever time it names
// (here the zero time of a note edited by hand).
func TestSettleDropsANoteWhoseLastActiveIsGone(t *testing.T) {
	now := created.Add(Day)
	a := map[string]string{AnnotationActivity: `{"generation":1,"ahead":{"lastActive":"0001-01-01T00:00:00Z","seen":"` + rfc(created) + `"}}`}
	if got, write := Settle(a, now); got.Ahead != nil || !write {
		t.Errorf("Settle = %+v, %t; want the note dropped", got, write)
	}
}

// TestAnObjectBeingWokenIsNoLongerAsleep: once a wake is under way (here
// for an edit the caller saw, which the annotations do not show), the
// object no longer counts as asleep, whatever its last use.
func TestAnObjectBeingWokenIsNoLongerAsleep(t *testing.T) {
	since := created.Add(4 * time.Hour)
	waking := sleepState(SleepState{Phase: PhaseWaking, Since: since, WokeBy: "spec edit", Generation: 1})
	if l := sleepy.Lifetime(created, waking, since.Add(time.Hour)); l.Asleep {
		t.Errorf("Asleep with the phase %s: %+v", PhaseWaking, l)
	}
}
