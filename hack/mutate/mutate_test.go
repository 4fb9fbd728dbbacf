// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestFindMakesEachOperatorsMutants(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       []string
	}{
		{"moves and negates a comparison's boundary", "return a < b",
			[]string{"boundary: a < b -> a <= b", "negate: a < b -> a >= b"}},
		{"negates an equality", "return a == b",
			[]string{"negate: a == b -> a != b"}},
		{"swaps && and ||", "return x && y",
			[]string{"and-or: x && y -> x || y"}},
		{"drops a not", "return !x",
			[]string{"drop-not: !x -> x"}},
		{"swaps Before and After, but not in the time package's After", "<-time.After(d); return t.Before(u)",
			[]string{"before-after: t.Before(u) -> t.After(u)"}},
		{"swaps min and max", "return min(a, b)",
			[]string{"min-max: min(a, b) -> max(a, b)"}},
		{"moves a constant compared with by one", "return n > 2",
			[]string{"boundary: n > 2 -> n >= 2", "negate: n > 2 -> n <= 2", "plus-one: n > 2 -> n > 3", "minus-one: n > 2 -> n > 1"}},
		{"moves an index by one, and never below zero", "return s[0]",
			[]string{"plus-one: s[0] -> s[1]"}},
		{"leaves a constant given to make alone", "return make([]int, 3)", nil},
		{"negates an if on a call, and skips its early return", "if ok(x) { return }",
			[]string{"negate-if: ok(x) -> !(ok(x))", "skip-early-exit: ok(x) -> false && (ok(x))"}},
		{"skips an early continue, keeping what the init declares used", "for { if v := f(); v { continue } }",
			[]string{"negate-if: v -> !(v)", "skip-early-exit: v -> false && (v)"}},
		{"leaves an if with an else alone but for its condition", "if ok(x) { return } else { x++ }",
			[]string{"negate-if: ok(x) -> !(ok(x))"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := "package p\n\nfunc f() {\n\t" + c.body + "\n}\n"
			ms, err := Find("p.go", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range ms {
				got = append(got, fmt.Sprintf("%s: %s -> %s", m.Op, m.Orig, m.Mut))
				if m.Line != 4 {
					t.Errorf("%s: line %d, want 4", m.ID(), m.Line)
				}
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(c.want))
			if !slices.Equal(got, want) {
				t.Errorf("mutants of %q:\n got %q\nwant %q", c.body, got, want)
			}
		})
	}
}

func TestFindLeavesDeclarationsOutsideFunctionsAlone(t *testing.T) {
	src := "package p\n\nconst limit = 2 + 3\n\nvar big = limit > 4\n"
	ms, err := Find("p.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 0 {
		t.Errorf("mutants of package-level declarations: %v", ms)
	}
}

func TestApplyChangesOnlyTheMutatedBytes(t *testing.T) {
	src := []byte("package p\n\nfunc f(a, b int) bool {\n\treturn a < b // a < b in a comment stays\n}\n")
	ms, err := Find("p.go", src)
	if err != nil {
		t.Fatal(err)
	}
	got := string(ms[0].Apply(src))
	want := "package p\n\nfunc f(a, b int) bool {\n\treturn a <= b // a < b in a comment stays\n}\n"
	if got != want {
		t.Errorf("Apply:\n%s\nwant:\n%s", got, want)
	}
}

