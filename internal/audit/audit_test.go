// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
}

// shortFile is a File whose writes fail after accepting part of the data,
// as on a full disk, while fail is set.
type shortFile struct {
	*os.File
	fail bool
}

func (f *shortFile) Write(p []byte) (int, error) {
	if f.fail {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, errors.New("no space left on device")
	}
	return f.File.Write(p)
}

func TestAWriteAfterATornOneStartsOnAFreshLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	var sf *shortFile
	l, err := openFile(path, func(p string) (File, error) {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		sf = &shortFile{File: f}
		return sf, err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	if err := l.Write(Record{Type: Deleting, Result: OK}); err != nil {
		t.Fatal(err)
	}
	sf.fail = true
	if err := l.Write(Record{Type: Deleted, Result: OK, Detail: "torn"}); err == nil {
		t.Fatal("a short write must be reported")
	}
	sf.fail = false
	if err := l.Write(Record{Type: Deleted, Result: OK, Detail: "whole"}); err != nil {
		t.Fatal(err)
	}

	recs, err := ReadFile(path)
	var skipped *SkippedError
	if !errors.As(err, &skipped) || !slices.Equal(skipped.Lines, []int{2}) {
		t.Fatalf("ReadFile: %v, want line 2 skipped", err)
	}
	if len(recs) != 2 || recs[0].Type != Deleting || recs[1].Detail != "whole" {
		t.Fatalf("read %+v, want the records before and after the torn line", recs)
	}
}

func TestReadFileSkipsALineThatIsNotARecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	trail := `{"type":"deleting","result":"ok"}` + "\n" +
		`{"type":"dele` + "\n" +
		"\n" +
		`not json` + "\n" +
		`{"type":"deleted","result":"ok"}` + "\n"
	if err := os.WriteFile(path, []byte(trail), 0o600); err != nil {
		t.Fatal(err)
	}
	recs, err := ReadFile(path)
	var skipped *SkippedError
	if !errors.As(err, &skipped) || !slices.Equal(skipped.Lines, []int{2, 4}) {
		t.Fatalf("ReadFile: %v, want lines 2 and 4 skipped", err)
	}
	if !strings.Contains(err.Error(), "2, 4") {
		t.Errorf("the error %q does not name the lines", err)
	}
	if len(recs) != 2 || recs[0].Type != Deleting || recs[1].Type != Deleted {
		t.Fatalf("read %+v", recs)
	}
}

func TestAFileRotatedAwayIsOpenedAgain(t *testing.T) {
	tests := []struct {
		name   string
		rotate func(t *testing.T, l *Log, path string)
	}{{
		name: "on Reopen (SIGHUP) after a rename",
		rotate: func(t *testing.T, l *Log, path string) {
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
			if err := l.Reopen(); err != nil {
				t.Fatal(err)
			}
		},
	}, {
		name: "by itself within a second of a rename",
		rotate: func(t *testing.T, l *Log, path string) {
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
			// As if the last check were a second ago, rather than waiting.
			l.checked = l.checked.Add(-renameCheck)
		},
	}, {
		name: "by itself within a second of a removal",
		rotate: func(t *testing.T, l *Log, path string) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path+".1", data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			l.checked = l.checked.Add(-renameCheck)
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			l, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = l.Close() }()
			if err := l.Write(Record{Type: Deleting, Result: OK}); err != nil {
				t.Fatal(err)
			}
			tt.rotate(t, l, path)
			if err := l.Write(Record{Type: Deleted, Result: OK}); err != nil {
				t.Fatal(err)
			}
			old, err := ReadFile(path + ".1")
			if err != nil || len(old) != 1 || old[0].Type != Deleting {
				t.Fatalf("rotated file: %+v, %v; want the record before the rotation", old, err)
			}
			cur, err := ReadFile(path)
			if err != nil || len(cur) != 1 || cur[0].Type != Deleted {
				t.Fatalf("new file: %+v, %v; want the record after the rotation", cur, err)
			}
		})
	}
}

func TestAFileNotRotatedIsNotReopened(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	opens := 0
	l, err := openFile(path, func(p string) (File, error) {
		opens++
		return os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	for range 3 {
		l.checked = l.checked.Add(-renameCheck)
		if err := l.Write(Record{Type: Deleted, Result: OK}); err != nil {
			t.Fatal(err)
		}
	}
	if opens != 1 {
		t.Fatalf("opened %d times, want once", opens)
	}
	if recs, err := ReadFile(path); err != nil || len(recs) != 3 {
		t.Fatalf("read %d records, %v", len(recs), err)
	}
}
