// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/archive"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// Not parallel: its deletion is checked to be on time, and the suite's
// bursts (a deletion cap spreading 60 expiries, each now followed through
// Terminating) kept the shared workers busy for over 5 s on two cores.
func TestArchivesThenDeletesAndAuditsEachStep(t *testing.T) {
	spec := playbookPolicy("archive", "1h")
	spec.Reminders = []v1alpha1.Duration{"2s"}
	spec.MinimumNotice = "0s"
	spec.Deletion.Archive = true
	createPolicy(t, "archive", spec)

	pb := create(t, playbooks, newPlaybook("archive", "kept in the archive", map[string]string{expiry.AnnotationTTL: "4s"}))
	pb.expectDeletedOnTime(t, pb.after(4*time.Second))

	// The archive holds the object as it was, less what the server sets.
	path := archive.Path(archiveDir, playbookKind, pb.GetUID())
	got, header, err := archive.Read(path)
	if err != nil {
		t.Fatalf("no archive of %s: %v", pb.GetName(), err)
	}
	if header.UID != pb.GetUID() || header.Policy != "archive" || !header.ExpiresAt.Equal(pb.after(4*time.Second)) {
		t.Errorf("archive header %+v", header)
	}
	for _, field := range [][]string{{"metadata", "uid"}, {"metadata", "resourceVersion"}, {"metadata", "managedFields"}, {"status"}} {
		if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, field...); found {
			t.Errorf("the archive keeps %s", strings.Join(field, "."))
		}
	}
	if title, _, _ := unstructured.NestedString(got.Object, "spec", "title"); title != "kept in the archive" {
		t.Errorf("archived spec.title %q", title)
	}
	if got.GetName() != pb.GetName() || got.GetAnnotations()[expiry.AnnotationTTL] != "4s" || got.GetLabels()[testLabel] != "archive" {
		t.Errorf("archived metadata %v %v %v", got.GetName(), got.GetAnnotations(), got.GetLabels())
	}

	// Each decision is on the trail, in the order it was taken, with the
	// object's UID: the reminder, the archive, then the deletion, its
	// intent first.
	var recs []audit.Record
	fixture.Eventually(t, 5*time.Second, "audit records of "+pb.GetName(), func() (bool, error) {
		recs = withoutSuiteCapTurns(t, auditRecords(t, pb.GetUID()))
		return slices.ContainsFunc(recs, func(r audit.Record) bool { return r.Type == audit.Gone }), nil
	})
	var trail []audit.Type
	for _, r := range recs {
		trail = append(trail, r.Type)
	}
	if want := []audit.Type{audit.Notified, audit.Archived, audit.Deleting, audit.Deleted, audit.Gone}; !slices.Equal(trail, want) {
		t.Fatalf("audit trail %v, want %v", trail, want)
	}
	if r := recs[0]; r.Message != "reminder" || r.Stage != "2s" || r.Channel != "events" || r.Result != audit.OK {
		t.Errorf("reminder record %+v", r)
	}
	if r := recs[1]; r.Detail != path {
		t.Errorf("archive record %+v names another file than %s", r, path)
	}
	for _, r := range recs {
		if r.Policy != "archive" || r.ExpiresAt == nil || !r.ExpiresAt.Equal(pb.after(4*time.Second)) ||
			r.Object.Kind != "Playbook" || r.Object.Name != pb.GetName() || r.Object.APIVersion != "amphitheatre.app/v1" {
			t.Errorf("record %+v", r)
		}
	}
}

