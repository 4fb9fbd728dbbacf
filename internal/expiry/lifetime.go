// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Annotations a governed object may carry.
const (
	// Prefix starts every annotation the controller reads or writes.
	Prefix = "timeout.amphitheatre.app/"
	// AnnotationTTL is a lifetime counted from metadata.creationTimestamp.
	AnnotationTTL = Prefix + "ttl"
	// AnnotationExpiresAt is an absolute RFC 3339 expiry; it wins over ttl.
	AnnotationExpiresAt = Prefix + "expires-at"
	// AnnotationKeep set to "true" exempts the object for good.
	AnnotationKeep = Prefix + "keep"
	// AnnotationLegacyTTL is the bare annotation Amphitheatre's own timeout
	// loop reads: whole seconds from creation. It is honoured only when
	// neither prefixed lifetime annotation is present.
	AnnotationLegacyTTL = "ttl"
	// AnnotationLinkUses lists the latest uses of the links in messages
	// (docs/guides/actions-server.md), written by the actions server in
	// the same patch as the change a link makes, so that each link acts
	// once.
	AnnotationLinkUses = Prefix + "link-uses"
)

// SourceDefault is Lifetime.Source when the policy's defaultTTL applies.
const SourceDefault = "defaultTTL"

// Invalid describes an annotation whose value cannot be used.
type Invalid struct {
	Annotation string
	Value      string
	// Expected says what the annotation accepts.
	Expected string
	// Fallback says what the controller does instead.
	Fallback string
	// Unknown is set when the key itself is not one the controller knows.
	Unknown bool
	// Limited is set when the value is valid but the policy's extension
	// limits refuse it: an extension past them, or a keep.
	Limited bool
}

func (i Invalid) Error() string {
	return i.text(strconv.Quote(i.Value))
}

// text says what is wrong, with the value as quoted.
func (i Invalid) text(quoted string) string {
	if i.Unknown {
		return fmt.Sprintf("annotation %s (value %s) is unknown: expected %s; %s", i.Annotation, quoted, i.Expected, i.Fallback)
	}
	return fmt.Sprintf("annotation %s has invalid value %s: expected %s; %s", i.Annotation, quoted, i.Expected, i.Fallback)
}

// Lifetime is what an object's annotations and its policy's default make
// of the object's life.
type Lifetime struct {
	// Keep exempts the object: it never expires.
	Keep bool
	// ExpiresAt is when the object expires; zero when Keep is set.
	ExpiresAt time.Time
	// Source is the annotation that set ExpiresAt, or SourceDefault.
	Source string
	// Invalid lists the annotations whose values were not usable.
	Invalid []Invalid

	// The fields below are set by Schedule.Lifetime.

	// LastActive is the object's latest activity: its creation, the
	// last-active annotation, or a generation change the controller saw;
	// ActiveBy says which.
	LastActive time.Time
	ActiveBy   string
	// Use is the use LastActive is, when ActiveBy is the last-active
	// annotation and last-use describes it: how and by whom.
	Use *Use
	// Base is the expiry the annotations or defaultTTL give (the creation
	// clock); IdleAt is LastActive plus idleTTL (zero without one); Max is
	// creation plus maxTTL (zero without one).
	Base, IdleAt, Max time.Time
	// KeepRefused says the object asks to be kept and its policy forbids
	// it, or its extension limits do.
	KeepRefused bool
	// Extensions is what the extensions annotation should hold under the
	// policy's extension limits; nil when the policy has none.
	Extensions *Extensions

	// Sleep is the object's sleep state (the sleep annotation). Under a
	// policy that puts objects to sleep, SleepAt is when the object sleeps
	// (or went to sleep, when Asleep), and SleepByUse says that SleepAt
	// follows its last activity.
	Sleep      SleepState
	SleepAt    time.Time
	Asleep     bool
	SleepByUse bool
}

