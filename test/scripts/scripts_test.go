// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package scripts tests the scripts of hack/ that `make test` and
// `make demo` run before anything else: the cached builds of the control
// plane, Prometheus and the S3 server, and the Debian packages the tests
// need. A fake go on PATH stands in for the builds, so that they take a
// second and no cache of the machine is touched.
package scripts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeGo answers what the build scripts ask go: a build takes a second,
// is written to the log, and leaves an executable for each command at -o;
// the rest does nothing (the module version, the path of a go.mod).
const fakeGo = `#!/usr/bin/env bash
set -euo pipefail
case $1 in
build)
  shift
  out= pkgs=()
  while [ $# -gt 0 ]; do
    case $1 in
    -o) out=$2; shift 2 ;;
    -ldflags) shift 2 ;;
    -*) shift ;;
    *) pkgs+=("$1"); shift ;;
    esac
  done
  echo "build ${pkgs[*]}" >> "$FAKE_GO_LOG"
  sleep 1
  for p in "${pkgs[@]}"; do
    f=$out
    case $out in */) f=$out$(basename "$p") ;; esac
    printf '#!/bin/sh\n' > "$f"
    chmod +x "$f"
  done
  ;;
list) echo v0.0.0-fake ;;
mod) [ "$2" != download ] || echo "{\"GoMod\": \"$FAKE_GO_MOD\"}" ;;
esac
`

// scriptRepo copies the scripts into a directory laid out like the
// repository, so that their caches go under its bin/, and returns it with
// the environment that puts the fake go first on PATH.
func scriptRepo(t *testing.T) (string, []string) {
	t.Helper()
	root := t.TempDir()
	for _, p := range []string{"hack/control-plane.sh", "hack/prometheus.sh", "hack/s3-server.sh", "hack/promtool/go.mod"} {
		b, err := os.ReadFile(filepath.Join("..", "..", p))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "hack", "s3"), 0o755); err != nil {
		t.Fatal(err)
	}
	tools := t.TempDir()
	if err := os.WriteFile(filepath.Join(tools, "go"), []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	gomod := filepath.Join(tools, "kubernetes.mod")
	if err := os.WriteFile(gomod, []byte("module k8s.io/kubernetes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"PATH="+tools+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FAKE_GO_LOG="+filepath.Join(root, "builds.log"),
		"FAKE_GO_MOD="+gomod,
	)
	// The scripts' caches are the copy's: drop a cache set by the caller.
	env = append(env, "CONTROL_PLANE_DIR=")
	return root, env
}

type result struct {
	out, err string
	code     error
}

// runAtOnce runs the command n times at once.
func runAtOnce(t *testing.T, n int, env []string, name string, args ...string) []result {
	t.Helper()
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			cmd := exec.Command(name, args...)
			cmd.Env = env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			results[i] = result{out: stdout.String(), err: stderr.String(), code: err}
		})
	}
	wg.Wait()
	return results
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestTwoBuildsAtOnceBuildOnceAndBothSucceed(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock on this machine: the scripts build without a lock")
	}
	for _, tc := range []struct {
		name, script string
		args         []string
		// built are the lines the fake go logs: each once.
		built []string
		// binaries are what the directory of the last line holds, or
		// the last line itself when empty.
		binaries []string
	}{
		{
			name:     "the control plane",
			script:   "hack/control-plane.sh",
			built:    []string{"build go.etcd.io/etcd/server/v3", "build k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager"},
			binaries: []string{"etcd", "kube-apiserver", "kube-controller-manager"},
		},
		{
			name:     "the node's binaries",
			script:   "hack/control-plane.sh",
			args:     []string{"--node"},
			built:    []string{"build go.etcd.io/etcd/server/v3", "build k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubectl"},
			binaries: []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl"},
		},
		{
			name:   "Prometheus",
			script: "hack/prometheus.sh",
			built:  []string{"build github.com/prometheus/prometheus/cmd/prometheus"},
		},
		{
			name:   "the S3 server",
			script: "hack/s3-server.sh",
			built:  []string{"build github.com/versity/versitygw/cmd/versitygw"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, env := scriptRepo(t)
			results := runAtOnce(t, 2, env, filepath.Join(root, tc.script), tc.args...)
			for i, r := range results {
				if r.code != nil {
					t.Fatalf("run %d failed: %v\n%s", i, r.code, r.err)
				}
			}
			if a, b := lastLine(results[0].out), lastLine(results[1].out); a != b {
				t.Errorf("the runs printed %q and %q", a, b)
			}
			log, err := os.ReadFile(filepath.Join(root, "builds.log"))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSpace(string(log)), "\n")
			if strings.Join(got, "\n") != strings.Join(tc.built, "\n") {
				t.Errorf("built\n  %s\nwant each once:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.built, "\n  "))
			}
			if !strings.Contains(results[0].err+results[1].err, "waiting for another build") {
				t.Errorf("neither run said it waited for the other:\n%s\n%s", results[0].err, results[1].err)
			}
			last := lastLine(results[0].out)
			dir, paths := last, []string{last}
			if len(tc.binaries) > 0 {
				paths = nil
				for _, b := range tc.binaries {
					paths = append(paths, filepath.Join(dir, b))
				}
			} else {
				dir = filepath.Dir(last)
			}
			for _, p := range paths {
				if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
					t.Errorf("%s is not an executable: %v", p, err)
				}
			}
			left, _ := filepath.Glob(filepath.Join(dir, ".build.*"))
			if len(left) > 0 {
				t.Errorf("builds left behind: %v", left)
			}
			// Once built, a run builds nothing and says nothing.
			again := runAtOnce(t, 1, env, filepath.Join(root, tc.script), tc.args...)[0]
			if again.code != nil || again.err != "" || lastLine(again.out) != last {
				t.Errorf("a run on the built cache: %v, printed %q, said %q", again.code, again.out, again.err)
			}
		})
	}
}

