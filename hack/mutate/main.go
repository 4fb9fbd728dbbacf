// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Command mutate makes small wrong changes to the packages that hold the
// controller's promises (a comparison flipped, a clamp swapped, an early
// return skipped, an operand of && dropped, a dry run passed as false),
// one at a time, and runs each package's own tests against each: a change
// no test notices is a promise no test keeps.
//
// The source tree is never written. Each package is copied when the run
// starts; most of its mutants are built into one copy of its tests, each
// switched on by the environment (schema.go), and the others one by one,
// the mutated file put in place by `go test -overlay`. Mutants listed in
// equivalent.txt, with the reason no test can tell them apart, are
// reported as equivalent and not run.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/amphitheatre-app/timeout-controller/hack/internal/repo"
)

// DefaultTargets are the packages that hold the promises: of
// internal/notify, only the reading of the notify annotation; of
// internal/rules, only its evaluation, which shows what the controller
// will do (and rehearse) with the controller's own planner, in the plugin
// and on the pages links open; internal/controller/sleep, which scales a
// sleeping object's workloads to zero and back, and watches those it
// scaled down; internal/controller/usage, which records connections,
// traffic and spec edits as use.
var DefaultTargets = []string{
	"internal/expiry",
	"internal/decide",
	"internal/match",
	"internal/outbox",
	"internal/notify/recipients.go",
	"internal/rules/evaluate.go",
	"internal/controller/sleep",
	"internal/controller/usage",
}

// PendingTargets are targets whose tests do not kill every mutant yet
// (none today): run them with -pkg (make mutate MUTATE_FLAGS="-pkg
// internal/some/package"); each joins DefaultTargets once its
// survivors are killed or listed as equivalent, so that make mutate's
// threshold holds for the others meanwhile.
var PendingTargets = []string{}

// AlsoTestedBy names, for a target package, the packages whose tests
// check it too: a mutant is killed when the tests of any of them fail.
// The evaluation in internal/rules is what the plugin shows, and the
// plugin's tests (its explain goldens among them) hold it.
var AlsoTestedBy = map[string][]string{
	"internal/rules": {"internal/plugin"},
	// A sleep and a wake are carried out for the object reconciler, and
	// its tests drive them through it, as they drive the activity and the
	// traffic it reads; the policy reconciler's tests hold the validation
	// of spec.traffic.
	"internal/controller/sleep": {"internal/controller/object"},
	"internal/controller/usage": {"internal/controller/object", "internal/controller/policy"},
}

// testPackages are the packages whose tests run against a mutant of pkg.
func testPackages(pkg string) []string {
	return append([]string{pkg}, AlsoTestedBy[pkg]...)
}

// Config is what one run does.
type Config struct {
	// Root is the module's directory.
	Root string
	// Targets are package directories or single .go files, relative to
	// Root.
	Targets []string
	// Run keeps the mutants whose ID it matches; nil keeps all.
	Run *regexp.Regexp
	// Parallel is how many mutants are tested at once.
	Parallel int
	// Timeout bounds one run of a package's tests; zero sets it from the
	// time the tests take without a mutant.
	Timeout time.Duration
	// Equivalents is the list of equivalent mutants; empty for none.
	Equivalents string
	// CheckEquivalents runs the equivalent mutants too, to find entries
	// that a test now kills.
	CheckEquivalents bool
	// List lists the mutants and runs nothing.
	List bool
	// NoSchema builds every mutant on its own, as a file of its own in
	// the overlay, instead of most of them in one schema.
	NoSchema bool
	// Verbose reports every mutant, not only those not killed.
	Verbose bool
	// Min is the kill rate, in percent, below which the run fails.
	Min float64
	Out io.Writer
	Log io.Writer
}

