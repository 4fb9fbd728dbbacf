// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import "time"

// Action is what the controller does next about an object.
type Action int

const (
	// Keep: the object never expires; nothing is scheduled.
	Keep Action = iota
	// Wait: nothing is due before Plan.At.
	Wait
	// Delete: the object has expired.
	Delete
)

func (a Action) String() string {
	switch a {
	case Keep:
		return "Keep"
	case Wait:
		return "Wait"
	case Delete:
		return "Delete"
	}
	return "Unknown"
}

// Plan is the next action for an object and, for Wait, when to look again.
type Plan struct {
	Action Action
	At     time.Time
}

// After is how long to wait from now until the plan is due. It is always
// positive for Wait, so a requeue can never turn into a hot loop.
func (p Plan) After(now time.Time) time.Duration {
	d := p.At.Sub(now)
	if d < time.Millisecond {
		return time.Millisecond
	}
	return d
}

// Next plans what to do about an object with lifetime l at time now.
// Reminder stages will slot in here, between Wait and Delete.
func Next(l Lifetime, now time.Time) Plan {
	switch {
	case l.Keep:
		return Plan{Action: Keep}
	case now.Before(l.ExpiresAt):
		return Plan{Action: Wait, At: l.ExpiresAt}
	default:
		return Plan{Action: Delete, At: l.ExpiresAt}
	}
}
