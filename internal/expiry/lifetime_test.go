// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCompute(t *testing.T) {
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const defaultTTL = 14 * Day
	fallback := created.Add(defaultTTL)
	soon := created.Add(2 * Day)
	soonText := soon.Format(time.RFC3339)

	tests := []struct {
		name        string
		annotations map[string]string
		wantKeep    bool
		// wantExpiresAt is ignored when wantKeep is set: ExpiresAt must then be zero.
		wantExpiresAt time.Time
		wantSource    string
		// wantInvalid lists the annotations reported invalid, in order.
		wantInvalid []string
	}{
		{
			name:          "uses the default TTL for an object without annotations",
			annotations:   nil,
			wantExpiresAt: fallback,
			wantSource:    SourceDefault,
		},
		{
			name:          "ignores annotations the controller does not own",
			annotations:   map[string]string{"example.com/ttl": "1h", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
			wantExpiresAt: fallback,
			wantSource:    SourceDefault,
		},
		{
			name:          "uses a prefixed ttl of 7d",
			annotations:   map[string]string{AnnotationTTL: "7d"},
			wantExpiresAt: created.Add(7 * Day),
			wantSource:    AnnotationTTL,
		},
		{
			name:          "uses a prefixed ttl longer than the default",
			annotations:   map[string]string{AnnotationTTL: "30d"},
			wantExpiresAt: created.Add(30 * Day),
			wantSource:    AnnotationTTL,
		},
		{
			name:          "uses an RFC 3339 expires-at",
			annotations:   map[string]string{AnnotationExpiresAt: soonText},
			wantExpiresAt: soon,
			wantSource:    AnnotationExpiresAt,
		},
		{
			name:          "reads an expires-at written with a time zone offset",
			annotations:   map[string]string{AnnotationExpiresAt: soon.In(time.FixedZone("", 2*60*60)).Format(time.RFC3339)},
			wantExpiresAt: soon,
			wantSource:    AnnotationExpiresAt,
		},
		{
			name:          "lets expires-at win over a longer ttl",
			annotations:   map[string]string{AnnotationExpiresAt: soonText, AnnotationTTL: "30d"},
			wantExpiresAt: soon,
			wantSource:    AnnotationExpiresAt,
		},
		{
			name:          "lets expires-at win over a shorter ttl",
			annotations:   map[string]string{AnnotationExpiresAt: soonText, AnnotationTTL: "1h"},
			wantExpiresAt: soon,
			wantSource:    AnnotationExpiresAt,
		},
		{
			name:          "honours a legacy ttl of whole seconds when it is alone",
			annotations:   map[string]string{AnnotationLegacyTTL: "3600"},
			wantExpiresAt: created.Add(time.Hour),
			wantSource:    AnnotationLegacyTTL,
		},
		{
			name:          "honours the longest legacy ttl that fits a duration",
			annotations:   map[string]string{AnnotationLegacyTTL: "9223372036"},
			wantExpiresAt: created.Add(9223372036 * time.Second),
			wantSource:    AnnotationLegacyTTL,
		},
		{
			name:          "ignores a legacy ttl when a prefixed ttl is present",
			annotations:   map[string]string{AnnotationTTL: "7d", AnnotationLegacyTTL: "60"},
			wantExpiresAt: created.Add(7 * Day),
			wantSource:    AnnotationTTL,
		},
		{
			name:          "ignores a legacy ttl when expires-at is present",
			annotations:   map[string]string{AnnotationExpiresAt: soonText, AnnotationLegacyTTL: "60"},
			wantExpiresAt: soon,
			wantSource:    AnnotationExpiresAt,
		},
		{
			name:          "does not validate a legacy ttl when a prefixed ttl is present",
			annotations:   map[string]string{AnnotationTTL: "7d", AnnotationLegacyTTL: "abc"},
			wantExpiresAt: created.Add(7 * Day),
			wantSource:    AnnotationTTL,
		},
		{
			name:          "does not validate a legacy ttl when expires-at is present",
			annotations:   map[string]string{AnnotationExpiresAt: soonText, AnnotationLegacyTTL: "abc"},
			wantExpiresAt: soon,
			wantSource:    AnnotationExpiresAt,
		},
		{
			name:          "ignores a legacy ttl when the prefixed ttl is present but invalid",
			annotations:   map[string]string{AnnotationTTL: "3 days", AnnotationLegacyTTL: "60"},
			wantExpiresAt: fallback,
			wantSource:    SourceDefault,
			wantInvalid:   []string{AnnotationTTL},
		},
		{
			name:          "ignores a legacy ttl when expires-at is present but invalid",
			annotations:   map[string]string{AnnotationExpiresAt: "tomorrow", AnnotationLegacyTTL: "60"},
			wantExpiresAt: fallback,
			wantSource:    SourceDefault,
			wantInvalid:   []string{AnnotationExpiresAt},
		},
		{
			name:        "keeps an object annotated keep=true",
			annotations: map[string]string{AnnotationKeep: "true", AnnotationTTL: "1h"},
			wantKeep:    true,
			wantSource:  AnnotationTTL,
		},
		{
			name:          "does not keep an object annotated keep=false",
			annotations:   map[string]string{AnnotationKeep: "false", AnnotationTTL: "7d"},
			wantExpiresAt: created.Add(7 * Day),
			wantSource:    AnnotationTTL,
		},
		{
			name:        "keeps an object whose keep value is invalid",
			annotations: map[string]string{AnnotationKeep: "yes-please", AnnotationTTL: "1h"},
			wantKeep:    true,
			wantSource:  AnnotationTTL,
			wantInvalid: []string{AnnotationKeep},
		},
		{
			name:          "falls back to the default for an invalid ttl",
			annotations:   map[string]string{AnnotationTTL: "3 days"},
			wantExpiresAt: fallback,
			wantSource:    SourceDefault,
			wantInvalid:   []string{AnnotationTTL},
		},
		{
			name:          "uses a valid ttl longer than the default when expires-at is invalid",
			annotations:   map[string]string{AnnotationExpiresAt: "next tuesday", AnnotationTTL: "30d"},
			wantExpiresAt: created.Add(30 * Day),
			wantSource:    AnnotationTTL,
			wantInvalid:   []string{AnnotationExpiresAt},
		},
		{
			name:          "uses the default when expires-at is invalid and the valid ttl is shorter",
			annotations:   map[string]string{AnnotationExpiresAt: "next tuesday", AnnotationTTL: "1h"},
			wantExpiresAt: fallback,
			wantSource:    SourceDefault,
			wantInvalid:   []string{AnnotationExpiresAt},
		},
		{
			name:          "lets a valid expires-at decide despite an invalid ttl",
			annotations:   map[string]string{AnnotationExpiresAt: soonText, AnnotationTTL: "3 days"},
			wantExpiresAt: soon,
			wantSource:    AnnotationExpiresAt,
			wantInvalid:   []string{AnnotationTTL},
		},
		{
			name:          "falls back to the default when expires-at and ttl are both invalid",
			annotations:   map[string]string{AnnotationExpiresAt: "next tuesday", AnnotationTTL: "3 days"},
			wantExpiresAt: fallback,
			wantSource:    SourceDefault,
			wantInvalid:   []string{AnnotationExpiresAt, AnnotationTTL},
		},
		{
			name:          "treats an expires-at before creation as a typo",
			annotations:   map[string]string{AnnotationExpiresAt: "2025-03-02T12:00:00Z"},
			wantExpiresAt: fallback,
			wantSource:    SourceDefault,
			wantInvalid:   []string{AnnotationExpiresAt},
		},
		{
			name:          "rejects an expires-at without a time zone",
			annotations:   map[string]string{AnnotationExpiresAt: "2026-03-03T12:00:00"},
			wantExpiresAt: fallback,
			wantSource:    SourceDefault,
			wantInvalid:   []string{AnnotationExpiresAt},
		},
		{
			name:          "rejects a ttl of 0s",
			annotations:   map[string]string{AnnotationTTL: "0s"},
			wantExpiresAt: fallback,
			wantSource:    SourceDefault,
			wantInvalid:   []string{AnnotationTTL},
		},
		{
			name:          "rejects a negative ttl",
			annotations:   map[string]string{AnnotationTTL: "-1h"},
			wantExpiresAt: fallback,
			wantSource:    SourceDefault,
			wantInvalid:   []string{AnnotationTTL},
		},
		{
			name:          "rejects a legacy ttl of 0",
			annotations:   map[string]string{AnnotationLegacyTTL: "0"},
			wantExpiresAt: fallback,
			wantSource:    SourceDefault,
			wantInvalid:   []string{AnnotationLegacyTTL},
		},
		{
			name:          "rejects a negative legacy ttl",
			annotations:   map[string]string{AnnotationLegacyTTL: "-5"},
			wantExpiresAt: fallback,
			wantSource:    SourceDefault,
			wantInvalid:   []string{AnnotationLegacyTTL},
		},
		{
			name:          "rejects a legacy ttl that is not a number",
			annotations:   map[string]string{AnnotationLegacyTTL: "abc"},
			wantExpiresAt: fallback,
			wantSource:    SourceDefault,
			wantInvalid:   []string{AnnotationLegacyTTL},
		},
		{
			name:          "rejects a legacy ttl written with a unit",
			annotations:   map[string]string{AnnotationLegacyTTL: "3600s"},
			wantExpiresAt: fallback,
			wantSource:    SourceDefault,
			wantInvalid:   []string{AnnotationLegacyTTL},
		},
		{
			name:          "rejects a legacy ttl too big for 64 bits",
			annotations:   map[string]string{AnnotationLegacyTTL: "99999999999999999999"},
			wantExpiresAt: fallback,
			wantSource:    SourceDefault,
			wantInvalid:   []string{AnnotationLegacyTTL},
		},
		{
			name:          "rejects a legacy ttl one second too long for a duration",
			annotations:   map[string]string{AnnotationLegacyTTL: "9223372037"},
			wantExpiresAt: fallback,
			wantSource:    SourceDefault,
			wantInvalid:   []string{AnnotationLegacyTTL},
		},
		{
			name:          "tolerates whitespace around a ttl",
			annotations:   map[string]string{AnnotationTTL: " 7d\n"},
			wantExpiresAt: created.Add(7 * Day),
			wantSource:    AnnotationTTL,
		},
		{
			name:          "tolerates whitespace around an expires-at",
			annotations:   map[string]string{AnnotationExpiresAt: "\t" + soonText + " "},
			wantExpiresAt: soon,
			wantSource:    AnnotationExpiresAt,
		},
		{
			name:          "tolerates whitespace around a legacy ttl",
			annotations:   map[string]string{AnnotationLegacyTTL: " 3600 "},
			wantExpiresAt: created.Add(time.Hour),
			wantSource:    AnnotationLegacyTTL,
		},
		{
			name:        "tolerates whitespace around keep",
			annotations: map[string]string{AnnotationKeep: " true\n", AnnotationTTL: "1h"},
			wantKeep:    true,
			wantSource:  AnnotationTTL,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(created, tt.annotations, defaultTTL)
			if got.Keep != tt.wantKeep {
				t.Errorf("Keep = %v, want %v", got.Keep, tt.wantKeep)
			}
			if tt.wantKeep {
				if !got.ExpiresAt.IsZero() {
					t.Errorf("ExpiresAt = %v for a kept object, want the zero time", got.ExpiresAt)
				}
			} else if !got.ExpiresAt.Equal(tt.wantExpiresAt) {
				t.Errorf("ExpiresAt = %v, want %v", got.ExpiresAt, tt.wantExpiresAt)
			}
			if got.Source != tt.wantSource {
				t.Errorf("Source = %q, want %q", got.Source, tt.wantSource)
			}
			var invalid []string
			for _, inv := range got.Invalid {
				invalid = append(invalid, inv.Annotation)
				if inv.Value != tt.annotations[inv.Annotation] {
					t.Errorf("Invalid %s has Value %q, want the annotation's value %q", inv.Annotation, inv.Value, tt.annotations[inv.Annotation])
				}
				msg := inv.Error()
				for _, want := range []string{inv.Annotation, strconv.Quote(inv.Value), "expected " + inv.Expected} {
					if !strings.Contains(msg, want) {
						t.Errorf("Invalid.Error() = %q, want it to contain %q", msg, want)
					}
				}
			}
			if !slices.Equal(invalid, tt.wantInvalid) {
				t.Errorf("Invalid annotations = %q, want %q", invalid, tt.wantInvalid)
			}
		})
	}
}

