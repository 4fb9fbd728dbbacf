// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/internal/audit"
)

// A SIGHUP (logrotate's postrotate) opens the audit file again at its
// path, before any record is written to notice the rename.
func TestSIGHUPReopensTheAuditLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reopenOnHangup(ctx, l)

	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no audit file at the path 5s after SIGHUP")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := l.Write(audit.Record{Type: audit.Deleted, Result: audit.OK}); err != nil {
		t.Fatal(err)
	}
	if recs, err := audit.ReadFile(path); err != nil || len(recs) != 1 {
		t.Fatalf("the reopened file holds %d records, %v; want the one written after SIGHUP", len(recs), err)
	}
}
