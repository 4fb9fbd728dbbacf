// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package notify

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/<name>, or writes it there with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from what it was:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// A message without links renders as it did before messages carried any:
// the goldens were written by the code before them.
func TestMessagesWithoutLinksRenderAsBefore(t *testing.T) {
	tpl, err := NewTemplates(nil)
	if err != nil {
		t.Fatal(err)
	}
	digest := message(v1alpha1.EventReminder)
	digest.Digest = &Digest{Stage: "3d", Items: []DigestItem{
		{Object: Object{Kind: "Playbook", Name: "pb-1", Namespace: "team-a", Title: "<First>"}, ExpiresAt: digest.ExpiresAt, Extend: "kubectl annotate playbook pb-1"},
		{Object: Object{Kind: "Playbook", Name: "pb-2"}, ExpiresAt: digest.ExpiresAt.Add(time.Hour), Extend: "kubectl annotate playbook pb-2"},
	}}
	deleted := message(v1alpha1.EventDeleted)
	deleted.Reclaimed = &Reclaimed{Namespaces: []string{"amp-1"}, Objects: 9, Pods: 3, CPUMillis: 1500, MemoryBytes: 1 << 30}
	cases := map[string]Message{"digest": digest, "deleted-reclaimed": deleted}
	for _, et := range v1alpha1.EventTypes {
		cases[string(et)] = message(et)
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := tpl.Render(m)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("render", name+".txt"), c.Subject+"\n---\n"+c.Text+"---\n"+c.HTML)
		})
	}
}
