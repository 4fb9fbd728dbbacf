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

// An extension is audited with who made it, as the changed-by stamp
// names them, and with the expiry it replaced.
func TestTheAuditOfAnExtensionNamesWhoMadeIt(t *testing.T) {
	was := t0.Add(10 * time.Minute)
	rec := &expiry.Record{ExpiresAt: was, Since: t0}
	stamp, _ := json.Marshal(expiry.ChangedBy{By: "alice@example.com", Groups: []string{"developers"}, Changed: []string{"expires-at"}})
	cm := newConfigMap("extended", annotated(
		expiry.AnnotationReminders, rec.String(),
		expiry.AnnotationExpiresAt, t0.Add(2*time.Hour).Format(time.RFC3339),
		expiry.AnnotationChangedBy, string(stamp),
	))
	h := newHarness(t, t0.Add(5*time.Minute), fixture.Policy("extensions", fixture.DefaultTTL("10m")), cm)
	var trail bytes.Buffer
	h.r.Audit = audit.New(&trail)
	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	var got audit.Record
	dec := json.NewDecoder(&trail)
	for got.Type != audit.Extended {
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("audit trail without an extended record: %v", err)
		}
	}
	if got.By != "alice@example.com" {
		t.Errorf("the extended record names %q, want alice@example.com", got.By)
	}
	if want := "expiry moved from " + was.Format(time.RFC3339); got.Detail != want {
		t.Errorf("the extended record says %q, want %q", got.Detail, want)
	}
}