// Not parallel: the metrics are the process's, and only while no other
// test runs can a change in them be put down to this test's Playbook.
func TestMetricsCountWhatHappens(t *testing.T) {
	spec := playbookPolicy("metrics", "1h")
	spec.Reminders = []v1alpha1.Duration{"2s"}
	spec.MinimumNotice = "0s"
	spec.Deletion.Archive = true
	createPolicy(t, "metrics", spec)

	type sample struct {
		name   string
		labels map[string]string
	}
	counters := []sample{
		{"timeout_controller_archives_total", map[string]string{"result": "ok"}},
		{"timeout_controller_deletions_total", map[string]string{"result": "deleted"}},
		{"timeout_controller_notifications_total", map[string]string{"channel": "events", "type": "reminder", "result": "sent"}},
	}
	histograms := []string{"timeout_controller_deletion_lag_seconds", "timeout_controller_reminder_lag_seconds"}
	before := map[string]float64{}
	for _, c := range counters {
		before[c.name] = counter(t, c.name, c.labels)
	}
	for _, h := range histograms {
		before[h] = float64(metric(t, h, nil).GetHistogram().GetSampleCount())
	}

	pb := create(t, playbooks, newPlaybook("metrics", "counted", map[string]string{expiry.AnnotationTTL: "4s"}))
	pb.expectDeletedOnTime(t, pb.after(4*time.Second))

	// The watch can tell the test of the deletion before the controller
	// has its answer to the DELETE and counts it: wait for every count to
	// move, then check that each moved by exactly one.
	grown := func() (counts, samples map[string]float64) {
		counts, samples = map[string]float64{}, map[string]float64{}
		for _, c := range counters {
			counts[c.name] = counter(t, c.name, c.labels) - before[c.name]
		}
		for _, h := range histograms {
			samples[h] = float64(metric(t, h, nil).GetHistogram().GetSampleCount()) - before[h]
		}
		return counts, samples
	}
	fixture.Eventually(t, 5*time.Second, "the metrics of "+pb.GetName(), func() (bool, error) {
		counts, samples := grown()
		for _, n := range counts {
			if n < 1 {
				return false, nil
			}
		}
		for _, n := range samples {
			if n < 1 {
				return false, nil
			}
		}
		return true, nil
	})
	counts, samples := grown()
	for _, c := range counters {
		if got := counts[c.name]; got != 1 {
			t.Errorf("%s%v went up by %v, want 1", c.name, c.labels, got)
		}
	}
	for _, h := range histograms {
		if got := samples[h]; got != 1 {
			t.Errorf("%s has %v new samples, want 1", h, got)
		}
	}

	// No label names an object: only these, whose values are policies,
	// channels and fixed sets (action and request are the actions
	// server's, which the tests run in this process).
	allowed := map[string]bool{"policy": true, "channel": true, "type": true, "result": true, "cap": true, "annotation": true, "within": true, "what": true, "action": true, "request": true}
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "timeout_controller_") {
			continue
		}
		seen++
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if !allowed[l.GetName()] || strings.Contains(l.GetValue(), pb.GetName()) {
					t.Errorf("%s has label %s=%q", f.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
	if seen < 8 {
		t.Errorf("only %d timeout_controller_ metric families gathered", seen)
	}
}

func TestAnArchiveThatFailsKeepsTheObject(t *testing.T) {
	t.Parallel()
	spec := playbookPolicy("archive-fails", "1h")
	spec.Deletion.Archive = true
	createPolicy(t, "archive-fails", spec)

	pb := create(t, playbooks, newPlaybook("archive-fails", "cannot be archived", map[string]string{expiry.AnnotationTTL: "3s"}))
	// A directory where the archive file should go: the write fails.
	blocker := archive.Path(archiveDir, playbookKind, pb.GetUID())
	if err := os.MkdirAll(filepath.Join(blocker, "in-the-way"), 0o750); err != nil {
		t.Fatal(err)
	}

	pb.expectKept(t, time.Until(pb.after(6*time.Second)))
	warning := findEvent(t, eventNamespace, pb.GetName(), "ArchiveFailed")
	mustContain(t, warning.Note, "not deleted", "policy archive-fails", "retrying")
	if !slices.ContainsFunc(auditRecords(t, pb.GetUID()), func(r audit.Record) bool {
		return r.Type == audit.ArchiveFailed && r.Result == audit.Error && r.Error != ""
	}) {
		t.Fatal("no archive-failed audit record")
	}

	// Once the archive can be written, the object goes, archived.
	if err := os.RemoveAll(blocker); err != nil {
		t.Fatal(err)
	}
	select {
	case <-pb.gone:
	case <-time.After(30 * time.Second):
		t.Fatal("not deleted 30s after the archive was fixed")
	}
	if _, _, err := archive.Read(blocker); err != nil {
		t.Fatalf("deleted without its archive: %v", err)
	}
}

func TestInvalidAnnotationsAreAudited(t *testing.T) {
	t.Parallel()
	createPolicy(t, "audit-invalid", playbookPolicy("audit-invalid", "1h"))
	pb := create(t, playbooks, newPlaybook("audit-invalid", "typo", map[string]string{expiry.AnnotationTTL: "2x"}))
	findEvent(t, eventNamespace, pb.GetName(), "InvalidTimeout")
	fixture.Eventually(t, 5*time.Second, "an invalid-annotation audit record", func() (bool, error) {
		return slices.ContainsFunc(auditRecords(t, pb.GetUID()), func(r audit.Record) bool {
			return r.Type == audit.InvalidAnnotation && strings.Contains(r.Error, expiry.AnnotationTTL) && strings.Contains(r.Error, `"2x"`)
		}), nil
	})
}

// 500 Playbooks expiring in the same second under a cap of 100 a minute:
// the first seconds delete no more than the cap's pace allows, the
// earliest first, none early; lifting the cap lets the rest go at once,
// none skipped. The pace over a whole minute (turns 0.6 s apart, 100 in
// any minute) is TestCapSpreadsABurstInOrder's, in internal/controller/object:
// this test does not wait a minute for it.
func TestACapSpreadsABurstOfExpiries(t *testing.T) {
	t.Parallel()
	const n, perMinute = 500, 100
	spec := playbookPolicy("cap", "1h")
	spec.Deletion.MaxPerMinute = perMinute
	policy := createPolicy(t, "cap", spec)

	ctx := context.Background()
	res := dyn.Resource(playbooks)
	w, err := res.Watch(ctx, metav1.ListOptions{LabelSelector: testLabel + "=cap"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	deleted := map[string]time.Time{}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				if o, ok := ev.Object.(metav1.Object); ok {
					mu.Lock()
					deleted[o.GetName()] = time.Now()
					mu.Unlock()
				}
			}
		}
	}()

	// One second, one millisecond apart: the order they should go in.
	second := time.Now().Add(15 * time.Second).Truncate(time.Second)
	expiries := map[string]time.Time{}
	var names []string
	creates := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		at := second.Add(time.Duration(i) * time.Millisecond)
		pb := newPlaybook("cap", fmt.Sprintf("burst %d", i), map[string]string{expiry.AnnotationExpiresAt: at.UTC().Format(time.RFC3339Nano)})
		expiries[pb.GetName()] = at
		names = append(names, pb.GetName())
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := res.Create(ctx, pb, metav1.CreateOptions{})
			creates <- err
		}()
	}
	for range n {
		if err := <-creates; err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = res.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: testLabel + "=cap"})
	})
	if time.Now().After(second) {
		t.Fatalf("creating %d Playbooks took past their expiry; the machine is too slow for this test", n)
	}

	// A window of the first seconds after the burst expired: turns are
	// 0.6 s apart, so it holds at most window/0.6 deletions, plus the one
	// the first instant allows. Without the cap all 500 would go in it.
	const window = 9 * time.Second
	time.Sleep(time.Until(second.Add(window)))
	mu.Lock()
	inWindow := map[string]time.Time{}
	for name, at := range deleted {
		if at.Before(expiries[name]) {
			t.Errorf("%s deleted %s before its expiry", name, expiries[name].Sub(at))
		}
		if at.Before(second.Add(window)) {
			inWindow[name] = at
		}
	}
	mu.Unlock()
	if c, most := len(inWindow), int(window/(600*time.Millisecond))+1; c > most || c == 0 {
		t.Fatalf("%d deleted in the %s after the burst expired, want 1 to %d", c, window, most)
	}
	// The earliest expiries went first: no object deleted in the window
	// ranks far behind the number deleted.
	for name := range inWindow {
		rank := slices.Index(names, name)
		if slack := 25; rank >= len(inWindow)+slack {
			t.Errorf("%s, number %d in order of expiry, went in the first %s with only %d deleted", name, rank, window, len(inWindow))
		}
	}

	// The burst is throttled: every one after the first minute's share is
	// counted, and the last in line is told it waits.
	fixture.Eventually(t, time.Minute, "the throttled deletions counted", func() (bool, error) {
		v := counter(t, "timeout_controller_deletions_throttled_total", map[string]string{"cap": "policy"})
		return v >= n-perMinute-1, fmt.Errorf("deletions_throttled_total{cap=policy} is %v, want at least %d", v, n-perMinute-1)
	})

	last := names[n-1]
	throttled := findEvent(t, eventNamespace, last, "DeletionThrottled")
	mustContain(t, throttled.Note, "cap of 100 deletions per minute of policy cap")

	// Lifting the cap: the rest go now, none skipped.
	lifted := time.Now()
	patch := []byte(`{"spec":{"deletion":{"maxPerMinute":0}}}`)
	if err := k8s.Patch(ctx, policy, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 60*time.Second, "every Playbook deleted once the cap is lifted", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(deleted) == n, fmt.Errorf("%d of %d deleted", len(deleted), n)
	})
	t.Logf("%d deleted in the first %s; the %d left were deleted %s after the cap was lifted",
		len(inWindow), window, n-len(inWindow), time.Since(lifted).Round(time.Millisecond))
}

