// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"fmt"
	"strconv"
	"strings"
	"time"
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
}

func (i Invalid) Error() string {
	return fmt.Sprintf("annotation %s has invalid value %q: expected %s; %s", i.Annotation, i.Value, i.Expected, i.Fallback)
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
	return l
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
