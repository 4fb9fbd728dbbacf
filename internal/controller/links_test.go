// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/actions"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

func TestParseActionsURL(t *testing.T) {
	for _, tt := range []struct {
		raw, want, err string
	}{
		{raw: "https://timeout.example.com", want: "https://timeout.example.com"},
		{raw: "https://example.com/timeout/", want: "https://example.com/timeout"},
		{raw: "http://localhost:8080", want: "http://localhost:8080"},
		{raw: "http://127.0.0.1:8080", want: "http://127.0.0.1:8080"},
		{raw: "http://[::1]:8080", want: "http://[::1]:8080"},
		{raw: "http://timeout.example.com", err: "must use https (http only for localhost)"},
		{raw: "ftp://timeout.example.com", err: "want an https URL"},
		{raw: "timeout.example.com", err: "want an absolute URL"},
		{raw: "https://user:pw@timeout.example.com", err: "want no user, query or fragment"},
		{raw: "https://timeout.example.com/?a=1", err: "want no user, query or fragment"},
		{raw: "https://timeout.example.com/%zz", err: "is not a URL"},
	} {
		t.Run(tt.raw, func(t *testing.T) {
			got, err := ParseActionsURL(tt.raw)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseActionsURL = %v, %v; want an error with %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got.String() != tt.want {
				t.Fatalf("ParseActionsURL = %v, %v; want %s", got, err, tt.want)
			}
		})
	}
}

