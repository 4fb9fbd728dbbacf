// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/notify/webhook"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// An event about a message without links is the one sent before
// messages carried any: the goldens were written by the code before them.
func TestEventsWithoutLinksAreAsBefore(t *testing.T) {
	slept := reminder()
	slept.Type, slept.Stage = v1alpha1.EventSlept, ""
	for name, m := range map[string]notify.Message{"reminder": reminder(), "slept": slept, "deletion-failed": deletionFailed()} {
		t.Run(name, func(t *testing.T) {
			_, body, err := webhook.Envelope(m)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "events", name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, append(body, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to write it)", err)
			}
			if string(append(body, '\n')) != string(want) {
				t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", path, body, want)
			}
		})
	}
}
