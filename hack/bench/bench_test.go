// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSmoke runs the whole bench on a few Playbooks and checks that it
// measured and reported everything. It checks no timing: a loaded machine
// may be slow, but it must never delete early or remind twice.
func TestSmoke(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, which builds the control plane (etcd, kube-apiserver, kube-controller-manager) and sets it")
	}
	cfg := config{
		// The policy has no minimum notice, so a reminder the controller
		// reaches only after the expiry is dropped, as documented: the lead
		// is long enough for a loaded machine's lag.
		N: 200, Expiring: 150, Burst: 50, Window: 4 * time.Second, Reminders: 10 * time.Second,
		Margin: 4 * time.Second, Grace: 15 * time.Second, Settle: time.Second,
		Characters: 3, Creators: 16, Log: filepath.Join(t.TempDir(), "controller.log"),
		// 20 of the 50 that expire a day later are edited twice a second,
		// under an idleTTL whose write window is a second.
		Touch: 0.1, TouchEvery: 500 * time.Millisecond, TouchFor: 4 * time.Second, IdleTTL: 20 * time.Second,
	}
	rep, printed := runBench(t, cfg)

	t.Run("deletes every expiring Playbook and none early", func(t *testing.T) {
		d := rep.Deletion
		if d.Expected != 150 || d.Observed != 150 || d.Missing != 0 {
			t.Errorf("deletion: expected %d, observed %d, missing %d; want 150, 150, 0", d.Expected, d.Observed, d.Missing)
		}
		if d.Early != 0 || d.Duplicates != 0 {
			t.Errorf("deletion: %d early, %d duplicate DELETED events; want none", d.Early, d.Duplicates)
		}
		checkDeletionParts(t, rep, 150)
	})
	t.Run("reminds every expiring Playbook once and not early", func(t *testing.T) {
		r := rep.Reminder
		if r.Expected != 150 || r.Observed != 150 || r.Missing != 0 {
			t.Errorf("reminder: expected %d, observed %d, missing %d; want 150, 150, 0", r.Expected, r.Observed, r.Missing)
		}
		if r.Early != 0 || r.Duplicates != 0 {
			t.Errorf("reminder: %d early, %d duplicates; want none", r.Early, r.Duplicates)
		}
		if rep.Refused != 0 {
			t.Errorf("the receiver refused %d requests", rep.Refused)
		}
	})
	t.Run("measures the controller process", func(t *testing.T) {
		if rep.ColdStartSeconds <= 0 || rep.PeakRSSBytes <= 0 || rep.RSSAtSyncBytes <= 0 || rep.CPUSeconds <= 0 {
			t.Errorf("cold start %vs, peak RSS %d, RSS at sync %d, CPU %vs: want all positive",
				rep.ColdStartSeconds, rep.PeakRSSBytes, rep.RSSAtSyncBytes, rep.CPUSeconds)
		}
		if rep.IdleRSSBytes <= 0 || rep.IdleHeapLiveBytes <= 0 || rep.ControllerAtSync.HeapLive <= 0 || rep.BinaryBytes <= 0 {
			t.Errorf("idle RSS %d, idle live heap %d, live heap at sync %v, binary %d: want all positive",
				rep.IdleRSSBytes, rep.IdleHeapLiveBytes, rep.ControllerAtSync.HeapLive, rep.BinaryBytes)
		}
		if rep.Controller.Reconciles < float64(cfg.N) {
			t.Errorf("%v object reconciles, want at least %d", rep.Controller.Reconciles, cfg.N)
		}
		if rep.ControllerFlags["workers"] == nil {
			t.Errorf("the controller's flags were not read from its log: %v", rep.ControllerFlags)
		}
	})
	t.Run("edits the touched Playbooks and counts the controller's writes of their use", func(t *testing.T) {
		checkTouched(t, rep.Touch)
	})
	t.Run("attributes the controller's API requests", func(t *testing.T) {
		after := rep.API.AfterSync
		// A DELETE refused on a loaded API server (a conflict with a write
		// of the moment, a timeout) is sent again.
		if d := after["DELETE playbooks"]; d < 150 || d > 155 {
			t.Errorf("DELETE playbooks after sync = %v, want 150 (one per expiring Playbook) and at most 5 retries", d)
		}
		if after["PATCH playbooks"] < 150 {
			t.Errorf("PATCH playbooks after sync = %v, want at least 150 (one per reminder)", after["PATCH playbooks"])
		}
		if after["LIST playbooks"] != 0 {
			t.Errorf("LIST playbooks after sync = %v, want 0", after["LIST playbooks"])
		}
		if rep.API.Watches["WATCH playbooks"] != 1 {
			t.Errorf("open watches on playbooks = %v, want the controller's 1 (the bench's own is taken out)", rep.API.Watches["WATCH playbooks"])
		}
	})
	t.Run("prints one table and writes JSON with every field", func(t *testing.T) {
		for _, want := range []string{"cold start", "controller idle", "live heap per object", "controller peak RSS", "controller CPU", "deletion", "reminder", "DELETE playbooks"} {
			if !strings.Contains(printed, want) {
				t.Errorf("the table has no %q", want)
			}
		}
		path := filepath.Join(t.TempDir(), "bench.json")
		if err := writeJSON(path, rep); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"machine", "config", "controllerFlags", "coldStartSeconds", "deletion", "reminder",
			"peakRSSBytes", "cpuSeconds", "api", "controller"} {
			if _, ok := got[key]; !ok {
				t.Errorf("the JSON has no %q", key)
			}
		}
		for _, key := range []string{"p50Ms", "p90Ms", "p99Ms", "maxMs", "early", "duplicates", "missing"} {
			if _, ok := got["deletion"].(map[string]any)[key]; !ok {
				t.Errorf("the JSON's deletion has no %q", key)
			}
		}
		if _, ok := got["owned"]; ok {
			t.Error("the JSON has an owned lag without -owned")
		}
	})
	t.Run("with -owned, measures when each expiring Playbook's namespace is gone", checkOwned)
}

