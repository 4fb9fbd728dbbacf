// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"testing"
	"time"
)

var (
	benchDuration time.Duration
	benchLifetime Lifetime
	benchPlan     Plan
)

func BenchmarkParseDuration(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		d, err := ParseDuration("1w2d12h")
		if err != nil {
			b.Fatal(err)
		}
		benchDuration = d
	}
}

func BenchmarkCompute(b *testing.B) {
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// What a Playbook typically carries: its owner's ttl, a keep=false
	// left over from an earlier exemption, and annotations of other tools.
	annotations := map[string]string{
		AnnotationTTL:  "7d",
		AnnotationKeep: "false",
		"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"amphitheatre.app/v1","kind":"Playbook"}`,
		"amphitheatre.app/owner":                           "alice",
	}
	b.ReportAllocs()
	for b.Loop() {
		benchLifetime = Compute(created, annotations, 14*Day)
	}
	if benchLifetime.Source != AnnotationTTL {
		b.Fatalf("Source = %q, want %q", benchLifetime.Source, AnnotationTTL)
	}
}

func BenchmarkNext(b *testing.B) {
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	life := Lifetime{ExpiresAt: created.Add(7 * Day), Source: AnnotationTTL}
	in := Input{
		Life:     life,
		Schedule: Schedule{DefaultTTL: 14 * Day, Reminders: []time.Duration{3 * Day, 2 * Day}, MinimumNotice: Day},
		Record:   (*Record)(nil).For(life.ExpiresAt, created, created),
		Channels: toAll([]string{"email", "slack"}),
		Now:      created.Add(Day),
	}
	b.ReportAllocs()
	for b.Loop() {
		benchPlan = Next(in)
	}
	if benchPlan.Action != Wait {
		b.Fatalf("Action = %v, want Wait", benchPlan.Action)
	}
}

var benchRecord *Record

// BenchmarkParseRecord reads the record of an object reminded twice by
// two channels, which every reconcile of such an object does.
func BenchmarkParseRecord(b *testing.B) {
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := (*Record)(nil).For(created.Add(7*Day), created, created)
	rec.Title = "amp-example-go"
	rec.Delivered(StageKey(3*Day), true, []string{"email", "webhook/ops"}, created.Add(4*Day))
	rec.Delivered(StageKey(2*Day), true, []string{"email", "webhook/ops"}, created.Add(5*Day))
	value := rec.String()
	b.ReportAllocs()
	for b.Loop() {
		r, err := ParseRecord(value)
		if err != nil {
			b.Fatal(err)
		}
		benchRecord = r
	}
}

// BenchmarkPlan is what one reconcile decides about an object, from its
// annotations to its next action: the lifetime, the record for it and
// the plan.
func BenchmarkPlan(b *testing.B) {
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	expires := created.Add(7 * Day)
	rec := (*Record)(nil).For(expires, created, created)
	rec.Delivered(StageKey(3*Day), true, []string{"webhook/ops"}, created.Add(4*Day))
	annotations := map[string]string{
		AnnotationExpiresAt: expires.Format(time.RFC3339),
		AnnotationReminders: rec.String(),
	}
	schedule := Schedule{DefaultTTL: 14 * Day, Reminders: []time.Duration{3 * Day, 2 * Day}, MinimumNotice: Day}
	channels := toAll([]string{"webhook/ops"})
	now := created.Add(4*Day + time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		life := Compute(created, annotations, schedule.DefaultTTL)
		r, err := ParseRecord(annotations[AnnotationReminders])
		if err != nil {
			b.Fatal(err)
		}
		benchPlan = Next(Input{Life: life, Schedule: schedule, Record: r.For(life.ExpiresAt, created, now), Channels: channels, Now: now})
	}
	if benchPlan.Action != Wait {
		b.Fatalf("Action = %v, want Wait", benchPlan.Action)
	}
}
