// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"
)

// Annotations of lifetimes that follow use.
const (
	// AnnotationLastActive is an RFC 3339 time at which the object was
	// last used. Any client may write it; under a policy with idleTTL the
	// object lives at least idleTTL past it.
	AnnotationLastActive = Prefix + "last-active"
	// AnnotationActivity holds the controller's own observation of use: the
	// metadata.generation it last recorded and when it saw it change. The
	// controller owns it; people write last-active instead.
	AnnotationActivity = Prefix + "activity"
)

// Sources of Lifetime.ExpiresAt besides the annotations and SourceDefault.
const (
	// SourceIdle: the last activity plus the policy's idleTTL.
	SourceIdle = "idleTTL"
	// SourceMax: the policy's maxTTL from creation, which capped a later
	// expiry.
	SourceMax = "maxTTL"
	// SourceCreated is Lifetime.ActiveBy when no activity is known but the
	// creation.
	SourceCreated = "creationTimestamp"
	// SourceGeneration is Lifetime.ActiveBy when the controller's
	// observation of a spec change is the latest activity.
	SourceGeneration = "metadata.generation"
)

// Skew is how far ahead of the controller's clock a time of use may be
// and still count as the time it was written: the clocks of the writer
// and the controller may differ by a few seconds.
const Skew = 5 * time.Second

// Activity is what the controller recorded of an object's use: a change of
// metadata.generation (a spec edit) that it saw at At, and when it first
// saw a last-active annotation that named a time ahead of its clock.
type Activity struct {
	// Generation is the generation the controller last recorded; an
	// object without the annotation counts as recorded at generation 1,
	// the one it was created with.
	Generation int64 `json:"generation"`
	// At is when the controller saw the generation change; zero when it
	// has recorded none.
	At time.Time `json:"at,omitzero"`
	// Ahead is set while the last-active annotation names a time that was
	// ahead of the controller's clock when it first saw it.
	Ahead *Ahead `json:"ahead,omitempty"`
}

// Ahead notes a last-active annotation that named a time ahead of the
// controller's clock: the time it named, and when the controller first
// saw it. Use is never in the future: the use counts from Seen, so that
// writing a far date cannot keep an object.
type Ahead struct {
	LastActive time.Time `json:"lastActive"`
	Seen       time.Time `json:"seen"`
}

// ahead reports whether a time of use t is in the future at now, beyond
// the clock skew allowed.
func ahead(t, now time.Time) bool {
	return t.After(now.Add(Skew))
}

// lastActive returns when the use that a last-active annotation naming t
// was, read at now: t itself, unless t was ahead of the clock when the
// controller first saw it (its note says when), or is ahead of now and
// not noted yet. clamped says the use counts from earlier than t.
func (a Activity) lastActive(t, now time.Time) (used time.Time, clamped bool) {
	// A note seen ahead of now was not written by the controller.
	if n := a.Ahead; n != nil && n.LastActive.Equal(t) && !ahead(n.Seen, now) {
		if n.Seen.Before(t) {
			return n.Seen, true
		}
		return t, false
	}
	if ahead(t, now) {
		return now, true
	}
	return t, false
}

// Settle returns the activity annotation that keeps what Lifetime makes of
// times of use ahead of now where it put them: it notes when a last-active
// ahead of now was first seen (now), brings a recorded time of use ahead
// of now back to now, and drops a note whose last-active is gone, so that
// the same far date written again later counts from then. write is false
// when the annotation needs no change.
func Settle(annotations map[string]string, now time.Time) (a Activity, write bool) {
	a, err := ParseActivity(annotations[AnnotationActivity])
	if err == nil && ahead(a.At, now) {
		a.At, write = now, true
	}
	var t time.Time
	parsed := false
	if v, ok := annotations[AnnotationLastActive]; ok {
		t, err = time.Parse(time.RFC3339, strings.TrimSpace(v))
		parsed = err == nil
	}
	noted := a.Ahead != nil && parsed && a.Ahead.LastActive.Equal(t)
	switch {
	case parsed && ahead(t, now) && (!noted || ahead(a.Ahead.Seen, now)):
		a.Ahead, write = &Ahead{LastActive: t, Seen: now}, true
	case a.Ahead != nil && !noted:
		a.Ahead, write = nil, true
	}
	return a, write
}

