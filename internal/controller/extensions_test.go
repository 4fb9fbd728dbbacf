// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// Every extension is audited with who made it, as the changed-by stamp
// names them, whether or not a reminder was recorded about the expiry it
// replaced, and once.
func TestTheAuditOfAnExtensionNamesWhoMadeIt(t *testing.T) {
	was := t0.Add(10 * time.Minute)
	stamp, _ := json.Marshal(expiry.ChangedBy{By: "alice@example.com", Groups: []string{"developers"}, Changed: []string{"expires-at"}})
	for _, tt := range []struct {
		name       string
		record     *expiry.Record
		wantDetail string
	}{
		{"after a reminder, with the expiry it replaced", &expiry.Record{ExpiresAt: was, Since: t0}, "expiry moved from " + was.Format(time.RFC3339) + " by " + expiry.AnnotationExpiresAt},
		{"before any reminder, when nothing recorded the expiry it replaced", nil, "expiry set by " + expiry.AnnotationExpiresAt + "; no earlier expiry was recorded"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			annotations := []string{
				expiry.AnnotationExpiresAt, t0.Add(2 * time.Hour).Format(time.RFC3339),
				expiry.AnnotationChangedBy, string(stamp),
			}
			if tt.record != nil {
				annotations = append(annotations, expiry.AnnotationReminders, tt.record.String())
			}
			cm := newConfigMap("extended", annotated(annotations...))
			h := newHarness(t, t0.Add(5*time.Minute), fixture.Policy("extensions", fixture.DefaultTTL("10m")), cm)
			var trail bytes.Buffer
			h.r.Audit = audit.New(&trail)
			for range 3 {
				if _, err := h.reconcile(cm); err != nil {
					t.Fatal(err)
				}
			}
			var extended []audit.Record
			dec := json.NewDecoder(&trail)
			for {
				var got audit.Record
				if err := dec.Decode(&got); err != nil {
					break
				}
				if got.Type == audit.Extended {
					extended = append(extended, got)
				}
			}
			if len(extended) != 1 {
				t.Fatalf("%d extended records over three looks, want 1: %+v", len(extended), extended)
			}
			got := extended[0]
			if got.By != "alice@example.com" || len(got.Groups) != 1 || got.Groups[0] != "developers" {
				t.Errorf("the extended record names %q of %v, want alice@example.com of [developers]", got.By, got.Groups)
			}
			if got.Detail != tt.wantDetail {
				t.Errorf("the extended record says %q, want %q", got.Detail, tt.wantDetail)
			}
		})
	}
}