func main() {
	root, err := repo.Root()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	cfg := Config{Root: root, Out: os.Stdout, Log: os.Stderr}
	pending := "none"
	if len(PendingTargets) > 0 {
		pending = strings.Join(PendingTargets, ", ")
	}
	pkgs := flag.String("pkg", strings.Join(DefaultTargets, ","), "Comma-separated package directories, or single .go files, relative to the module root. Targets not yet in the default: "+pending+".")
	run := flag.String("run", "", "Only the mutants whose ID (file:line:column operator) matches this regular expression.")
	flag.IntVar(&cfg.Parallel, "parallel", 1, "How many mutants to test at once.")
	flag.DurationVar(&cfg.Timeout, "timeout", 0, "Bound on one run of a package's tests (go test -timeout); 0 sets it from the time they take without a mutant.")
	flag.StringVar(&cfg.Equivalents, "equivalent", filepath.Join("hack", "mutate", "equivalent.txt"), "The list of equivalent mutants, relative to the module root.")
	flag.BoolVar(&cfg.CheckEquivalents, "check-equivalent", false, "Run the listed equivalent mutants too, and report those a test kills.")
	flag.BoolVar(&cfg.List, "list", false, "List the mutants and run nothing.")
	flag.BoolVar(&cfg.NoSchema, "no-schema", false, "Build every mutant on its own (slow) instead of most of them in one build.")
	flag.BoolVar(&cfg.Verbose, "v", false, "Report every mutant, with the test that killed it.")
	flag.Float64Var(&cfg.Min, "min", 0, "Fail when the kill rate of all the packages, in percent, is below this.")
	flag.Parse()
	cfg.Targets = strings.Split(*pkgs, ",")
	if *run != "" {
		if cfg.Run, err = regexp.Compile(*run); err != nil {
			fmt.Fprintln(os.Stderr, "mutate: -run:", err)
			os.Exit(2)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

// target is one package and the files of it to mutate.
type target struct {
	pkg   string
	files []string
	// name is what the report calls it: the package, or the file when
	// only one of its files is mutated.
	name string
}

func resolve(root string, targets []string) ([]target, error) {
	var out []target
	for _, t := range targets {
		t = filepath.ToSlash(strings.TrimSuffix(strings.TrimSpace(t), "/"))
		if t == "" {
			continue
		}
		if strings.HasSuffix(t, ".go") {
			out = append(out, target{pkg: filepath.ToSlash(filepath.Dir(t)), files: []string{t}, name: t})
			continue
		}
		entries, err := os.ReadDir(filepath.Join(root, t))
		if err != nil {
			return nil, err
		}
		tg := target{pkg: t, name: t}
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || strings.HasPrefix(n, "zz_generated") {
				continue
			}
			tg.files = append(tg.files, t+"/"+n)
		}
		out = append(out, tg)
	}
	return out, nil
}

// Run finds the mutants of cfg's targets, tests them, writes the report
// and returns what became of each mutant.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	targets, err := resolve(cfg.Root, cfg.Targets)
	if err != nil {
		return nil, err
	}
	equivalents, err := loadEquivalents(cfg)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "mutate-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	// Every package is copied first and its mutants found in the copy:
	// edits made to the tree during the run change nothing in it.
	start := time.Now()
	used := make([]bool, len(equivalents))
	var runs []*pkgRun
	for _, t := range targets {
		pr := &pkgRun{target: t, srcs: map[string][]byte{}}
		if pr.snapshot, err = snapshot(cfg.Root, t.pkg, filepath.Join(tmp, "snapshot", filepath.FromSlash(t.pkg))); err != nil {
			return nil, err
		}
		pkg, err := loadPackage(ctx, cfg.Root, t.pkg, pr.snapshot)
		if err != nil {
			return nil, err
		}
		for _, file := range t.files {
			copied, ok := pr.snapshot[filepath.Join(cfg.Root, filepath.FromSlash(file))]
			if !ok {
				return nil, fmt.Errorf("%s: no such Go file", file)
			}
			if pr.srcs[file], err = os.ReadFile(copied); err != nil {
				return nil, err
			}
			f, ok := pkg.files[file]
			if !ok {
				return nil, fmt.Errorf("%s: not a file the package builds", file)
			}
			ms := findIn(pkg.fset, f, pr.srcs[file], pkg.info)
			for _, m := range ms {
				if cfg.Run != nil && !cfg.Run.MatchString(m.ID()) {
					continue
				}
				r := Result{Mutant: m}
				for i := range equivalents {
					if equivalents[i].Matches(m) {
						r.Status, r.Equivalent, used[i] = Equivalent, &equivalents[i], true
						break
					}
				}
				pr.results = append(pr.results, r)
			}
		}
		runs = append(runs, pr)
	}

	scanned := map[string]bool{}
	for _, t := range targets {
		for _, f := range t.files {
			scanned[f] = true
		}
	}
	for i, e := range equivalents {
		if !used[i] && cfg.Run == nil && scanned[e.File] {
			fmt.Fprintf(cfg.Log, "mutate: %s:%d names no mutant of %s: remove the entry, or fix it\n", cfg.Equivalents, e.Line, e.File)
		}
	}

	var all []Result
	if cfg.List {
		for _, pr := range runs {
			for _, r := range pr.results {
				fmt.Fprintf(cfg.Out, "%s\t%s  ->  %s\t%s\n", r.ID(), r.Orig, r.Mut, r.Status)
			}
			all = append(all, pr.results...)
		}
		return all, nil
	}

	next := 0
	for _, pr := range runs {
		if err := pr.test(ctx, cfg, tmp, &next); err != nil {
			return nil, err
		}
		all = append(all, pr.results...)
	}

	report(cfg, all)
	fmt.Fprintln(cfg.Out)
	tw := tabwriter.NewWriter(cfg.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\tmutants\tkilled\ttimed out\tequivalent\tnot built\tsurvived\tkill rate\ttime\t\n", "package")
	for _, pr := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", pr.name, tally(pr.results).row(), pr.elapsed.Round(time.Second))
	}
	total := tally(all)
	fmt.Fprintf(tw, "%s\t%s\t%s\t\n", "total", total.row(), time.Since(start).Round(time.Second))
	_ = tw.Flush()
	fmt.Fprintln(cfg.Out, "kill rate: (killed + timed out) / (mutants - equivalent - not built)")

	if rate, ok := total.rate(); ok && rate < cfg.Min {
		return all, fmt.Errorf("kill rate %.1f%% is below %.1f%%", rate, cfg.Min)
	}
	return all, nil
}

func loadEquivalents(cfg Config) ([]Listed, error) {
	if cfg.Equivalents == "" {
		return nil, nil
	}
	f, err := os.Open(filepath.Join(cfg.Root, cfg.Equivalents))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	list, err := ParseEquivalents(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Equivalents, err)
	}
	return list, nil
}

