// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// slowSecrets counts reads and takes a while over each, as the API server
// does under load.
type slowSecrets struct{ reads atomic.Int32 }

func (s *slowSecrets) Get(context.Context, string, string, string) ([]byte, error) {
	s.reads.Add(1)
	time.Sleep(20 * time.Millisecond)
	return []byte("a signing key"), nil
}

func TestChannelsAreBuiltOnceWhenEveryWorkerMissesAtOnce(t *testing.T) {
	secrets := &slowSecrets{}
	c := &Channels{Secrets: secrets, Clock: clocktesting.NewFakePassiveClock(t0)}
	p := newPolicy("hooks", func(p *v1alpha1.TimeoutPolicy) {
		p.UID = "uid-hooks"
		p.Spec.Notifications.Webhooks = []v1alpha1.WebhookNotifications{{
			Name: "ops", URL: "https://hooks.example.com/timeout",
			SecretRef: v1alpha1.SecretKeySelector{Namespace: "timeout-system", Name: "hooks", Key: "key"},
		}}
	})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if _, err := c.get(context.Background(), p); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := secrets.reads.Load(); n != 1 {
		t.Errorf("16 workers at once read the Secret %d times, want 1", n)
	}
}

// secretsByKey returns each Secret key's value from a map.
type secretsByKey map[string]string

func (s secretsByKey) Get(_ context.Context, _, _, key string) ([]byte, error) {
	return []byte(s[key]), nil
}

// The plugin plans with notify.ChannelNames, from the spec alone: the
// channels the controller builds from the same spec must carry the same
// names for the same message types.
func TestBuiltChannelsCarryThePlannedNames(t *testing.T) {
	secrets := secretsByKey{"url": "https://hooks.slack.com/services/T0/B0/x", "key": "a signing key"}
	ref := func(key string) v1alpha1.SecretKeySelector {
		return v1alpha1.SecretKeySelector{Namespace: "timeout-system", Name: "channels", Key: key}
	}
	spec := v1alpha1.Notifications{
		Email: &v1alpha1.EmailNotifications{Host: "smtp.example.com", From: "timeout@example.com", Events: []v1alpha1.EventType{v1alpha1.EventReminder}},
		Slack: &v1alpha1.SlackNotifications{WebhookURLSecretRef: ref("url")},
		Webhooks: []v1alpha1.WebhookNotifications{
			{Name: "portal", URL: "https://portal.example.com/hook", SecretRef: ref("key")},
			{Name: "deletions", URL: "https://audit.example.com/hook", SecretRef: ref("key"), Events: []v1alpha1.EventType{v1alpha1.EventDeleted}},
		},
	}
	for name, spec := range map[string]v1alpha1.Notifications{"every channel": spec, "none": {}} {
		t.Run(name, func(t *testing.T) {
			set, err := buildChannels(context.Background(), spec, secrets)
			if err != nil {
				t.Fatal(err)
			}
			if want := notify.ChannelNames(spec); !reflect.DeepEqual(set.names, want) {
				t.Errorf("built %v, planned %v", set.names, want)
			}
		})
	}
}
