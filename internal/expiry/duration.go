// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package expiry holds the pure time logic: parsing lifetimes, computing expiries and planning the next action.
package expiry

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// DurationPattern is the regular expression the TimeoutPolicy CRD checks
// durations against at admission. ParseDuration accepts exactly the strings
// it matches, except those too long to fit in a time.Duration.
const DurationPattern = `^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h|d|w))+)$`

// DurationForms describes the accepted forms, for error messages.
const DurationForms = "a number and a unit (ns, us, ms, s, m, h, d, w), repeated if needed, such as 90m, 36h, 14d, 2w or 1w2d12h"

// Day and Week are the units ParseDuration adds to Go's.
const (
	Day  = 24 * time.Hour
	Week = 7 * Day
)

var units = []struct {
	name string
	unit time.Duration
}{
	// Two-letter units come first so that "ms" is not read as "m".
	{"ns", time.Nanosecond},
	{"us", time.Microsecond},
	{"µs", time.Microsecond},
	{"ms", time.Millisecond},
	{"s", time.Second},
	{"m", time.Minute},
	{"h", time.Hour},
	{"d", Day},
	{"w", Week},
}

// ErrNegative is returned for durations written with a minus sign.
var ErrNegative = errors.New("must not be negative")

// ParseDuration parses a Go duration in which days (d) and weeks (w) may
// also be used: "90m", "36h", "14d", "2w", "1w2d12h", "1.5d". It rejects
// signs, spaces and values that overflow a time.Duration.
func ParseDuration(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	if s == "" {
		return 0, fmt.Errorf("empty duration: expected %s", DurationForms)
	}
	if s[0] == '-' {
		return 0, fmt.Errorf("duration %q %w", s, ErrNegative)
	}
	var total time.Duration
	rest := s
	for rest != "" {
		whole, frac, scale, n := leadingNumber(rest)
		if n < 0 {
			return 0, fmt.Errorf("invalid duration %q: expected %s", s, DurationForms)
		}
		rest = rest[n:]
		unit := time.Duration(0)
		for _, u := range units {
			if strings.HasPrefix(rest, u.name) {
				unit = u.unit
				rest = rest[len(u.name):]
				break
			}
		}
		if unit == 0 {
			return 0, fmt.Errorf("invalid duration %q: expected %s", s, DurationForms)
		}
		if whole > uint64(math.MaxInt64)/uint64(unit) {
			return 0, fmt.Errorf("duration %q is too long", s)
		}
		v := time.Duration(whole) * unit
		if frac > 0 {
			v += time.Duration(float64(frac) * (float64(unit) / scale))
		}
		if v < 0 || total > math.MaxInt64-v {
			return 0, fmt.Errorf("duration %q is too long", s)
		}
		total += v
	}
	return total, nil
}

// leadingNumber reads "123" or "123.456" at the start of s. It returns the
// integer part, the fraction's digits as an integer and the power of ten
// they are to be divided by, and the length read, or -1 when s does not
// start with such a number. An integer part too big for a uint64 is
// returned as math.MaxUint64, so that the caller reports it as too long
// rather than as malformed: the CRD pattern accepts it.
func leadingNumber(s string) (whole, frac uint64, scale float64, n int) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		if whole > (math.MaxUint64-9)/10 {
			whole = math.MaxUint64
		} else {
			whole = whole*10 + uint64(s[i]-'0')
		}
		i++
	}
	if i == 0 {
		return 0, 0, 0, -1
	}
	scale = 1
	if i < len(s) && s[i] == '.' {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			// Digits past the 18th cannot change a time.Duration: drop them.
			if scale < 1e18 {
				frac = frac*10 + uint64(s[j]-'0')
				scale *= 10
			}
			j++
		}
		if j == i+1 {
			return 0, 0, 0, -1
		}
		i = j
	}
	return whole, frac, scale, i
}

// FormatDuration writes d in the units people read: "14d", "1d12h",
// "1h30m", "45s". Durations of a second or more are rounded down to the
// second; it is the inverse of ParseDuration for such values.
func FormatDuration(d time.Duration) string {
	if d < 0 {
		if d == math.MinInt64 {
			d++ // -d would overflow back to itself
		}
		return "-" + FormatDuration(-d)
	}
	if d < time.Second {
		return d.String()
	}
	d = d.Truncate(time.Second)
	var b strings.Builder
	for _, u := range []struct {
		name string
		unit time.Duration
	}{{"d", Day}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}} {
		if n := d / u.unit; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			d -= n * u.unit
		}
	}
	return b.String()
}
