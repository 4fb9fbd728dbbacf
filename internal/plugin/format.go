// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"fmt"
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

// Left writes the time left before a deletion: "2d 4h", or "due" when
// it is due now or past.
func Left(d time.Duration) string {
	if d < time.Second {
		return "due"
	}
	return Age(d)
}

// relative writes t as seen from now: "in 2d 4h", "3m 10s ago", "now".
func relative(t, now time.Time) string {
	d := t.Sub(now)
	switch {
	case d >= time.Second:
		return "in " + Age(d)
	case d <= -time.Second:
		return Age(-d) + " ago"
	}
	return "now"
}

// truncate shortens s to n runes, marking the cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
