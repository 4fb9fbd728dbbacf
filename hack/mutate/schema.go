// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A schema is a file in which all its mutants are built in at once, each
// off unless the environment variable GO_MUTATE holds its number: the
// package's tests are built once and run once per mutant, instead of a
// build per mutant. Every expression that has mutants is replaced, on its
// own lines, by a choice between its text and each mutant's:
//
//	a < b   becomes   (mutateOn__(7) && (a <= b) || mutateOn__(8) && (a >= b) || mutateNone__(7, 8) && (a < b))
//
// so that exactly one text is evaluated, once. A call of min or max, and
// an integer constant outside a comparison, become calls of helpers that
// do the same. Lines keep their numbers, so that a compiler error names
// the line of the expression that caused it; a mutant the schema cannot
// hold (a constant that must stay constant, a bool of a named type) is
// then built on its own.

// helperFile is the file added to the package for its schema.
const helperFile = "zz_mutate_schema__.go"

// helpers returns the source of the file that declares the schema's
// helpers in package pkg.
func helpers(pkg string) string {
	return "package " + pkg + `

import (
	"cmp"
	"os"
	"strconv"
)

var mutateActive__, _ = strconv.Atoi(os.Getenv("GO_MUTATE"))

func mutateOn__(id int) bool { return mutateActive__ == id }

func mutateNone__(ids ...int) bool {
	for _, id := range ids {
		if mutateActive__ == id {
			return false
		}
	}
	return true
}

func mutateMin__[T cmp.Ordered](id int, x T, xs ...T) T {
	for _, y := range xs {
		if mutateActive__ == id {
			x = max(x, y)
		} else {
			x = min(x, y)
		}
	}
	return x
}

func mutateMax__[T cmp.Ordered](id int, x T, xs ...T) T {
	for _, y := range xs {
		if mutateActive__ == id {
			x = min(x, y)
		} else {
			x = max(x, y)
		}
	}
	return x
}

func mutateInt__[T ~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr](inc, dec int, v T) T {
	switch mutateActive__ {
	case inc:
		return v + 1
	case dec:
		return v - 1
	}
	return v
}
`
}

// numbered is a mutant with its number in the schema.
type numbered struct {
	ID int
	Mutant
}

// site is an expression of the schema, with its mutants and the sites
// inside it.
type site struct {
	span
	kind     kind
	mutants  []numbered
	children []*site
}

