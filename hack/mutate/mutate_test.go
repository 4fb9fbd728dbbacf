// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
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
		{"swaps && and ||, and drops either operand", "return x && y",
			[]string{"and-or: x && y -> x || y", "drop-left: x && y -> (true || x) && y", "drop-right: x && y -> x && (true || y)"}},
		{"drops either operand of ||, in parentheses when it is an || itself", "return x || y || z",
			[]string{
				"and-or: x || y || z -> x || y && z", "drop-left: x || y || z -> (false && (x || y)) || z", "drop-right: x || y || z -> x || y || (false && z)",
				"and-or: x || y -> x && y", "drop-left: x || y -> (false && x) || y", "drop-right: x || y -> x || (false && y)",
			}},
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

func TestFindMakesABooleanArgumentOrFieldTrueAndFalse(t *testing.T) {
	const decls = "\n\ntype Flag bool\n\ntype Options struct {\n\tDryRun bool\n\tN      int\n}\n\n" +
		"const off = false\n\nfunc g(bool)   {}\nfunc h(Flag)   {}\nfunc k(...int) {}\n"
	for _, c := range []struct {
		name, body string
		want       []string
	}{
		{"makes an argument true and false", "g(ok)",
			[]string{"to-true: ok -> true || ok", "to-false: ok -> false && ok"}},
		{"makes a field of a composite literal true and false, and leaves an int field alone", "_ = Options{DryRun: ok, N: n}",
			[]string{"to-true: ok -> true || ok", "to-false: ok -> false && ok"}},
		{"makes a value of a literal without keys true and false", "_ = []bool{ok}",
			[]string{"to-true: ok -> true || ok", "to-false: ok -> false && ok"}},
		{"makes an argument of a named bool type true and false", "h(flag)",
			[]string{"to-true: flag -> true || flag", "to-false: flag -> false && flag"}},
		{"gives a constant only the other value", "g(true); g(off)",
			[]string{"to-false: true -> false", "to-true: off -> true"}},
		{"puts an || in parentheses behind false", "g(ok || n > 0)",
			[]string{
				"to-true: ok || n > 0 -> true || ok || n > 0", "to-false: ok || n > 0 -> false && (ok || n > 0)",
				"and-or: ok || n > 0 -> ok && n > 0", "drop-left: ok || n > 0 -> (false && ok) || n > 0", "drop-right: ok || n > 0 -> ok || (false && n > 0)",
				"boundary: n > 0 -> n >= 0", "negate: n > 0 -> n <= 0", "plus-one: n > 0 -> n > 1",
			}},
		{"leaves a conversion and an argument of another type alone", "_ = Flag(ok); k(n)", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := "package p\n\nfunc f(ok bool, flag Flag, n int) {\n\t" + c.body + "\n}" + decls
			ms, err := Find("p.go", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range ms {
				got = append(got, fmt.Sprintf("%s: %s -> %s", m.Op, m.Orig, m.Mut))
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(c.want))
			if !slices.Equal(got, want) {
				t.Errorf("mutants of %q:\n got %q\nwant %q", c.body, got, want)
			}
		})
	}
}

func TestFindNamesEachMutantApart(t *testing.T) {
	src := "package p\n\nfunc f(a, b, c bool, n int) bool {\n\tif a && b && c {\n\t\treturn n < 2\n\t}\n\treturn g(a || b)\n}\n\nfunc g(bool) bool { return true }\n"
	ms, err := Find("p.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range ms {
		if seen[m.ID()] {
			t.Errorf("two mutants are named %s", m.ID())
		}
		seen[m.ID()] = true
	}
}

// TestEveryMutantTypeChecks applies each mutant on its own, as Run does
// for those the schema cannot hold: a variable used only in the operand
// dropped or in the argument replaced is still used, and a bool of a
// named type stays of its type.
func TestEveryMutantTypeChecks(t *testing.T) {
	src := []byte(`package p

type Flag bool

func h(Flag) {}

func f(a, b bool, n int) bool {
	if v := n; a && v > 0 {
		return true
	}
	var fl Flag
	h(fl && Flag(b))
	w := n > 1
	h(Flag(w))
	return a || b && g(n < 3)
}

func g(bool) bool { return true }
`)
	ms, err := Find("p.go", src)
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]bool{}
	for _, m := range ms {
		ops[m.Op] = true
		mutated := m.Apply(src)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "p.go", mutated, 0)
		if err != nil {
			t.Errorf("%s: %v\n%s", m.ID(), err, mutated)
			continue
		}
		if _, err := check(fset, []*ast.File{f}, nil, true); err != nil {
			t.Errorf("%s: %s -> %s: %v", m.ID(), m.Orig, m.Mut, err)
		}
	}
	for _, op := range []string{OpDropLeft, OpDropRight, OpTrue, OpFalse} {
		if !ops[op] {
			t.Errorf("no %s mutant", op)
		}
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

func TestAnEquivalentEntryNamesTheLineItFollowsWhenTheLineRepeatsInAFunction(t *testing.T) {
	src := "package p\n\nfunc a(f, g func() error) error {\n\terr := f()\n\tif err != nil {\n\t\treturn err\n\t}\n\terr = g()\n\tif err != nil {\n\t\treturn err\n\t}\n\treturn nil\n}\n"
	list, err := ParseEquivalents(strings.NewReader("p.go\n  in: if err != nil {\n  func: a\n  after: err = g()\n  from: err != nil\n  to: false && (err != nil)\n  why: w\n"))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := Find("p.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var matched []int
	for _, m := range ms {
		if list[0].Matches(m) {
			matched = append(matched, m.Line)
		}
	}
	if !slices.Equal(matched, []int{9}) {
		t.Errorf("the entry matches the mutants on lines %v, want line 9's only", matched)
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
// the third is listed as equivalent; Both's tests kill all five of its
// mutants (an operand dropped, an argument made true or false), from the
// schema too, which needs the types of the package; Due's mutants, which
// the schema cannot hold, are built on their own, and its tests leave out
// the boundary, which survives.
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
		Parallel: 2, Min: 90, Out: &out, Log: &log,
	})
	if err == nil || !strings.Contains(err.Error(), "kill rate 88.9% is below 90.0%") {
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
		"a && b and-or":          Killed,
		"a && b drop-left":       Killed,
		"a && b drop-right":      Killed,
		"a && b to-true":         Killed,
		"a && b to-false":        Killed,
	}
	for k, st := range want {
		if got[k] != st {
			t.Errorf("%s: %q, want %q", k, got[k], st)
		}
	}
	if len(got) != len(want) {
		t.Errorf("mutants %v, want %v", got, want)
	}
	if !strings.Contains(log.String(), "9 mutants, 7 in one build") {
		t.Errorf("the log does not say Due's mutants were built on their own:\n%s", log.String())
	}
	for _, line := range []string{
		"survived    clamp.go:19:13 boundary  now > due  ->  now >= due",
		"equivalent  clamp.go:6:7 boundary  x > hi  ->  x >= hi",
		"88.9%",
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