// A policy capped at one deletion a minute, with Playbooks waiting their
// turns minutes ahead, holds back only its own: a Playbook of an uncapped
// policy goes at its expiry, under the controller-wide cap too.
func TestAPolicyCapDelaysOnlyItsOwnObjects(t *testing.T) {
	t.Parallel()
	capped := playbookPolicy("cap-one", "1h")
	capped.Deletion.MaxPerMinute = 1
	createPolicy(t, "cap-one", capped)
	createPolicy(t, "cap-free", playbookPolicy("cap-free", "1h"))

	expires := time.Now().Add(3 * time.Second)
	at := func(d time.Duration) map[string]string {
		return map[string]string{expiry.AnnotationExpiresAt: expires.Add(d).UTC().Format(time.RFC3339Nano)}
	}
	var queued []*tracked
	for i := range 3 {
		queued = append(queued, create(t, playbooks, newPlaybook("cap-one", fmt.Sprintf("queued %d", i), at(0))))
	}
	free := create(t, playbooks, newPlaybook("cap-free", "free", at(2*time.Second)))

	free.expectDeletedOnTime(t, expires.Add(2*time.Second))
	gone := 0
	for _, q := range queued {
		select {
		case <-q.gone:
			gone++
		default:
		}
	}
	if gone != 1 {
		t.Fatalf("%d of the capped policy's Playbooks deleted, want the first only", gone)
	}
}

