// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package channelset

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// slowSecrets counts reads and takes a while over each, as the API server
// does under load.
type slowSecrets struct{ reads atomic.Int32 }

func (s *slowSecrets) Get(context.Context, string, string, string) ([]byte, error) {
	s.reads.Add(1)
	time.Sleep(20 * time.Millisecond)
	return []byte("a signing key"), nil
}

// channelsWith returns Channels reading chans from a fake API server.
func channelsWith(t *testing.T, secrets notify.Secrets, chans ...*v1alpha1.NotificationChannel) *Channels {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(fixture.Scheme(t))
	for _, ch := range chans {
		b = b.WithObjects(ch)
	}
	return &Channels{Reader: b.Build(), Secrets: secrets, Clock: clocktesting.NewFakePassiveClock(fixture.T0)}
}

func TestChannelsAreBuiltOnceWhenEveryWorkerMissesAtOnce(t *testing.T) {
	secrets := &slowSecrets{}
	c := channelsWith(t, secrets, fixture.Channel("ops", fixture.HookSpec))
	p := fixture.Policy("hooks", func(p *v1alpha1.TimeoutPolicy) {
		p.UID = "uid-hooks"
		p.Spec.Notifications.Channels = []v1alpha1.ChannelReference{{Name: "ops"}}
	})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if _, err := c.Get(context.Background(), p); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := secrets.reads.Load(); n != 1 {
		t.Errorf("16 workers at once read the Secret %d times, want 1", n)
	}
}