// Compute works out an object's lifetime from its creation time, its
// annotations and the policy's default TTL.
//
// expires-at wins over ttl, and either wins over the legacy bare ttl. When
// the annotation that would decide is invalid, the object lives the longer
// of the default TTL and what its remaining valid annotations say: a typo
// never makes an object expire sooner than the policy default would.
// An invalid keep value keeps the object, for the same reason.
func Compute(created time.Time, annotations map[string]string, defaultTTL time.Duration) Lifetime {
	var l Lifetime

	if v, ok := annotations[AnnotationKeep]; ok {
		keep, err := strconv.ParseBool(strings.TrimSpace(v))
		switch {
		case err != nil:
			l.Invalid = append(l.Invalid, Invalid{
				Annotation: AnnotationKeep, Value: v,
				Expected: `"true" or "false"`,
				Fallback: "the object is kept until the value is fixed",
			})
			l.Keep = true
		case keep:
			l.Keep = true
		}
	}

	type candidate struct {
		annotation string
		parse      func(string) (time.Time, string, bool)
	}
	candidates := []candidate{
		{AnnotationExpiresAt, func(v string) (time.Time, string, bool) { return parseExpiresAt(created, v) }},
		{AnnotationTTL, func(v string) (time.Time, string, bool) { return parseTTL(created, v) }},
	}
	_, hasExpiresAt := annotations[AnnotationExpiresAt]
	_, hasTTL := annotations[AnnotationTTL]
	if !hasExpiresAt && !hasTTL {
		candidates = append(candidates, candidate{AnnotationLegacyTTL, func(v string) (time.Time, string, bool) { return parseLegacyTTL(created, v) }})
	}

	deciderInvalid := false
	decided := false
	for _, c := range candidates {
		v, ok := annotations[c.annotation]
		if !ok {
			continue
		}
		at, expected, valid := c.parse(v)
		if !valid {
			if !decided {
				deciderInvalid = true
			}
			l.Invalid = append(l.Invalid, Invalid{
				Annotation: c.annotation, Value: v, Expected: expected,
				Fallback: "the object expires at the later of the policy's defaultTTL and its other valid annotations",
			})
			continue
		}
		if !decided {
			decided = true
			l.ExpiresAt, l.Source = at, c.annotation
		}
	}

	fallback := created.Add(defaultTTL)
	switch {
	case !decided:
		l.ExpiresAt, l.Source = fallback, SourceDefault
	case deciderInvalid && fallback.After(l.ExpiresAt):
		l.ExpiresAt, l.Source = fallback, SourceDefault
	}
	if l.Keep {
		l.ExpiresAt = time.Time{}
	}
	l.Invalid = append(l.Invalid, unknownKeys(annotations)...)
	return l
}

// userKeys are the names under Prefix that people write: the ones above
// and the notify annotation, which internal/notify reads.
var userKeys = []string{"ttl", "expires-at", "keep", "notify", "last-active"}

// KnownAnnotations are the annotations under Prefix that the controller
// reads or writes; any other key under Prefix is a mistake.
var KnownAnnotations = []string{AnnotationTTL, AnnotationExpiresAt, AnnotationKeep, Prefix + "notify", AnnotationReminders, AnnotationLastActive, AnnotationLastUse, AnnotationActivity, AnnotationSleep, AnnotationReplicas, Prefix + "owner", AnnotationExtensions, AnnotationChangedBy, AnnotationLinkUses}

// unknownKeys reports the keys under Prefix that the controller does not
// know, in the order of their names. They change nothing, but a misspelt
// keep that silently does not keep is worse than a warning.
func unknownKeys(annotations map[string]string) []Invalid {
	var out []Invalid
	for k, v := range annotations {
		name, ok := strings.CutPrefix(k, Prefix)
		if !ok || slices.Contains(KnownAnnotations, k) {
			continue
		}
		expected := "one of the keys " + strings.Join(userKeys, ", ") + " under " + Prefix
		if hint := closestKey(name); hint != "" {
			expected += "; did you mean " + hint + "?"
		}
		out = append(out, Invalid{Annotation: k, Value: v, Expected: expected, Fallback: "it is ignored", Unknown: true})
	}
	slices.SortFunc(out, func(a, b Invalid) int { return strings.Compare(a.Annotation, b.Annotation) })
	return out
}

// closestKey returns the key people write that name most likely meant:
// the same but for case or an underscore, or at most two edits away.
func closestKey(name string) string {
	norm := strings.ReplaceAll(strings.ToLower(name), "_", "-")
	best, bestDist := "", 3
	for _, k := range userKeys {
		if d := editDistance(norm, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, by bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func parseExpiresAt(created time.Time, v string) (time.Time, string, bool) {
	const expected = "an RFC 3339 time after the object's creation, such as 2026-12-24T18:00:00Z"
	at, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
	// A date before the object existed is a typo (a wrong year, say), not
	// a wish to delete it at once.
	if err != nil || at.Before(created) {
		return time.Time{}, expected, false
	}
	return at, expected, true
}

func parseTTL(created time.Time, v string) (time.Time, string, bool) {
	const expected = "a positive duration: " + DurationForms
	d, err := ParseDuration(strings.TrimSpace(v))
	if err != nil || d <= 0 {
		return time.Time{}, expected, false
	}
	return created.Add(d), expected, true
}

func parseLegacyTTL(created time.Time, v string) (time.Time, string, bool) {
	const expected = "a positive whole number of seconds, such as 86400"
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 || n > int64(1<<63-1)/int64(time.Second) {
		return time.Time{}, expected, false
	}
	return created.Add(time.Duration(n) * time.Second), expected, true
}

// Brief is Error with a long value cut to its first bytes and its length,
// for Event notes, which the API server bounds; the audit trail and the
// log keep Error, with the whole value.
func (i Invalid) Brief() string {
	return i.text(brief(i.Value))
}

// briefLen is how many bytes of a value Brief shows.
const briefLen = 64

// brief quotes v, cut to briefLen bytes on a character boundary and
// followed by its length when it is longer.
func brief(v string) string {
	if len(v) <= briefLen {
		return strconv.Quote(v)
	}
	n := briefLen
	for n > 0 && !utf8.RuneStart(v[n]) {
		n--
	}
	return fmt.Sprintf("%q…(%d bytes)", v[:n], len(v))
}
