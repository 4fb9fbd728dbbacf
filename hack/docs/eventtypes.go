// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// The event types of the messages (v1alpha1.EventTypes) are listed in one
// table, that of the notifications guide, and the webhooks guide's table
// of CloudEvent types follows it. Elsewhere a page links to them rather
// than list or count them; the checks below find the lists and counts
// that a new event type would leave behind.

// cloudEventTypes: the table of the webhooks guide whose first column is
// the CloudEvent `type` has a row for each event type, and says in each
// what data.expiresAt carries, which differs between them.
func (n names) cloudEventTypes() {
	pg := n.ref("docs/guides/webhooks.md")
	if pg == nil {
		return
	}
	var types []string
	for _, t := range n.facts.MessageTypes {
		types = append(types, notify.CloudEventType(v1alpha1.EventType(t)))
	}
	n.bothWays(pg, pg.tableColumn("`type`", 0), types,
		"the CloudEvent type %s is not in the table of event types",
		"the CloudEvent type %s is not one the controller sends")
	for _, r := range pg.tableRows("`type`") {
		if len(r.cells) < 3 || strings.TrimSpace(r.cells[2]) == "" {
			n.report(pg.path, r.line, "the table of event types does not say what data.expiresAt carries for this one")
		}
	}
}

// unit is a paragraph, a list item or a table row of a page, its lines
// joined by spaces: a list may wrap across lines.
type unit struct {
	text   string
	starts []int // the offset in text where each line begins
	first  int   // the line of the first, from 1
}

// line is the line of the offset off of the unit's text.
func (u unit) line(off int) int {
	i, found := slices.BinarySearch(u.starts, off)
	if !found {
		i--
	}
	return u.first + i
}

var listItem = regexp.MustCompile(`^\s*(?:[-*+]|\d+\.)\s`)

// units splits the prose of a page into paragraphs, list items and table
// rows.
func (pg *page) units() []unit {
	var out []unit
	var cur *unit
	last := -2
	flush := func() {
		if cur != nil {
			out = append(out, *cur)
			cur = nil
		}
	}
	for _, i := range pg.prose {
		l := pg.lines[i]
		t := strings.TrimSpace(l)
		if i != last+1 || t == "" || heading.MatchString(t) || strings.HasPrefix(t, "|") || listItem.MatchString(l) {
			flush()
		}
		last = i
		if t == "" {
			continue
		}
		if cur == nil {
			cur = &unit{first: i + 1}
		} else {
			cur.text += " "
		}
		cur.starts = append(cur.starts, len(cur.text))
		cur.text += t
		if heading.MatchString(t) || strings.HasPrefix(t, "|") {
			flush()
		}
	}
	flush()
	return out
}

// listSeparator is what stands between two items of a list: a comma, and
// or or, a slash.
var listSeparator = regexp.MustCompile(`^(?:,\s*|,?\s+(?:and|or)\s+|\s*/\s*)$`)

// minList is the shortest run of event types taken for a list of them
// all, out of n: more than half, and four at least. Shorter runs name a
// group on purpose: the three messages of the outbox, the three that give
// notice, the three of sleep, the messages the plugin's explain plans.
func minList(n int) int {
	return max(4, n/2+1)
}

// eventTypeLists: a list of more than half the event types (in code
// spans, separated by commas, and, or) names every one, unless it says it
// is partial with an ellipsis or "etc.".
func (n names) eventTypeLists() {
	all := n.facts.MessageTypes
	name := func(code string) (string, bool) {
		code = strings.TrimPrefix(code, notify.CloudEventTypePrefix)
		return code, slices.Contains(all, code)
	}
	for _, p := range n.sortedPages() {
		for _, u := range n.pages[p].units() {
			spans := codeSpan.FindAllStringSubmatchIndex(u.text, -1)
			for i := 0; i < len(spans); {
				// The run of event types that begins at spans[i].
				j := i
				var run []string
				for ; j < len(spans); j++ {
					t, ok := name(u.text[spans[j][2]:spans[j][3]])
					if !ok || j > i && !listSeparator.MatchString(u.text[spans[j-1][1]:spans[j][0]]) {
						break
					}
					run = append(run, t)
				}
				if j == i {
					i++
					continue
				}
				end := spans[j-1][1]
				if len(run) >= minList(len(all)) && !partial(u.text[end:]) {
					var without []string
					for _, t := range all {
						if !slices.Contains(run, t) {
							without = append(without, t)
						}
					}
					if len(without) > 0 {
						n.report(p, u.line(spans[i][0]), "lists %d of the %d event types, without %s: name them all, or link to the table of event types (docs/guides/notifications.md#what-is-sent-and-when)",
							len(slices.Compact(slices.Sorted(slices.Values(run)))), len(all), strings.Join(without, ", "))
					}
				}
				i = j
			}
		}
	}
}