// The plugin plans with notify.ChannelNames, from the spec alone: the
// channels the controller builds from the same spec, of every kind it
// lists, must carry the same names for the same message types.
func TestBuiltChannelsCarryThePlannedNames(t *testing.T) {
	secrets := fixture.SecretsByKey{"url": "https://hooks.slack.com/services/T0/B0/x", "key": "a signing key"}
	ref := func(key string) v1alpha1.SecretKeySelector {
		return v1alpha1.SecretKeySelector{Namespace: "timeout-system", Name: "channels", Key: key}
	}
	// A channel of each kind, by the kind's name.
	specs := map[string]v1alpha1.NotificationChannelSpec{
		"email":   {Email: &v1alpha1.EmailChannel{Host: "smtp.example.com", From: "timeout@example.com"}},
		"slack":   {Slack: &v1alpha1.SlackChannel{WebhookURLSecretRef: ref("url")}},
		"webhook": {Webhook: &v1alpha1.WebhookChannel{URL: "https://portal.example.com/hook", SecretRef: ref("key")}},
	}
	var (
		chans []*v1alpha1.NotificationChannel
		refs  []v1alpha1.ChannelReference
	)
	for _, k := range ChannelKinds {
		spec, ok := specs[k.Name]
		if !ok {
			t.Fatalf("no channel of kind %s to build: add one to this test", k.Name)
		}
		// Each kind three times: for every message type, for reminders
		// only, and for a type that is not recorded.
		for suffix, events := range map[string][]v1alpha1.EventType{
			"":           nil,
			"-reminders": {v1alpha1.EventReminder},
			"-deletions": {v1alpha1.EventDeleted},
		} {
			chans = append(chans, fixture.Channel(k.Name+suffix, spec))
			refs = append(refs, v1alpha1.ChannelReference{Name: k.Name + suffix, Events: events})
		}
	}
	c := channelsWith(t, secrets, chans...)
	for name, spec := range map[string]v1alpha1.Notifications{"every channel": {Channels: refs}, "none": {}} {
		t.Run(name, func(t *testing.T) {
			p := fixture.Policy("p-"+strings.ReplaceAll(name, " ", "-"), func(p *v1alpha1.TimeoutPolicy) { p.Spec.Notifications = spec })
			set, err := c.Get(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			if want := notify.ChannelNames(spec); !reflect.DeepEqual(set.Names, want) {
				t.Errorf("built %v, planned %v", set.Names, want)
			}
		})
	}
}

// Each field of NotificationChannelSpec that configures a kind of channel
// (exactly one of them is set) has its kind in channelKinds, and no other
// kind is listed: a kind added to the API but not to the list would leave
// its channels unusable.
func TestTheControllerListsEveryKindOfChannelTheAPIHas(t *testing.T) {
	var fields []string
	spec := reflect.TypeFor[v1alpha1.NotificationChannelSpec]()
	for i := range spec.NumField() {
		f := spec.Field(i)
		if f.Type.Kind() == reflect.Pointer && strings.HasSuffix(f.Type.Elem().Name(), "Channel") {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			fields = append(fields, name)
		}
	}
	var kinds []string
	for _, k := range ChannelKinds {
		kinds = append(kinds, k.Name)
	}
	slices.Sort(fields)
	slices.Sort(kinds)
	if len(fields) == 0 || !slices.Equal(kinds, fields) {
		t.Errorf("channelKinds are %q; NotificationChannelSpec has the kinds %q", kinds, fields)
	}
}

// A policy only names channels; whether it may use one, and how, is the
// channel's administrator's to say.
func TestChannelsRefuseWhatTheirAdministratorDidNotAllow(t *testing.T) {
	mail := fixture.Channel("team-a-mail", v1alpha1.NotificationChannelSpec{
		Email:               &v1alpha1.EmailChannel{Host: "smtp.example.com", From: "timeout@example.com"},
		AllowedEmailDomains: []string{"team-a.example.com"},
		PolicySelector:      &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
	})
	c := channelsWith(t, fixture.SecretsByKey{"key": "a signing key"}, mail, fixture.Channel("ops", fixture.HookSpec))
	for _, tt := range []struct {
		name       string
		labels     map[string]string
		ref        v1alpha1.ChannelReference
		wantReason string // empty: usable
		wantIn     string
	}{
		{name: "lets a policy its selector matches use it", labels: map[string]string{"team": "a"},
			ref: v1alpha1.ChannelReference{Name: "team-a-mail", To: []string{"lead@team-a.example.com"}}},
		{name: "refuses a policy its selector does not match", labels: map[string]string{"team": "b"},
			ref: v1alpha1.ChannelReference{Name: "team-a-mail"}, wantReason: v1alpha1.ReasonChannelRefused, wantIn: "policySelector does not match"},
		{name: "refuses to send to an address outside its domains", labels: map[string]string{"team": "a"},
			ref: v1alpha1.ChannelReference{Name: "team-a-mail", To: []string{"me@attacker.example"}}, wantReason: v1alpha1.ReasonChannelRefused, wantIn: `"me@attacker.example"`},
		{name: "refuses recipients for a channel that is not e-mail",
			ref: v1alpha1.ChannelReference{Name: "ops", To: []string{"me@attacker.example"}}, wantReason: v1alpha1.ReasonChannelRefused, wantIn: "not an e-mail channel"},
		{name: "reports a channel that does not exist",
			ref: v1alpha1.ChannelReference{Name: "nowhere"}, wantReason: v1alpha1.ReasonChannelNotFound, wantIn: "NotificationChannel nowhere does not exist"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := fixture.Policy("user", func(p *v1alpha1.TimeoutPolicy) {
				p.Labels = tt.labels
				p.Spec.Notifications.Channels = []v1alpha1.ChannelReference{tt.ref}
			})
			_, err := c.Get(context.Background(), p)
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("get: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("the policy may use the channel")
			}
			if got := ChannelReason(err); got != tt.wantReason || !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("reason %s, error %q; want %s and %q", got, err, tt.wantReason, tt.wantIn)
			}
		})
	}
}

// Editing a channel takes effect at once, not after channelsTTL.
func TestChannelsAreRebuiltWhenTheirChannelChanges(t *testing.T) {
	ch := fixture.Channel("ops", fixture.HookSpec)
	c := channelsWith(t, fixture.SecretsByKey{"key": "a signing key"}, ch)
	p := fixture.Policy("hooks", func(p *v1alpha1.TimeoutPolicy) {
		p.Spec.Notifications.Channels = []v1alpha1.ChannelReference{{Name: "ops"}}
	})
	if _, err := c.Get(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	cl := c.Reader.(client.Client)
	if err := cl.Get(context.Background(), client.ObjectKeyFromObject(ch), ch); err != nil {
		t.Fatal(err)
	}
	ch.Spec.PolicySelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "other"}}
	if err := cl.Update(context.Background(), ch); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(context.Background(), p); ChannelReason(err) != v1alpha1.ReasonChannelRefused {
		t.Errorf("after the channel refused the policy, get = %v", err)
	}
}
