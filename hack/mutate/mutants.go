// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"slices"
	"strconv"
	"strings"
)

// The operators, by the name the report gives them.
const (
	// OpBoundary moves a comparison's boundary: < and <=, > and >=.
	OpBoundary = "boundary"
	// OpNegate turns a comparison into its opposite: < and >=, == and !=.
	OpNegate = "negate"
	// OpLogic swaps && and ||.
	OpLogic = "and-or"
	// OpDropLeft and OpDropRight make an operand of && or || count for
	// nothing, so that the other decides alone: a && b becomes
	// (true || a) && b or a && (true || b), a || b becomes
	// (false && a) || b or a || (false && b). The operand dropped stays
	// in the text, unevaluated, so that what only it uses is still used.
	OpDropLeft  = "drop-left"
	OpDropRight = "drop-right"
	// OpNot drops a ! .
	OpNot = "drop-not"
	// OpIf negates an if's condition that no other operator already does
	// (a call, a name, a conjunction).
	OpIf = "negate-if"
	// OpEarly removes an if without else whose body ends in return,
	// continue or break: the early exit never happens.
	OpEarly = "skip-early-exit"
	// OpTime swaps the time.Time methods Before and After.
	OpTime = "before-after"
	// OpClamp swaps the builtins min and max.
	OpClamp = "min-max"
	// OpInc and OpDec add one to, or take one from, an integer constant
	// that is compared, computed with, indexed by or clamped.
	OpInc = "plus-one"
	OpDec = "minus-one"
	// OpTrue and OpFalse make a boolean argument of a call, or a boolean
	// value in a composite literal (DryRun: rehearse), true or false:
	// x becomes true || x or false && x. A constant gets only the other
	// value, written plainly.
	OpTrue  = "to-true"
	OpFalse = "to-false"
)

// Mutant is one small change to one file: the bytes [Start, End) replaced
// by Repl.
type Mutant struct {
	// File is the path from the module root, with slashes.
	File      string
	Line, Col int
	Op        string
	Start     int
	End       int
	Repl      string
	// Orig and Mut are the expression around the change, before and
	// after, with runs of white space made one space.
	Orig, Mut string
	// LineText is the source line, trimmed, and Func the function it is
	// in ("Record.For" for a method). With Orig and Mut they name the
	// mutant in the list of equivalents, whatever line it moves to.
	LineText string
	Func     string
	// Above is the source line above LineText, trimmed.
	Above string

	// How the mutant joins a schema (schema.go): the expression that
	// chooses, what kind it is, and for a condition wrapped whole
	// (negate-if, skip-early-exit) what goes around it.
	Site           span
	Kind           kind
	Prefix, Suffix string
	// Open is, for min-max, the offset just after the call's "(".
	Open int
	// Keep is, for drop-left and drop-right, the operand that decides
	// alone: the schema puts it in place of the site.
	Keep span
}

// span is a range of bytes of a file.
type span struct{ Start, End int }

// kind is how a mutant's site chooses in a schema.
type kind int

const (
	// kindBool: the site is a boolean expression, which the schema
	// replaces by a choice between its text and each mutant's.
	kindBool kind = iota
	// kindMinMax: the site is a call of min or max, which the schema
	// replaces by a helper that swaps them when the mutant is on.
	kindMinMax
	// kindInt: the site is an integer constant outside a comparison,
	// which the schema replaces by a helper that moves it by one.
	kindInt
)

// ID names the mutant in the report and for -run.
func (m Mutant) ID() string {
	return fmt.Sprintf("%s:%d:%d %s", m.File, m.Line, m.Col, m.Op)
}

// Apply returns src with the mutation made.
func (m Mutant) Apply(src []byte) []byte {
	out := make([]byte, 0, len(src)+len(m.Repl))
	out = append(out, src[:m.Start]...)
	out = append(out, m.Repl...)
	return append(out, src[m.End:]...)
}

var (
	boundary = map[token.Token]token.Token{token.LSS: token.LEQ, token.LEQ: token.LSS, token.GTR: token.GEQ, token.GEQ: token.GTR}
	negation = map[token.Token]token.Token{
		token.LSS: token.GEQ, token.GEQ: token.LSS, token.GTR: token.LEQ, token.LEQ: token.GTR,
		token.EQL: token.NEQ, token.NEQ: token.EQL,
	}
	logic = map[token.Token]token.Token{token.LAND: token.LOR, token.LOR: token.LAND}
)

// Find returns the mutants of one Go file, type-checked on its own: the
// operators that need a type know only what the file declares and the
// standard library. Run finds those of a package's files with findIn.
func Find(file string, src []byte) ([]Mutant, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	info, _ := check(fset, []*ast.File{f}, importer.Default(), false)
	return findIn(fset, f, src, info), nil
}

