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

	deleted := []string{"default-ttl", "ttl-15s", "expires-at", "legacy-ttl-20", "invalid-ttl", "short-notice", "too-short", "extend-me"}
	// reminded are the Playbooks at least one reminder stage applies to.
	reminded := []string{"default-ttl", "ttl-15s", "expires-at", "legacy-ttl-20", "invalid-ttl", "short-notice", "extend-me"}
	const both = `12s at \+[0-9.]+s, 6s at \+[0-9.]+s`
	type step struct{ name, pattern string }
	steps := []step{
		{"prints the start table", `(?m)^ +TITLE +ANNOTATION +EXPIRES +REMINDERS +WHY$`},
		{"lists the Playbook without annotation", `(?m)^ +default-ttl +- +\+[0-9.]+s +` + both + ` +40s after creation, set by the policy's defaultTTL$`},
		{"lists the Playbook with a ttl", `(?m)^ +ttl-15s +timeout\.amphitheatre\.app/ttl: 15s +\+[0-9.]+s +` + both + ` +15s after`},
		{"lists the Playbook with an expires-at", `(?m)^ +expires-at +timeout\.amphitheatre\.app/expires-at: \d{4}-\d\d-\d\dT[0-9:]+Z +\+[0-9.]+s +` + both + ` +2[56]s after`},
		{"lists the Playbook with a legacy ttl", `(?m)^ +legacy-ttl-20 +ttl: 20 +\+[0-9.]+s +` + both + ` +20s after creation, set by the legacy bare ttl`},
		{"lists the kept Playbook", `(?m)^ +keep-me +timeout\.amphitheatre\.app/keep: true +never +- +kept$`},
		{"lists the Playbook with an invalid ttl", `(?m)^ +invalid-ttl +timeout\.amphitheatre\.app/ttl: two weeks +\+[0-9.]+s +` + both + ` +40s after .*invalid`},
		{"lists the Playbook to be postponed", `(?m)^ +short-notice +timeout\.amphitheatre\.app/ttl: 8s +\+[0-9.]+s +6s at \+[0-9.]+s +8s after .*expect a postponement`},
		{"lists the Playbook too short for reminders", `(?m)^ +too-short +timeout\.amphitheatre\.app/ttl: 4s +\+[0-9.]+s +none +4s after .*no reminder applies, so no notice is owed$`},
		{"lists the Playbook to be extended", `(?m)^ +extend-me +timeout\.amphitheatre\.app/ttl: 10s +\+[0-9.]+s +6s at \+[0-9.]+s +10s after .*extended to 30s`},
		{"names the Playbooks with the notify annotation", `ttl-15s and extend-me also carry timeout\.amphitheatre\.app/notify: "alice@demo\.local, #team-amp"`},
		{"shows the InvalidTimeout warning", `event Warning InvalidTimeout +invalid-ttl: annotation timeout\.amphitheatre\.app/ttl has invalid value "two weeks"`},
		{"narrates the extension", `extending extend-me: a merge patch sets timeout\.amphitheatre\.app/ttl from 10s to 30s; it now expires at`},
		{"shows the extended message by webhook", `webhook demo-receiver: app\.amphitheatre\.timeout\.extended extend-me, now expires at \+[0-9.]+s \(signature ok\)`},
		{"shows the extended message by mail", `mail to alice@demo\.local, platform@demo\.local: Playbook "extend-me" \(\S+\) now expires in \d+ seconds`},
		{"shows the DeletionPostponed event", `event Normal +DeletionPostponed +short-notice: Expired at \S+; deletion postponed to \S+ because the first reminder reached people`},
		{"shows the postponed message by webhook", `webhook demo-receiver: app\.amphitheatre\.timeout\.postponed short-notice, deletion at \+[0-9.]+s \(signature ok\)`},
		{"shows the postponed message by mail", `mail to platform@demo\.local: Deletion of Playbook "short-notice" \(\S+\) postponed to`},
		{"reports the postponed deletion", `deleted short-notice \(expired at \+[0-9.]+s, postponed to \+[0-9.]+s, deleted \d+ ms after that\)`},
		{"explains the deletion without reminder", `deleted too-short \(expired at \+[0-9.]+s, deleted \d+ ms after\)\n +no reminder before it, as none applied`},
		{"shows the kept Playbook surviving", `keep-me is still there`},
		{"tallies the reminders of extend-me", `(?m)^ +extend-me +3 +3 +3 +\d+ ms +.*extended`},
		{"ends with the summary", `demo: 8 deleted on time, 1 kept, 0 early; 14 reminders by mail and 14 by webhook, 0 duplicates\n$`},
	}
	for _, title := range deleted {
		q := regexp.QuoteMeta(title)
		steps = append(steps,
			step{"reports " + title + " deleted on time", `deleted ` + q + ` \(expired at \+[0-9.]+s, (postponed to \+[0-9.]+s, )?deleted \d+ ms after`},
			step{"shows the Expired event of " + title, `event Normal +Expired +` + q + `: Expired at `},
			step{"shows the Deleted event of " + title, `event Normal +Deleted +` + q + `: Deleted `},
			step{"shows the deleted message of " + title + " by webhook", `webhook demo-receiver: app\.amphitheatre\.timeout\.deleted ` + q + `[ (]`},
		)
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			if !regexp.MustCompile(step.pattern).MatchString(out) {
				t.Errorf("output does not match %s", step.pattern)
			}
		})
	}

	for _, title := range reminded {
		q := regexp.QuoteMeta(title)
		deletion := regexp.MustCompile(`deleted ` + q + ` \(`)
		for via, pattern := range map[string]string{
			"mail":    `mail to (alice@demo\.local, )?platform@demo\.local: Playbook "` + q + `" \(\S+\) will be deleted in \d+ seconds`,
			"webhook": `webhook demo-receiver: app\.amphitheatre\.timeout\.reminder ` + q + ` stage \d+s \(signature ok\)`,
		} {
			t.Run("reminds of "+title+" by "+via+" before deleting it", func(t *testing.T) {
				first(t, out, regexp.MustCompile(pattern), deletion)
			})
		}
	}
	t.Run("sends no reminder for the Playbook shorter than every lead", func(t *testing.T) {
		if m := regexp.MustCompile(`.*(reminder too-short|"too-short" .* will be deleted).*`).FindString(out); m != "" {
			t.Errorf("unexpected reminder: %s", m)
		}
	})
	t.Run("tells alice only about the Playbooks that name her", func(t *testing.T) {
		for _, m := range regexp.MustCompile(`mail to alice@demo\.local[^:]*: .*`).FindAllString(out, -1) {
			if !strings.Contains(m, `"ttl-15s"`) && !strings.Contains(m, `"extend-me"`) {
				t.Errorf("alice got: %s", m)
			}
		}
	})
	t.Run("mails every deletion", func(t *testing.T) {
		// Not by title: the title of a Playbook that never had a reminder
		// is left out of its messages.
		if n := len(regexp.MustCompile(`(?m)mail to [^:]+: Playbook .* was deleted$`).FindAllString(out, -1)); n != len(deleted) {
			t.Errorf("%d deletions mailed, want %d", n, len(deleted))
		}
	})
	t.Run("reports no problem", func(t *testing.T) {
		if m := regexp.MustCompile(`.*(PROBLEM|DUPLICATE|REFUSED|EARLY|LATE).*`).FindString(out); m != "" {
			t.Errorf("found: %s", m)
		}
	})

	t.Run("extends the Playbook before the controller would have deleted it", func(t *testing.T) {
		first(t, out, regexp.MustCompile(`extending extend-me`), regexp.MustCompile(`deleted extend-me`))
	})
	t.Run("sends the extended message after the extension", func(t *testing.T) {
		first(t, out, regexp.MustCompile(`extending extend-me`), regexp.MustCompile(`timeout\.extended extend-me`))
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

// first checks that a is in out, and before b.
func first(t *testing.T, out string, a, b *regexp.Regexp) {
	t.Helper()
	ia, ib := a.FindStringIndex(out), b.FindStringIndex(out)
	switch {
	case ia == nil:
		t.Errorf("no match for %s", a)
	case ib == nil:
		t.Errorf("no match for %s", b)
	case ia[0] > ib[0]:
		t.Errorf("%s at offset %d comes after %s at offset %d", a, ia[0], b, ib[0])
	}
}