// withoutSuiteCapTurns drops the turns the suite's controller-wide cap
// gave. That cap (60,000 a minute) spaces deletions a millisecond apart, so
// a deletion that falls in the same millisecond as another test's waits its
// turn, and the trail says so truthfully; it is not part of the story a
// test tells. Any other throttling stays on the trail.
func withoutSuiteCapTurns(t *testing.T, recs []audit.Record) []audit.Record {
	t.Helper()
	return slices.DeleteFunc(recs, func(r audit.Record) bool {
		if r.Type != audit.Throttled || !strings.Contains(r.Detail, "--max-deletions-per-minute") {
			return false
		}
		t.Logf("the suite's cap held a deletion back: %s", r.Detail)
		return true
	})
}

// auditRecords returns the audit trail's records about the object uid, in
// the order they were written.
func auditRecords(t *testing.T, uid types.UID) []audit.Record {
	t.Helper()
	all, err := audit.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	var recs []audit.Record
	for _, r := range all {
		if r.Object.UID == uid {
			recs = append(recs, r)
		}
	}
	return recs
}

// counter returns the value of the in-process controller's counter with
// the given labels.
func counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return metric(t, name, labels).GetCounter().GetValue()
}

// metric returns the in-process controller's metric with the given
// labels, or nil.
func metric(t *testing.T, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matchLabels(m, labels) {
				return m
			}
		}
	}
	return nil
}

func matchLabels(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
