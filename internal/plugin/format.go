// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"fmt"
	"math"
	"time"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// Age writes a length of time for people, in its two largest units:
// "2d 4h", "5h 12m", "42s". Negative lengths count as zero.
func Age(d time.Duration) string {
	if d < time.Second {
		return "0s"
	}
	units := []struct {
		unit time.Duration
		name string
	}{{expiry.Day, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}}
	for i, u := range units {
		n := d / u.unit
		if n == 0 {
			continue
		}
		out := fmt.Sprintf("%d%s", n, u.name)
		if i+1 < len(units) {
			if m := d % u.unit / units[i+1].unit; m > 0 {
				out += fmt.Sprintf(" %d%s", m, units[i+1].name)
			}
		}
		return out
	}
	return "0s"
}

// Span writes the time from one moment to a later one for people, as
// Age does, and a span of a year or more in years and days ("973y 12d"):
// a time.Duration stops at about 292 years, and a date in 2999 must not
// read as "106751d 23h". A negative span counts as zero.
func Span(from, to time.Time) string {
	y := to.Year() - from.Year()
	if y > 0 && from.AddDate(y, 0, 0).After(to) {
		y--
	}
	if y <= 0 {
		return Age(to.Sub(from))
	}
	out := fmt.Sprintf("%dy", y)
	if days := to.Sub(from.AddDate(y, 0, 0)) / expiry.Day; days > 0 {
		out += fmt.Sprintf(" %dd", days)
	}
	return out
}

// Left writes the time left from now to a deletion at: "2d 4h", or
// "due" when it is due now or past.
func Left(at, now time.Time) string {
	if at.Before(now.Add(time.Second)) {
		return "due"
	}
	return Span(now, at)
}

// relative writes t as seen from now: "in 2d 4h", "3m 10s ago", "now".
func relative(t, now time.Time) string {
	switch {
	case !t.Before(now.Add(time.Second)):
		return "in " + Span(now, t)
	case !t.After(now.Add(-time.Second)):
		return Span(t, now) + " ago"
	}
	return "now"
}

// secondsBetween is the whole seconds from one moment to another, also
// past the 292 years a time.Duration holds.
func secondsBetween(from, to time.Time) int64 {
	if d := to.Sub(from); d != math.MaxInt64 && d != math.MinInt64 {
		return int64(d / time.Second)
	}
	return to.Unix() - from.Unix()
}

// truncate shortens s to n runes, marking the cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
