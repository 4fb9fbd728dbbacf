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
