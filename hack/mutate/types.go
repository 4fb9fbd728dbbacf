// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// typed is a package's files, parsed and type-checked: the operators that
// change a boolean argument or field need to know which ones are bool.
type typed struct {
	fset *token.FileSet
	// files are the package's files by their path from the module root.
	files map[string]*ast.File
	info  *types.Info
}

// check type-checks files as one package. With strict, a type error is
// returned; without, it is ignored and the types that could be known are.
func check(fset *token.FileSet, files []*ast.File, imp types.Importer, strict bool) (*types.Info, error) {
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	var first error
	conf := types.Config{
		Importer: imp,
		Sizes:    types.SizesFor("gc", runtime.GOARCH),
		Error: func(err error) {
			if first == nil {
				first = err
			}
		},
	}
	name := "p"
	if len(files) > 0 {
		name = files[0].Name.Name
	}
	_, _ = conf.Check(name, fset, files, info)
	if strict && first != nil {
		return nil, first
	}
	return info, nil
}

// loadPackage parses and type-checks the package in directory pkg
// (relative to root) from the copies in snapshot (as tester.Snapshot). The
// packages it imports are read from their export data, which go list
// builds (the build cache has it when the tests have run).
func loadPackage(ctx context.Context, root, pkg string, snapshot map[string]string) (*typed, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-e", "-export", "-deps", "-json=ImportPath,Dir,Export,GoFiles,Error", "./"+filepath.ToSlash(pkg))
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w\n%s", pkg, err, stderr.String())
	}
	type listed struct {
		ImportPath, Dir, Export string
		GoFiles                 []string
		Error                   *struct{ Err string }
	}
	exports := map[string]string{}
	var self *listed
	dir := filepath.Join(root, filepath.FromSlash(pkg))
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list %s: %w", pkg, err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list %s: %s: %s", pkg, p.ImportPath, p.Error.Err)
		}
		exports[p.ImportPath] = p.Export
		if filepath.Clean(p.Dir) == dir {
			self = &p
		}
	}
	if self == nil {
		return nil, fmt.Errorf("go list %s: the package is not listed", pkg)
	}
	t := &typed{fset: token.NewFileSet(), files: map[string]*ast.File{}}
	var files []*ast.File
	for _, name := range self.GoFiles {
		path := filepath.Join(dir, name)
		copied, ok := snapshot[path]
		if !ok {
			copied = path
		}
		src, err := os.ReadFile(copied)
		if err != nil {
			return nil, err
		}
		rel := filepath.ToSlash(filepath.Join(pkg, name))
		f, err := parser.ParseFile(t.fset, rel, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		t.files[rel] = f
		files = append(files, f)
	}
	imp := importer.ForCompiler(t.fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	if t.info, err = check(t.fset, files, imp, true); err != nil {
		return nil, fmt.Errorf("type-checking %s: %w", pkg, err)
	}
	return t, nil
}
