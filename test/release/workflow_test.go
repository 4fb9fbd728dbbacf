// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package release

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	workflows       = filepath.Join(root, ".github", "workflows")
	releaseWorkflow = filepath.Join(workflows, "release.yaml")
	// usesLine is a step's uses: and what follows it on the line.
	usesLine = regexp.MustCompile(`^\s*(?:-\s+)?uses:\s*(\S+)(.*)$`)
	// pinned is an action at a full commit, then its version as a comment.
	pinned    = regexp.MustCompile(`^([\w.-]+/[\w./-]+)@([0-9a-f]{40})$`)
	version   = regexp.MustCompile(`^\s+# (v\d+(?:\.\d+)*)$`)
	envExpr   = regexp.MustCompile(`\$\{\{ env\.(\w+) \}\}`)
	digestRef = regexp.MustCompile(`^\$\{\{ steps\.([\w-]+)\.outputs\.digest \}\}$`)
)

// workflow is what this package reads of a GitHub Actions workflow.
type workflow struct {
	// On is the workflow's "on:", which sigs.k8s.io/yaml, reading YAML 1.1,
	// turns into the key true.
	On          map[string]json.RawMessage `json:"true"`
	Permissions map[string]string          `json:"permissions"`
	Env         map[string]string          `json:"env"`
	Jobs        map[string]job             `json:"jobs"`
}

type job struct {
	If          string            `json:"if"`
	Needs       []string          `json:"needs"`
	Permissions map[string]string `json:"permissions"`
	Steps       []step            `json:"steps"`
}

type step struct {
	ID   string            `json:"id"`
	Uses string            `json:"uses"`
	With map[string]any    `json:"with"`
	Env  map[string]string `json:"env"`
	Run  string            `json:"run"`
}

// action is the action a step uses, without its ref.
func (s step) action() string {
	a, _, _ := strings.Cut(s.Uses, "@")
	return a
}

// runs is every script of the job, one after the other.
func (j job) runs() string {
	var b strings.Builder
	for _, s := range j.Steps {
		b.WriteString(s.Run + "\n")
	}
	return b.String()
}

func readWorkflow(t *testing.T, name string) workflow {
	t.Helper()
	var w workflow
	readYAML(t, name, &w)
	if len(w.Jobs) == 0 {
		t.Fatalf("%s has no jobs", name)
	}
	return w
}

// expand replaces the workflow's ${{ env.X }} with their values.
func (w workflow) expand(s string) string {
	return envExpr.ReplaceAllStringFunc(s, func(e string) string {
		if v, ok := w.Env[envExpr.FindStringSubmatch(e)[1]]; ok {
			return v
		}
		return e
	})
}

// jobWhere returns the name and job of the one job for which ok is true.
func (w workflow) jobWhere(t *testing.T, what string, ok func(job) bool) (string, job) {
	t.Helper()
	var names []string
	for name, j := range w.Jobs {
		if ok(j) {
			names = append(names, name)
		}
	}
	if len(names) != 1 {
		t.Fatalf("release.yaml: want one job that %s, found %v", what, names)
	}
	return names[0], w.Jobs[names[0]]
}

// buildStep is the step of j that builds and pushes the image, if any.
func buildStep(j job) (step, bool) {
	for _, s := range j.Steps {
		if s.action() == "docker/build-push-action" {
			return s, true
		}
	}
	return step{}, false
}

