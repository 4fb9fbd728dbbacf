// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package release

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	dryRun = filepath.Join(root, "hack", "release-dry-run.sh")
	// command is what a run script runs to build or check, where a command
	// starts (not in a comment or a message): a make target, a go test of
	// a package, or a script of hack/.
	command = regexp.MustCompile(`(?m)(?:^|&&|\|\||;|\||\$\()\s*(?:[A-Z_]+=\S+\s+)*` +
		`(?:make (?:--no-print-directory )?([a-z-]+)|go test (?:-\S+ )*(\./\S+)|(hack/[\w-]+\.sh)\b)`)
)

// goBuild is a go build command line: its cgo setting, its flags and the
// package it builds.
type goBuild struct {
	cgo   string
	flags []string
	pkg   string
}

// parseGoBuild finds the one go build command of a Dockerfile or a shell
// script, its continued lines joined.
func parseGoBuild(t *testing.T, name string) goBuild {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	var found []goBuild
	for _, line := range strings.Split(strings.ReplaceAll(string(data), "\\\n", " "), "\n") {
		fields := strings.Fields(line)
		i := slices.Index(fields, "go")
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") || i < 0 || i+1 >= len(fields) || fields[i+1] != "build" {
			continue
		}
		var b goBuild
		for _, f := range fields[:i] {
			if v, ok := strings.CutPrefix(f, "CGO_ENABLED="); ok {
				b.cgo = v
			}
		}
		o := slices.Index(fields, "-o")
		if o < i {
			t.Fatalf("%s: %q has no -o", name, line)
		}
		b.flags, b.pkg = fields[i+2:o], fields[len(fields)-1]
		found = append(found, b)
	}
	if len(found) != 1 {
		t.Fatalf("%s: want one go build command, found %d", name, len(found))
	}
	return found[0]
}

func TestTheDryRunBuildsTheControllerAsTheDockerfileDoes(t *testing.T) {
	image := parseGoBuild(t, "Dockerfile")
	dry := parseGoBuild(t, filepath.Join("hack", "release-dry-run.sh"))
	if image.cgo != "0" {
		t.Errorf("the Dockerfile builds with CGO_ENABLED=%q, want 0: the image is distroless/static, with no C library", image.cgo)
	}
	if dry.cgo != image.cgo || !slices.Equal(dry.flags, image.flags) || dry.pkg != image.pkg {
		t.Errorf("the dry run builds %+v, the Dockerfile %+v", dry, image)
	}
}

// TestTheDryRunRunsTheReleaseWorkflowsCommands keeps the two in step: each
// make target, package test and script the workflow runs, the dry run runs.
func TestTheDryRunRunsTheReleaseWorkflowsCommands(t *testing.T) {
	script, err := os.ReadFile(dryRun)
	if err != nil {
		t.Fatal(err)
	}
	runs := commands(string(script))
	w := readWorkflow(t, releaseWorkflow)
	var checked int
	for name, j := range w.Jobs {
		for _, c := range commands(j.runs()) {
			checked++
			if !slices.Contains(runs, c) {
				t.Errorf("release.yaml's job %s runs %s, hack/release-dry-run.sh does not", name, c)
			}
		}
	}
	if checked == 0 {
		t.Error("release.yaml runs no make target, package test or script: is the pattern still right?")
	}
}

// commands lists the make targets, tested packages and scripts of a script.
func commands(script string) []string {
	var list []string
	for _, m := range command.FindAllStringSubmatch(script, -1) {
		switch {
		case m[1] != "":
			list = append(list, "make "+m[1])
		case m[2] != "":
			list = append(list, "go test "+m[2])
		default:
			list = append(list, m[3])
		}
	}
	return list
}