// depsPath is a PATH for hack/deps.sh on which none of the packages it
// looks for is installed: cat and the fakes given, nothing else.
func depsPath(t *testing.T, fakes map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(cat, filepath.Join(dir, "cat")); err != nil {
		t.Fatal(err)
	}
	for name, script := range fakes {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestDepsInstallsWhatIsMissingOrSaysHow(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "hack", "deps.sh"))
	if err != nil {
		t.Fatal(err)
	}
	// Packages whose commands the PATH of the test lacks, whatever the
	// machine has (the others are found under /usr/sbin or /usr/lib).
	packages := []string{"gcc", "shellcheck", "containerd", "runc", "chromium", "nodejs", "npm"}
	log := filepath.Join(t.TempDir(), "apt-get.log")
	aptGet := `echo "$@" >> ` + log
	for _, tc := range []struct {
		name  string
		fakes map[string]string
		// fails says the script exits non-zero; say is what its
		// standard error says, and list begins the line of it that names
		// the missing packages.
		fails     bool
		say, list string
		// apt says what apt-get was asked, in order.
		apt []string
	}{
		{
			name:  "prints the apt-get command for a user and fails",
			fakes: map[string]string{"id": "echo 1000", "apt-get": aptGet},
			fails: true,
			say:   "installing them takes root",
			list:  "  sudo apt-get update && sudo apt-get install -y ",
		},
		{
			name:  "names the packages on a machine without apt-get and fails",
			fakes: map[string]string{"id": "echo 0"},
			fails: true,
			say:   "this machine has no apt-get",
			list:  "  ",
		},
		{
			name:  "installs them as root",
			fakes: map[string]string{"id": "echo 0", "apt-get": aptGet},
			say:   "installing",
			list:  "hack/deps.sh: installing ",
			apt:   []string{"-o DPkg::Lock::Timeout=600 update -qq", "-o DPkg::Lock::Timeout=600 install -y -qq gcc "},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(log)
			cmd := exec.Command(bash, script)
			cmd.Env = []string{"PATH=" + depsPath(t, tc.fakes), "HOME=" + t.TempDir()}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if failed := err != nil; failed != tc.fails {
				t.Errorf("exit: %v, want failure %v; it said:\n%s", err, tc.fails, stderr.String())
			}
			said := stderr.String()
			if !strings.Contains(said, tc.say) {
				t.Errorf("it did not say %q:\n%s", tc.say, said)
			}
			listed := false
			for _, l := range strings.Split(said, "\n") {
				if rest, ok := strings.CutPrefix(l, tc.list); ok && strings.HasPrefix(rest, "gcc ") {
					listed = true
					for _, p := range packages {
						if !slices.Contains(strings.Fields(rest), p) {
							t.Errorf("%q does not name %s", l, p)
						}
					}
				}
			}
			if !listed {
				t.Errorf("no line begins %q and lists the packages:\n%s", tc.list, said)
			}
			b, _ := os.ReadFile(log)
			asked := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(tc.apt) == 0 {
				if len(b) > 0 {
					t.Errorf("apt-get was run: %s", b)
				}
				return
			}
			if len(asked) != len(tc.apt) {
				t.Fatalf("apt-get was asked %q, want %q", asked, tc.apt)
			}
			for i, want := range tc.apt {
				if !strings.HasPrefix(asked[i], want) {
					t.Errorf("apt-get was asked %q, want %q…", asked[i], want)
				}
			}
			for _, p := range packages {
				if !slices.Contains(strings.Fields(asked[1]), p) {
					t.Errorf("apt-get install was not asked for %s: %q", p, asked[1])
				}
			}
		})
	}
}
