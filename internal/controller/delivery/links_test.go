// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

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
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/actions"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/eval"
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
	cl := c.WithScheme(fixture.Scheme(t)).Build()
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
	clk := clocktesting.NewFakeClock(fixture.T0)
	cl := fake.NewClientBuilder().WithScheme(fixture.Scheme(t)).Build()
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
	if err := actions.AddKey(s, fixture.T0.Add(time.Hour)); err != nil {
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
	if got, _ := l.keyring(ctx); !slices.Equal(got.Keys(), []string{actions.KeyName(fixture.T0.Add(time.Hour))}) {
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

func TestObjectActions(t *testing.T) {
	sleeping := expiry.SleepState{Phase: expiry.PhaseAsleep}
	for _, tt := range []struct {
		name string
		t    v1alpha1.EventType
		ev   func(*eval.Evaluation)
		want []actions.Action
	}{
		{name: "a reminder about an awake object offers no wake", t: v1alpha1.EventReminder, want: []actions.Action{actions.View, actions.Extend}},
		{name: "a reminder about an object asleep offers to wake it", t: v1alpha1.EventReminder,
			ev: func(ev *eval.Evaluation) { ev.Life.Sleep = sleeping }, want: []actions.Action{actions.View, actions.Extend, actions.Wake}},
		{name: "a sleeping message offers to keep it awake", t: v1alpha1.EventSleeping, want: []actions.Action{actions.View, actions.Extend, actions.Wake}},
		{name: "a slept message offers to wake it", t: v1alpha1.EventSlept, ev: func(ev *eval.Evaluation) { ev.Life.Sleep = sleeping },
			want: []actions.Action{actions.View, actions.Extend, actions.Wake}},
		{name: "no extension once the count is used", t: v1alpha1.EventReminder, ev: func(ev *eval.Evaluation) {
			ev.Schedule.Limits = &expiry.Limits{MaxCount: 2}
			ev.Life.Extensions = &expiry.Extensions{Used: 2}
		}, want: []actions.Action{actions.View}},
		{name: "an extension while the count allows one", t: v1alpha1.EventReminder, ev: func(ev *eval.Evaluation) {
			ev.Schedule.Limits = &expiry.Limits{MaxCount: 2}
			ev.Life.Extensions = &expiry.Extensions{Used: 1}
		}, want: []actions.Action{actions.View, actions.Extend}},
		{name: "delete when the policy allows it", t: v1alpha1.EventSlept, ev: func(ev *eval.Evaluation) { ev.Schedule.DeleteNow = true },
			want: []actions.Action{actions.View, actions.Extend, actions.Wake, actions.Delete}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ev := &eval.Evaluation{Obj: &metav1.PartialObjectMetadata{}}
			ev.Life.ExpiresAt = fixture.T0.Add(time.Hour)
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
	clk := clocktesting.NewFakeClock(fixture.T0)
	l, secret := newLinks(t, fake.NewClientBuilder(), clk)
	p := fixture.Policy("digests", func(p *v1alpha1.TimeoutPolicy) {
		p.Spec.Actions = &v1alpha1.Actions{DeleteNow: v1alpha1.DeleteNowAllowed, ExtendBy: "2d"}
	})
	m := notify.Message{Type: v1alpha1.EventReminder, Time: fixture.T0, Digest: &notify.Digest{Stage: "3d", Owner: "alice", Items: []notify.DigestItem{
		{Object: notify.Object{APIVersion: "amphitheatre.app/v1", Kind: "Playbook", Name: "pb-1", UID: "u1"}, ExpiresAt: fixture.T0.Add(3 * expiry.Day)},
		{Object: notify.Object{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "cm", UID: "u2"}, ExpiresAt: fixture.T0.Add(9 * expiry.Day)},
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
		{actions.Ref{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook", Name: "pb-1", UID: "u1"}, fixture.T0.Add(3 * expiry.Day)},
		{actions.Ref{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "cm", UID: "u2"}, fixture.T0.Add(LinkLifetime)},
	} {
		item := got.Digest.Items[i].Actions
		if item == nil || item.Step != "2 days" {
			t.Fatalf("item %d links %+v", i, item)
		}
		c, err := ring.Verify(item.Token, fixture.T0)
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
	c, err := ring.Verify(got.Actions.Token, fixture.T0)
	if err != nil || c.Owner != "alice" || c.Object != nil || c.Recipient != "alice@example.com" || !c.Expires.Equal(fixture.T0.Add(LinkLifetime)) {
		t.Errorf("owner's page claims %+v, %v", c, err)
	}
}
