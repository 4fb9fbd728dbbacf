// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
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
