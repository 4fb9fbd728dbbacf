// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

func TestNewSchedule(t *testing.T) {
	tests := []struct {
		name          string
		spec          v1alpha1.TimeoutPolicySpec
		wantTTL       time.Duration
		wantReminders []time.Duration
		wantNotice    time.Duration
	}{
		{
			name:       "applies the defaults to an empty spec",
			spec:       v1alpha1.TimeoutPolicySpec{},
			wantTTL:    14 * Day,
			wantNotice: 24 * time.Hour,
		},
		{
			name: "parses the CRD defaults written out",
			spec: v1alpha1.TimeoutPolicySpec{
				DefaultTTL:    "14d",
				Reminders:     []v1alpha1.Duration{"3d", "2d"},
				MinimumNotice: "24h",
			},
			wantTTL:       14 * Day,
			wantReminders: []time.Duration{3 * Day, 2 * Day},
			wantNotice:    24 * time.Hour,
		},
		{
			name: "has no reminders for an empty list",
			spec: v1alpha1.TimeoutPolicySpec{
				DefaultTTL: "1w",
				Reminders:  []v1alpha1.Duration{},
			},
			wantTTL:    Week,
			wantNotice: 24 * time.Hour,
		},
		{
			name: "keeps one of two reminders written differently",
			spec: v1alpha1.TimeoutPolicySpec{
				Reminders: []v1alpha1.Duration{"3d", "72h"},
			},
			wantTTL:       14 * Day,
			wantReminders: []time.Duration{3 * Day},
			wantNotice:    24 * time.Hour,
		},
		{
			name: "sorts reminders longest first",
			spec: v1alpha1.TimeoutPolicySpec{
				Reminders: []v1alpha1.Duration{"1h", "2d", "30m", "1w", "4320m", "2d"},
			},
			wantTTL:       14 * Day,
			wantReminders: []time.Duration{Week, 3 * Day, 2 * Day, time.Hour, 30 * time.Minute},
			wantNotice:    24 * time.Hour,
		},
		{
			name: "accepts a minimum notice of 0s",
			spec: v1alpha1.TimeoutPolicySpec{
				DefaultTTL:    "36h",
				MinimumNotice: "0s",
			},
			wantTTL:    36 * time.Hour,
			wantNotice: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewSchedule(tt.spec)
			if err != nil {
				t.Fatalf("NewSchedule returned error %v", err)
			}
			if got.DefaultTTL != tt.wantTTL {
				t.Errorf("DefaultTTL = %v, want %v", got.DefaultTTL, tt.wantTTL)
			}
			if !slices.Equal(got.Reminders, tt.wantReminders) {
				t.Errorf("Reminders = %v, want %v", got.Reminders, tt.wantReminders)
			}
			if got.MinimumNotice != tt.wantNotice {
				t.Errorf("MinimumNotice = %v, want %v", got.MinimumNotice, tt.wantNotice)
			}
			var wantLongest time.Duration
			if len(tt.wantReminders) > 0 {
				wantLongest = tt.wantReminders[0]
			}
			if l := got.LongestReminder(); l != wantLongest {
				t.Errorf("LongestReminder() = %v, want %v", l, wantLongest)
			}
		})
	}
}