func TestTheReleaseWorkflowRunsForVersionTagsOnly(t *testing.T) {
	w := readWorkflow(t, releaseWorkflow)
	if events := slices.Sorted(maps.Keys(w.On)); !slices.Equal(events, []string{"push"}) {
		t.Errorf("release.yaml runs on %v, want push only", events)
	}
	var push struct {
		Tags     []string `json:"tags"`
		Branches []string `json:"branches"`
	}
	if err := json.Unmarshal(w.On["push"], &push); err != nil {
		t.Fatalf("release.yaml on.push: %v", err)
	}
	if !slices.Equal(push.Tags, []string{"v*"}) || len(push.Branches) > 0 {
		t.Errorf("release.yaml runs on pushed tags %v and branches %v, want tags [v*] only", push.Tags, push.Branches)
	}

	// Every job waits for the check of the tag against the chart.
	check, ok := w.Jobs["check"]
	if !ok || !strings.Contains(check.runs(), "make release-check") {
		t.Fatal("release.yaml has no job check that runs make release-check")
	}
	for name := range w.Jobs {
		if name != "check" && !needs(w, name, "check") {
			t.Errorf("job %s does not wait for the job check", name)
		}
	}
}

// needs reports whether job name waits, directly or not, for job other.
func needs(w workflow, name, other string) bool {
	for _, n := range w.Jobs[name].Needs {
		if n == other || needs(w, n, other) {
			return true
		}
	}
	return false
}

func TestTheReleaseWorkflowPushesTheImageTheChartNames(t *testing.T) {
	c := readChart(t)
	w := readWorkflow(t, releaseWorkflow)
	_, j := w.jobWhere(t, "builds the image", func(j job) bool { _, ok := buildStep(j); return ok })
	build, _ := buildStep(j)
	with := func(key string) string {
		if v, ok := build.With[key]; ok {
			return w.expand(fmt.Sprint(v))
		}
		return ""
	}

	platforms := strings.Split(with("platforms"), ",")
	slices.Sort(platforms)
	for _, c := range []struct{ what, got, want string }{
		{"tags", with("tags"), c.Image.Repository + ":${{ github.ref_name }}"},
		{"platforms", strings.Join(platforms, ","), "linux/amd64,linux/arm64"},
		{"push", with("push"), "true"},
		{"sbom", with("sbom"), "true"},
		// The Dockerfile at the root, whose build the dry run repeats.
		{"context", with("context"), "."},
		{"file", with("file"), ""},
	} {
		if c.got != c.want {
			t.Errorf("release.yaml: docker/build-push-action's %s is %q, want %q", c.what, c.got, c.want)
		}
	}
	if build.ID == "" {
		t.Error("release.yaml: the docker/build-push-action step has no id, so nothing can sign its digest")
	}
}

func TestTheReleaseWorkflowSignsWhatItPublishes(t *testing.T) {
	w := readWorkflow(t, releaseWorkflow)
	imageJob, image := w.jobWhere(t, "builds the image", func(j job) bool { _, ok := buildStep(j); return ok })
	chartJob, chart := w.jobWhere(t, "pushes the chart", func(j job) bool { return strings.Contains(j.runs(), "helm push") })
	releaseJob, release := w.jobWhere(t, "creates the GitHub release", func(j job) bool { return strings.Contains(j.runs(), "gh release create") })

	build, _ := buildStep(image)
	signsDigest := func(command string) bool {
		for _, s := range image.Steps {
			for _, v := range s.Env {
				if m := digestRef.FindStringSubmatch(v); m != nil && m[1] == build.ID && strings.Contains(s.Run, command) {
					return true
				}
			}
		}
		return false
	}
	var ghRelease string
	for _, line := range strings.Split(release.runs(), "gh release create")[1:] {
		ghRelease += line
	}
	for _, c := range []struct {
		what string
		ok   bool
	}{
		{imageJob + " signs the digest it pushed (cosign sign)", signsDigest("cosign sign ")},
		{imageJob + " attests the SBOMs of that digest (cosign attest --type spdxjson)", signsDigest("cosign attest") && strings.Contains(image.runs(), "--type spdxjson")},
		{chartJob + " lints and packages the chart (make chart-package)", strings.Contains(chart.runs(), "make chart-package")},
		{chartJob + " signs the chart it pushed (cosign sign)", strings.Contains(chart.runs(), "cosign sign ")},
		{releaseJob + " builds the krew archives (make dist) and checks them (test/dist)", strings.Contains(release.runs(), "make dist VERSION=") && strings.Contains(release.runs(), "./test/dist")},
		{releaseJob + " signs checksums.txt into a bundle (cosign sign-blob --bundle)", strings.Contains(release.runs(), "cosign sign-blob --yes --bundle dist/checksums.txt.sigstore.json dist/checksums.txt")},
		{releaseJob + " publishes the archives, the manifest, checksums.txt and its bundle", strings.Contains(ghRelease, "dist/kubectl-timeout_*.tar.gz") &&
			strings.Contains(ghRelease, "dist/timeout.yaml") && strings.Contains(ghRelease, "dist/checksums.txt ") && strings.Contains(ghRelease, "dist/checksums.txt.sigstore.json")},
		{releaseJob + " comes after the image and the chart", needs(w, releaseJob, imageJob) && needs(w, releaseJob, chartJob)},
	} {
		if !c.ok {
			t.Errorf("release.yaml: want the job %s", c.what)
		}
	}

	for name, j := range w.Jobs {
		installed := false
		for _, s := range j.Steps {
			installed = installed || s.action() == "sigstore/cosign-installer"
			if strings.Contains(s.Run, "cosign ") && !installed {
				t.Errorf("release.yaml: job %s runs cosign before sigstore/cosign-installer", name)
			}
		}
	}
}

