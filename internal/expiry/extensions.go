// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Annotations of the extension limits and of who changed a lifetime.
const (
	// AnnotationExtensions is the controller's account of an object's
	// extensions under its policy's limits: the expiry the limits allowed
	// last, how many extensions were used, the limits themselves, and who
	// made the last extension. Only the controller writes it; the
	// admission policy (config/admission) reads it to judge a change
	// before it is written. Its form is Extensions.String.
	AnnotationExtensions = Prefix + "extensions"
	// AnnotationChangedBy says who last changed the object's lifetime
	// annotations (ttl, expires-at, keep, last-active), and which: JSON
	// {"by": "alice", "groups": ["dev"], "changed": ["ttl"]}, stamped at
	// admission from the request's user, over whatever the writer put.
	AnnotationChangedBy = Prefix + "changed-by"
)

// LifetimeKeys are the short names of the annotations a change of lifetime
// writes, as ChangedBy.Changed names them.
var LifetimeKeys = []string{"ttl", "expires-at", "keep", "last-active"}

// ChangedBy is what the changed-by annotation holds.
type ChangedBy struct {
	// By is the username of whoever wrote the change.
	By string `json:"by"`
	// Groups are the user's groups.
	Groups []string `json:"groups,omitempty"`
	// Changed are the short names of the lifetime annotations the write
	// changed (LifetimeKeys).
	Changed []string `json:"changed"`
	// Via is how the change was made when not through the API directly:
	// ViaLink or ViaSlack, written by the actions server, which names in
	// By the person the link was sent to (or who signed in). Empty for a
	// stamp made at admission.
	Via string `json:"via,omitempty"`
}

// Who names whoever made the change for people: "alice", or
// "alice via link".
func (c ChangedBy) Who() string {
	if c.Via == "" {
		return c.By
	}
	return c.By + " via " + c.Via
}

// ParseChangedBy reads the changed-by annotation of an object; ok is false
// when there is none or it does not parse.
func ParseChangedBy(annotations map[string]string) (c ChangedBy, ok bool) {
	v, has := annotations[AnnotationChangedBy]
	if !has || json.Unmarshal([]byte(v), &c) != nil || c.By == "" {
		return ChangedBy{}, false
	}
	return c, true
}

// changedAny reports whether the stamp says the write changed one of keys.
func (c ChangedBy) changedAny(keys ...string) bool {
	return slices.ContainsFunc(c.Changed, func(k string) bool { return slices.Contains(keys, k) })
}

// ChangedExpiry reports whether the stamp says the write changed ttl or
// expires-at: the annotations that set an expiry.
func (c ChangedBy) ChangedExpiry() bool {
	return c.changedAny("ttl", "expires-at")
}

// Limits are a policy's extension limits (spec.extensions), parsed.
type Limits struct {
	// MaxStep is how far one extension may move the expiry; 0 sets no
	// bound.
	MaxStep time.Duration
	// MaxCount is how many extensions an object may have; negative sets
	// no bound.
	MaxCount int
	// Exempt are the groups whose members may exceed the limits and keep.
	Exempt []string
}

// exempt reports whether the stamp's user is in one of the exempt groups.
func (l Limits) exempt(c ChangedBy) bool {
	return slices.ContainsFunc(c.Groups, func(g string) bool { return slices.Contains(l.Exempt, g) })
}

// ask says whom to ask for more, for messages.
func (l Limits) ask() string {
	if len(l.Exempt) == 0 {
		return "nobody may exceed the limits"
	}
	return "ask a member of " + strings.Join(l.Exempt, " or ")
}

// Extensions is what the extensions annotation holds.
type Extensions struct {
	// Granted is the expiry the annotations (or defaultTTL) gave that the
	// limits last allowed: an extension is judged against it.
	Granted time.Time
	// Used counts the extensions made within the limits. Those of the
	// exempt groups are not counted.
	Used int
	// Limits are the policy's limits when it was written, for the
	// admission policy.
	Limits Limits
	// Keep says an exempt user set keep, which holds until keep is
	// removed.
	Keep bool
	// At is when the controller first saw the last extension, and By who
	// made it (the changed-by stamp), "" when unknown.
	At time.Time
	By string
}

// none is how the extensions annotation writes an absent value.
const none = "-"

