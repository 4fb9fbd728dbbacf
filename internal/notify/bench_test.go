// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package notify

import (
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

var (
	benchContent    Content
	benchRecipients Recipients
	benchID         string
)

func benchReminder() Message {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	return Message{
		ID: NewID("2b1e7c9e-3f7a-4c61-9a51-0f3c2d7e8a10", now.Add(72*time.Hour), v1alpha1.EventReminder, "3d"), Type: v1alpha1.EventReminder, Time: now,
		Object: Object{APIVersion: "amphitheatre.app/v1", Kind: "Playbook", Name: "2b1e7c9e-3f7a-4c61-9a51-0f3c2d7e8a10",
			UID: "0d3c1f5e-8b1a-4d8e-9a57-6f0e2c9b1a42", Title: "amp-example-go"},
		ExpiresAt: now.Add(72 * time.Hour), Stage: "3d", Policy: "playbooks",
		Recipients: Recipients{Emails: []string{"alice@example.com"}, SlackChannels: []string{"#team-amp"}},
		Extend:     "kubectl annotate playbook.amphitheatre.app 2b1e7c9e-3f7a-4c61-9a51-0f3c2d7e8a10 --overwrite timeout.amphitheatre.app/expires-at=2026-12-01T12:00:00Z",
	}
}

// BenchmarkRender writes a reminder's subject, text and HTML with the
// default templates, as every delivery does.
func BenchmarkRender(b *testing.B) {
	t, err := NewTemplates(nil)
	if err != nil {
		b.Fatal(err)
	}
	m := benchReminder()
	b.ReportAllocs()
	for b.Loop() {
		c, err := t.Render(m)
		if err != nil {
			b.Fatal(err)
		}
		benchContent = c
	}
}

// BenchmarkParseRecipients reads a typical notify annotation.
func BenchmarkParseRecipients(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		benchRecipients, _ = ParseRecipients("alice@example.com, bob@example.com, #team-amp", []string{"example.com"})
	}
}

// BenchmarkNewID derives a message's ID.
func BenchmarkNewID(b *testing.B) {
	expires := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		benchID = NewID("0d3c1f5e-8b1a-4d8e-9a57-6f0e2c9b1a42", expires, v1alpha1.EventReminder, "3d")
	}
}
