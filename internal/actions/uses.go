// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package actions

import (
	"strconv"
	"strings"
	"time"
)

// maxUses is how many uses the link-uses annotation keeps: a link's
// second click finds its first among them as long as fewer than this many
// other clicks changed the object in between.
const maxUses = 20

// use is one use of a link on an object: which token, for what, when.
type use struct {
	ID     string
	Action Action
	At     time.Time
}

func (u use) String() string {
	return u.ID + ":" + string(u.Action) + ":" + strconv.FormatInt(u.At.Unix(), 10)
}

// parseUses reads the link-uses annotation, oldest first; entries that do
// not parse are dropped.
func parseUses(v string) []use {
	var out []use
	for _, e := range strings.Split(v, ",") {
		parts := strings.Split(strings.TrimSpace(e), ":")
		if len(parts) != 3 || parts[0] == "" {
			continue
		}
		sec, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, use{ID: parts[0], Action: Action(parts[1]), At: time.Unix(sec, 0).UTC()})
	}
	return out
}

// findUse returns the use of token id for action, if the list has it.
func findUse(uses []use, id string, a Action) (use, bool) {
	for _, u := range uses {
		if u.ID == id && u.Action == a {
			return u, true
		}
	}
	return use{}, false
}

// withUse is the annotation's value with u added, keeping the newest
// maxUses.
func withUse(uses []use, u use) string {
	uses = append(uses, u)
	if len(uses) > maxUses {
		uses = uses[len(uses)-maxUses:]
	}
	parts := make([]string, len(uses))
	for i, u := range uses {
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}