func TestInvalidError(t *testing.T) {
	got := Compute(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), map[string]string{AnnotationTTL: "3 days"}, Day)
	if len(got.Invalid) != 1 {
		t.Fatalf("Invalid = %v, want one entry", got.Invalid)
	}
	want := `annotation timeout.amphitheatre.app/ttl has invalid value "3 days": expected a positive duration: ` +
		DurationForms + `; the object expires at the later of the policy's defaultTTL and its other valid annotations`
	if msg := got.Invalid[0].Error(); msg != want {
		t.Errorf("Error() = %q, want %q", msg, want)
	}
}

// Bits of FuzzCompute's present argument: which annotations the object carries.
const (
	fuzzKeep = 1 << iota
	fuzzExpiresAt
	fuzzTTL
	fuzzLegacyTTL
)

func FuzzCompute(f *testing.F) {
	f.Add("7d", "2026-03-03T12:00:00Z", "true", "3600", uint8(fuzzTTL), uint32(14*24*60*60))
	f.Add("30d", "next tuesday", "false", "60", uint8(fuzzKeep|fuzzExpiresAt|fuzzTTL), uint32(14*24*60*60))
	f.Add("1h", "2025-03-01T12:00:00Z", "yes-please", "60", uint8(fuzzExpiresAt|fuzzTTL|fuzzLegacyTTL), uint32(24*60*60))
	f.Add("3 days", "2026-03-02T12:00:00Z", "", "abc", uint8(fuzzExpiresAt|fuzzTTL), uint32(60))
	f.Add("", "", "", "99999999999999999999", uint8(fuzzLegacyTTL), uint32(1))
	f.Fuzz(func(t *testing.T, ttl, expiresAt, keep, legacyTTL string, present uint8, defaultSeconds uint32) {
		created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		// A policy's default TTL is always positive: NewSchedule rejects zero.
		defaultTTL := time.Duration(defaultSeconds)*time.Second + time.Second
		fallback := created.Add(defaultTTL)

		annotations := map[string]string{}
		for _, a := range []struct {
			bit   uint8
			name  string
			value string
		}{
			{fuzzKeep, AnnotationKeep, keep},
			{fuzzExpiresAt, AnnotationExpiresAt, expiresAt},
			{fuzzTTL, AnnotationTTL, ttl},
			{fuzzLegacyTTL, AnnotationLegacyTTL, legacyTTL},
		} {
			if present&a.bit != 0 {
				annotations[a.name] = a.value
			}
		}

		got := Compute(created, annotations, defaultTTL)

		invalid := map[string]bool{}
		for _, inv := range got.Invalid {
			if invalid[inv.Annotation] {
				t.Fatalf("Invalid lists %s twice: %v", inv.Annotation, got.Invalid)
			}
			invalid[inv.Annotation] = true
			if v, ok := annotations[inv.Annotation]; !ok || v != inv.Value {
				t.Fatalf("Invalid names %s=%q, which the object does not carry", inv.Annotation, inv.Value)
			}
		}
		_, hasKeep := annotations[AnnotationKeep]
		if invalid[AnnotationKeep] && !got.Keep {
			t.Fatalf("keep=%q is invalid but the object is not kept", keep)
		}
		if got.Keep && !hasKeep {
			t.Fatalf("Keep is set without a keep annotation: %v", annotations)
		}
		if got.Keep {
			if !got.ExpiresAt.IsZero() {
				t.Fatalf("Keep is set and ExpiresAt = %v, want the zero time", got.ExpiresAt)
			}
			return
		}

		// The annotation that decides, when it is valid: expires-at, else
		// ttl, else the legacy ttl, which is not even read when either
		// prefixed annotation is present.
		decider := SourceDefault
		for _, name := range []string{AnnotationExpiresAt, AnnotationTTL, AnnotationLegacyTTL} {
			if _, ok := annotations[name]; ok {
				decider = name
				break
			}
		}
		_, hasExpiresAt := annotations[AnnotationExpiresAt]
		_, hasTTL := annotations[AnnotationTTL]
		if (hasExpiresAt || hasTTL) && invalid[AnnotationLegacyTTL] {
			t.Fatalf("the legacy ttl is reported invalid although a prefixed lifetime annotation is present: %v", got.Invalid)
		}

		if got.ExpiresAt.Before(created) {
			t.Fatalf("ExpiresAt = %v, before creation at %v; annotations %q", got.ExpiresAt, created, annotations)
		}
		if got.Source == SourceDefault && !got.ExpiresAt.Equal(fallback) {
			t.Fatalf("Source is the default but ExpiresAt = %v, want %v", got.ExpiresAt, fallback)
		}
		if got.Source != SourceDefault && invalid[got.Source] {
			t.Fatalf("Source is %s, which is listed as invalid", got.Source)
		}

		switch {
		case decider == SourceDefault:
			if got.Source != SourceDefault {
				t.Fatalf("no lifetime annotation, but Source = %q", got.Source)
			}
		case !invalid[decider]:
			if got.Source != decider {
				t.Fatalf("%s=%q is valid and decides, but Source = %q; annotations %q", decider, annotations[decider], got.Source, annotations)
			}
		default:
			// The documented rule: a typo never makes an object expire
			// sooner than the default would, and the object lives the later
			// of the default and its remaining valid annotations.
			if got.ExpiresAt.Before(fallback) {
				t.Fatalf("%s=%q is invalid and ExpiresAt = %v, before the default %v; annotations %q", decider, annotations[decider], got.ExpiresAt, fallback, annotations)
			}
			want := fallback
			if decider == AnnotationExpiresAt && hasTTL && !invalid[AnnotationTTL] {
				if alone := Compute(created, map[string]string{AnnotationTTL: ttl}, defaultTTL); alone.ExpiresAt.After(want) {
					want = alone.ExpiresAt
				}
			}
			if !got.ExpiresAt.Equal(want) {
				t.Fatalf("%s=%q is invalid and ExpiresAt = %v, want the later of the default and the other valid annotations, %v; annotations %q", decider, annotations[decider], got.ExpiresAt, want, annotations)
			}
		}
	})
}

