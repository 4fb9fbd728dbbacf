// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Listed is a mutant that no test can kill because it changes nothing
// that matters, with the reason. It is named by its file, its source line
// and the expression before and after, not by a line number, so that the
// entry holds while the code around it moves.
type Listed struct {
	File, In, From, To string
	// Func, when set, is the function the line is in: needed only when
	// the same line, with the same mutant, is in two functions. After,
	// when set, is the source line just above it: needed only when the
	// same line, with the same mutant, is twice in one function.
	Func, After string
	Why         string
	// Line is where the entry is in the list, for messages about it.
	Line int
}

// ParseEquivalents reads the list of equivalent mutants. An entry is a
// line naming the file, then indented lines "in:" (the source line),
// "from:" and "to:" (the expression, as the report shows it), optionally
// "func:" (the function, Type.Method for a method) and "after:" (the
// source line just above), and "why:", which may
// go on over further indented lines. Lines starting with # are
// comments; blank lines end an entry.
func ParseEquivalents(r io.Reader) ([]Listed, error) {
	var out []Listed
	var cur *Listed
	last := ""
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "#"):
			continue
		case trimmed == "":
			cur, last = nil, ""
			continue
		case line[0] != ' ' && line[0] != '\t':
			out = append(out, Listed{File: trimmed, Line: n})
			cur, last = &out[len(out)-1], ""
			continue
		case cur == nil:
			return nil, fmt.Errorf("line %d: an indented line outside an entry", n)
		}
		key, value, ok := strings.Cut(trimmed, ":")
		switch key {
		case "in", "from", "to", "func", "after", "why":
		default:
			ok = false
		}
		if !ok {
			if last != "why" {
				return nil, fmt.Errorf("line %d: expected a key in, from, to, func, after or why", n)
			}
			cur.Why += " " + trimmed
			continue
		}
		value = oneLine(value)
		switch key {
		case "in":
			cur.In = value
		case "from":
			cur.From = value
		case "to":
			cur.To = value
		case "func":
			cur.Func = value
		case "after":
			cur.After = value
		case "why":
			cur.Why = value
		}
		last = key
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, e := range out {
		if e.In == "" || e.From == "" || e.To == "" || e.Why == "" {
			return nil, fmt.Errorf("line %d: the entry for %s needs the keys in, from, to and why", e.Line, e.File)
		}
	}
	return out, nil
}

// Matches reports whether the entry names the mutant.
func (e Listed) Matches(m Mutant) bool {
	return e.File == m.File && e.In == oneLine(m.LineText) && e.From == m.Orig && e.To == m.Mut &&
		(e.Func == "" || e.Func == m.Func) && (e.After == "" || e.After == oneLine(m.Above))
}