// String is the annotation value: space-separated fields in a fixed
// order, so that the admission policy's expressions can read them by
// position; By comes last and may hold spaces. A group never holds a
// space or a comma (the CRD says so).
//
//	granted=2026-12-01T00:00:00Z used=1 maxCount=3 maxStep=7d exempt=platform-team keep=false at=2026-11-20T10:00:00Z by=alice
func (e Extensions) String() string {
	count, step, exempt, at, by := none, none, none, none, none
	if e.Limits.MaxCount >= 0 {
		count = strconv.Itoa(e.Limits.MaxCount)
	}
	if e.Limits.MaxStep > 0 {
		step = FormatDuration(e.Limits.MaxStep)
	}
	if len(e.Limits.Exempt) > 0 {
		exempt = strings.Join(e.Limits.Exempt, ",")
	}
	if !e.At.IsZero() {
		at = e.At.UTC().Format(time.RFC3339)
	}
	if e.By != "" {
		by = strings.ToValidUTF8(e.By[:min(len(e.By), MaxUseBy)], "")
	}
	return fmt.Sprintf("granted=%s used=%d maxCount=%s maxStep=%s exempt=%s keep=%t at=%s by=%s",
		e.Granted.UTC().Format(time.RFC3339), e.Used, count, step, exempt, e.Keep, at, by)
}

// extensionFields are the names of String's fields, in order.
var extensionFields = []string{"granted", "used", "maxCount", "maxStep", "exempt", "keep", "at", "by"}

// ParseExtensions reads the extensions annotation.
func ParseExtensions(value string) (Extensions, error) {
	fail := func(what string) (Extensions, error) {
		return Extensions{}, fmt.Errorf("annotation %s: %s", AnnotationExtensions, what)
	}
	parts := strings.SplitN(value, " ", len(extensionFields))
	if len(parts) != len(extensionFields) {
		return fail("expected the fields " + strings.Join(extensionFields, ", "))
	}
	v := make([]string, len(parts))
	for i, p := range parts {
		var ok bool
		if v[i], ok = strings.CutPrefix(p, extensionFields[i]+"="); !ok {
			return fail("expected " + extensionFields[i] + "= as field " + strconv.Itoa(i+1))
		}
	}
	var e Extensions
	var err error
	if e.Granted, err = time.Parse(time.RFC3339, v[0]); err != nil {
		return fail("granted: " + err.Error())
	}
	if e.Used, err = strconv.Atoi(v[1]); err != nil || e.Used < 0 {
		return fail("used: expected a count")
	}
	e.Limits.MaxCount = -1
	if v[2] != none {
		if e.Limits.MaxCount, err = strconv.Atoi(v[2]); err != nil || e.Limits.MaxCount < 0 {
			return fail("maxCount: expected a count")
		}
	}
	if v[3] != none {
		if e.Limits.MaxStep, err = ParseDuration(v[3]); err != nil || e.Limits.MaxStep <= 0 {
			return fail("maxStep: expected a duration")
		}
	}
	if v[4] != none {
		e.Limits.Exempt = strings.Split(v[4], ",")
	}
	if e.Keep, err = strconv.ParseBool(v[5]); err != nil {
		return fail("keep: expected true or false")
	}
	if v[6] != none {
		if e.At, err = time.Parse(time.RFC3339, v[6]); err != nil {
			return fail("at: " + err.Error())
		}
	}
	if v[7] != none {
		e.By = v[7]
	}
	return e, nil
}

// limited is what the limits make of an object's annotations: the state
// the extensions annotation should hold, and what was refused.
type limited struct {
	state Extensions
	// refused is set when an extension beyond the limits was refused: the
	// lifetime keeps state.Granted.
	refused *Invalid
}

// keepAllowed reports whether the limits let the object's keep annotation
// keep it: keep was let before, or the changed-by stamp says a member of
// an exempt group set it.
func (l Limits) keepAllowed(prev Extensions, hasPrev bool, stamp ChangedBy, stamped bool) bool {
	return (hasPrev && prev.Keep) || (stamped && stamp.changedAny("keep") && l.exempt(stamp))
}