// ParseActivity reads the activity annotation; an empty value is the
// activity of an object as created.
func ParseActivity(value string) (Activity, error) {
	if value == "" {
		return Activity{Generation: 1}, nil
	}
	var a Activity
	if err := json.Unmarshal([]byte(value), &a); err != nil {
		return Activity{Generation: 1}, fmt.Errorf("annotation %s: %w", AnnotationActivity, err)
	}
	return a, nil
}

// String is the annotation value.
func (a Activity) String() string {
	b, _ := json.Marshal(a)
	return string(b)
}

// Lifetime works out an object's lifetime under the whole schedule: what
// Compute makes of its annotations and defaultTTL (the creation clock),
// moved later to its last activity plus idleTTL (the idle clock), and
// capped at creation plus maxTTL (the maximum). Under a policy that
// forbids keep, the keep annotation is reported and ignored. An allowed
// keep wins over the maximum: maxTTL caps lifetimes, and whether an object
// may be kept is spec.keep's say.
//
// A time of use ahead of now (by more than Skew) counts from when the
// controller first saw it, which the activity annotation notes (Settle),
// or from now until it does: use is never in the future, and a far date
// in last-active keeps nothing. Such a last-active is reported.
func (s Schedule) Lifetime(created time.Time, annotations map[string]string, now time.Time) Lifetime {
	a := annotations
	var refused *Invalid
	if v, ok := annotations[AnnotationKeep]; ok && s.KeepForbidden {
		if keep, err := strconv.ParseBool(strings.TrimSpace(v)); err != nil || keep {
			refused = &Invalid{
				Annotation: AnnotationKeep, Value: v,
				Expected: "no keep: the policy forbids it (spec.keep: Forbidden)",
				Fallback: "it is ignored",
			}
		}
		a = maps.Clone(annotations)
		delete(a, AnnotationKeep)
	}
	if refused == nil && s.Limits != nil && keepAsked(annotations) {
		prev, err := ParseExtensions(annotations[AnnotationExtensions])
		stamp, stamped := ParseChangedBy(annotations)
		if !s.Limits.keepAllowed(prev, err == nil, stamp, stamped) {
			refused = &Invalid{
				Annotation: AnnotationKeep, Value: annotations[AnnotationKeep],
				Expected: "no keep: under the policy's extension limits only its exempt groups may keep (" + s.Limits.ask() + ")",
				Fallback: "it is ignored",
				Limited:  true,
			}
			a = maps.Clone(annotations)
			delete(a, AnnotationKeep)
		}
	}
	l := Compute(created, a, s.DefaultTTL)
	if refused != nil {
		l.KeepRefused = true
		l.Invalid = append([]Invalid{*refused}, l.Invalid...)
	}
	if s.Limits != nil {
		s.limit(&l, created, a, now)
	}

	l.LastActive, l.ActiveBy = created, SourceCreated
	// The controller's own annotation: if someone broke it, the object
	// counts as unused since its other activity, and the next change of
	// generation is recorded afresh.
	act, actErr := ParseActivity(annotations[AnnotationActivity])
	if v, ok := annotations[AnnotationLastActive]; ok {
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
		if err != nil {
			l.Invalid = append(l.Invalid, Invalid{
				Annotation: AnnotationLastActive, Value: v,
				Expected: "an RFC 3339 time, such as 2026-12-24T18:00:00Z",
				Fallback: "activity counts from the object's creation and the changes the controller saw",
			})
		} else {
			used, clamped := act.lastActive(t, now)
			if clamped {
				l.Invalid = append(l.Invalid, Invalid{
					Annotation: AnnotationLastActive, Value: v,
					Expected: fmt.Sprintf("a time no later than when it is written (%s of clock skew allowed)", FormatDuration(Skew)),
					Fallback: "the use counts from " + used.UTC().Format(time.RFC3339) + ", when it was first seen",
				})
			}
			if used.After(l.LastActive) {
				l.LastActive, l.ActiveBy = used, AnnotationLastActive
			}
		}
	}
	if actErr == nil {
		// The controller records only what it saw: a later time was not
		// written by it, and counts as now until it is brought back.
		at := act.At
		if ahead(at, now) {
			at = now
		}
		if at.After(l.LastActive) {
			l.LastActive, l.ActiveBy = at, SourceGeneration
		}
	}
	// A wake is activity: it restarts the idle clock. The controller
	// writes the wake at its own clock: one ahead of now it did not write.
	if st, err := ParseSleep(annotations[AnnotationSleep]); err == nil {
		l.Sleep = st
		if st.Woke.After(l.LastActive) && !ahead(st.Woke, now) {
			l.LastActive, l.ActiveBy = st.Woke, SourceWoke
		}
	} else {
		l.Invalid = append(l.Invalid, Invalid{
			Annotation: AnnotationSleep, Value: annotations[AnnotationSleep],
			Expected: "the controller's sleep state", Fallback: "the object counts as awake",
		})
	}
	if l.ActiveBy == AnnotationLastActive {
		if u, ok := LastUse(annotations); ok {
			l.Use = &u
		}
	}
	if l.Keep {
		return l
	}

	l.Base = l.ExpiresAt
	if s.IdleTTL > 0 {
		l.IdleAt = l.LastActive.Add(s.IdleTTL)
		if l.IdleAt.After(l.ExpiresAt) {
			l.ExpiresAt, l.Source = l.IdleAt, SourceIdle
		}
	}
	if s.Sleeps() {
		s.sleepTimes(created, &l)
	}
	if s.MaxTTL > 0 {
		l.Max = created.Add(s.MaxTTL)
		if l.Base.After(l.Max) && l.Source != SourceDefault {
			// Activity reaching the maximum is the ordinary end of a busy
			// object; an annotation asking for more is worth a word.
			source := l.Source
			if source == SourceIdle || source == SourceSleep {
				source = l.baseSource(a)
			}
			l.Invalid = append(l.Invalid, Invalid{
				Annotation: source, Value: a[source],
				Expected: fmt.Sprintf("a lifetime within the policy's maxTTL %s from creation (until %s)",
					FormatDuration(s.MaxTTL), l.Max.UTC().Format(time.RFC3339)),
				Fallback: "the object expires at its maximum",
			})
		}
		if l.ExpiresAt.After(l.Max) {
			l.ExpiresAt, l.Source = l.Max, SourceMax
		}
	}
	return l
}

