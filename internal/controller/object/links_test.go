// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/actions"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/delivery"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// linkedHarness is a harness whose messages carry links.
func linkedHarness(t *testing.T, now time.Time, p *v1alpha1.TimeoutPolicy, cm *corev1.ConfigMap) *harness {
	t.Helper()
	h := newHarness(t, now, p, cm)
	links, err := delivery.NewLinks("https://timeout.example.com/", h.client, h.client, "timeout-system", h.clock)
	if err != nil {
		t.Fatal(err)
	}
	h.r.Links = links
	return h
}

func TestRemindersCarryLinksForEachRecipient(t *testing.T) {
	for _, tt := range []struct {
		name    string
		policy  func(*v1alpha1.TimeoutPolicy)
		cm      func(*corev1.ConfigMap)
		want    []actions.Action
		step    string
		expires time.Time
		// at is when the reminder goes, t0+31m when zero.
		at time.Time
	}{
		{
			name:    "a reminder lets its recipient see and keep the object until its deletion",
			want:    []actions.Action{actions.View, actions.Extend},
			step:    "1 day",
			expires: fixture.T0.Add(time.Hour),
		},
		{
			name: "the step is the policy's, and delete is offered when the policy allows it",
			policy: func(p *v1alpha1.TimeoutPolicy) {
				p.Spec.Extensions = &v1alpha1.Extensions{MaxStep: "12h"}
				p.Spec.Actions = &v1alpha1.Actions{DeleteNow: v1alpha1.DeleteNowAllowed}
			},
			want:    []actions.Action{actions.View, actions.Extend, actions.Delete},
			step:    "12 hours",
			expires: fixture.T0.Add(time.Hour),
		},
		{
			name:    "no extension under limits that allow none",
			policy:  func(p *v1alpha1.TimeoutPolicy) { p.Spec.Extensions = &v1alpha1.Extensions{MaxCount: ptr.To[int32](0)} },
			want:    []actions.Action{actions.View},
			expires: fixture.T0.Add(time.Hour),
		},
		{
			name:    "no extension at maxTTL",
			policy:  func(p *v1alpha1.TimeoutPolicy) { p.Spec.MaxTTL = "1h" },
			want:    []actions.Action{actions.View},
			expires: fixture.T0.Add(time.Hour),
		},
		{
			name: "a link works a week at most",
			policy: func(p *v1alpha1.TimeoutPolicy) {
				p.Spec.DefaultTTL, p.Spec.Reminders = "30d", []v1alpha1.Duration{"29d"}
			},
			want:    []actions.Action{actions.View, actions.Extend},
			step:    "1 day",
			at:      fixture.T0.Add(expiry.Day + time.Minute),
			expires: fixture.T0.Add(expiry.Day + time.Minute + delivery.LinkLifetime),
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := remindingPolicy("0s")
			if tt.policy != nil {
				tt.policy(p)
			}
			cm := fixture.NewConfigMap("linked")
			at := tt.at
			if at.IsZero() {
				at = fixture.T0.Add(31 * time.Minute)
			}
			h := linkedHarness(t, at, p, cm)
			for range 3 {
				// The first may write the extensions annotation only.
				mustReconcile(t, h, cm)
			}
			if n := h.scripted.count(v1alpha1.EventReminder); n != 1 {
				t.Fatalf("%d reminders, want 1", n)
			}
			m := h.scripted.sent[0]
			if m.Linker == nil {
				t.Fatal("the reminder carries no links")
			}
			for _, who := range []string{"alice@example.com", "#team-a"} {
				got, err := m.Linker.Link(m, who)
				if err != nil {
					t.Fatal(err)
				}
				c := verify(t, h, got.Actions)
				if c.Object == nil || c.Object.UID != cm.UID || c.Object.Kind != "ConfigMap" || c.Object.Version != "v1" ||
					c.Object.Namespace != "team-a" || c.Object.Name != "linked" {
					t.Errorf("the link is about %+v, want ConfigMap team-a/linked %s", c.Object, cm.UID)
				}
				if c.Recipient != who {
					t.Errorf("the link names %q, want %s", c.Recipient, who)
				}
				if !slices.Equal(c.Actions, tt.want) {
					t.Errorf("the link allows %q, want %q", c.Actions, tt.want)
				}
				if !c.Expires.Equal(tt.expires) {
					t.Errorf("the link expires at %s, want %s", c.Expires, tt.expires)
				}
				if got.Actions.Step != tt.step || (got.Actions.Extend != "") != slices.Contains(tt.want, actions.Extend) {
					t.Errorf("links %+v, want step %q", got.Actions, tt.step)
				}
			}
		})
	}
}

// Without --actions-url a message carries no links, and a message nobody
// acts on carries none with it.
func TestMessagesWithoutLinks(t *testing.T) {
	t.Run("without an actions URL", func(t *testing.T) {
		cm := fixture.NewConfigMap("plain")
		h := newHarness(t, fixture.T0.Add(31*time.Minute), remindingPolicy("0s"), cm)
		mustReconcile(t, h, cm)
		if n := h.scripted.count(v1alpha1.EventReminder); n != 1 || h.scripted.sent[0].Linker != nil {
			t.Fatalf("%d reminders, the first with a linker: %v", n, n > 0 && h.scripted.sent[0].Linker != nil)
		}
		s := &corev1.Secret{}
		if err := h.client.Get(context.Background(), types.NamespacedName{Namespace: "timeout-system", Name: actions.SecretName}, s); err == nil {
			t.Error("a keyring Secret was made without an actions URL")
		}
	})
	t.Run("an extended message", func(t *testing.T) {
		cm := fixture.NewConfigMap("extended")
		h := linkedHarness(t, fixture.T0.Add(31*time.Minute), remindingPolicy("0s"), cm)
		mustReconcile(t, h, cm)
		mustReconcile(t, h, cm)
		h.annotate(cm, expiry.AnnotationExpiresAt, fixture.T0.Add(3*time.Hour).Format(time.RFC3339))
		for range 3 {
			mustReconcile(t, h, cm)
		}
		for _, m := range h.scripted.sent {
			if m.Type == v1alpha1.EventExtended && m.Linker != nil {
				t.Error("the extended message carries links")
			}
		}
	})
}

// verify reads the token of a link with the keyring the harness keeps.
func verify(t *testing.T, h *harness, l *notify.Links) actions.Claims {
	t.Helper()
	s := &corev1.Secret{}
	if err := h.client.Get(context.Background(), types.NamespacedName{Namespace: "timeout-system", Name: actions.SecretName}, s); err != nil {
		t.Fatal(err)
	}
	ring, err := actions.KeyringFromSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(l.Page, "https://timeout.example.com/a/") || !strings.HasSuffix(l.Page, "/"+l.Token) {
		t.Fatalf("page %q does not carry its token", l.Page)
	}
	c, err := ring.Verify(l.Token, h.clock.Now())
	if err != nil {
		t.Fatalf("verify the link: %v", err)
	}
	return c
}
