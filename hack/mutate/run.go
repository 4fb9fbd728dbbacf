// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Status is what became of a mutant.
type Status string

// The statuses, in the order the report lists them.
const (
	// Survived: the package's tests passed with the mutant.
	Survived Status = "survived"
	// Equivalent: the list of equivalents says no test can tell it apart.
	Equivalent Status = "equivalent"
	// NotBuilt: the mutant does not compile; it counts for nothing.
	NotBuilt Status = "not built"
	// TimedOut: the tests did not finish in time, which counts as killed
	// (a hot loop is a failure too).
	TimedOut Status = "timed out"
	// Killed: a test failed.
	Killed Status = "killed"
	// Skipped: the package's tests fail without any mutant, so none of
	// its mutants was tried.
	Skipped Status = "skipped"
)

// Result is a mutant and what became of it.
type Result struct {
	Mutant
	Status Status
	// By is the first test that failed, for a killed mutant.
	By string
	// Equivalent is the entry that names it, for an equivalent one.
	Equivalent *Listed
}

// tester runs one package's tests, with one file replaced or none.
type tester struct {
	// Root is the module's directory.
	Root string
	// Tmp holds the mutated files and the overlays.
	Tmp string
	// Timeout bounds the test binary (go test -timeout); the go command
	// is killed a while after.
	Timeout time.Duration
	// Snapshot maps each Go file of the package, by its path in the
	// tree, to a copy taken when the run started: every test of the
	// package sees the same code, whatever is edited in the tree
	// meanwhile.
	Snapshot map[string]string
}

// snapshot copies the Go files of pkg (relative to root) into dir.
func snapshot(root, pkg, dir string) (map[string]string, error) {
	src := filepath.Join(root, filepath.FromSlash(pkg))
	entries, err := os.ReadDir(src)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return nil, err
		}
		copied := filepath.Join(dir, e.Name())
		if err := os.WriteFile(copied, b, 0o644); err != nil {
			return nil, err
		}
		out[filepath.Join(src, e.Name())] = copied
	}
	return out, nil
}

var failedTest = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

// overlay writes, into dir, the overlay that puts the snapshot and the
// files of replace (original path to replacement) in place.
func (t tester) overlay(dir string, replace map[string]string) (string, error) {
	all := maps.Clone(t.Snapshot)
	if all == nil {
		all = map[string]string{}
	}
	maps.Copy(all, replace)
	b, err := json.Marshal(map[string]map[string]string{"Replace": all})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "overlay.json")
	return path, os.WriteFile(path, b, 0o644)
}

// run builds and tests pkg (a directory relative to Root) with file
// (relative to Root) replaced by src, or as it is when src is nil. It
// returns the status and, for a killed mutant, the first test that
// failed, for one that does not build the first line of the compiler's
// complaint.
func (t tester) run(ctx context.Context, pkg, file string, src []byte, id int) (Status, string, error) {
	dir := filepath.Join(t.Tmp, fmt.Sprint(id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	replace := map[string]string{}
	if src != nil {
		mutated := filepath.Join(dir, filepath.Base(file))
		if err := os.WriteFile(mutated, src, 0o644); err != nil {
			return "", "", err
		}
		replace[filepath.Join(t.Root, filepath.FromSlash(file))] = mutated
	}
	ov, err := t.overlay(dir, replace)
	if err != nil {
		return "", "", err
	}
	args := []string{"test", "-count=1", "-vet=off", "-failfast", "-timeout", t.Timeout.String(), "-overlay", ov}
	for _, p := range testPackages(pkg) {
		args = append(args, "./"+filepath.ToSlash(p))
	}
	return t.exec(ctx, t.Root, nil, "go", args...)
}

// build compiles pkg's tests with the files of replace into bin, and
// returns the compiler's output when it fails.
func (t tester) build(ctx context.Context, pkg string, replace map[string]string, bin string) (bool, string, error) {
	dir := filepath.Dir(bin)
	ov, err := t.overlay(dir, replace)
	if err != nil {
		return false, "", err
	}
	// -e: every error, not the first ten, so that one build names every
	// mutant the schema cannot hold.
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-gcflags=-e", "-o", bin, "-overlay", ov, "./"+filepath.ToSlash(pkg))
	cmd.Dir = t.Root
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, "", nil
	case errors.As(err, &exit) && ctx.Err() == nil:
		return false, string(out), nil
	}
	return false, "", fmt.Errorf("go test -c %s: %w\n%s", pkg, err, out)
}

// runBinary runs the tests built into bin with the schema's mutant id
// on (none for 0), in pkg's directory as go test does.
func (t tester) runBinary(ctx context.Context, bin, pkg string, id int) (Status, string, error) {
	env := append(os.Environ(), "GO_MUTATE="+strconv.Itoa(id))
	return t.exec(ctx, filepath.Join(t.Root, filepath.FromSlash(pkg)), env, bin,
		"-test.count=1", "-test.failfast", "-test.timeout="+t.Timeout.String())
}

// exec runs a test command and says what became of the mutant.
func (t tester) exec(ctx context.Context, dir string, env []string, name string, args ...string) (Status, string, error) {
	ctx, cancel := context.WithTimeout(ctx, t.Timeout+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	ownGroup(cmd)
	err := cmd.Run()
	text := out.String()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return Survived, "", nil
	case ctx.Err() != nil || strings.Contains(text, "panic: test timed out"):
		return TimedOut, "", nil
	case strings.Contains(text, "[build failed]") || strings.Contains(text, "[setup failed]"):
		return NotBuilt, firstLine(text), nil
	case errors.As(err, &exit):
		by := ""
		if m := failedTest.FindStringSubmatch(text); m != nil {
			by = m[1]
		}
		return Killed, by, nil
	}
	return "", "", fmt.Errorf("%s: %w\n%s", name, err, text)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
