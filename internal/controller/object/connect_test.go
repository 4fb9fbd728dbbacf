// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

func TestTheAuditOfAnIdleExpiryNamesTheLastUse(t *testing.T) {
	used := expiry.Use{At: fixture.T0.Add(5 * time.Minute), Via: expiry.ViaExec, By: "alice"}
	var kv []string
	for k, v := range used.Annotations() {
		kv = append(kv, k, v)
	}
	cm := fixture.NewConfigMap("used", fixture.Annotated(kv...))
	h := newHarness(t, fixture.T0.Add(65*time.Minute), fixture.Policy("idle", fixture.DefaultTTL("10m"), fixture.Idle("1h")), cm)
	var trail bytes.Buffer
	h.r.DryRun, h.r.Audit = true, audit.New(&trail)
	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	var rec audit.Record
	dec := json.NewDecoder(&trail)
	for rec.Type != audit.WouldDelete {
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("audit trail without a would-delete record: %v", err)
		}
	}
	if rec.LastUse == nil || rec.LastUse.Via != expiry.ViaExec || rec.LastUse.By != "alice" || !rec.LastUse.At.Equal(used.At) {
		t.Errorf("the record of an idle expiry names the last use %+v, want %+v", rec.LastUse, used)
	}
}
