// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"cmp"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	checkNarration(t, out, deleted)
	checkMessages(t, out, deleted, reminded)
	checkExtension(t, out)
	checkPlugin(t, out)
	checkTrail(t, out)
	checkCleanup(t, out)
}

// checkNarration checks that each step of the story was told.
func checkNarration(t *testing.T, out string, deleted []string) {
	const both = `12s at \+[0-9.]+s, 6s at \+[0-9.]+s`
	type step struct{ name, pattern string }
	steps := []step{
		{"prints the start table", `(?m)^ +TITLE +ANNOTATION +EXPIRES +REMINDERS +WHY$`},
		{"lists the Playbook without annotation", `(?m)^ +default-ttl +- +\+[0-9.]+s +` + both + ` +40s after creation, set by the policy's defaultTTL$`},
		{"lists the Playbook with a ttl", `(?m)^ +ttl-15s +timeout\.amphitheatre\.app/ttl: 15s +\+[0-9.]+s +` + both + ` +15s after`},
		// Its expires-at is written when the cast is made up, 25s ahead;
		// on a busy API server the Playbook is created seconds later.
		{"lists the Playbook with an expires-at", `(?m)^ +expires-at +timeout\.amphitheatre\.app/expires-at: \d{4}-\d\d-\d\dT[0-9:]+Z +\+[0-9.]+s +` + both + ` +2\ds after`},
		{"lists the Playbook with a legacy ttl", `(?m)^ +legacy-ttl-20 +ttl: 20 +\+[0-9.]+s +` + both + ` +20s after creation, set by the legacy bare ttl`},
		{"lists the kept Playbook", `(?m)^ +keep-me +timeout\.amphitheatre\.app/keep: true +never +- +kept$`},
		{"lists the Playbook with an invalid ttl", `(?m)^ +invalid-ttl +timeout\.amphitheatre\.app/ttl: two weeks +\+[0-9.]+s +` + both + ` +40s after .*invalid`},
		{"lists the Playbook to be postponed", `(?m)^ +short-notice +timeout\.amphitheatre\.app/ttl: 8s +\+[0-9.]+s +6s at \+[0-9.]+s +8s after .*expect a postponement`},
		{"lists the Playbook too short for reminders", `(?m)^ +too-short +timeout\.amphitheatre\.app/ttl: 4s +\+[0-9.]+s +none +4s after .*no reminder applies, so no notice is owed$`},
		{"lists the Playbook to be extended", `(?m)^ +extend-me +timeout\.amphitheatre\.app/ttl: 10s +\+[0-9.]+s +6s at \+[0-9.]+s +10s after .*extended by 20s at \+[0-9.]+s$`},
		{"names the Playbooks with the notify annotation", `ttl-15s and extend-me also carry timeout\.amphitheatre\.app/notify: "alice@demo\.local, #team-amp"`},
		{"shows the InvalidTimeout warning", `event Warning InvalidTimeout +invalid-ttl: annotation timeout\.amphitheatre\.app/ttl has invalid value "two weeks"`},
		{"extends through the plugin", `extending extend-me by 20s through the plugin, [0-9.]+s before it would expire:\n +\$ kubectl timeout extend extend-me 20s\n +playbook/\S+ \("extend-me"\) extended from \S+\n +expires \S+ \(in \d+s\)\n`},
		{"narrates the new expiry", `extend-me now expires at \+[0-9.]+s instead of \+[0-9.]+s, set by timeout\.amphitheatre\.app/expires-at\n +it was reminded of the old date`},
		{"explains short-notice with the plugin", `\$ kubectl timeout explain short-notice\n +playbook/\S+ "short-notice"\n`},
		{"counts the audit records", `the controller's audit trail, \S+/audit\.jsonl: \d+ records, one per decision`},
		{"counts the archived records", `(?m)^ +archived +8 +-$`},
		{"counts the deleted records", `(?m)^ +deleted +8 +-$`},
		{"counts the deleting records, one before each delete", `(?m)^ +deleting +8 +-$`},
		{"counts the invalid-annotation record", `(?m)^ +invalid-annotation +1 +-$`},
		{"counts the extended record", `(?m)^ +extended +1 +-$`},
		{"counts the postponed record", `(?m)^ +postponed +1 +-$`},
		{"shows the extension on the trail", `(?m)^ +\+[0-9.]+s +extended +expiry moved from \S+$`},
		{"shows the archive on the trail", `(?m)^ +\+[0-9.]+s +archived +archive/amphitheatre\.app/Playbook/[0-9a-f-]+\.yaml$`},
		{"shows the deletion on the trail, its intent first", `(?m)^ +\+[0-9.]+s +deleting +propagation Background\n +\+[0-9.]+s +deleted +propagation Background, \S+ after it fell due$`},
		{"says where the archive is", `the archive, \S+/archive: 8 manifests, one for each Playbook deleted, as <uid>\.yaml in amphitheatre\.app/Playbook/\n`},
		{"restores default-ttl with the plugin", `\$ kubectl timeout restore (playbook/[0-9a-f-]+) --archive-dir \S+/archive\n +playbook/[0-9a-f-]+ \("default-ttl"\) restored from \S+/archive/amphitheatre\.app/Playbook/\S+\.yaml \(archived \S+ under policy demo\); now governed by policy demo\n +expires \S+ \(in \d+s\)\n`},
		{"gives the restored Playbook a fresh lifetime", `default-ttl is back under its old name, as a new object \(UID \S+, was \S+\)\n +with a fresh lifetime: it expires at \+[0-9.]+s, 40s after its new creation, set by the policy's defaultTTL;\n`},
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
}

// checkMessages checks who was told what, by mail and by webhook.
func checkMessages(t *testing.T, out string, deleted, reminded []string) {
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
}

// checkExtension checks the extension through the plugin.
func checkExtension(t *testing.T, out string) {
	t.Run("extends the Playbook before the controller would have deleted it", func(t *testing.T) {
		first(t, out, regexp.MustCompile(`extending extend-me`), regexp.MustCompile(`deleted extend-me`))
	})
	t.Run("sends the extended message after the extension", func(t *testing.T) {
		first(t, out, regexp.MustCompile(`extending extend-me`), regexp.MustCompile(`timeout\.extended extend-me`))
	})

	t.Run("extends by exactly 20s", func(t *testing.T) {
		m := regexp.MustCompile(`\("extend-me"\) extended from (\S+)\n +expires (\S+) `).FindStringSubmatch(out)
		if m == nil {
			t.Fatal("no extension in the output")
		}
		from, err1 := time.Parse(time.RFC3339, m[1])
		to, err2 := time.Parse(time.RFC3339, m[2])
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if d := to.Sub(from); d != 20*time.Second {
			t.Errorf("extended from %s to %s: by %s, want 20s", m[1], m[2], d)
		}
	})
}

// checkPlugin checks what the plugin's list and explain printed.
func checkPlugin(t *testing.T, out string) {
	// The lifetimes the list should show, in seconds from creation, until
	// deletion: short-notice and extend-me wait for the minimum notice (8s)
	// after their 6s reminders.
	lifetimes := map[string]int{
		"too-short": 4, "short-notice": 8 - 6 + 8, "extend-me": 10 - 6 + 8, "ttl-15s": 15, "legacy-ttl-20": 20,
		"invalid-ttl": 40, "default-ttl": 40,
	}
	if m := regexp.MustCompile(`(?m)^ +expires-at +.* (\d+)s after creation`).FindStringSubmatch(out); m != nil {
		lifetimes["expires-at"], _ = strconv.Atoi(m[1])
	}
	flags := map[string]string{"short-notice": "postponed", "extend-me": "postponed", "invalid-ttl": "invalid"}
	row := regexp.MustCompile(`^ +playbook/(\S+) +(\S+) +(\d+[smhd](?: \d+[smhd])?) ago +(\d{4}-\d\d-\d\d \d\d:\d\d|-) +(\d+s|due|-) +(-|\d+s(?:,\d+s)*) +demo +(\S+)$`)
	t.Run("lists the cast with the plugin at the start", func(t *testing.T) {
		rows := block(t, out, "$ kubectl timeout list", 0)
		if len(rows) != 10 || !regexp.MustCompile(`^ +NAME +TITLE +CREATED +EXPIRES \(UTC\) +LEFT +REMINDERS +POLICY +FLAGS$`).MatchString(rows[0]) {
			t.Fatalf("want a header and 9 rows, got:\n%s", strings.Join(rows, "\n"))
		}
		var titles []string
		for _, r := range rows[1:] {
			m := row.FindStringSubmatch(r)
			if m == nil {
				t.Errorf("unexpected row: %s", r)
				continue
			}
			title, left, flag := m[2], m[5], m[7]
			titles = append(titles, title)
			if title == "keep-me" {
				if left != "-" || flag != "keep" {
					t.Errorf("keep-me: left %s, flags %s; want -, keep", left, flag)
				}
				continue
			}
			if want := cmp.Or(flags[title], "-"); flag != want {
				t.Errorf("%s: flags %s, want %s", title, flag, want)
			}
			// The creation time is whole seconds, and the list comes a
			// moment after it: a little less than the lifetime is left.
			secs, _ := strconv.Atoi(strings.TrimSuffix(left, "s"))
			if life := lifetimes[title]; secs > life || secs < life-5 {
				t.Errorf("%s: %s left, want a little under %ds", title, left, life)
			}
		}
		if len(titles) == 9 && (titles[0] != "too-short" || titles[8] != "keep-me") {
			t.Errorf("order %v: want the soonest deletion (too-short) first and the kept Playbook last", titles)
		}
	})
	t.Run("lists keep-me and the restored Playbook at the end", func(t *testing.T) {
		restored := regexp.MustCompile(`\$ kubectl timeout restore playbook/(\S+) `).FindStringSubmatch(out)
		if restored == nil {
			t.Fatal("no restore in the output")
		}
		rows := block(t, out, "$ kubectl timeout list", 1)
		if len(rows) != 3 {
			t.Fatalf("want a header and 2 rows, got:\n%s", strings.Join(rows, "\n"))
		}
		got := map[string][]string{}
		for _, r := range rows[1:] {
			if m := row.FindStringSubmatch(r); m != nil {
				got[m[2]] = m
			}
		}
		if m := got["default-ttl"]; m == nil || m[1] != restored[1] || m[6] != "-" || m[7] != "-" {
			t.Errorf("want default-ttl as %s with a fresh lifetime, got %q", restored[1], m)
		} else if secs, _ := strconv.Atoi(strings.TrimSuffix(m[5], "s")); secs > 40 || secs < 35 {
			t.Errorf("the restored default-ttl has %s left, want a little under 40s", m[5])
		}
		if m := got["keep-me"]; m == nil || m[7] != "keep" {
			t.Errorf("want keep-me, kept, got %q", m)
		}
	})
	t.Run("explains the postponement of short-notice", func(t *testing.T) {
		text := strings.Join(block(t, out, "$ kubectl timeout explain short-notice", 0), "\n")
		for _, want := range []string{
			`(?m)^ +set by the annotation timeout\.amphitheatre\.app/ttl="8s", counted from creation$`,
			`(?m)^ +8s, owed: `,
			`(?m)^ +6s +due \S+ +(upcoming|due|sent)`,
			`(?m)^ +\S+ +\([^)]*\) +postponed message via demo-mail, demo-receiver, announcing deletion at \S+$`,
			`(?m)^ +\S+ +\([^)]*\) +deleted$`,
		} {
			if !regexp.MustCompile(want).MatchString(text) {
				t.Errorf("explain does not match %s:\n%s", want, text)
			}
		}
	})
}

// checkTrail checks the audit trail, the archive and the restore.
func checkTrail(t *testing.T, out string) {
	t.Run("counts the messages on the audit trail", func(t *testing.T) {
		m := regexp.MustCompile(`(?m)^ +notified +(\d+) +(.*)$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatal("no notified records")
		}
		// Two channels: 14 reminders, 8 expired and 8 deleted messages,
		// one extended and one postponed message on each.
		for _, want := range []string{"reminder 28", "expired 16", "deleted 16", "extended 2", "postponed 2"} {
			if !slices.Contains(strings.Split(m[2], ", "), want) {
				t.Errorf("notified %s: no %q", m[2], want)
			}
		}
		if m[1] != "64" {
			t.Errorf("%s notified records, want 64", m[1])
		}
	})
	t.Run("archives extend-me before deleting it", func(t *testing.T) {
		first(t, out, regexp.MustCompile(`(?m)^ +\+[0-9.]+s +archived `), regexp.MustCompile(`(?m)^ +\+[0-9.]+s +deleted +propagation`))
	})
	t.Run("restores default-ttl as a new object", func(t *testing.T) {
		m := regexp.MustCompile(`default-ttl is back under its old name, as a new object \(UID (\S+), was (\S+)\)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatal("no restore in the output")
		}
		if m[1] == m[2] {
			t.Errorf("the restored default-ttl has the old UID %s", m[1])
		}
	})
}

// checkCleanup checks that the demo leaves nothing behind.
func checkCleanup(t *testing.T, out string) {
	t.Run("leaves no temporary directory behind", func(t *testing.T) {
		m := regexp.MustCompile(`kubeconfig: (\S+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatal("no kubeconfig path in the output")
		}
		dir := filepath.Dir(m[1])
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s still exists (stat: %v)", dir, err)
		}
		files := regexp.MustCompile(`audit trail: (\S+); archive: (\S+)`).FindStringSubmatch(out)
		if files == nil {
			t.Fatal("no audit trail and archive paths in the output")
		}
		for _, f := range files[1:] {
			if filepath.Dir(f) != dir {
				t.Errorf("%s is not in %s, which the demo removes", f, dir)
			}
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

// block returns the lines the nth (from 0) run of the plugin command cmd
// printed: those after the command line, up to the next narration line.
func block(t *testing.T, out, cmd string, nth int) []string {
	t.Helper()
	parts := strings.Split(out, "          "+cmd+"\n")
	if len(parts) <= nth+1 {
		t.Fatalf("%q ran %d times, not %d", cmd, len(parts)-1, nth+1)
	}
	var lines []string
	for _, l := range strings.Split(parts[nth+1], "\n") {
		if strings.HasPrefix(l, "[") || strings.HasPrefix(l, "          $ ") || l == "" {
			break
		}
		lines = append(lines, l)
	}
	return lines
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
