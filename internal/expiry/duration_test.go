// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"
)

var durationPattern = regexp.MustCompile(DurationPattern)

func TestParseDurationAccepts(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want time.Duration
	}{
		{"accepts a bare zero", "0", 0},
		{"accepts minutes", "90m", 90 * time.Minute},
		{"accepts hours", "36h", 36 * time.Hour},
		{"accepts days", "14d", 14 * Day},
		{"accepts weeks", "2w", 2 * Week},
		{"accepts weeks, days and hours combined", "1w2d12h", Week + 2*Day + 12*time.Hour},
		{"accepts a fraction of an hour", "1.5h", 90 * time.Minute},
		{"accepts a fraction of a day", "1.5d", 36 * time.Hour},
		{"accepts milliseconds", "300ms", 300 * time.Millisecond},
		{"accepts microseconds written us", "10us", 10 * time.Microsecond},
		{"accepts microseconds written µs", "10µs", 10 * time.Microsecond},
		{"accepts zero seconds", "0s", 0},
		{"accepts the longest duration there is", "9223372036854775807ns", math.MaxInt64},
		{"accepts the most weeks that fit", "15250w", 15250 * Week},
		{"reads ms as milliseconds, not minutes", "1m1ms", time.Minute + time.Millisecond},
		{"ignores fraction digits past the 18th", "1.9999999999999999999999h", 2 * time.Hour},
		{"accepts a fraction of a nanosecond, rounded down", "1.5ns", time.Nanosecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			if err != nil {
				t.Fatalf("ParseDuration(%q) returned error %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseDuration(%q) = %v, want %v", tt.in, got, tt.want)
			}
			if !durationPattern.MatchString(tt.in) {
				t.Errorf("DurationPattern does not match %q, which ParseDuration accepts", tt.in)
			}
		})
	}
}

func TestParseDurationRejects(t *testing.T) {
	tests := []struct {
		name string
		in   string
		// wantErr is a substring of the error message.
		wantErr string
		// wantPattern is whether DurationPattern matches: only values too
		// long for a time.Duration pass admission and still fail to parse.
		wantPattern bool
	}{
		{"rejects the empty string", "", "expected", false},
		{"rejects a minus sign", "-1h", "must not be negative", false},
		{"rejects a plus sign", "+1h", "expected", false},
		{"rejects a number without a unit", "1", "expected", false},
		{"rejects a unit without a number", "h", "expected", false},
		{"rejects a space between number and unit", "1 h", "expected", false},
		{"rejects a leading space", " 1h", "expected", false},
		{"rejects a trailing space", "1h ", "expected", false},
		{"rejects a trailing newline", "1h\n", "expected", false},
		{"rejects a point without a fraction", "1.h", "expected", false},
		{"rejects a fraction without a whole part", ".5h", "expected", false},
		{"rejects years", "1y", "expected", false},
		{"rejects an upper-case unit", "1D", "expected", false},
		{"rejects words", "3 days", "expected", false},
		{"rejects a number left over after a unit", "1h30", "expected", false},
		{"rejects a double zero", "00", "expected", false},
		{"rejects the Greek letter mu for micro", "10\u03bcs", "expected", false},
		{"rejects too many weeks", "300000000w", "too long", true},
		{"rejects one nanosecond too many", "9223372036854775808ns", "too long", true},
		{"rejects a sum that overflows", "15250w6d", "too long", true},
		{"rejects a number too big for 64 bits", "99999999999999999999s", "too long", true},
		{"rejects a fraction that overflows", "15250w1.9999d", "too long", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			if err == nil {
				t.Fatalf("ParseDuration(%q) = %v, want an error", tt.in, got)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseDuration(%q) error = %q, want it to contain %q", tt.in, err, tt.wantErr)
			}
			if got != 0 {
				t.Errorf("ParseDuration(%q) = %v with an error, want 0", tt.in, got)
			}
			if m := durationPattern.MatchString(tt.in); m != tt.wantPattern {
				t.Errorf("DurationPattern.MatchString(%q) = %v, want %v", tt.in, m, tt.wantPattern)
			}
		})
	}
}

func TestParseDurationWrapsErrNegative(t *testing.T) {
	_, err := ParseDuration("-1h")
	if !errors.Is(err, ErrNegative) {
		t.Errorf("ParseDuration(%q) error = %v, want one wrapping ErrNegative", "-1h", err)
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		name string
		in   time.Duration
		want string
	}{
		{"writes whole days as days", 14 * Day, "14d"},
		{"writes more than a day as days and hours", 36 * time.Hour, "1d12h"},
		{"writes more than an hour as hours and minutes", 90 * time.Minute, "1h30m"},
		{"writes seconds alone", 45 * time.Second, "45s"},
		{"writes zero as 0s", 0, "0s"},
		{"writes less than a second as Go does", 500 * time.Millisecond, "500ms"},
		{"skips units that are zero", Day + time.Second, "1d1s"},
		{"rounds down to the second", 90*time.Second + 999*time.Millisecond, "1m30s"},
		{"writes the most negative duration without recursing forever", math.MinInt64, "-106751d23h47m16s"},
		{"writes a negative duration with a minus sign", -90 * time.Minute, "-1h30m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FormatDuration(tt.in); got != tt.want {
				t.Errorf("FormatDuration(%v) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestFormatDurationRoundTrips(t *testing.T) {
	tests := []struct {
		name string
		in   time.Duration
	}{
		{"round-trips one second", time.Second},
		{"round-trips just under a minute", 59 * time.Second},
		{"round-trips a day and a second", Day + time.Second},
		{"round-trips just under two weeks", 2*Week - time.Second},
		{"round-trips a duration with a fraction of a second", 36*time.Hour + 1500*time.Millisecond},
		{"round-trips the longest duration there is", math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := FormatDuration(tt.in)
			got, err := ParseDuration(s)
			if err != nil {
				t.Fatalf("ParseDuration(FormatDuration(%v) = %q) returned error %v", tt.in, s, err)
			}
			if want := tt.in.Truncate(time.Second); got != want {
				t.Errorf("ParseDuration(FormatDuration(%v) = %q) = %v, want %v", tt.in, s, got, want)
			}
		})
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"0", "90m", "1w2d12h", "1.5d", "10µs", "-1h", "1 h", "300000000w", "9223372036854775807ns"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		matches := durationPattern.MatchString(s)
		if err == nil {
			if !matches {
				t.Fatalf("ParseDuration(%q) = %v, but DurationPattern rejects it", s, d)
			}
			if d < 0 {
				t.Fatalf("ParseDuration(%q) = %v, a negative duration", s, d)
			}
		} else if matches && !strings.Contains(err.Error(), "too long") {
			t.Fatalf("ParseDuration(%q) error = %q; DurationPattern matches it, so the only allowed error is one saying it is too long", s, err)
		}
		if err != nil || d < time.Second {
			return
		}
		out := FormatDuration(d)
		back, err := ParseDuration(out)
		if err != nil {
			t.Fatalf("ParseDuration(FormatDuration(%v) = %q) returned error %v", d, out, err)
		}
		if want := d.Truncate(time.Second); back != want {
			t.Fatalf("ParseDuration(FormatDuration(%v) = %q) = %v, want %v", d, out, back, want)
		}
	})
}