// checkDeletionParts checks the controller's part of each deletion, read
// from its log: one of each per deleted Playbook, within the lag.
func checkDeletionParts(t *testing.T, rep *report, n int) {
	t.Helper()
	late, took, d := rep.DeletionLate, rep.DeletionTook, rep.Deletion
	if late.Observed != n || took.Observed != n || took.Max <= 0 || late.P50+took.P50 > d.Max {
		t.Errorf("the controller's part: %d and %d observed, wait p50 %.1f ms and work p50 %.1f ms against a lag of at most %.1f ms; want %d each, within the lag",
			late.Observed, took.Observed, late.P50, took.P50, d.Max, n)
	}
}

// TestSleepersSmoke runs the bench with a few sleepers: each falls asleep
// (its three workloads at zero, one write each), four are used at once
// and two alone, half by last-active and half by an exec through the
// connection webhook, and each wakes with one write to each workload and
// no fight; one more wakes when the bench scales one of its Deployments
// up. It checks no timing.
func TestSleepersSmoke(t *testing.T) {
	cfg := config{
		N: 10, Expiring: 5, Window: 4 * time.Second, Reminders: 2 * time.Second,
		Margin: 6 * time.Second, Grace: 20 * time.Second, Settle: time.Second,
		Characters: 3, Creators: 4, Log: filepath.Join(t.TempDir(), "controller.log"),
		Sleepers: 7, Wakes: 4, WakeWindow: time.Second, SingleWakes: 2, ScaleUps: 1,
	}
	rep, out := runBench(t, cfg)
	w := rep.Wake
	if w == nil {
		t.Fatal("no report of the sleepers")
	}
	if s := w.Sleep; s.Expected != 7 || s.Observed != 7 || s.Early != 0 {
		t.Errorf("sleep: expected %d, observed %d, early %d; want 7, 7, 0", s.Expected, s.Observed, s.Early)
	}
	for name, l := range map[string]lagStats{"burst": w.Burst, "by last-active": w.LastActive, "by exec": w.Exec, "one alone": w.Single, "by a scale-up": w.ScaleUp} {
		if l.Missing != 0 || l.Observed == 0 {
			t.Errorf("wake %s: observed %d, missing %d; want all", name, l.Observed, l.Missing)
		}
	}
	if w.Burst.Observed != 4 || w.Single.Observed != 2 || w.Exec.Observed != 2 || w.ScaleUp.Observed != 1 {
		t.Errorf("wakes: %d in the burst (%d by exec), %d alone, %d by a scale-up; want 4 (2), 2, 1", w.Burst.Observed, w.Exec.Observed, w.Single.Observed, w.ScaleUp.Observed)
	}
	if w.MaxWorkloadWritesPerSleep != 1 || w.MaxWorkloadWritesPerWake != 1 || w.Fights != 0 {
		t.Errorf("at most %d writes to a workload per sleep, %d per wake, %d fights; want 1, 1, 0",
			w.MaxWorkloadWritesPerSleep, w.MaxWorkloadWritesPerWake, w.Fights)
	}
	if w.RequestsPerSleep["PATCH deployments"] != 2 || w.RequestsPerSleep["PATCH statefulsets"] != 1 {
		t.Errorf("requests per sleep %v: want 2 PATCH deployments and 1 PATCH statefulsets", w.RequestsPerSleep)
	}
	// The burst's load counts at least the wakes' own writes: three
	// workloads each.
	if l := w.Load; l.Seconds <= 0 || l.Writes < 12 || l.Requests < l.Writes || l.CPUSeconds["kube-apiserver"] <= 0 || l.CPUSeconds["controller"] <= 0 {
		t.Errorf("burst load %+v: want its time, at least 12 writes among its requests, and the CPU of kube-apiserver and the controller", l)
	}
	for _, want := range []string{"sleepers", "writes per sleep", "wake, burst", "by exec", "wake, one alone", "wake, by a scale-up", "burst, API server"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table has no %q", want)
		}
	}
}