func TestComputeReportsUnknownKeysUnderThePrefix(t *testing.T) {
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		annotations map[string]string
		// wantUnknown lists the keys reported unknown, in order; wantHint
		// is the key each suggests ("" for none).
		wantUnknown []string
		wantHint    []string
		wantKeep    bool
	}{
		{
			name:        "reports a capitalised keep and suggests keep, and does not keep",
			annotations: map[string]string{Prefix + "Keep": "true"},
			wantUnknown: []string{Prefix + "Keep"},
			wantHint:    []string{"keep"},
		},
		{
			name:        "reports a misspelt keep and suggests keep",
			annotations: map[string]string{Prefix + "kep": "true"},
			wantUnknown: []string{Prefix + "kep"},
			wantHint:    []string{"keep"},
		},
		{
			name:        "reports several unknown keys in the order of their names",
			annotations: map[string]string{Prefix + "expires_at": "x", Prefix + "team": "alice", Prefix + "TTL": "1h", AnnotationTTL: "2h"},
			wantUnknown: []string{Prefix + "TTL", Prefix + "expires_at", Prefix + "team"},
			wantHint:    []string{"ttl", "expires-at", ""},
		},
		{
			name: "knows every key the controller reads or writes",
			annotations: map[string]string{
				AnnotationTTL: "1h", AnnotationExpiresAt: "2026-03-02T12:00:00Z", AnnotationKeep: "true",
				AnnotationReminders: "{}", Prefix + "notify": "a@example.com",
			},
			wantKeep: true,
		},
		{
			name:        "leaves other prefixes alone",
			annotations: map[string]string{"example.com/Keep": "true", "timeout.amphitheatre.app.example/keep": "true"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(created, tt.annotations, time.Hour)
			var unknown, hints []string
			for _, inv := range got.Invalid {
				if !inv.Unknown {
					continue
				}
				unknown = append(unknown, inv.Annotation)
				hint := ""
				if _, after, ok := strings.Cut(inv.Expected, "did you mean "); ok {
					hint = strings.TrimSuffix(after, "?")
				}
				hints = append(hints, hint)
				if inv.Value != tt.annotations[inv.Annotation] || !strings.Contains(inv.Error(), "unknown") ||
					!strings.Contains(inv.Expected, "ttl, expires-at, keep, notify") {
					t.Errorf("unknown key reported as %q", inv.Error())
				}
			}
			if !slices.Equal(unknown, tt.wantUnknown) || (tt.wantHint != nil && !slices.Equal(hints, tt.wantHint)) {
				t.Errorf("unknown keys %q with hints %q, want %q with %q", unknown, hints, tt.wantUnknown, tt.wantHint)
			}
			if got.Keep != tt.wantKeep {
				t.Errorf("Keep = %t, want %t", got.Keep, tt.wantKeep)
			}
		})
	}
}

func TestInvalidBriefShowsTheStartOfALongValue(t *testing.T) {
	long := strings.Repeat("1", 1500) + "x"
	tests := []struct {
		name, value, wantQuoted string
	}{
		{"quotes a short value whole", "3 days", `"3 days"`},
		{"quotes a value of 64 bytes whole", strings.Repeat("é", 32), `"` + strings.Repeat("é", 32) + `"`},
		{"shows the first 64 bytes of a long value and its length", long, `"` + long[:64] + `"…(1501 bytes)`},
		{"does not split a character at 64 bytes", "a" + strings.Repeat("é", 40), `"a` + strings.Repeat("é", 31) + `"…(81 bytes)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := Compute(time.Now(), map[string]string{AnnotationTTL: tt.value}, time.Hour).Invalid[0]
			if got := inv.Brief(); !strings.Contains(got, "annotation "+AnnotationTTL+" has invalid value "+tt.wantQuoted+": expected a positive duration") {
				t.Errorf("Brief() = %q, want it to show the value as %s", got, tt.wantQuoted)
			}
			if !strings.Contains(inv.Error(), strconv.Quote(tt.value)) {
				t.Errorf("Error() = %q lacks the whole value", inv.Error())
			}
		})
	}
}