// findIn returns the mutants of the parsed file f, whose source is src,
// in the order of their place in it; info has the types of its
// expressions. Only code in function bodies is changed: declarations of
// constants and variables are settings, not decisions.
func findIn(fset *token.FileSet, f *ast.File, src []byte, info *types.Info) []Mutant {
	file := fset.Position(f.Pos()).Filename
	tf := fset.File(f.Pos())
	off := func(p token.Pos) int { return tf.Offset(p) }
	var out []Mutant
	var fn string
	lineText := func(line int) string {
		lineStart := tf.Offset(tf.LineStart(line))
		lineEnd := bytes.IndexByte(src[lineStart:], '\n')
		if lineEnd < 0 {
			lineEnd = len(src) - lineStart
		}
		return strings.TrimSpace(string(src[lineStart : lineStart+lineEnd]))
	}
	above := func(line int) string {
		if line <= 1 {
			return ""
		}
		return lineText(line - 1)
	}
	add := func(op string, node ast.Node, start, end int, repl string) *Mutant {
		a, b := off(node.Pos()), off(node.End())
		pos := tf.Position(tf.Pos(start))
		mut := string(src[a:start]) + repl + string(src[end:b])
		out = append(out, Mutant{
			File: file, Line: pos.Line, Col: pos.Column, Op: op, Start: start, End: end, Repl: repl,
			Orig: oneLine(string(src[a:b])), Mut: oneLine(mut),
			LineText: lineText(pos.Line),
			Above:    above(pos.Line),
			Func:     fn,
			Site:     span{a, b},
		})
		return &out[len(out)-1]
	}
	// guard is "true || e" when value is true, "false && e" when it is
	// false: e's value, which is not evaluated, no longer counts.
	guard := func(value bool, e ast.Expr) string {
		t := string(src[off(e.Pos()):off(e.End())])
		if value {
			return "true || " + t
		}
		if b, ok := e.(*ast.BinaryExpr); ok && b.Op == token.LOR {
			t = "(" + t + ")"
		}
		return "false && " + t
	}
	// toBool adds the mutants that make the boolean value e true and
	// false.
	toBool := func(e ast.Expr) {
		tv, ok := info.Types[e]
		if !ok || tv.Type == nil {
			return
		}
		if b, ok := tv.Type.Underlying().(*types.Basic); !ok || b.Info()&types.IsBoolean == 0 {
			return
		}
		a, b := off(e.Pos()), off(e.End())
		if tv.Value != nil && tv.Value.Kind() == constant.Bool {
			op, repl := OpTrue, "true"
			if constant.BoolVal(tv.Value) {
				op, repl = OpFalse, "false"
			}
			add(op, e, a, b, repl)
			return
		}
		add(OpTrue, e, a, b, guard(true, e))
		add(OpFalse, e, a, b, guard(false, e))
	}
	// drop adds the mutants of n, an && or ||, that drop one operand: the
	// operand dropped is put behind a constant that decides the operator
	// alone, and the mutant is named by the operator's place, which no
	// other && or || shares.
	drop := func(n *ast.BinaryExpr) {
		pos := tf.Position(n.OpPos)
		for _, c := range []struct {
			op         string
			drop, keep ast.Expr
		}{{OpDropLeft, n.X, n.Y}, {OpDropRight, n.Y, n.X}} {
			m := add(c.op, n, off(c.drop.Pos()), off(c.drop.End()), "("+guard(n.Op == token.LAND, c.drop)+")")
			m.Line, m.Col, m.LineText, m.Above = pos.Line, pos.Column, lineText(pos.Line), above(pos.Line)
			m.Keep = span{off(c.keep.Pos()), off(c.keep.End())}
		}
	}

	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		fn = funcName(fd)
		var stack []ast.Node
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			var parent ast.Node
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			stack = append(stack, n)
			switch n := n.(type) {
			case *ast.BinaryExpr:
				at := off(n.OpPos)
				end := at + len(n.Op.String())
				if t, ok := boundary[n.Op]; ok {
					add(OpBoundary, n, at, end, t.String())
				}
				if t, ok := negation[n.Op]; ok {
					add(OpNegate, n, at, end, t.String())
				}
				if t, ok := logic[n.Op]; ok {
					add(OpLogic, n, at, end, t.String())
					drop(n)
				}
			case *ast.UnaryExpr:
				if n.Op == token.NOT {
					add(OpNot, n, off(n.OpPos), off(n.OpPos)+1, "")
				}
			case *ast.IfStmt:
				ifMutants(n, off, src, add)
			case *ast.CompositeLit:
				for _, e := range n.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						e = kv.Value
					}
					toBool(e)
				}
			case *ast.CallExpr:
				callMutants(n, info, off, add, toBool)
			case *ast.BasicLit:
				literalMutants(n, parent, stack, off, add)
			}
			return true
		})
	}
	slices.SortStableFunc(out, func(a, b Mutant) int { return a.Start - b.Start })
	return out
}