// checkOwned runs the bench with -owned and checks what it reports of the
// namespaces.
func checkOwned(t *testing.T) {
	rep, out := smokeOwned(t)
	if d := rep.Deletion; d.Observed != 5 || d.Missing != 0 || d.Early != 0 {
		t.Errorf("deletion: observed %d, missing %d, early %d; want 5, 0, 0 (the finalizer's stand-in releases them)", d.Observed, d.Missing, d.Early)
	}
	o := rep.Owned
	if o == nil {
		t.Fatal("no owned lag in the report")
	}
	if o.Expected != 5 || o.Observed != 5 || o.Missing != 0 || o.Early != 0 || o.Duplicates != 0 {
		t.Errorf("owned: expected %d, observed %d, missing %d, early %d, duplicates %d; want 5, 5, 0, 0, 0",
			o.Expected, o.Observed, o.Missing, o.Early, o.Duplicates)
	}
	if o.P50 < rep.Deletion.P50 || o.Max <= 0 {
		t.Errorf("owned lag p50 %.1f ms, max %.1f ms: want the namespaces gone after the Playbooks (deletion p50 %.1f ms)", o.P50, o.Max, rep.Deletion.P50)
	}
	for _, want := range []string{"owned gone (namespace)", "owned namespaces", "kube-controller-manager"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table has no %q", want)
		}
	}
}

// smokeOwned runs the bench with -owned on a handful of Playbooks, each
// expiring one deployed as Amphitheatre deploys it, and returns its report
// and printed table.
func smokeOwned(t *testing.T) (*report, string) {
	t.Helper()
	cfg := config{
		N: 8, Expiring: 5, Window: 2 * time.Second, Reminders: 2 * time.Second,
		Margin: 6 * time.Second, Grace: 15 * time.Second, Settle: time.Second,
		Characters: 3, Creators: 4, Log: filepath.Join(t.TempDir(), "controller.log"),
		Owned: true, OwnedGrace: 2 * time.Minute,
	}
	return runBench(t, cfg)
}

// runBench runs the bench with cfg, logs its progress and report, and
// returns the report and the printed table; it fails the test when the run
// failed.
func runBench(t *testing.T, cfg config) (*report, string) {
	t.Helper()
	var progress bytes.Buffer
	rep, err := run(t.Context(), cfg, &progress)
	t.Logf("progress:\n%s", progress.String())
	if rep == nil {
		t.Fatalf("run: %v", err)
	}
	var out bytes.Buffer
	rep.print(&out)
	t.Logf("report:\n%s", out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return rep, out.String()
}

// checkTouched checks the run's report of the touched Playbooks: 20 of
// them, edited twice a second for 4 s under an idleTTL of 20 s.
func checkTouched(t *testing.T, tr *touchReport) {
	t.Helper()
	if tr == nil {
		t.Fatal("no report of the touched Playbooks")
	}
	if tr.Objects != 20 || tr.Edits == 0 || tr.Failed != 0 {
		t.Errorf("%d Playbooks touched with %d edits, %d failed; want 20, some, none", tr.Objects, tr.Edits, tr.Failed)
	}
	// One write per object and window (idleTTL/20 = 1 s), and one more
	// for a window the run began in the middle of.
	if most := float64(tr.Objects) * (tr.Seconds + 1); tr.Writes == 0 || tr.Writes > most {
		t.Errorf("%v activity writes for %d objects over %.1fs; want some and at most %v", tr.Writes, tr.Objects, tr.Seconds, most)
	}
}
