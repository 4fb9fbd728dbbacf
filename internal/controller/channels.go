// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// channelsTTL is how long a policy's channels are reused before they are
// built again, which picks up rotated Secrets.
const channelsTTL = time.Minute

// channelSet is a policy's notifiers, by name, and its templates.
type channelSet struct {
	// names are, per recorded message type, the channels that carry it, or
	// notify.EventsChannel when none does.
	names     map[v1alpha1.EventType][]string
	notifiers map[string]notify.Notifier
	templates *notify.Templates
}

// Channels builds and caches each policy's channels.
type Channels struct {
	Secrets notify.Secrets
	Clock   clock.PassiveClock

	mu    sync.Mutex
	cache map[types.UID]cachedChannels
	// building lets one caller at a time build: when a policy's set
	// expires, every worker misses it at once, and each would otherwise
	// read the Secrets and parse the templates again.
	building sync.Mutex
}

type cachedChannels struct {
	generation int64
	built      time.Time
	set        *channelSet
	err        error
}

// get returns the channels policy p configures. Its error says what is
// wrong with them, without secrets.
func (c *Channels) get(ctx context.Context, p *v1alpha1.TimeoutPolicy) (*channelSet, error) {
	now := c.Clock.Now()
	if e, ok := c.cached(p, now); ok {
		return e.set, e.err
	}
	c.building.Lock()
	defer c.building.Unlock()
	// Built by another caller while this one waited.
	if e, ok := c.cached(p, now); ok {
		return e.set, e.err
	}

	set, err := buildChannels(ctx, p.Spec.Notifications, c.Secrets)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cache == nil {
		c.cache = map[types.UID]cachedChannels{}
	}
	c.cache[p.UID] = cachedChannels{generation: p.Generation, built: now, set: set, err: err}
	return set, err
}

func (c *Channels) cached(p *v1alpha1.TimeoutPolicy, now time.Time) (cachedChannels, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cache[p.UID]
	return e, ok && e.generation == p.Generation && now.Sub(e.built) < channelsTTL
}

func buildChannels(ctx context.Context, spec v1alpha1.Notifications, secrets notify.Secrets) (*channelSet, error) {
	templates, err := notify.NewTemplates(spec.Templates)
	if err != nil {
		return nil, err
	}
	notifiers, err := notify.Build(ctx, spec, secrets)
	if err != nil {
		return nil, err
	}
	set := &channelSet{names: map[v1alpha1.EventType][]string{}, notifiers: map[string]notify.Notifier{}, templates: templates}
	for _, n := range notifiers {
		set.notifiers[n.Name()] = n
	}
	// Only a channel that carries reminders can give notice, and a message
	// counts as delivered once the channels that carry it took it. For the
	// channels of the spec these are the names notify.ChannelNames plans
	// with (the plugin does); channels registered otherwise count too.
	for _, t := range notify.Recorded {
		for _, n := range notifiers {
			if n.Accepts(t) {
				set.names[t] = append(set.names[t], n.Name())
			}
		}
		if len(set.names[t]) == 0 {
			set.names[t] = []string{notify.EventsChannel}
		}
	}
	return set, nil
}

// secretReader reads Secrets straight from the API server: the controller
// neither caches nor watches Secrets, so it needs get on the named ones
// only. With a namespace set, it reads no Secret outside it, so that
// whoever may write a TimeoutPolicy cannot point the controller at other
// teams' credentials.
type secretReader struct {
	reader    client.Reader
	namespace string
}

func (s secretReader) Get(ctx context.Context, namespace, name, key string) ([]byte, error) {
	if s.namespace != "" && namespace != s.namespace {
		return nil, fmt.Errorf("secret %s/%s is outside namespace %s, the only one this controller reads Secrets from", namespace, name, s.namespace)
	}
	secret := &corev1.Secret{}
	if err := s.reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, secret); err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", namespace, name, err)
	}
	v, ok := secret.Data[key]
	if !ok {
		return nil, fmt.Errorf("secret %s/%s has no key %q", namespace, name, key)
	}
	return v, nil
}
