// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package decide

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
)

func TestTitle(t *testing.T) {
	for _, tt := range []struct {
		name string
		gvk  schema.GroupVersionKind
		want string
	}{
		{"reads a Playbook's spec.title", schema.GroupVersionKind{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook"}, "Hello Go"},
		{"reads no title from an Actor", schema.GroupVersionKind{Group: "amphitheatre.app", Version: "v1", Kind: "Actor"}, ""},
		{"reads no title from a Playbook of another group", schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Playbook"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"title": "Hello Go"}}}
			u.SetGroupVersionKind(tt.gvk)
			if got := Title(u); got != tt.want {
				t.Errorf("Title = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEvaluate(t *testing.T) {
	created := time.Date(2026, time.March, 1, 9, 0, 0, 0, time.UTC)
	now := created.Add(time.Hour)
	c := &match.Candidate{Schedule: expiry.Schedule{DefaultTTL: 2 * time.Hour}}
	old := &expiry.Record{ExpiresAt: created.Add(90 * time.Minute), Since: created, Sent: map[string]expiry.Delivery{}}
	t.Run("starts a new record when the shown one is about another expiry, and leaves the shown one alone", func(t *testing.T) {
		d := Evaluate(c, Object{Created: created, Annotations: map[string]string{expiry.AnnotationReminders: old.String()}}, now, nil)
		if !d.Replaced || !d.Previous.Equal(old.ExpiresAt) || !d.Record.ExpiresAt.Equal(created.Add(2*time.Hour)) {
			t.Errorf("Replaced %t, Previous %s, Record about %s; want a new record about the 2h expiry replacing the 90m one", d.Replaced, d.Previous, d.Record.ExpiresAt)
		}
		if !d.Shown.ExpiresAt.Equal(old.ExpiresAt) {
			t.Errorf("the shown record changed to %s", d.Shown.ExpiresAt)
		}
	})
	t.Run("plans from a copy of the shown record", func(t *testing.T) {
		same := &expiry.Record{ExpiresAt: created.Add(2 * time.Hour), Since: created, Sent: map[string]expiry.Delivery{}}
		d := Evaluate(c, Object{Created: created, Annotations: map[string]string{expiry.AnnotationReminders: same.String()}}, now, nil)
		if d.Replaced || d.Record == d.Shown || d.Record == nil {
			t.Errorf("Replaced %t, Record is Shown %t; want the same expiry planned from a copy", d.Replaced, d.Record == d.Shown)
		}
	})
	t.Run("reports an unreadable record and plans as if there were none", func(t *testing.T) {
		d := Evaluate(c, Object{Created: created, Annotations: map[string]string{expiry.AnnotationReminders: "{"}}, now, nil)
		if d.RecordErr == nil || d.Shown != nil || d.Record == nil {
			t.Errorf("RecordErr %v, Shown %v, Record %v; want an error, nothing shown and a fresh record", d.RecordErr, d.Shown, d.Record)
		}
	})
	t.Run("has no record for a kept object", func(t *testing.T) {
		d := Evaluate(c, Object{Created: created, Annotations: map[string]string{expiry.AnnotationKeep: "true"}}, now, nil)
		if !d.Life.Keep || d.Record != nil {
			t.Errorf("Keep %t, Record %v; want kept with no record", d.Life.Keep, d.Record)
		}
	})
}
