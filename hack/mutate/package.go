// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// pkgRun is one package's mutants and what became of them.
type pkgRun struct {
	target
	// snapshot is the package's copy, as tester.Snapshot.
	snapshot map[string]string
	// srcs are the files mutated, as copied.
	srcs    map[string][]byte
	results []Result
	elapsed time.Duration
}

// test runs the package's tests once as it is, then once per mutant not
// yet settled: those the schema holds from one build, the others each
// from its own. next numbers the runs, for their directories.
func (pr *pkgRun) test(ctx context.Context, cfg Config, tmp string, next *int) error {
	var todo []int
	for i, r := range pr.results {
		if r.Status == "" || cfg.CheckEquivalents {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	began := time.Now()
	defer func() { pr.elapsed = time.Since(began) }()
	t := tester{Root: cfg.Root, Tmp: tmp, Timeout: 10 * time.Minute, Snapshot: pr.snapshot}
	status, by, err := t.run(ctx, pr.pkg, "", nil, *next)
	*next++
	if err != nil {
		return err
	}
	baseline := time.Since(began)
	if status != Survived {
		fmt.Fprintf(cfg.Log, "mutate: %s: the tests fail without a mutant (%s %s): its mutants are skipped\n", pr.pkg, status, by)
		for i := range pr.results {
			pr.results[i].Status = Skipped
		}
		return nil
	}
	t.Timeout = cfg.Timeout
	if t.Timeout == 0 {
		t.Timeout = 5*baseline + 30*time.Second
	}

	var bins []schemaBinary
	schema := map[int]bool{}
	if !cfg.NoSchema {
		if bins, schema, err = pr.buildSchema(ctx, cfg, t, tmp, todo); err != nil {
			return err
		}
	}
	fmt.Fprintf(cfg.Log, "mutate: %s: %d mutants, %d in one build; the tests take %s without one\n",
		pr.pkg, len(todo), len(schema), baseline.Round(100*time.Millisecond))

	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var runErr error
	done := 0
	for range max(cfg.Parallel, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				r := &pr.results[i]
				mu.Lock()
				n := *next
				*next++
				mu.Unlock()
				var status Status
				var by string
				var err error
				if schema[i] {
					// Killed when any package's tests fail.
					for _, b := range bins {
						if status, by, err = t.runBinary(ctx, b.bin, b.pkg, i+1); err != nil || status != Survived {
							break
						}
					}
				} else {
					status, by, err = t.run(ctx, pr.pkg, r.File, r.Apply(pr.srcs[r.File]), n)
				}
				mu.Lock()
				pr.settle(cfg, r, status, by)
				if err != nil && runErr == nil {
					runErr = err
				}
				if done++; done%50 == 0 {
					fmt.Fprintf(cfg.Log, "mutate: %s: %d of %d done\n", pr.pkg, done, len(todo))
				}
				mu.Unlock()
			}
		}()
	}
	for _, i := range todo {
		if ctx.Err() != nil {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if runErr != nil {
		return runErr
	}
	return ctx.Err()
}

// schemaBinary is the tests of pkg, built with a schema.
type schemaBinary struct{ bin, pkg string }

// buildSchema builds the tests of the package, and of those that also
// test it (testPackages), with as many of the mutants todo (indexes of
// results; the mutant of results[i] is number i+1) as a schema holds. It
// returns the test binaries and the indexes they hold; none when the
// schema does not build or changes what the tests see.
func (pr *pkgRun) buildSchema(ctx context.Context, cfg Config, t tester, tmp string, todo []int) ([]schemaBinary, map[int]bool, error) {
	dir := filepath.Join(tmp, "schema", filepath.FromSlash(pr.pkg))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	name, err := packageName(pr.srcs)
	if err != nil {
		return nil, nil, err
	}
	helper := filepath.Join(dir, helperFile)
	if err := os.WriteFile(helper, []byte(helpers(name)), 0o644); err != nil {
		return nil, nil, err
	}
	in := map[int]bool{}
	for _, i := range todo {
		in[i] = true
	}
	bin := filepath.Join(dir, "pkg.test")
	// Each build that fails leaves out the mutants on the lines the
	// compiler names; a few rounds settle it.
	for round := 0; round < 5; round++ {
		replace := map[string]string{filepath.Join(cfg.Root, filepath.FromSlash(pr.pkg), helperFile): helper}
		paths := map[string]string{}
		for file, src := range pr.srcs {
			var ms []numbered
			for i := range in {
				if pr.results[i].File == file {
					ms = append(ms, numbered{i + 1, pr.results[i].Mutant})
				}
			}
			slices.SortFunc(ms, func(a, b numbered) int { return a.ID - b.ID })
			text, left := Schema(src, ms)
			for _, id := range left {
				delete(in, id-1)
			}
			path := filepath.Join(dir, filepath.Base(file))
			if err := os.WriteFile(path, text, 0o644); err != nil {
				return nil, nil, err
			}
			replace[filepath.Join(cfg.Root, filepath.FromSlash(file))] = path
			paths[path] = file
		}
		ok, out, err := t.build(ctx, pr.pkg, replace, bin)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			var bins []schemaBinary
			// A package without tests of its own (tested only by the
			// packages of AlsoTestedBy) builds no binary.
			if _, err := os.Stat(bin); err == nil {
				bins = append(bins, schemaBinary{bin, pr.pkg})
			}
			for i, also := range testPackages(pr.pkg)[1:] {
				b := filepath.Join(dir, fmt.Sprintf("also%d.test", i))
				built, alsoOut, err := t.build(ctx, also, replace, b)
				if err != nil {
					return nil, nil, err
				}
				if !built {
					fmt.Fprintf(cfg.Log, "mutate: %s: the tests of %s do not build with the schema: each mutant is built on its own\n%s", pr.pkg, also, firstLines(alsoOut, 5))
					return nil, nil, nil
				}
				bins = append(bins, schemaBinary{b, also})
			}
			for _, b := range bins {
				status, by, err := t.runBinary(ctx, b.bin, b.pkg, 0)
				if err != nil {
					return nil, nil, err
				}
				if status != Survived {
					fmt.Fprintf(cfg.Log, "mutate: %s: the tests of %s fail in the schema with no mutant on (%s %s): each mutant is built on its own\n", pr.pkg, b.pkg, status, by)
					return nil, nil, nil
				}
			}
			return bins, in, nil
		}
		dropped := 0
		for file, bad := range errorLines(out, paths) {
			src := pr.srcs[file]
			for i := range in {
				r := pr.results[i]
				if r.File != file {
					continue
				}
				first, last := lines(src, r.Site)
				if slices.ContainsFunc(bad, func(n int) bool { return n >= first && n <= last }) {
					delete(in, i)
					dropped++
				}
			}
		}
		if dropped == 0 {
			fmt.Fprintf(cfg.Log, "mutate: %s: the schema does not build: each mutant is built on its own\n%s", pr.pkg, firstLines(out, 5))
			return nil, nil, nil
		}
	}
	return nil, nil, nil
}

// packageName is the name of the package of the files.
func packageName(srcs map[string][]byte) (string, error) {
	for file, src := range srcs {
		f, err := parser.ParseFile(token.NewFileSet(), file, src, parser.PackageClauseOnly)
		if err != nil {
			return "", err
		}
		return f.Name.Name, nil
	}
	return "", fmt.Errorf("no file")
}

func firstLines(s string, n int) string {
	lines := strings.SplitAfterN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "")
}
