// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// narrator writes lines stamped with the time since the demo started.
type narrator struct {
	out   io.Writer
	start time.Time
}

func (n *narrator) say(format string, args ...any) {
	fmt.Fprintf(n.out, "[%6.1fs] %s\n", time.Since(n.start).Seconds(), fmt.Sprintf(format, args...))
}

// more continues the previous line, aligned under its text.
func (n *narrator) more(format string, args ...any) {
	fmt.Fprintf(n.out, "%10s%s\n", "", fmt.Sprintf(format, args...))
}

// table writes tab-separated rows as aligned columns under the last line.
func (n *narrator) table(rows []string) {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(w, r)
	}
	w.Flush()
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		n.more("%s", line)
	}
}

// at is a moment as an offset from the start, the unit of the narration.
func (n *narrator) at(t time.Time) string {
	return fmt.Sprintf("+%.1fs", t.Sub(n.start).Seconds())
}

func (n *narrator) tail(path string, lines int) {
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	last := strings.Split(strings.TrimSpace(string(data)), "\n")
	last = last[max(0, len(last)-lines):]
	n.say("last lines of the controller log:")
	for _, l := range last {
		n.more("%s", l)
	}
}

// scene opens scene i of the story with a line of its own.
func (n *narrator) scene(i int, title string) {
	n.say("── scene %d: %s ──", i, title)
}
