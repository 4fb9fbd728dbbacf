// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/clock"

	"github.com/amphitheatre-app/timeout-controller/internal/archive"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

func TestArchiveIsPrunedAtStart(t *testing.T) {
	dir := t.TempDir()
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(fixture.PlaybookGVK)
	obj.SetName("old")
	obj.SetUID("uid-old")
	old, err := archive.Write(dir, obj, archive.Header{})
	if err != nil {
		t.Fatal(err)
	}
	obj.SetName("new")
	obj.SetUID("uid-new")
	recent, err := archive.Write(dir, obj, archive.Header{})
	if err != nil {
		t.Fatal(err)
	}
	month := time.Now().Add(-31 * 24 * time.Hour)
	if err := os.Chtimes(old, month, month); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- pruneArchive(archive.Dir(dir), 30*24*time.Hour, clock.RealClock{}, logr.Discard()).Start(ctx)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(old); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the manifest older than the retention is still there")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(recent); err != nil {
		t.Fatalf("the recent manifest went too: %v", err)
	}
}
