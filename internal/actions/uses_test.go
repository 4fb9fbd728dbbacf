// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package actions

import (
	"fmt"
	"testing"
	"time"
)

// The link-uses annotation stays small however many clicks an object
// gets: it keeps the newest maxUses, and a hand-edited entry that does
// not parse is dropped rather than refusing every click.
func TestLinkUsesKeepTheNewestAndStaySmall(t *testing.T) {
	at := time.Date(2026, time.November, 28, 9, 0, 0, 0, time.UTC)
	var uses []use
	for i := range 3 * maxUses {
		uses = parseUses(withUse(uses, use{ID: fmt.Sprintf("%016x", i), Action: Extend, At: at.Add(time.Duration(i) * time.Second)}))
	}
	if len(uses) != maxUses {
		t.Fatalf("%d uses kept, want %d", len(uses), maxUses)
	}
	if _, ok := findUse(uses, fmt.Sprintf("%016x", 3*maxUses-1), Extend); !ok {
		t.Error("the newest use is gone")
	}
	if _, ok := findUse(uses, fmt.Sprintf("%016x", 0), Extend); ok {
		t.Error("the oldest use is still kept")
	}
	if n := len(withUse(uses, use{ID: "ffffffffffffffff", Action: Delete, At: at})); n > 1024 {
		t.Errorf("the annotation is %d bytes, want it small", n)
	}
	got := parseUses("garbage, 0123456789abcdef:wake:1764320400,:extend:1,abc:extend:soon")
	if len(got) != 1 || got[0].ID != "0123456789abcdef" || got[0].Action != Wake {
		t.Errorf("parseUses kept %+v, want only the well-formed entry", got)
	}
}
