// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package slack

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/<name>, or writes it there with
// -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// goldenMessage is a message of type et about a Playbook that expires 72
// hours after it is sent.
func goldenMessage(et v1alpha1.EventType) notify.Message {
	at := time.Date(2026, 11, 24, 14, 0, 0, 0, time.UTC)
	obj := notify.Object{APIVersion: "amphitheatre.app/v1", Kind: "Playbook", Name: "2b1e7c9e", Namespace: "team-a", UID: "uid-1", Title: "Checkout demo"}
	return notify.Message{
		ID: "id", Type: et, Time: at, Object: obj, ExpiresAt: at.Add(72 * time.Hour), Stage: "3d", Policy: "playbooks",
		Extend: "kubectl annotate playbook 2b1e7c9e --overwrite timeout.amphitheatre.app/ttl=21d",
	}
}

func buildJSON(t *testing.T, m notify.Message) []byte {
	t.Helper()
	tpl, err := notify.NewTemplates(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tpl.Render(m)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(build(m, c, false), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// A message without links is laid out as it was before messages carried
// any: the goldens were written by the code before them.
func TestMessagesWithoutLinksAreLaidOutAsBefore(t *testing.T) {
	for _, et := range []v1alpha1.EventType{v1alpha1.EventReminder, v1alpha1.EventSleeping, v1alpha1.EventSlept, v1alpha1.EventDeleted} {
		t.Run(string(et), func(t *testing.T) {
			golden(t, filepath.Join("blocks", string(et)+".json"), buildJSON(t, goldenMessage(et)))
		})
	}
}

// The layout of a message with links, with interactive buttons and with
// buttons that open the page.
func TestMessagesWithLinksLayOutButtons(t *testing.T) {
	for _, interactive := range []bool{true, false} {
		name := map[bool]string{true: "interactive", false: "page"}[interactive]
		t.Run(name, func(t *testing.T) {
			m := goldenMessage(v1alpha1.EventReminder)
			page := "https://timeout.example.com/a/TOKEN"
			m.Actions = &notify.Links{Page: page, Extend: page + "?do=extend", Delete: page + "?do=delete", Step: "1 day", Token: "TOKEN"}
			tpl, err := notify.NewTemplates(nil)
			if err != nil {
				t.Fatal(err)
			}
			c, err := tpl.Render(m)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.MarshalIndent(build(m, c, interactive), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("blocks", "linked-"+name+".json"), append(b, '\n'))
		})
	}
}
