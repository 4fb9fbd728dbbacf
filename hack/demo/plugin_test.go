// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/plugin"
)

// The checks of what the plugin showed, and of the cleanup.

// checkPlugin checks what the plugin showed and how it exited.
func checkPlugin(t *testing.T, res *results) {
	checkPluginRuns(t, res)
	checkListed(t, res)
	checkExplained(t, res)
	checkFinalList(t, res)
}

// checkPluginRuns checks the exit codes of the plugin's commands.
func checkPluginRuns(t *testing.T, res *results) {
	t.Run("refuses only the extension past the maximum and the forbidden keep", func(t *testing.T) {
		refused := map[string]int{"extend extended-past-max 1m": plugin.ExitPastMaximum, "keep keep-refused": plugin.ExitKeepForbidden}
		ran := map[string]bool{}
		for _, r := range res.plugin {
			line := strings.Join(r.args, " ")
			ran[line] = true
			if want := refused[line]; r.code != want {
				t.Errorf("kubectl timeout %s: exit code %d, want %d", line, r.code, want)
			}
		}
		for _, line := range []string{"list", "explain short-notice", "extend extend-me " + extendBy, "wake " + sleepTitle, "explain used",
			"extend extended-past-max 1m", "keep keep-refused"} {
			if !ran[line] {
				t.Errorf("kubectl timeout %s was not run", line)
			}
		}
	})
}

// checkListed checks the list at the start: the cast, in order of
// deletion, with their flags and deletion times.
func checkListed(t *testing.T, res *results) {
	t.Run("lists the cast at the start, soonest deletion first", func(t *testing.T) {
		items := res.listed.Items
		if len(items) != len(firstScene) {
			t.Fatalf("%d items, want %d", len(items), len(firstScene))
		}
		if items[0].Title != "too-short" || items[len(items)-1].Title != "keep-me" {
			t.Errorf("first %s and last %s; want too-short, the soonest, first and keep-me, kept, last", items[0].Title, items[len(items)-1].Title)
		}
		for _, it := range items {
			i := slices.IndexFunc(firstScene, func(c fate) bool { return c.title == it.Title })
			if i < 0 {
				t.Errorf("unexpected item %s", it.Title)
				continue
			}
			c, p := firstScene[i], res.playbook(t, it.Title, 1)
			var flags []string
			switch {
			case c.kept:
				flags = []string{"keep"}
			case c.invalid:
				flags = []string{"invalid"}
			case len(c.stages) > 0 && mustDuration(t, c.stages[0]) < mustDuration(t, minimumNotice):
				// Its first reminder leaves less than the notice.
				flags = []string{"postponed"}
			}
			if !slices.Equal(it.Flags, flags) {
				t.Errorf("%s: flags %v, want %v", it.Title, it.Flags, flags)
			}
			if c.kept {
				if it.DeleteAt != nil {
					t.Errorf("%s: deleted at %s, want never", it.Title, time.Time(*it.DeleteAt))
				}
				continue
			}
			// Planned as if every reminder went out on time: the deletion
			// is the expiry, or the first reminder plus the notice. The
			// list came before the extension.
			want := expiresAt(t, p, c)
			if c.extended {
				want = p.obj.GetCreationTimestamp().Add(c.life)
			}
			if len(c.stages) > 0 {
				if notice := want.Add(-mustDuration(t, c.stages[0])).Add(mustDuration(t, minimumNotice)); notice.After(want) {
					want = notice
				}
			}
			if it.DeleteAt == nil || time.Time(*it.DeleteAt).Before(want) || time.Time(*it.DeleteAt).Sub(want) > lateAfter {
				t.Errorf("%s: deleted at %v, want %s", it.Title, it.DeleteAt, want)
			}
		}
	})
}

// checkExplained checks the explanation of short-notice.
func checkExplained(t *testing.T, res *results) {
	t.Run("explains that short-notice waits for the minimum notice", func(t *testing.T) {
		x := res.explained
		if x.Object.Title != "short-notice" || x.Lifetime == nil || x.Notice == nil || len(x.Next) == 0 {
			t.Fatalf("explanation %+v", x)
		}
		if x.Lifetime.Source != expiry.AnnotationTTL || x.Lifetime.Value != "8s" {
			t.Errorf("lifetime set by %s=%q, want %s=8s", x.Lifetime.Source, x.Lifetime.Value, expiry.AnnotationTTL)
		}
		if !x.Notice.Owed || x.Notice.MinimumNotice != minimumNotice {
			t.Errorf("notice %+v, want %s owed", x.Notice, minimumNotice)
		}
		actions := make([]string, 0, len(x.Next))
		for _, s := range x.Next {
			actions = append(actions, s.Action)
		}
		if !slices.Contains(actions, string(v1alpha1.EventPostponed)) || actions[len(actions)-1] != plugin.ActionDelete {
			t.Errorf("next %v, want a postponed message and the deletion last", actions)
		}
	})
}

// checkFinalList checks the list after the restore.
func checkFinalList(t *testing.T, res *results) {
	t.Run("lists keep-me and the restored default-ttl at the end", func(t *testing.T) {
		old := res.playbook(t, "default-ttl", 1)
		got := map[string]plugin.Item{}
		for _, it := range res.finalList.Items {
			got[it.Title] = it
		}
		if len(got) != 2 {
			t.Fatalf("items %v, want keep-me and default-ttl", res.finalList.Items)
		}
		if it := got["keep-me"]; !slices.Equal(it.Flags, []string{"keep"}) {
			t.Errorf("keep-me: flags %v, want [keep]", it.Flags)
		}
		it := got["default-ttl"]
		if it.Name != old.obj.GetName() || it.UID == string(old.obj.GetUID()) {
			t.Errorf("default-ttl restored as %s (UID %s); want its old name %s and a new UID (was %s)", it.Name, it.UID, old.obj.GetName(), old.obj.GetUID())
		}
		if it.ExpiresAt == nil || time.Time(*it.ExpiresAt).Sub(time.Time(it.Created)) != 40*time.Second || len(it.RemindersSent) != 0 {
			t.Errorf("default-ttl restored with expiry %v from creation %s and reminders %v; want a fresh lifetime of 40s", it.ExpiresAt, time.Time(it.Created), it.RemindersSent)
		}
	})
}

// checkCleanup checks that the demo leaves nothing behind.
func checkCleanup(t *testing.T, res *results) {
	t.Run("leaves no temporary directory behind", func(t *testing.T) {
		if res.workdir == "" {
			t.Fatal("no work directory in the results")
		}
		if _, err := os.Stat(res.workdir); !os.IsNotExist(err) {
			t.Errorf("%s still exists (stat: %v)", res.workdir, err)
		}
	})
	t.Run("leaves no actions server running", func(t *testing.T) {
		if res.link.actionsPID == 0 {
			t.Fatal("no actions server pid in the results")
		}
		if p, err := os.FindProcess(res.link.actionsPID); err == nil && p.Signal(syscall.Signal(0)) == nil {
			t.Errorf("actions server process %d is still running", res.link.actionsPID)
		}
	})
	t.Run("leaves no controller running", func(t *testing.T) {
		if res.pid == 0 {
			t.Fatal("no controller pid in the results")
		}
		if p, err := os.FindProcess(res.pid); err == nil && p.Signal(syscall.Signal(0)) == nil {
			t.Errorf("controller process %d is still running", res.pid)
		}
	})
}