// TestEveryJobHasOnlyThePermissionsItUses derives each job's permissions
// from what it does: read the repository; write packages to push to
// ghcr.io; an OIDC token to sign with cosign; write contents to create the
// GitHub release.
func TestEveryJobHasOnlyThePermissionsItUses(t *testing.T) {
	for _, name := range workflowFiles(t) {
		w := readWorkflow(t, name)
		if len(w.Permissions) > 1 || (len(w.Permissions) == 1 && w.Permissions["contents"] != "read") || w.Permissions == nil {
			t.Errorf("%s: top-level permissions %v, want {} or contents: read, and each job asking for more", filepath.Base(name), w.Permissions)
		}
		for jobName, j := range w.Jobs {
			want := map[string]string{"contents": "read"}
			runs := j.runs()
			if s, ok := buildStep(j); (ok && fmt.Sprint(s.With["push"]) == "true") || strings.Contains(runs, "helm push") {
				want["packages"] = "write"
			}
			if strings.Contains(runs, "cosign ") {
				want["id-token"] = "write"
			}
			if strings.Contains(runs, "gh release") {
				want["contents"] = "write"
			}
			got := j.Permissions
			if got == nil {
				got = w.Permissions
			}
			if !maps.Equal(got, want) {
				t.Errorf("%s: job %s has permissions %v, want %v", filepath.Base(name), jobName, got, want)
			}
		}
	}
}

func TestEveryActionIsPinnedToACommitWithItsVersion(t *testing.T) {
	seen := map[string]string{} // action -> "commit # version"
	for _, name := range workflowFiles(t) {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			m := usesLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			at := fmt.Sprintf("%s:%d", filepath.Base(name), i+1)
			p, v := pinned.FindStringSubmatch(m[1]), version.FindStringSubmatch(m[2])
			if p == nil || v == nil {
				t.Errorf("%s: %s is not owner/action@<40 hex digits of a commit> # vX.Y.Z", at, strings.TrimSpace(m[1]+m[2]))
				continue
			}
			pin := p[2] + " # " + v[1]
			if prev, ok := seen[p[1]]; ok && prev != pin {
				t.Errorf("%s: %s is pinned at %s here and at %s elsewhere", at, p[1], pin, prev)
			}
			seen[p[1]] = pin
		}
	}
	if len(seen) == 0 {
		t.Error("the workflows use no action: is the pattern still right?")
	}
}

func workflowFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(workflows, "*.y*ml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no workflows in %s: %v", workflows, err)
	}
	return files
}
