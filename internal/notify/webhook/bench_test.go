// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

var (
	benchBody      []byte
	benchSignature string
)

func benchMessage() notify.Message {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	return notify.Message{
		Type: v1alpha1.EventReminder, Time: now,
		Object: notify.Object{APIVersion: "amphitheatre.app/v1", Kind: "Playbook", Name: "2b1e7c9e-3f7a-4c61-9a51-0f3c2d7e8a10",
			UID: "0d3c1f5e-8b1a-4d8e-9a57-6f0e2c9b1a42", Title: "amp-example-go"},
		ExpiresAt: now.Add(72 * time.Hour), Stage: "3d", Policy: "playbooks",
	}
}

// BenchmarkEnvelope builds the CloudEvent of a reminder: the body every
// webhook delivery sends.
func BenchmarkEnvelope(b *testing.B) {
	m := benchMessage()
	b.ReportAllocs()
	for b.Loop() {
		_, body, err := Envelope(m)
		if err != nil {
			b.Fatal(err)
		}
		benchBody = body
	}
}

// BenchmarkSign signs that body.
func BenchmarkSign(b *testing.B) {
	_, body, err := Envelope(benchMessage())
	if err != nil {
		b.Fatal(err)
	}
	key := make([]byte, 32)
	b.ReportAllocs()
	for b.Loop() {
		benchSignature = Sign(key, "0123456789abcdef0123456789abcdef", "1795262400", body)
	}
}