func TestNewScheduleErrors(t *testing.T) {
	tests := []struct {
		name string
		spec v1alpha1.TimeoutPolicySpec
		// want has one entry per error, in order: each error's message
		// must start with the field path and contain the text.
		want []struct{ path, text string }
	}{
		{
			name: "rejects a default TTL of 0",
			spec: v1alpha1.TimeoutPolicySpec{DefaultTTL: "0"},
			want: []struct{ path, text string }{{"spec.defaultTTL", "greater than zero"}},
		},
		{
			name: "rejects a default TTL of 0s",
			spec: v1alpha1.TimeoutPolicySpec{DefaultTTL: "0s"},
			want: []struct{ path, text string }{{"spec.defaultTTL", "greater than zero"}},
		},
		{
			name: "rejects an unparsable default TTL",
			spec: v1alpha1.TimeoutPolicySpec{DefaultTTL: "fortnight"},
			want: []struct{ path, text string }{{"spec.defaultTTL", `"fortnight"`}},
		},
		{
			name: "rejects a default TTL too long for a duration",
			spec: v1alpha1.TimeoutPolicySpec{DefaultTTL: "300000000w"},
			want: []struct{ path, text string }{{"spec.defaultTTL", "too long"}},
		},
		{
			name: "rejects a zero reminder and names its index",
			spec: v1alpha1.TimeoutPolicySpec{Reminders: []v1alpha1.Duration{"1h", "0s"}},
			want: []struct{ path, text string }{{"spec.reminders[1]", "greater than zero"}},
		},
		{
			name: "rejects an unparsable reminder and names its index",
			spec: v1alpha1.TimeoutPolicySpec{Reminders: []v1alpha1.Duration{"1h", "soon"}},
			want: []struct{ path, text string }{{"spec.reminders[1]", `"soon"`}},
		},
		{
			name: "rejects an unparsable minimum notice",
			spec: v1alpha1.TimeoutPolicySpec{MinimumNotice: "a day"},
			want: []struct{ path, text string }{{"spec.minimumNotice", `"a day"`}},
		},
		{
			name: "rejects a negative minimum notice",
			spec: v1alpha1.TimeoutPolicySpec{MinimumNotice: "-1h"},
			want: []struct{ path, text string }{{"spec.minimumNotice", "negative"}},
		},
		{
			name: "rejects a link step longer than the extensions' step",
			spec: v1alpha1.TimeoutPolicySpec{
				Extensions: &v1alpha1.Extensions{MaxStep: "2d"},
				Actions:    &v1alpha1.Actions{ExtendBy: "3d"},
			},
			want: []struct{ path, text string }{{"spec.actions.extendBy", `"3d" is longer than spec.extensions.maxStep "2d"`}},
		},
		{
			name: "rejects a link step of 0",
			spec: v1alpha1.TimeoutPolicySpec{Actions: &v1alpha1.Actions{ExtendBy: "0s"}},
			want: []struct{ path, text string }{{"spec.actions.extendBy", "greater than zero"}},
		},
		{
			name: "reports every wrong field together",
			spec: v1alpha1.TimeoutPolicySpec{
				DefaultTTL:    "0",
				Reminders:     []v1alpha1.Duration{"1d", "x", "0"},
				MinimumNotice: "1 h",
			},
			want: []struct{ path, text string }{
				{"spec.defaultTTL", "greater than zero"},
				{"spec.reminders[1]", `"x"`},
				{"spec.reminders[2]", "greater than zero"},
				{"spec.minimumNotice", `"1 h"`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewSchedule(tt.spec)
			if err == nil {
				t.Fatal("NewSchedule returned no error")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("NewSchedule error = %q, want %d errors", err, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(lines[i], w.path+": ") || !strings.Contains(lines[i], w.text) {
					t.Errorf("error %d = %q, want it to start with %q and contain %q", i, lines[i], w.path+": ", w.text)
				}
			}
		})
	}
}

func TestLinkStep(t *testing.T) {
	tests := []struct {
		name       string
		extensions *v1alpha1.Extensions
		actions    *v1alpha1.Actions
		want       time.Duration
	}{
		{name: "is a day when the policy names no step", want: Day},
		{name: "is a day under limits that count only", extensions: &v1alpha1.Extensions{MaxCount: new(int32(3))}, want: Day},
		{name: "is the extensions' maximum step by default", extensions: &v1alpha1.Extensions{MaxStep: "3d"}, want: 3 * Day},
		{name: "is the step the policy names", actions: &v1alpha1.Actions{ExtendBy: "12h"}, want: 12 * time.Hour},
		{name: "is the step the policy names without limits", actions: &v1alpha1.Actions{ExtendBy: "2w"}, want: 2 * Week},
		{
			name:       "is the step the policy names within the limits",
			extensions: &v1alpha1.Extensions{MaxStep: "3d"}, actions: &v1alpha1.Actions{ExtendBy: "1d"}, want: Day,
		},
		{name: "never exceeds a maximum step shorter than a day", extensions: &v1alpha1.Extensions{MaxStep: "6h"}, want: 6 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSchedule(v1alpha1.TimeoutPolicySpec{Extensions: tt.extensions, Actions: tt.actions})
			if err != nil {
				t.Fatal(err)
			}
			if got := s.LinkStep(); got != tt.want {
				t.Errorf("LinkStep() = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestLinkStepNeverExceedsMaxStep(t *testing.T) {
	// NewSchedule refuses such a policy; a Schedule built otherwise still
	// gets no longer step than its limits allow.
	s := Schedule{ExtendBy: 3 * Day, Limits: &Limits{MaxStep: Day, MaxCount: -1}}
	if got := s.LinkStep(); got != Day {
		t.Errorf("LinkStep() = %s, want %s", got, Day)
	}
}

func TestDeleteNow(t *testing.T) {
	for _, tt := range []struct {
		name    string
		actions *v1alpha1.Actions
		want    bool
	}{
		{name: "is off without actions", want: false},
		{name: "is off when forbidden", actions: &v1alpha1.Actions{DeleteNow: v1alpha1.DeleteNowForbidden}, want: false},
		{name: "is on when allowed", actions: &v1alpha1.Actions{DeleteNow: v1alpha1.DeleteNowAllowed}, want: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSchedule(v1alpha1.TimeoutPolicySpec{Actions: tt.actions})
			if err != nil {
				t.Fatal(err)
			}
			if s.DeleteNow != tt.want {
				t.Errorf("DeleteNow = %t, want %t", s.DeleteNow, tt.want)
			}
		})
	}
}