// Schema returns src with the mutants built in, and the numbers of those
// it could not place.
func Schema(src []byte, ms []numbered) ([]byte, []int) {
	byRange := map[span]*site{}
	var sites []*site
	for _, m := range ms {
		s := byRange[m.Site]
		if s == nil {
			s = &site{span: m.Site, kind: m.Kind}
			byRange[m.Site] = s
			sites = append(sites, s)
		}
		s.mutants = append(s.mutants, m)
	}
	// Outer sites first: by start, then the longer.
	slices.SortFunc(sites, func(a, b *site) int {
		if a.Start != b.Start {
			return a.Start - b.Start
		}
		return b.End - a.End
	})
	var roots, stack []*site
	for _, s := range sites {
		for len(stack) > 0 && stack[len(stack)-1].End <= s.Start {
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 {
			stack[len(stack)-1].children = append(stack[len(stack)-1].children, s)
		} else {
			roots = append(roots, s)
		}
		stack = append(stack, s)
	}
	var left []int
	text := render(src, span{0, len(src)}, roots, nil, &left)
	return []byte(text), left
}

// lines returns the first and last line of s in src.
func lines(src []byte, s span) (int, int) {
	first := 1 + strings.Count(string(src[:s.Start]), "\n")
	return first, first + strings.Count(string(src[s.Start:s.End]), "\n")
}

// edit is a change of bytes [Start, End) to Repl.
type edit struct {
	span
	Repl string
}

// render returns the bytes of r with the sites in it rendered, and e made
// if it is given; e must lie between sites, or render returns "". A
// mutant that cannot be made is added to left and stays off.
func render(src []byte, r span, children []*site, e *edit, left *[]int) string {
	var b strings.Builder
	pos := r.Start
	gap := func(end int) {
		if e != nil && e.Start >= pos && e.End <= end {
			b.Write(src[pos:e.Start])
			b.WriteString(e.Repl)
			b.Write(src[e.End:end])
			e = nil
			return
		}
		b.Write(src[pos:end])
	}
	for _, c := range children {
		gap(c.Start)
		b.WriteString(c.render(src, left))
		pos = c.End
	}
	gap(r.End)
	if e != nil {
		return ""
	}
	return b.String()
}

func (s *site) render(src []byte, left *[]int) string {
	orig := render(src, s.span, s.children, nil, left)
	switch s.kind {
	case kindMinMax:
		m := s.mutants[0]
		helper := "mutateMin__("
		if m.Repl == "min" {
			helper = "mutateMax__("
		}
		if out := render(src, s.span, s.children, &edit{span{m.Start, m.Open}, helper + strconv.Itoa(m.ID) + ", "}, left); out != "" {
			return out
		}
		*left = append(*left, m.ID)
		return orig
	case kindInt:
		inc, dec := -1, -1
		for _, m := range s.mutants {
			if m.Op == OpInc {
				inc = m.ID
			} else {
				dec = m.ID
			}
		}
		return fmt.Sprintf("mutateInt__(%d, %d, %s)", inc, dec, orig)
	}
	// The site's text is repeated once per mutant, on one line: its line
	// breaks all go after the opening parenthesis, where they end no
	// statement, so that the lines after it keep their numbers. A comment
	// or a raw string cannot be joined to the next line: such a site is
	// left out.
	text := string(src[s.Start:s.End])
	breaks := strings.Count(text, "\n")
	if breaks > 0 && strings.ContainsAny(text, "/`") {
		for _, m := range s.mutants {
			*left = append(*left, m.ID)
		}
		return orig
	}
	var b strings.Builder
	var ids []string
	b.WriteString("(" + strings.Repeat("\n", breaks))
	for _, m := range s.mutants {
		var alt string
		switch {
		case m.Prefix != "" || m.Suffix != "":
			alt = m.Prefix + orig + m.Suffix
		case m.Keep != span{}:
			// The operand kept decides alone. (The one dropped is in
			// the text not chosen: what only it uses is still used.)
			alt = string(src[m.Keep.Start:m.Keep.End])
		case m.Start == s.Start && m.End == s.End:
			// The whole site is replaced (to-true, to-false).
			alt = m.Repl
		default:
			// The sites inside are rendered again: their mutants are
			// on in either text.
			var ignored []int
			alt = render(src, s.span, s.children, &edit{span{m.Start, m.End}, m.Repl}, &ignored)
		}
		if alt == "" {
			*left = append(*left, m.ID)
			continue
		}
		id := strconv.Itoa(m.ID)
		ids = append(ids, id)
		fmt.Fprintf(&b, "mutateOn__(%s) && (%s) || ", id, flat(alt))
	}
	fmt.Fprintf(&b, "mutateNone__(%s) && (%s))", strings.Join(ids, ", "), flat(orig))
	return b.String()
}

// flat joins the lines of an expression.
func flat(s string) string {
	return strings.ReplaceAll(s, "\n", " ")
}

var compileError = regexp.MustCompile(`(?m)^(\S+\.go):(\d+):\d+: `)

// errorLines returns, for each file of paths (the schema's files by their
// path) that a compiler's output names, the lines it names.
func errorLines(out string, paths map[string]string) map[string][]int {
	lines := map[string][]int{}
	for _, m := range compileError.FindAllStringSubmatch(out, -1) {
		file, ok := paths[m[1]]
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		lines[file] = append(lines[file], n)
	}
	return lines
}