// newLinks returns the links of an actions server at
// https://timeout.example.com, with its keyring Secret kept through c.
func newLinks(t *testing.T, c *fake.ClientBuilder, clk *clocktesting.FakeClock) (*Links, func() *corev1.Secret) {
	t.Helper()
	cl := c.WithScheme(testScheme(t)).Build()
	l, err := NewLinks("https://timeout.example.com", cl, cl, "timeout-system", clk)
	if err != nil {
		t.Fatal(err)
	}
	return l, func() *corev1.Secret {
		s := &corev1.Secret{}
		if err := cl.Get(context.Background(), types.NamespacedName{Namespace: "timeout-system", Name: actions.SecretName}, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// The keyring Secret is made when missing, and read again so that a key
// added signs, and a key removed no longer does, within keyringTTL.
func TestTheKeyringIsCreatedAndReadAgain(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).Build()
	l, err := NewLinks("https://timeout.example.com", cl, cl, "timeout-system", clk)
	if err != nil {
		t.Fatal(err)
	}
	first, err := l.keyring(ctx)
	if err != nil {
		t.Fatalf("keyring with no Secret: %v", err)
	}
	s := &corev1.Secret{}
	if err := cl.Get(ctx, types.NamespacedName{Namespace: "timeout-system", Name: actions.SecretName}, s); err != nil {
		t.Fatalf("no keyring Secret made: %v", err)
	}
	if keys := first.Keys(); len(keys) != 1 {
		t.Fatalf("the new keyring holds %q", keys)
	}

	// Rotated: a newer key added, the old one removed.
	old := first.Keys()[0]
	if err := actions.AddKey(s, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	delete(s.Data, old)
	if err := cl.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.keyring(ctx); !slices.Equal(got.Keys(), []string{old}) {
		t.Errorf("keys %q within the TTL, want the ones read before", got.Keys())
	}
	clk.Step(keyringTTL)
	if got, _ := l.keyring(ctx); !slices.Equal(got.Keys(), []string{actions.KeyName(t0.Add(time.Hour))}) {
		t.Errorf("keys %q after the TTL, want the rotated ones", got.Keys())
	}

	// Broken: the keys read last go on signing.
	s.Data = map[string][]byte{"key-20260301T090000Z": []byte("short")}
	if err := cl.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	clk.Step(keyringTTL)
	if got, err := l.keyring(ctx); err != nil || len(got.Keys()) != 1 {
		t.Errorf("keyring after a bad edit = %v, %v; want the keys read before", got, err)
	}
}

// linkedHarness is a harness whose messages carry links.
func linkedHarness(t *testing.T, now time.Time, p *v1alpha1.TimeoutPolicy, cm *corev1.ConfigMap) *harness {
	t.Helper()
	h := newHarness(t, now, p, cm)
	links, err := NewLinks("https://timeout.example.com/", h.client, h.client, "timeout-system", h.clock)
	if err != nil {
		t.Fatal(err)
	}
	h.r.Links = links
	return h
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
			expires: t0.Add(time.Hour),
		},
		{
			name: "the step is the policy's, and delete is offered when the policy allows it",
			policy: func(p *v1alpha1.TimeoutPolicy) {
				p.Spec.Extensions = &v1alpha1.Extensions{MaxStep: "12h"}
				p.Spec.Actions = &v1alpha1.Actions{DeleteNow: v1alpha1.DeleteNowAllowed}
			},
			want:    []actions.Action{actions.View, actions.Extend, actions.Delete},
			step:    "12 hours",
			expires: t0.Add(time.Hour),
		},
		{
			name:    "no extension under limits that allow none",
			policy:  func(p *v1alpha1.TimeoutPolicy) { p.Spec.Extensions = &v1alpha1.Extensions{MaxCount: ptr.To[int32](0)} },
			want:    []actions.Action{actions.View},
			expires: t0.Add(time.Hour),
		},
		{
			name:    "no extension at maxTTL",
			policy:  func(p *v1alpha1.TimeoutPolicy) { p.Spec.MaxTTL = "1h" },
			want:    []actions.Action{actions.View},
			expires: t0.Add(time.Hour),
		},
		{
			name: "a link works a week at most",
			policy: func(p *v1alpha1.TimeoutPolicy) {
				p.Spec.DefaultTTL, p.Spec.Reminders = "30d", []v1alpha1.Duration{"29d"}
			},
			want:    []actions.Action{actions.View, actions.Extend},
			step:    "1 day",
			at:      t0.Add(expiry.Day + time.Minute),
			expires: t0.Add(expiry.Day + time.Minute + linkLifetime),
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := remindingPolicy("0s")
			if tt.policy != nil {
				tt.policy(p)
			}
			cm := newConfigMap("linked")
			at := tt.at
			if at.IsZero() {
				at = t0.Add(31 * time.Minute)
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
		cm := newConfigMap("plain")
		h := newHarness(t, t0.Add(31*time.Minute), remindingPolicy("0s"), cm)
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
		cm := newConfigMap("extended")
		h := linkedHarness(t, t0.Add(31*time.Minute), remindingPolicy("0s"), cm)
		mustReconcile(t, h, cm)
		mustReconcile(t, h, cm)
		h.annotate(cm, expiry.AnnotationExpiresAt, t0.Add(3*time.Hour).Format(time.RFC3339))
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

func TestObjectActions(t *testing.T) {
	sleeping := expiry.SleepState{Phase: expiry.PhaseAsleep}
	for _, tt := range []struct {
		name string
		t    v1alpha1.EventType
		ev   func(*evaluation)
		want []actions.Action
	}{
		{name: "a reminder about an awake object offers no wake", t: v1alpha1.EventReminder, want: []actions.Action{actions.View, actions.Extend}},
		{name: "a reminder about an object asleep offers to wake it", t: v1alpha1.EventReminder,
			ev: func(ev *evaluation) { ev.Life.Sleep = sleeping }, want: []actions.Action{actions.View, actions.Extend, actions.Wake}},
		{name: "a sleeping message offers to keep it awake", t: v1alpha1.EventSleeping, want: []actions.Action{actions.View, actions.Extend, actions.Wake}},
		{name: "a slept message offers to wake it", t: v1alpha1.EventSlept, ev: func(ev *evaluation) { ev.Life.Sleep = sleeping },
			want: []actions.Action{actions.View, actions.Extend, actions.Wake}},
		{name: "no extension once the count is used", t: v1alpha1.EventReminder, ev: func(ev *evaluation) {
			ev.Schedule.Limits = &expiry.Limits{MaxCount: 2}
			ev.Life.Extensions = &expiry.Extensions{Used: 2}
		}, want: []actions.Action{actions.View}},
		{name: "an extension while the count allows one", t: v1alpha1.EventReminder, ev: func(ev *evaluation) {
			ev.Schedule.Limits = &expiry.Limits{MaxCount: 2}
			ev.Life.Extensions = &expiry.Extensions{Used: 1}
		}, want: []actions.Action{actions.View, actions.Extend}},
		{name: "delete when the policy allows it", t: v1alpha1.EventSlept, ev: func(ev *evaluation) { ev.Schedule.DeleteNow = true },
			want: []actions.Action{actions.View, actions.Extend, actions.Wake, actions.Delete}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ev := &evaluation{obj: &metav1.PartialObjectMetadata{}}
			ev.Life.ExpiresAt = t0.Add(time.Hour)
			if tt.ev != nil {
				tt.ev(ev)
			}
			if got := objectActions(ev, tt.t); !slices.Equal(got, tt.want) {
				t.Errorf("objectActions = %q, want %q", got, tt.want)
			}
		})
	}
}

// A digest gives each object its links, and its owner the owner's page,
// all for the digest's recipient.
func TestDigestLinks(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	l, secret := newLinks(t, fake.NewClientBuilder(), clk)
	p := fixture.Policy("digests", func(p *v1alpha1.TimeoutPolicy) {
		p.Spec.Actions = &v1alpha1.Actions{DeleteNow: v1alpha1.DeleteNowAllowed, ExtendBy: "2d"}
	})
	m := notify.Message{Type: v1alpha1.EventReminder, Time: t0, Digest: &notify.Digest{Stage: "3d", Owner: "alice", Items: []notify.DigestItem{
		{Object: notify.Object{APIVersion: "amphitheatre.app/v1", Kind: "Playbook", Name: "pb-1", UID: "u1"}, ExpiresAt: t0.Add(3 * expiry.Day)},
		{Object: notify.Object{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "cm", UID: "u2"}, ExpiresAt: t0.Add(9 * expiry.Day)},
	}}}
	linker := l.digestLinks(context.Background(), p, m)
	if linker == nil {
		t.Fatal("a digest carries no links")
	}
	got, err := linker.Link(m, "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	ring, err := actions.KeyringFromSecret(secret())
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		ref     actions.Ref
		expires time.Time
	}{
		{actions.Ref{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook", Name: "pb-1", UID: "u1"}, t0.Add(3 * expiry.Day)},
		{actions.Ref{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "cm", UID: "u2"}, t0.Add(linkLifetime)},
	} {
		item := got.Digest.Items[i].Actions
		if item == nil || item.Step != "2 days" {
			t.Fatalf("item %d links %+v", i, item)
		}
		c, err := ring.Verify(item.Token, t0)
		if err != nil {
			t.Fatal(err)
		}
		if *c.Object != want.ref || c.Recipient != "alice@example.com" || !c.Expires.Equal(want.expires) ||
			!slices.Equal(c.Actions, []actions.Action{actions.View, actions.Extend, actions.Delete}) {
			t.Errorf("item %d: claims %+v about %+v, want %+v until %s", i, c, c.Object, want.ref, want.expires)
		}
	}
	if m.Digest.Items[0].Actions != nil {
		t.Error("Link changed the digest it was given")
	}
	if got.Actions == nil || !strings.HasPrefix(got.Actions.Page, "https://timeout.example.com/o/") || got.Actions.Extend != "" {
		t.Fatalf("owner's links %+v", got.Actions)
	}
	c, err := ring.Verify(got.Actions.Token, t0)
	if err != nil || c.Owner != "alice" || c.Object != nil || c.Recipient != "alice@example.com" || !c.Expires.Equal(t0.Add(linkLifetime)) {
		t.Errorf("owner's page claims %+v, %v", c, err)
	}
}