// callMutants adds the mutants of a call: its boolean arguments made true
// and false (toBool), Before and After swapped, min and max swapped.
func callMutants(n *ast.CallExpr, info *types.Info, off func(token.Pos) int, add func(string, ast.Node, int, int, string) *Mutant, toBool func(ast.Expr)) {
	// A conversion is no call.
	if tv, ok := info.Types[n.Fun]; !ok || !tv.IsType() {
		for _, e := range n.Args {
			toBool(e)
		}
	}
	switch fun := n.Fun.(type) {
	case *ast.SelectorExpr:
		// time.After, the package's function, is no comparison.
		if pkg, ok := fun.X.(*ast.Ident); ok && pkg.Name == "time" {
			break
		}
		if len(n.Args) == 1 && (fun.Sel.Name == "Before" || fun.Sel.Name == "After") {
			repl := "After"
			if fun.Sel.Name == "After" {
				repl = "Before"
			}
			add(OpTime, n, off(fun.Sel.Pos()), off(fun.Sel.End()), repl)
		}
	case *ast.Ident:
		if (fun.Name == "min" || fun.Name == "max") && len(n.Args) > 1 {
			repl := "max"
			if fun.Name == "max" {
				repl = "min"
			}
			m := add(OpClamp, n, off(fun.Pos()), off(fun.End()), repl)
			m.Kind, m.Open = kindMinMax, off(n.Lparen)+1
		}
	}
}

// literalMutants adds the mutants of an integer constant that counts as a
// limit: moved up and down by one. parent is the node that holds it, stack
// the nodes down to it.
func literalMutants(n *ast.BasicLit, parent ast.Node, stack []ast.Node, off func(token.Pos) int, add func(string, ast.Node, int, int, string) *Mutant) {
	if n.Kind != token.INT || !countsAsLimit(parent, n) {
		return
	}
	v, err := strconv.ParseUint(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
	if err != nil {
		return
	}
	// In a comparison, the comparison chooses; elsewhere the
	// constant itself.
	site, k := span{off(n.Pos()), off(n.End())}, kindInt
	if c := comparisonOf(stack); c != nil {
		site, k = span{off(c.Pos()), off(c.End())}, kindBool
	}
	m := add(OpInc, parent, off(n.Pos()), off(n.End()), strconv.FormatUint(v+1, 10))
	m.Site, m.Kind = site, k
	if v > 0 {
		m := add(OpDec, parent, off(n.Pos()), off(n.End()), strconv.FormatUint(v-1, 10))
		m.Site, m.Kind = site, k
	}
}

// funcName is the name of a function, or Type.Method for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	if g, ok := t.(*ast.IndexExpr); ok {
		t = g.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// comparisonOf returns the comparison that the integer constant at the
// top of stack is an operand of, through arithmetic and parentheses only;
// nil when there is none.
func comparisonOf(stack []ast.Node) *ast.BinaryExpr {
	for i := len(stack) - 2; i >= 0; i-- {
		switch p := stack[i].(type) {
		case *ast.ParenExpr:
			continue
		case *ast.BinaryExpr:
			if _, ok := negation[p.Op]; ok {
				return p
			}
			if _, ok := logic[p.Op]; !ok {
				continue
			}
		}
		return nil
	}
	return nil
}

// ifMutants adds the mutants of an if statement's condition as a whole.
func ifMutants(n *ast.IfStmt, off func(token.Pos) int, src []byte, add func(string, ast.Node, int, int, string) *Mutant) {
	a, b := off(n.Cond.Pos()), off(n.Cond.End())
	cond := string(src[a:b])
	// A comparison is negated by OpNegate, a ! dropped by OpNot.
	if !negatesAlready(n.Cond) {
		m := add(OpIf, n.Cond, a, b, "!("+cond+")")
		m.Prefix, m.Suffix = "!(", ")"
	}
	if n.Else == nil && endsInExit(n.Body) {
		// false && (cond), not false: what the init statement declares is
		// still used, so the mutant builds.
		m := add(OpEarly, n.Cond, a, b, "false && ("+cond+")")
		m.Prefix, m.Suffix = "false && (", ")"
	}
}

// negatesAlready reports whether another operator already makes the
// opposite of cond.
func negatesAlready(cond ast.Expr) bool {
	switch c := ast.Unparen(cond).(type) {
	case *ast.BinaryExpr:
		_, ok := negation[c.Op]
		return ok
	case *ast.UnaryExpr:
		return c.Op == token.NOT
	}
	return false
}

// endsInExit reports whether a block leaves the function or the loop.
func endsInExit(b *ast.BlockStmt) bool {
	if len(b.List) == 0 {
		return false
	}
	switch s := b.List[len(b.List)-1].(type) {
	case *ast.ReturnStmt:
		return true
	case *ast.BranchStmt:
		return s.Tok == token.CONTINUE || s.Tok == token.BREAK
	}
	return false
}

// countsAsLimit reports whether the integer constant lit, under parent,
// is a limit or an offset: an operand of a comparison or of arithmetic,
// an index, a slice bound or an argument of min or max. A constant given
// to make, to a format or as a plain value is left alone.
func countsAsLimit(parent ast.Node, lit *ast.BasicLit) bool {
	switch p := parent.(type) {
	case *ast.BinaryExpr:
		return true
	case *ast.IndexExpr:
		return p.Index == lit
	case *ast.SliceExpr:
		return p.Low == lit || p.High == lit || p.Max == lit
	case *ast.CallExpr:
		if id, ok := p.Fun.(*ast.Ident); ok {
			return id.Name == "min" || id.Name == "max"
		}
	}
	return false
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