func TestAnEquivalentEntryFollowsItsLineWhenTheCodeMoves(t *testing.T) {
	list, err := ParseEquivalents(strings.NewReader(`# comment
p.go
  in: return a < b
  from: a < b
  to: a <= b
  why: equal values
    give the same answer.
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Why != "equal values give the same answer." {
		t.Fatalf("parsed %+v", list)
	}
	for _, lines := range []string{"", "\n\n\n// moved down\n"} {
		src := "package p\n" + lines + "\nfunc f(a, b int) bool {\n\treturn a < b\n}\n"
		ms, err := Find("p.go", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		var matched []string
		for _, m := range ms {
			if list[0].Matches(m) {
				matched = append(matched, m.Op)
			}
		}
		if !slices.Equal(matched, []string{OpBoundary}) {
			t.Errorf("with %d lines above, the entry matches %v, want the boundary mutant only", strings.Count(lines, "\n"), matched)
		}
	}
}

func TestAnEquivalentEntryNamesItsFunctionWhenTheLineRepeats(t *testing.T) {
	src := "package p\n\nfunc (r *R) a() int {\n\tif r.x {\n\t\treturn 1\n\t}\n\treturn 0\n}\n\nfunc b(r *R) int {\n\tif r.x {\n\t\treturn 1\n\t}\n\treturn 0\n}\n"
	list, err := ParseEquivalents(strings.NewReader("p.go\n  in: if r.x {\n  func: R.a\n  from: r.x\n  to: false && (r.x)\n  why: w\n"))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := Find("p.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var matched []string
	for _, m := range ms {
		if list[0].Matches(m) {
			matched = append(matched, m.Func)
		}
	}
	if !slices.Equal(matched, []string{"R.a"}) {
		t.Errorf("the entry matches the mutants of %v, want R.a's only", matched)
	}
}

func TestParseEquivalentsRefusesAnIncompleteEntry(t *testing.T) {
	for name, text := range map[string]string{
		"no reason":               "p.go\n  in: x\n  from: a\n  to: b\n",
		"an unknown key":          "p.go\n  in: x\n  from: a\n  to: b\n  because: c\n",
		"a line outside an entry": "  in: x\n",
	} {
		if _, err := ParseEquivalents(strings.NewReader(text)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestRunKillsCountsAndLeavesTheTreeAlone mutates the fixture module of
// testdata: Clamp's tests kill two of its mutants, from the schema, and
// the third is listed as equivalent; Due's mutants, which the schema
// cannot hold, are built on their own, and its tests leave out the
// boundary, which survives.
func TestRunKillsCountsAndLeavesTheTreeAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test six times")
	}
	t.Setenv("GOWORK", "off")
	t.Setenv("GOFLAGS", "")
	root, err := filepath.Abs(filepath.Join("testdata", "fixture"))
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(root, "clamp.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out, log bytes.Buffer
	results, err := Run(context.Background(), Config{
		Root: root, Targets: []string{"clamp.go"}, Equivalents: "equivalent.txt",
		Parallel: 2, Min: 80, Out: &out, Log: &log,
	})
	if err == nil || !strings.Contains(err.Error(), "kill rate 75.0% is below 80.0%") {
		t.Errorf("Run: %v, want the kill rate below the minimum", err)
	}
	got := map[string]Status{}
	for _, r := range results {
		got[fmt.Sprintf("%s %s", r.Orig, r.Op)] = r.Status
	}
	want := map[string]Status{
		"x > hi boundary":        Equivalent,
		"x > hi negate":          Killed,
		"x > hi skip-early-exit": Killed,
		"now > due boundary":     Survived,
		"now > due negate":       Killed,
	}
	for k, st := range want {
		if got[k] != st {
			t.Errorf("%s: %q, want %q", k, got[k], st)
		}
	}
	if len(got) != len(want) {
		t.Errorf("mutants %v, want %v", got, want)
	}
	if !strings.Contains(log.String(), "4 mutants, 2 in one build") {
		t.Errorf("the log does not say Due's mutants were built on their own:\n%s", log.String())
	}
	for _, line := range []string{
		"survived    clamp.go:19:13 boundary  now > due  ->  now >= due",
		"equivalent  clamp.go:6:7 boundary  x > hi  ->  x >= hi",
		"75.0%",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("the report lacks %q:\n%s", line, out.String())
		}
	}
	after, err := os.ReadFile(filepath.Join(root, "clamp.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("the fixture's source changed on disk")
	}
}

func TestSchemaKeepsLinesAndHoldsEveryMutant(t *testing.T) {
	src := []byte("package p\n\nfunc f(a, b int, c bool, t, u interface{ Before(any) bool }) bool {\n\tif a < b+1 &&\n\t\t!c {\n\t\treturn t.Before(u)\n\t}\n\treturn min(a, b) > 0\n}\n")
	ms, err := Find("p.go", src)
	if err != nil {
		t.Fatal(err)
	}
	var ns []numbered
	for i, m := range ms {
		ns = append(ns, numbered{i + 1, m})
	}
	text, left := Schema(src, ns)
	if len(left) != 0 {
		t.Errorf("mutants left out: %v", left)
	}
	if got, want := bytes.Count(text, []byte("\n")), bytes.Count(src, []byte("\n")); got != want {
		t.Errorf("the schema has %d lines, want %d:\n%s", got, want, text)
	}
	if _, err := Find("p.go", text); err != nil {
		t.Errorf("the schema does not parse: %v\n%s", err, text)
	}
	for _, n := range ns {
		if !bytes.Contains(text, []byte(fmt.Sprintf("(%d", n.ID))) && !bytes.Contains(text, []byte(fmt.Sprintf(" %d,", n.ID))) && !bytes.Contains(text, []byte(fmt.Sprintf(", %d)", n.ID))) {
			t.Errorf("mutant %d (%s) is not in the schema:\n%s", n.ID, n.Mutant.ID(), text)
		}
	}
}