// judge applies the limits to an object whose annotations give the expiry
// base from source (ttl, expires-at, the legacy ttl or SourceDefault),
// seen at now. The previous state is the extensions annotation; without
// one (the object is new to the limits) base is the start.
//
// An extension (base later than the granted expiry, set by an annotation)
// is allowed when the changed-by stamp names an exempt group, or when it
// is within the step and the count; otherwise it is refused and the
// object keeps the granted expiry, never an earlier one. A shorter
// lifetime, or one the policy's defaultTTL gives, is no extension.
func (l Limits) judge(annotations map[string]string, base time.Time, source string, now time.Time) limited {
	prev, err := ParseExtensions(annotations[AnnotationExtensions])
	hasPrev := err == nil
	stamp, stamped := ParseChangedBy(annotations)
	out := limited{state: Extensions{Granted: base, Limits: l}}
	if hasPrev {
		out.state.Used, out.state.At, out.state.By = prev.Used, prev.At, prev.By
	}
	out.state.Keep = l.keepAllowed(prev, hasPrev, stamp, stamped) && keepAsked(annotations)
	if !hasPrev || !base.After(prev.Granted) || source == SourceDefault {
		return out
	}
	by := ""
	if stamped && stamp.changedAny("ttl", "expires-at") {
		by = stamp.By
	}
	step := base.Sub(prev.Granted)
	var problem string
	switch {
	case stamped && stamp.changedAny("ttl", "expires-at") && l.exempt(stamp):
		out.state.At, out.state.By = now, by
		return out
	case l.MaxCount >= 0 && prev.Used >= l.MaxCount:
		problem = fmt.Sprintf("no extension: %d of %d extensions used", prev.Used, l.MaxCount)
	case l.MaxStep > 0 && step > l.MaxStep:
		problem = fmt.Sprintf("an extension of at most %s past the current expiry %s (until %s), not %s",
			FormatDuration(l.MaxStep), prev.Granted.UTC().Format(time.RFC3339),
			prev.Granted.Add(l.MaxStep).UTC().Format(time.RFC3339), FormatDuration(step))
		if l.MaxCount >= 0 {
			problem += fmt.Sprintf("; %d of %d extensions used", prev.Used, l.MaxCount)
		}
	default:
		out.state.Used, out.state.At, out.state.By = prev.Used+1, now, by
		return out
	}
	out.state.Granted = prev.Granted
	out.refused = &Invalid{
		Annotation: source, Value: annotations[source],
		Expected: problem + " (the policy's extension limits; " + l.ask() + ")",
		Fallback: "the extension is refused: the object keeps its expiry " + prev.Granted.UTC().Format(time.RFC3339),
		Limited:  true,
	}
	return out
}

// keepAsked reports whether the keep annotation asks to keep: true, or a
// value that does not parse, which Compute takes for keep.
func keepAsked(annotations map[string]string) bool {
	v, ok := annotations[AnnotationKeep]
	if !ok {
		return false
	}
	keep, err := strconv.ParseBool(strings.TrimSpace(v))
	return err != nil || keep
}

// Extended describes the last extension for people: "extended by
// alice@example.com 2 days ago, 1 of 3 extensions used", or "" when the
// object has none.
func (e Extensions) Extended(now time.Time) string {
	if e.At.IsZero() && e.Used == 0 {
		return ""
	}
	s := "extended"
	if e.By != "" {
		s += " by " + e.By
	}
	if !e.At.IsZero() {
		s += " " + FormatDuration(now.Sub(e.At).Truncate(time.Minute)) + " ago"
	}
	if e.Limits.MaxCount >= 0 {
		s += fmt.Sprintf(", %d of %d extensions used", e.Used, e.Limits.MaxCount)
	} else {
		s += fmt.Sprintf(", %d extensions used", e.Used)
	}
	return s
}

// limit applies the policy's extension limits to the lifetime l that
// Compute made of the annotations a (keep already judged): an extension
// refused leaves the object at the expiry granted before, with the
// refusal among l.Invalid.
func (s Schedule) limit(l *Lifetime, created time.Time, a map[string]string, now time.Time) {
	base, source := l.ExpiresAt, l.Source
	if l.Keep {
		// Judged as if not kept, so that removing keep later is no
		// extension of its own.
		noKeep := maps.Clone(a)
		delete(noKeep, AnnotationKeep)
		c := Compute(created, noKeep, s.DefaultTTL)
		base, source = c.ExpiresAt, c.Source
	}
	j := s.Limits.judge(a, base, source, now)
	l.Extensions = &j.state
	if j.refused != nil && !l.Keep {
		l.ExpiresAt = j.state.Granted
		l.Invalid = append(l.Invalid, *j.refused)
	}
}
