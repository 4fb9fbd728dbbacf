// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	expiresAt := time.Date(2026, 3, 15, 12, 0, 0, 0, time.UTC)
	expiring := Lifetime{ExpiresAt: expiresAt, Source: AnnotationTTL}

	tests := []struct {
		name string
		life Lifetime
		now  time.Time
		want Plan
	}{
		{
			name: "keeps a kept object",
			life: Lifetime{Keep: true},
			now:  expiresAt,
			want: Plan{Action: Keep},
		},
		{
			name: "keeps a kept object long after it would have expired",
			life: Lifetime{Keep: true, ExpiresAt: expiresAt},
			now:  expiresAt.Add(365 * Day),
			want: Plan{Action: Keep},
		},
		{
			name: "waits until expiry a day before",
			life: expiring,
			now:  expiresAt.Add(-Day),
			want: Plan{Action: Wait, At: expiresAt},
		},
		{
			name: "waits one nanosecond before expiry",
			life: expiring,
			now:  expiresAt.Add(-time.Nanosecond),
			want: Plan{Action: Wait, At: expiresAt},
		},
		{
			name: "deletes exactly at expiry",
			life: expiring,
			now:  expiresAt,
			want: Plan{Action: Delete, At: expiresAt},
		},
		{
			name: "deletes one second after expiry",
			life: expiring,
			now:  expiresAt.Add(time.Second),
			want: Plan{Action: Delete, At: expiresAt},
		},
		{
			name: "deletes a year after expiry",
			life: expiring,
			now:  expiresAt.Add(365 * Day),
			want: Plan{Action: Delete, At: expiresAt},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Next(tt.life, tt.now)
			if got.Action != tt.want.Action || !got.At.Equal(tt.want.At) {
				t.Errorf("Next(%+v, %v) = %v at %v, want %v at %v", tt.life, tt.now, got.Action, got.At, tt.want.Action, tt.want.At)
			}
		})
	}
}

func TestPlanAfter(t *testing.T) {
	now := time.Date(2026, 3, 15, 12, 0, 0, 0, time.UTC)

	tests := []struct {
		name string
		plan Plan
		want time.Duration
	}{
		{"waits the remaining day", Plan{Action: Wait, At: now.Add(Day)}, Day},
		{"waits the remaining second", Plan{Action: Wait, At: now.Add(time.Second)}, time.Second},
		{"waits just over a millisecond as it is", Plan{Action: Wait, At: now.Add(time.Millisecond + time.Nanosecond)}, time.Millisecond + time.Nanosecond},
		{"waits exactly one millisecond", Plan{Action: Wait, At: now.Add(time.Millisecond)}, time.Millisecond},
		{"waits at least a millisecond when less remains", Plan{Action: Wait, At: now.Add(time.Microsecond)}, time.Millisecond},
		{"waits a millisecond when the plan is due now", Plan{Action: Delete, At: now}, time.Millisecond},
		{"waits a millisecond when the plan is overdue", Plan{Action: Delete, At: now.Add(-Day)}, time.Millisecond},
		{"waits a millisecond for a plan without a time", Plan{Action: Keep}, time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.plan.After(now); got != tt.want {
				t.Errorf("After = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestActionString(t *testing.T) {
	tests := []struct {
		name   string
		action Action
		want   string
	}{
		{"names Keep", Keep, "Keep"},
		{"names Wait", Wait, "Wait"},
		{"names Delete", Delete, "Delete"},
		{"names an unknown action Unknown", Action(99), "Unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.action.String(); got != tt.want {
				t.Errorf("Action(%d).String() = %q, want %q", int(tt.action), got, tt.want)
			}
		})
	}
}