// baseSource is the annotation that set Base, for an expiry the idle
// clock has since moved.
func (l Lifetime) baseSource(annotations map[string]string) string {
	for _, k := range []string{AnnotationExpiresAt, AnnotationTTL, AnnotationLegacyTTL} {
		if _, ok := annotations[k]; ok {
			return k
		}
	}
	return SourceDefault
}

// Clock names which clock sets the expiry: "creation" (annotations or
// defaultTTL), "idle" or "maximum".
func (l Lifetime) Clock() string {
	switch l.Source {
	case SourceIdle:
		return "idle"
	case SourceMax:
		return "maximum"
	case SourceSleep:
		return "sleep"
	}
	return "creation"
}

// Idle reports whether the idle clock has moved the expiry past what the
// creation clock gives: the object is alive because it was used.
func (l Lifetime) Idle() bool {
	if l.Keep {
		return false
	}
	return (!l.IdleAt.IsZero() && l.IdleAt.After(l.Base)) || (l.Source == SourceSleep && l.SleepByUse)
}

// Follows reports whether the record For gives r for the lifetime l is the
// one it gives every time, whatever now is: l's expiry is a later one set
// by use, and no message was delivered about r's, so that For keeps its
// Since. Such a record need not be written.
func (r *Record) Follows(l Lifetime) bool {
	return r != nil && !r.ExpiresAt.IsZero() && l.Idle() && l.ExpiresAt.After(r.ExpiresAt) &&
		onlyCycleKeys(r.Sent) && r.NoticeAt.IsZero()
}

// ForLife is For, for the lifetime l. An expiry moved later by activity
// owes an extended message only when a reminder reached someone about the
// old date: otherwise every recorded use would announce one.
func (r *Record) ForLife(l Lifetime, created, now time.Time) *Record {
	next := r.For(l.ExpiresAt, created, now)
	// A sleep moves the expiry to the time asleep: no extension either.
	moved := l.Idle() || l.Source == SourceSleep
	if next == r || r == nil || !moved || !l.ExpiresAt.After(r.ExpiresAt) || next.ExtendedFrom.IsZero() {
		return next
	}
	if _, told := r.Sent[KeyExtended]; told && !hasStage(r.Sent) {
		// The extension was announced; the use since only moves it on.
		next.ExtendedFrom = time.Time{}
	} else if len(r.Sent) > 0 && !hasStage(r.Sent) {
		next.ExtendedFrom = r.ExtendedFrom
	}
	return next
}
