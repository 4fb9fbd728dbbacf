// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package decide is the pure part of what the controller decides about an
// object: which policy governs it, when it expires, what the record says
// was sent about that expiry, and what happens next. The controller and
// the kubectl plugin both call it, so that what the plugin shows cannot
// drift from what the controller does.
package decide

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
)

// Governing returns the policy that governs an object of kind gvk, nil
// when none does. A policy whose spec cannot be used still governs (its
// SpecErr is set): it keeps the objects it selects from the others.
func Governing(policies []v1alpha1.TimeoutPolicy, gvk schema.GroupVersionKind, obj match.Object) (*match.Candidate, error) {
	matched, err := match.Matching(match.Candidates(policies, gvk), obj)
	if err != nil || len(matched) == 0 {
		return nil, err
	}
	return &matched[0], nil
}

// Object is what a decision reads from an object.
type Object struct {
	Created     time.Time
	Annotations map[string]string
}

// Decision is what a policy makes of an object at one moment.
type Decision struct {
	Schedule expiry.Schedule
	Life     expiry.Lifetime
	// Shown is the record as the object shows it; nil when it shows none
	// or one that does not parse (RecordErr says why).
	Shown     *expiry.Record
	RecordErr error
	// Record is the record of the current expiry, which planning goes on
	// from; nil when the object is kept. It is never Shown itself, so that
	// planning cannot change what the object shows.
	Record *expiry.Record
	// Replaced is set when the record the object shows is about another
	// expiry, and Record is the new one, not written yet; Previous is the
	// expiry the old one was about.
	Replaced bool
	Previous time.Time
	// Written is set when Replaced and the new expiry is one that a write
	// of the lifetime annotations (ttl, expires-at), or the policy, gives:
	// an extension or a shortening someone made, to be audited with who
	// made it. A move by use, a sleep or a wake is not written.
	Written bool
	// WokeBy is use of a sleeping object the caller saw that its
	// annotations do not show (a spec edit, a workload scaled up).
	WokeBy string
}

// Unwritten returns shown with the deliveries the caller made about an
// expiry other than expiresAt and has not written yet, without changing
// shown: they belong to the old record, which an extension replaces.
type Unwritten func(shown *expiry.Record, expiresAt time.Time) *expiry.Record

// Evaluate computes the lifetime and the record of obj under policy c at
// now. unwritten may be nil (the plugin has written nothing).
func Evaluate(c *match.Candidate, obj Object, now time.Time, unwritten Unwritten) Decision {
	d := Decision{Schedule: c.Schedule, Life: c.Schedule.Lifetime(obj.Created, obj.Annotations, now)}
	// The record is the controller's own; if someone broke it, the worst
	// that follows is a repeated reminder, never a deletion without one.
	d.Shown, d.RecordErr = expiry.ParseRecord(obj.Annotations[expiry.AnnotationReminders])
	if d.Life.Keep {
		return d
	}
	base := d.Shown
	if unwritten != nil {
		base = unwritten(d.Shown, d.Life.ExpiresAt)
	}
	d.Record = base.ForLife(d.Life, obj.Created, now)
	// A record moved only by use, about which nothing was said, is what
	// the stored one gives again at every look: not replaced, so that use
	// costs no record writes.
	d.Written = byWrite(d.Life)
	d.Replaced = base != nil && d.Record != base && !base.Follows(d.Life)
	if d.Replaced {
		d.Previous = base.ExpiresAt
	}
	if base == nil && d.Written && stampedExpiry(obj.Annotations, d.Life) {
		// Nothing was recorded about this object yet (no reminder was
		// sent), but someone wrote its expiry: the new record says so, and
		// its write is the mark that the change was seen.
		d.Replaced = true
	}
	d.Written = d.Written && d.Replaced
	if d.Record == d.Shown {
		d.Record = d.Shown.Clone()
	}
	return d
}

// byWrite reports whether l's expiry is one the lifetime annotations, the
// policy's defaultTTL or its maxTTL give, not one use, a sleep or a wake
// moved it to.
func byWrite(l expiry.Lifetime) bool {
	switch l.Source {
	case expiry.SourceIdle, expiry.SourceSleep, expiry.SourceWoke:
		return false
	}
	return true
}

// stampedExpiry reports whether the changed-by stamp says someone wrote
// ttl or expires-at, and what they wrote was used: not a value that does
// not parse, nor an extension the limits refused.
func stampedExpiry(annotations map[string]string, l expiry.Lifetime) bool {
	stamp, ok := expiry.ParseChangedBy(annotations)
	if !ok || !stamp.ChangedExpiry() {
		return false
	}
	for _, inv := range l.Invalid {
		if inv.Limited || inv.Annotation == expiry.AnnotationTTL || inv.Annotation == expiry.AnnotationExpiresAt {
			return false
		}
	}
	return true
}

// Plan is what happens next, at now, to an object whose record is d's:
// channels are the names of the channels that carry each recorded message
// type, and rehearse says deletions are only rehearsed (dry run).
func (d Decision) Plan(channels map[v1alpha1.EventType][]string, rehearse bool, now time.Time) expiry.Plan {
	return expiry.Next(expiry.Input{Life: d.Life, Schedule: d.Schedule, Record: d.Record, Channels: channels, DryRun: rehearse, WokeBy: d.WokeBy, Now: now})
}

// titled is the only kind whose spec.title names its objects: of the
// Amphitheatre kinds, only Playbooks have a spec.title.
var titled = schema.GroupKind{Group: "amphitheatre.app", Kind: "Playbook"}

// HasTitle reports whether objects of kind gk have a title in spec.title.
func HasTitle(gk schema.GroupKind) bool {
	return gk == titled
}

// Title returns obj's spec.title when its kind has titles, else "".
func Title(obj *unstructured.Unstructured) string {
	if !HasTitle(obj.GroupVersionKind().GroupKind()) {
		return ""
	}
	t, _, _ := unstructured.NestedString(obj.Object, "spec", "title")
	return t
}