// partial reports whether what follows a list says that it is not all:
// an ellipsis or "etc." before the end of its clause.
func partial(after string) bool {
	after = strings.ReplaceAll(after, "...", "…")
	if i := strings.IndexAny(after, ").;:"); i >= 0 {
		after = after[:i]
	}
	return strings.Contains(after, "…") || strings.Contains(after, "etc")
}

var (
	numberWords = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
		"eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"}
	number = `(` + strings.Join(numberWords, "|") + `|\d+)`
	// "ten event types", "the 7 message types", "seven possible event types".
	typesCounted = regexp.MustCompile(`(?i)\b` + number + `\s+(?:\w+\s+)?(?:event|message)\s+types\b`)
	// "not one of the seven", in a sentence about event types.
	oneOfThe  = regexp.MustCompile(`(?i)\b(?:one|any|none|each|all) of the ` + number + `(?:\s*[,.;:)]|\s*$)`)
	eventType = regexp.MustCompile(`(?i)\b(?:event|message) types?\b`)
)

// eventTypeCounts: a page that counts the event types counts them right.
// Better, it does not count them: the count is the table's.
func (n names) eventTypeCounts() {
	want := len(n.facts.MessageTypes)
	for _, p := range n.sortedPages() {
		for _, u := range n.pages[p].units() {
			var counts [][]int
			counts = append(counts, typesCounted.FindAllStringSubmatchIndex(u.text, -1)...)
			if eventType.MatchString(u.text) {
				counts = append(counts, oneOfThe.FindAllStringSubmatchIndex(u.text, -1)...)
			}
			for _, m := range counts {
				word := strings.ToLower(u.text[m[2]:m[3]])
				got := slices.Index(numberWords, word)
				if got < 0 {
					got, _ = strconv.Atoi(word)
				}
				if got != want {
					n.report(p, u.line(m[0]), "counts %s event types where v1alpha1.EventTypes has %d: say it without a count, or link to the table of event types (docs/guides/notifications.md#what-is-sent-and-when)", word, want)
				}
			}
		}
	}
}

// meanings are what a table row that defines an event type must say, for
// the event types whose name could be read to promise more than they do:
// `deleted` is sent when the API server accepted the delete, while the
// object may stay in Terminating.
var meanings = map[string]string{
	string(v1alpha1.EventDeleted): "accepted",
}

// meanings: every row of a table, outside the generated blocks, whose
// first cell is an event type with such a meaning says it.
func (n names) meanings() {
	for _, p := range n.sortedPages() {
		pg := n.pages[p]
		generated := map[int]bool{}
		sp, _ := spans(pg.lines) // checkBlocks reports a broken block
		for _, s := range sp {
			for i := s.begin; i <= s.end; i++ {
				generated[i+1] = true
			}
		}
		for _, i := range pg.prose {
			l := strings.TrimSpace(pg.lines[i])
			if !strings.HasPrefix(l, "|") || generated[i+1] {
				continue
			}
			cells := splitRow(l)
			if len(cells) < 2 {
				continue
			}
			first := codeSpan.FindAllStringSubmatch(cells[0], -1)
			if len(first) != 1 {
				continue
			}
			t := strings.TrimPrefix(first[0][1], notify.CloudEventTypePrefix)
			want, ok := meanings[t]
			if !ok {
				continue
			}
			if !strings.Contains(strings.Join(cells[1:], "|"), want) {
				n.report(p, i+1, "defines the event type %s without saying %q: it means what docs/guides/notifications.md#what-is-sent-and-when says", t, want)
			}
		}
	}
}