// settle records what a run of r's mutant gave. A listed equivalent stays
// equivalent; one that a test kills is reported, for its entry to go.
func (pr *pkgRun) settle(cfg Config, r *Result, status Status, by string) {
	if r.Status == Equivalent {
		if status == Killed || status == TimedOut {
			fmt.Fprintf(cfg.Log, "mutate: listed as equivalent but killed by %s: %s (%s:%d)\n", by, r.ID(), cfg.Equivalents, r.Equivalent.Line)
		}
		return
	}
	r.Status, r.By = status, by
	if status == Survived {
		fmt.Fprintf(cfg.Log, "  survived  %s  %s  ->  %s\n", r.ID(), r.Orig, r.Mut)
	}
}

type counts map[Status]int

func tally(rs []Result) counts {
	c := counts{}
	for _, r := range rs {
		c[r.Status]++
	}
	return c
}

func (c counts) rate() (float64, bool) {
	n := c[Killed] + c[TimedOut] + c[Survived]
	if n == 0 {
		return 0, false
	}
	return 100 * float64(c[Killed]+c[TimedOut]) / float64(n), true
}

func (c counts) row() string {
	n := 0
	for _, v := range c {
		n += v
	}
	rate := "-"
	if r, ok := c.rate(); ok {
		rate = fmt.Sprintf("%.1f%%", r)
	}
	if c[Skipped] > 0 {
		rate += fmt.Sprintf(" (%d skipped)", c[Skipped])
	}
	return fmt.Sprintf("%d\t%d\t%d\t%d\t%d\t%d\t%s", n, c[Killed], c[TimedOut], c[Equivalent], c[NotBuilt], c[Survived], rate)
}

// report lists the mutants not killed (every one, with -v), grouped by
// status, in the order of their place.
func report(cfg Config, rs []Result) {
	for _, st := range []Status{Survived, Equivalent, NotBuilt, TimedOut, Killed} {
		if st == Killed && !cfg.Verbose {
			continue
		}
		for _, r := range rs {
			if r.Status != st {
				continue
			}
			line := fmt.Sprintf("%-10s  %s  %s  ->  %s", st, r.ID(), short(r.Orig), short(r.Mut))
			switch {
			case st == Killed && r.By != "":
				line += "  (" + r.By + ")"
			case st == Equivalent && cfg.Verbose:
				line += "\n            " + r.Equivalent.Why
			case st == NotBuilt && cfg.Verbose:
				line += "  (" + r.By + ")"
			}
			fmt.Fprintln(cfg.Out, line)
		}
	}
}

func short(s string) string {
	if len(s) > 72 {
		return s[:69] + "..."
	}
	return s
}
