// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// recordingSink is an EventSink that keeps what it is given.
type recordingSink struct {
	mu      sync.Mutex
	created []*eventsv1.Event
	updated []*eventsv1.Event
	patched []*eventsv1.Event
}

func (s *recordingSink) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.created = append(s.created, e)
	return e, nil
}

func (s *recordingSink) Update(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updated = append(s.updated, e)
	return e, nil
}

func (s *recordingSink) Patch(_ context.Context, e *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.patched = append(s.patched, e)
	return e, nil
}

func (s *recordingSink) snapshot() (created, patched []*eventsv1.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*eventsv1.Event{}, s.created...), append([]*eventsv1.Event{}, s.patched...)
}

// newEvent is an Event as client-go's recorder makes it: in the object's
// namespace, or in "default" for a cluster-scoped object.
func newEvent(regardingNamespace string) *eventsv1.Event {
	ns := regardingNamespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scratch.1234"},
		Regarding:  corev1.ObjectReference{Kind: "Thing", Namespace: regardingNamespace, Name: "scratch"},
		Reason:     ReasonExpired,
	}
}

func TestClusterScopedSink(t *testing.T) {
	tests := []struct {
		name               string
		sinkNamespace      string
		regardingNamespace string
		want               string
	}{
		{
			name:          "writes an Event about a cluster-scoped object to the configured namespace",
			sinkNamespace: metav1.NamespaceSystem,
			want:          metav1.NamespaceSystem,
		},
		{
			name:               "leaves an Event about a namespaced object in the object's namespace",
			sinkNamespace:      metav1.NamespaceSystem,
			regardingNamespace: "team-a",
			want:               "team-a",
		},
		{
			name: "leaves an Event about a cluster-scoped object where client-go put it when no namespace is configured",
			want: metav1.NamespaceDefault,
		},
	}
	type write struct {
		name string
		call func(events.EventSink, *eventsv1.Event) error
		got  func(*recordingSink) []*eventsv1.Event
	}
	ctx := context.Background()
	writes := []write{
		{
			name: "Create",
			call: func(s events.EventSink, e *eventsv1.Event) error { _, err := s.Create(ctx, e); return err },
			got:  func(s *recordingSink) []*eventsv1.Event { return s.created },
		},
		{
			// The broadcaster patches the Event it created to count a
			// series of repeats; the patch must go where the Event is.
			name: "Patch",
			call: func(s events.EventSink, e *eventsv1.Event) error {
				_, err := s.Patch(ctx, e, []byte(`{"series":{"count":2}}`))
				return err
			},
			got: func(s *recordingSink) []*eventsv1.Event { return s.patched },
		},
	}
	for _, w := range writes {
		for _, tt := range tests {
			t.Run(w.name+" "+tt.name, func(t *testing.T) {
				rec := &recordingSink{}
				sink := ClusterScopedSink{EventSink: rec, Namespace: tt.sinkNamespace}
				e := newEvent(tt.regardingNamespace)
				orig := e.DeepCopy()

				if err := w.call(sink, e); err != nil {
					t.Fatal(err)
				}
				got := w.got(rec)
				if len(got) != 1 {
					t.Fatalf("sink received %d Events, want 1", len(got))
				}
				if got[0].Namespace != tt.want {
					t.Errorf("namespace = %q, want %q", got[0].Namespace, tt.want)
				}
				if got[0].Name != orig.Name || got[0].Regarding != orig.Regarding || got[0].Reason != orig.Reason {
					t.Errorf("Event changed beyond its namespace: %+v", got[0])
				}
				if e.Namespace != orig.Namespace {
					t.Errorf("caller's Event namespace changed to %q", e.Namespace)
				}
			})
		}
	}
}

func TestClusterScopedSinkWithBroadcaster(t *testing.T) {
	// The same Event twice in a row becomes a series: client-go creates
	// the first and patches it with the count. Both must go to the
	// namespace the first was written to, or the patch finds nothing.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recordingSink{}
	b := events.NewBroadcaster(ClusterScopedSink{EventSink: rec, Namespace: metav1.NamespaceSystem})
	defer b.Shutdown()
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	recorder := b.NewRecorder(fixture.Scheme(t), Name)
	policy := fixture.Policy("broken")
	policy.UID = "uid-broken"
	for range 2 {
		recorder.Eventf(policy, nil, corev1.EventTypeWarning, ReasonInvalidPolicy, ActionEvaluate, "spec.defaultTTL is wrong")
	}

	var created, patched []*eventsv1.Event
	deadline := time.Now().Add(10 * time.Second)
	for {
		created, patched = rec.snapshot()
		if len(created) >= 1 && len(patched) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s the sink has %d created and %d patched Events, want 1 and 1", len(created), len(patched))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if created[0].Namespace != metav1.NamespaceSystem {
		t.Errorf("created in %q, want %q", created[0].Namespace, metav1.NamespaceSystem)
	}
	if patched[0].Namespace != created[0].Namespace || patched[0].Name != created[0].Name {
		t.Errorf("series patch goes to %s/%s, but the Event is %s/%s",
			patched[0].Namespace, patched[0].Name, created[0].Namespace, created[0].Name)
	}
}

func TestNotesAreCutToTheAPILimitOnACharacterBoundary(t *testing.T) {
	tests := []struct {
		name string
		note string
		// wantPrefix is what the cut note starts with; the whole note when
		// it is not cut.
		wantPrefix string
		wantCut    bool
	}{
		{name: "keeps a short note", note: "expired", wantPrefix: "expired"},
		{name: "keeps a note of exactly the limit", note: strings.Repeat("a", maxNote), wantPrefix: strings.Repeat("a", maxNote)},
		{name: "cuts an ASCII note one byte over", note: strings.Repeat("a", maxNote+1), wantPrefix: strings.Repeat("a", maxNote-len(cutMark)), wantCut: true},
		{
			name: "does not split an é that straddles the cut", note: strings.Repeat("a", maxNote-len(cutMark)-1) + "é" + strings.Repeat("b", 10),
			wantPrefix: strings.Repeat("a", maxNote-len(cutMark)-1), wantCut: true,
		},
		{
			name: "does not split an emoji that straddles the cut", note: strings.Repeat("a", maxNote-len(cutMark)-2) + "🎭" + strings.Repeat("b", 10),
			wantPrefix: strings.Repeat("a", maxNote-len(cutMark)-2), wantCut: true,
		},
		{name: "cuts a note of nothing but emoji", note: strings.Repeat("🎭", 1000), wantPrefix: strings.Repeat("🎭", (maxNote-len(cutMark))/4), wantCut: true},
		{name: "makes invalid UTF-8 valid before measuring", note: strings.Repeat("a\xff", maxNote/2), wantPrefix: strings.Repeat("a\uFFFD", (maxNote-len(cutMark))/4) + "a", wantCut: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(1)
			NoteCutter{rec}.Eventf(&corev1.ConfigMap{}, nil, corev1.EventTypeWarning, ReasonInvalidTimeout, ActionEvaluate, "%s", tt.note)
			got := strings.TrimPrefix(<-rec.Events, "Warning InvalidTimeout ")
			if len(got) > maxNote || !utf8.ValidString(got) {
				t.Fatalf("note of %d bytes, valid UTF-8 %t", len(got), utf8.ValidString(got))
			}
			want := tt.wantPrefix
			if tt.wantCut {
				want += cutMark
			}
			if got != want {
				t.Errorf("note %q…(%d bytes), want %q…(%d bytes)", short(got), len(got), short(want), len(want))
			}
		})
	}
}

func short(s string) string { return s[:min(len(s), 20)] }
