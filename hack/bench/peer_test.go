// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPeerLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "peer.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := openPeerLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	write := func(s string) {
		t.Helper()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
		if err := l.poll(); err != nil {
			t.Fatal(err)
		}
	}

	write(`time=2026-11-26T06:50:39.398Z level=INFO msg="[playbooks/a] is configured with a TTL of 1m5s, which means it will expire in 1m4s"` + "\n")
	write(`time=2026-11-26T06:50:39.500Z level=INFO msg="Execution took 35`)
	if len(l.passes) != 0 {
		t.Fatalf("a pass read from half a line: %v", l.passes)
	}
	write("8ms, sleeping for 5m0s\"\n")
	write(`time=2026-11-26T06:55:39.501Z level=INFO msg="[playbooks/a] failed to delete: the server could not find the requested resource"` + "\n" +
		`{"time":"2026-11-26T06:55:40Z","level":"INFO","msg":"Execution took 1204ms, sleeping for 5m0s"}` + "\n")

	if len(l.passes) != 2 || l.passes[0].took != 358*time.Millisecond || l.passes[1].took != 1204*time.Millisecond {
		t.Errorf("passes %v, want two of 358ms and 1204ms", l.passes)
	}
	if l.errors != 1 {
		t.Errorf("%d errors, want the failed delete", l.errors)
	}
}

func TestSetPeerTTL(t *testing.T) {
	expiresAt := time.Now().Add(90 * time.Second).Truncate(time.Second)
	t.Run("ends the lifetime at the expiry, counted from the second of creation", func(t *testing.T) {
		obj := newPlaybook(0, expiresAt, 1, 1)
		setPeerTTL(obj, expiresAt, false)
		ttl, err := time.ParseDuration(obj.GetAnnotations()[peerTTLAnnotation])
		if err != nil {
			t.Fatal(err)
		}
		if created := time.Now().Truncate(time.Second); created.Add(ttl).Before(expiresAt) || created.Add(ttl).After(expiresAt.Add(time.Second)) {
			t.Errorf("TTL %s from %s ends at %s, want %s or a second later", ttl, created, created.Add(ttl), expiresAt)
		}
		if obj.GetAnnotations()[lastApplied] == "" {
			t.Error("the other annotations were lost")
		}
	})
	t.Run("gives plain others the policy's default TTL", func(t *testing.T) {
		obj := newPlaybook(0, expiresAt, 1, 0)
		setPeerTTL(obj, expiresAt, true)
		if got := obj.GetAnnotations()[peerTTLAnnotation]; got != "336h0m0s" {
			t.Errorf("TTL %q, want 336h0m0s", got)
		}
	})
}
