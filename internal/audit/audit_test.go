// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestFileLogAppendsOneLinePerRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(path, []byte(`{"type":"earlier"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// A disk that takes its time to sync, so that writers pile up behind
	// it, as in a burst of deletions: they must share fsyncs.
	syncs := 0
	inner := l.sync
	l.sync = func() error {
		syncs++
		time.Sleep(5 * time.Millisecond)
		return inner()
	}

	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				exp := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
				err := l.Write(Record{
					Type: Deleted, Object: Object{APIVersion: "amphitheatre.app/v1", Kind: "Playbook", Name: "pb", UID: "u"},
					Policy: "playbooks", ExpiresAt: &exp, Result: OK, Detail: string(rune('a'+w)) + string(rune('a'+i%26)),
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	lines := 0
	for sc.Scan() {
		lines++
		if lines == 1 {
			continue // the line written before
		}
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %d is not a record: %v: %s", lines, err, sc.Bytes())
		}
		if r.Type != Deleted || r.Object.UID != "u" || r.Time.IsZero() || r.Time.Location() != time.UTC || r.ExpiresAt == nil {
			t.Fatalf("line %d: %+v", lines, r)
		}
	}
	if want := 1 + writers*each; lines != want {
		t.Fatalf("%d lines, want %d", lines, want)
	}
	if records := writers * each; syncs == 0 || syncs > records/2 {
		t.Fatalf("%d fsyncs for %d records from %d writers at once, want them shared", syncs, records, writers)
	}
	t.Logf("%d records, %d fsyncs", writers*each, syncs)
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteReportsFailure(t *testing.T) {
	l := New(failingWriter{})
	if err := l.Write(Record{Type: Deleted}); err == nil {
		t.Fatal("a failed write must be reported")
	}
	// The next batch is tried afresh.
	if err := l.Write(Record{Type: Deleted}); err == nil {
		t.Fatal("a failed write must be reported")
	}
}

func TestNilLogWritesNothing(t *testing.T) {
	var l *Log
	if err := l.Write(Record{Type: Deleted}); err != nil {
		t.Fatal(err)
	}
}

func TestReadFileLeavesOutTheLineBeingWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Write(Record{Type: Archived, Result: OK}, Record{Type: Deleted, Result: OK}); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"type":"notif`)
	_ = f.Close()

	recs, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Type != Archived || recs[1].Type != Deleted {
		t.Fatalf("read %+v", recs)
	}
	if err := os.WriteFile(path, []byte("not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(path); err == nil {
		t.Fatal("a line that is not a record must be an error")
	}
}
