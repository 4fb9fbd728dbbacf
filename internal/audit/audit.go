// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package audit writes the controller's audit trail: one JSON line per
// decision (a message sent or failed, a deletion postponed, throttled,
// made or failed, an object archived, an invalid annotation), to standard
// output or to a file that each record is fsynced to before Write returns.
package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Type names a decision.
type Type string

// The decisions the trail records.
const (
	// Notified: a channel accepted a message (record.Message says which
	// kind: reminder, extended, postponed, expired, ...).
	Notified Type = "notified"
	// NotifyFailed: a channel refused a message or could not be reached.
	NotifyFailed Type = "notify-failed"
	// Extended: the object's expiry moved (an annotation changed), which
	// starts a new reminder record.
	Extended Type = "extended"
	// Postponed: the deletion waits for the minimum notice.
	Postponed Type = "postponed"
	// Throttled: the deletion waits for its turn under a deletion cap.
	Throttled Type = "throttled"
	// WouldDelete: the object expired under a dry run.
	WouldDelete Type = "would-delete"
	// Archived: the object's manifest was written to the archive.
	Archived Type = "archived"
	// ArchiveFailed: the manifest could not be archived, so the object was
	// not deleted.
	ArchiveFailed Type = "archive-failed"
	// Deleted: the API server accepted the delete.
	Deleted Type = "deleted"
	// DeletionFailed: the API server refused the delete.
	DeletionFailed Type = "deletion-failed"
	// InvalidAnnotation: an annotation's value could not be used.
	InvalidAnnotation Type = "invalid-annotation"
)

// Object identifies the object a record is about.
type Object struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Namespace  string    `json:"namespace,omitempty"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid"`
}

// Record is one decision.
type Record struct {
	Time   time.Time `json:"time"`
	Type   Type      `json:"type"`
	Object Object    `json:"object"`
	Policy string    `json:"policy,omitempty"`
	// ExpiresAt is the expiry the decision was about.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// Stage is the reminder stage (its lead, such as "3d").
	Stage string `json:"stage,omitempty"`
	// Message is the kind of message sent (reminder, extended, ...).
	Message string `json:"message,omitempty"`
	Channel string `json:"channel,omitempty"`
	// Result is "ok" or "error".
	Result string `json:"result"`
	Error  string `json:"error,omitempty"`
	// Detail says more: the archive file, the new time, the lag.
	Detail string `json:"detail,omitempty"`
}

// Results.
const (
	OK    = "ok"
	Error = "error"
)

// Log appends records to a destination. Concurrent writers share fsyncs:
// while one batch is being synced the next one gathers, so a burst of
// decisions costs a few fsyncs, not one each.
type Log struct {
	w io.Writer
	// sync makes what was written durable; nil for standard output.
	sync  func() error
	close func() error

	mu  sync.Mutex
	cur *batch
	// flushing lets one writer at a time write and sync a batch.
	flushing sync.Mutex
}

type batch struct {
	buf  bytes.Buffer
	done chan struct{}
	err  error
}

// Open returns a Log writing to standard output for "-" or "", and
// otherwise appending to the file at dest, which it creates if needed.
func Open(dest string) (*Log, error) {
	if dest == "" || dest == "-" {
		return New(os.Stdout), nil
	}
	f, err := os.OpenFile(dest, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	return &Log{w: f, sync: f.Sync, close: f.Close}, nil
}

// New returns a Log writing to w, without syncing.
func New(w io.Writer) *Log {
	return &Log{w: w}
}

// Write appends the records, one line each, and returns once they are
// written (and, for a file, synced to disk).
func (l *Log) Write(records ...Record) error {
	if l == nil || len(records) == 0 {
		return nil
	}
	var lines bytes.Buffer
	enc := json.NewEncoder(&lines)
	for _, r := range records {
		if r.Time.IsZero() {
			r.Time = time.Now()
		}
		r.Time = r.Time.UTC()
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("encode audit record: %w", err)
		}
	}

	l.mu.Lock()
	if l.cur == nil {
		l.cur = &batch{done: make(chan struct{})}
	}
	b := l.cur
	b.buf.Write(lines.Bytes())
	l.mu.Unlock()

	l.flushing.Lock()
	select {
	case <-b.done:
		// An earlier writer flushed this batch while this one waited.
	default:
		l.mu.Lock()
		taken := l.cur
		l.cur = nil
		l.mu.Unlock()
		taken.err = l.flush(taken.buf.Bytes())
		close(taken.done)
	}
	l.flushing.Unlock()
	<-b.done
	return b.err
}

func (l *Log) flush(p []byte) error {
	if _, err := l.w.Write(p); err != nil {
		return fmt.Errorf("write audit log: %w", err)
	}
	if l.sync != nil {
		if err := l.sync(); err != nil {
			return fmt.Errorf("sync audit log: %w", err)
		}
	}
	return nil
}

// Close closes the file a Log appends to.
func (l *Log) Close() error {
	if l == nil || l.close == nil {
		return nil
	}
	return l.close()
}

// ReadFile reads the records of the audit trail at path, in the order they
// were written. A last line still being written (no newline yet) is left
// out; any other line that is not a record is an error.
func ReadFile(path string) ([]Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the audit trail: %w", err)
	}
	// A last line still being written has no newline yet.
	data = data[:max(bytes.LastIndexByte(data, '\n'), 0)]
	var recs []Record
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("read the audit trail: %q is not a record: %w", line, err)
		}
		recs = append(recs, r)
	}
	return recs, nil
}
