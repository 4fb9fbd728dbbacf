// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemo plays the whole demo against a real control plane and the real
// controller binary, and checks that each step of the story was told.
func TestDemo(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, which builds etcd and kube-apiserver and sets it")
	}

	var buf bytes.Buffer
	start := time.Now()
	err := run(t.Context(), &buf, 100*time.Second)
	out := buf.String()
	t.Logf("demo output after %s:\n%s", time.Since(start).Round(time.Second), out)
	if err != nil {
		t.Fatalf("run: %v", err)
	}

	deleted := []string{"default-ttl", "ttl-15s", "expires-at", "legacy-ttl-20", "invalid-ttl", "extend-me"}
	type step struct{ name, pattern string }
	steps := []step{
		{"prints the start table", `(?m)^ +TITLE +ANNOTATION +EXPIRES +WHY$`},
		{"lists the Playbook without annotation", `(?m)^ +default-ttl +- +\+[0-9.]+s +40s after creation, set by the policy's defaultTTL$`},
		{"lists the Playbook with a ttl", `(?m)^ +ttl-15s +timeout\.amphitheatre\.app/ttl: 15s +\+[0-9.]+s +15s after`},
		{"lists the Playbook with an expires-at", `(?m)^ +expires-at +timeout\.amphitheatre\.app/expires-at: \d{4}-\d\d-\d\dT[0-9:]+Z +\+[0-9.]+s +2[56]s after`},
		{"lists the Playbook with a legacy ttl", `(?m)^ +legacy-ttl-20 +ttl: 20 +\+[0-9.]+s +20s after creation, set by the legacy bare ttl`},
		{"lists the kept Playbook", `(?m)^ +keep-me +timeout\.amphitheatre\.app/keep: true +never +kept$`},
		{"lists the Playbook with an invalid ttl", `(?m)^ +invalid-ttl +timeout\.amphitheatre\.app/ttl: two weeks +\+[0-9.]+s +40s after .*invalid`},
		{"lists the Playbook to be extended", `(?m)^ +extend-me +timeout\.amphitheatre\.app/ttl: 10s +\+[0-9.]+s +10s after .*extended to 30s`},
		{"shows the InvalidTimeout warning", `event Warning InvalidTimeout +invalid-ttl: annotation timeout\.amphitheatre\.app/ttl has invalid value "two weeks"`},
		{"narrates the extension", `extending extend-me: a merge patch sets timeout\.amphitheatre\.app/ttl from 10s to 30s; it now expires at`},
		{"shows the kept Playbook surviving", `keep-me is still there`},
		{"ends with the summary", `demo: 6 deleted on time, 1 kept, 0 early\n$`},
	}
	for _, title := range deleted {
		q := regexp.QuoteMeta(title)
		steps = append(steps,
			step{"reports " + title + " deleted on time", `deleted ` + q + ` \(expired at \+[0-9.]+s, deleted \d+ ms after\)`},
			step{"shows the Expired event of " + title, `event Normal +Expired +` + q + `: Expired at `},
			step{"shows the Deleted event of " + title, `event Normal +Deleted +` + q + `: Deleted `},
		)
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			if !regexp.MustCompile(step.pattern).MatchString(out) {
				t.Errorf("output does not match %s", step.pattern)
			}
		})
	}

	t.Run("extends the Playbook before the controller would have deleted it", func(t *testing.T) {
		ext, del := strings.Index(out, "extending extend-me"), strings.Index(out, "deleted extend-me")
		if ext < 0 || del < 0 || ext > del {
			t.Errorf("extension at offset %d, deletion at offset %d: want the extension first", ext, del)
		}
	})

	t.Run("leaves no temporary directory behind", func(t *testing.T) {
		m := regexp.MustCompile(`kubeconfig: (\S+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatal("no kubeconfig path in the output")
		}
		if _, err := os.Stat(filepath.Dir(m[1])); !os.IsNotExist(err) {
			t.Errorf("%s still exists (stat: %v)", filepath.Dir(m[1]), err)
		}
	})

	t.Run("leaves no controller running", func(t *testing.T) {
		m := regexp.MustCompile(`controller running \(pid (\d+)\)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatal("no controller pid in the output")
		}
		pid, _ := strconv.Atoi(m[1])
		if p, err := os.FindProcess(pid); err == nil && p.Signal(syscall.Signal(0)) == nil {
			t.Errorf("controller process %d is still running", pid)
		}
	})
}
