// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package audit writes the controller's audit trail: one JSON line per
// decision (a message sent or failed, a deletion postponed, throttled,
// about to be made, made or failed, an object archived, an invalid
// annotation), to standard output or to a file that each record is fsynced
// to before Write returns.
package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
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
	// Deleting: the delete is about to be sent. Written and synced first,
	// so that a crash before the outcome is written still leaves a trace;
	// one of Deleted, DeletionFailed or DeleteSuperseded follows.
	Deleting Type = "deleting"
	// Deleted: the API server accepted the delete. An object with
	// finalizers stays in Terminating until they have run; Gone follows
	// when it is gone.
	Deleted Type = "deleted"
	// Gone: the deleted object is gone from the API server (its finalizers
	// ran); Detail says how long after its deletion fell due.
	Gone Type = "gone"
	// Reclaimed: the namespaces the deleted object owned are gone too, and
	// with them what they held.
	Reclaimed Type = "reclaimed"
	// DeletionFailed: the API server refused the delete.
	DeletionFailed Type = "deletion-failed"
	// DeleteSuperseded: the delete was not made because the object had
	// changed (an extension won) or was gone already.
	DeleteSuperseded Type = "delete-superseded"
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
	// By is who made the change an extended record is about, as the
	// changed-by annotation names them (stamped at admission).
	By string `json:"by,omitempty"`
	// Groups are By's groups, as the changed-by annotation names them.
	Groups []string `json:"groups,omitempty"`
	// Via is how they made it when not through the API directly: "link"
	// or "slack", from a message's link (the stamp's via).
	Via string `json:"via,omitempty"`
	// Reclaimed is what the namespaces a deleted object owned held just
	// before the delete (deleted and reclaimed records).
	Reclaimed *notify.Reclaimed `json:"reclaimed,omitempty"`
	// LastUse is the use the idle clock counts from, when that clock sets
	// the expiry the record is about and the last-use annotation names
	// it: how (exec, portforward, traffic, annotation...) and by whom.
	LastUse *expiry.Use `json:"lastUse,omitempty"`
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

	// path is the file's path, empty for standard output; f the file
	// open at it, and open how to open it again after a rotation.
	path string
	f    File
	open func(string) (File, error)
	// checked is when the path was last compared with the open file.
	checked time.Time
	// torn says the last write may have stopped mid-line, so the next one
	// starts on a fresh line rather than joining the broken one.
	torn bool

	mu  sync.Mutex
	cur *batch
	// flushing lets one writer at a time write, sync, or reopen.
	flushing sync.Mutex
}

// File is what a Log writes to: an *os.File, or something else in tests.
type File interface {
	io.Writer
	Sync() error
	Close() error
	Stat() (os.FileInfo, error)
}

type batch struct {
	buf  bytes.Buffer
	done chan struct{}
	err  error
}

// renameCheck is how often the path is compared with the open file to
// notice a rotation by rename: a stat a second costs nothing next to the
// fsync of every batch.
const renameCheck = time.Second

// Open returns a Log writing to standard output for "-" or "", and
// otherwise appending to the file at dest, which it creates if needed.
// A file renamed or removed (rotated) is noticed within a second and
// opened again at dest; Reopen does it at once.
func Open(dest string) (*Log, error) {
	if dest == "" || dest == "-" {
		return New(os.Stdout), nil
	}
	return openFile(dest, func(path string) (File, error) {
		return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	})
}

func openFile(path string, open func(string) (File, error)) (*Log, error) {
	f, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	l := &Log{path: path, open: open}
	l.use(f)
	return l, nil
}

func (l *Log) use(f File) {
	l.f, l.w, l.sync, l.close = f, f, f.Sync, f.Close
	l.torn = false
	l.checked = time.Now()
}

// New returns a Log writing to w, without syncing.
func New(w io.Writer) *Log {
	return &Log{w: w}
}

// Reopen closes the file and opens its path again, so that records go to
// a new file once the old one was renamed away (logrotate, on SIGHUP).
// It does nothing for standard output.
func (l *Log) Reopen() error {
	if l == nil || l.path == "" {
		return nil
	}
	l.flushing.Lock()
	defer l.flushing.Unlock()
	return l.reopen()
}

func (l *Log) reopen() error {
	f, err := l.open(l.path)
	if err != nil {
		return fmt.Errorf("reopen audit log: %w", err)
	}
	old := l.f
	l.use(f)
	if err := old.Close(); err != nil {
		return fmt.Errorf("close the rotated audit log: %w", err)
	}
	return nil
}

// rotated reports whether the path no longer names the open file.
func (l *Log) rotated() bool {
	if l.path == "" || time.Since(l.checked) < renameCheck {
		return false
	}
	l.checked = time.Now()
	at, err := os.Stat(l.path)
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	open, err := l.f.Stat()
	return err == nil && !os.SameFile(at, open)
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
	if l.rotated() {
		if err := l.reopen(); err != nil {
			return err
		}
	}
	if l.torn {
		p = append([]byte{'\n'}, p...)
	}
	if n, err := l.w.Write(p); err != nil || n < len(p) {
		// Part of a line may be on disk: the next write ends it first.
		l.torn = true
		if err == nil {
			err = io.ErrShortWrite
		}
		return fmt.Errorf("write audit log: %w", err)
	}
	l.torn = false
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
	l.flushing.Lock()
	defer l.flushing.Unlock()
	return l.close()
}

// ReadFile reads the records of the audit trail at path, in the order they
// were written. A last line still being written (no newline yet) is left
// out. A line that is not a record (torn by a failed write) is skipped:
// the records are returned with a *SkippedError naming its line.
func ReadFile(path string) ([]Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the audit trail: %w", err)
	}
	// A last line still being written has no newline yet.
	data = data[:max(bytes.LastIndexByte(data, '\n'), 0)]
	var recs []Record
	var skipped []int
	n := 0
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		n++
		if len(line) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil || r.Type == "" {
			skipped = append(skipped, n)
			continue
		}
		recs = append(recs, r)
	}
	if len(skipped) > 0 {
		return recs, &SkippedError{Path: path, Lines: skipped}
	}
	return recs, nil
}

// SkippedError names the lines of an audit trail that are not records.
type SkippedError struct {
	Path string
	// Lines are the line numbers, from 1.
	Lines []int
}

func (e *SkippedError) Error() string {
	lines := make([]string, len(e.Lines))
	for i, n := range e.Lines {
		lines[i] = strconv.Itoa(n)
	}
	return fmt.Sprintf("read the audit trail %s: skipped %d line(s) that are not records (torn by a failed write?): %s",
		e.Path, len(e.Lines), strings.Join(lines, ", "))
}
