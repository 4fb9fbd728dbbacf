// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package actions

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// keys keeps the keyring, read from its Secret: again after every
// keysInterval (in the background, the old keyring serving meanwhile), and
// at once (at most every keysRetry) when a link names a key it lacks, so
// that a key the controller just added works at once. No lock is held
// while the API server is asked, so a slow API server delays only the
// request that must wait for the Secret.
type keys struct {
	reader client.Reader
	secret types.NamespacedName
	clock  clock.PassiveClock

	mu         sync.Mutex
	ring       *Keyring
	read       time.Time
	refreshing bool
}

const (
	keysInterval = time.Minute
	keysRetry    = 5 * time.Second
)

// get returns the keyring, read again when it is old or when fresh says a
// link named a key it lacks.
func (k *keys) get(ctx context.Context, fresh bool) (*Keyring, error) {
	k.mu.Lock()
	ring, age := k.ring, k.clock.Since(k.read)
	stale := ring != nil && age >= keysInterval && !fresh && !k.refreshing
	if stale {
		k.refreshing = true
	}
	k.mu.Unlock()
	switch {
	case ring != nil && age < keysInterval && (!fresh || age < keysRetry):
		return ring, nil
	case stale:
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), DefaultAPITimeout)
			defer cancel()
			_, _ = k.refresh(ctx)
		}()
		return ring, nil
	case ring != nil && !fresh:
		// Another request is reading it already.
		return ring, nil
	}
	return k.refresh(ctx)
}

// refresh reads the Secret. When it cannot, the keys last read go on
// serving: a Secret briefly unreadable must not break every link.
func (k *keys) refresh(ctx context.Context) (*Keyring, error) {
	var s corev1.Secret
	err := k.reader.Get(ctx, k.secret, &s)
	var ring *Keyring
	if err == nil {
		ring, err = KeyringFromSecret(&s)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.refreshing = false
	if err == nil {
		k.ring, k.read = ring, k.clock.Now()
		return ring, nil
	}
	if k.ring != nil {
		k.read = k.clock.Now()
		return k.ring, nil
	}
	return nil, fmt.Errorf("read the links keyring %s: %w", k.secret, err)
}

// verify reads a token with the keyring, reading the Secret again when the
// token names a key the keyring lacks.
func (k *keys) verify(ctx context.Context, token string, now time.Time) (*Keyring, Claims, string, error) {
	ring, err := k.get(ctx, false)
	if err != nil {
		return nil, Claims{}, "", err
	}
	c, stamp, err := ring.verify(token, now)
	if errors.Is(err, ErrUnknownKey) {
		if ring, err = k.get(ctx, true); err != nil {
			return nil, Claims{}, "", err
		}
		c, stamp, err = ring.verify(token, now)
	}
	return ring, c, stamp, err
}

// linkRules are what a policy lets links do.
type linkRules struct {
	// step is how far "keep it longer" moves the expiry.
	step time.Duration
	// deleteNow says links may delete the object now.
	deleteNow bool
}

// linkRulesFor is what schedule s, a policy's, lets links do: the step of
// spec.actions.extendBy (Schedule.LinkStep) and spec.actions.deleteNow.
func linkRulesFor(s expiry.Schedule) linkRules {
	return linkRules{step: s.LinkStep(), deleteNow: s.DeleteNow}
}

// policies reads the TimeoutPolicies (from a cache), converting each
// version of a policy once.
type policies struct {
	reader client.Reader

	mu   sync.Mutex
	memo map[types.UID]convertedPolicy
}

type convertedPolicy struct {
	resourceVersion string
	policy          v1alpha1.TimeoutPolicy
}

// policyList is the TimeoutPolicies.
type policyList struct {
	items []v1alpha1.TimeoutPolicy
}

func (p *policies) list(ctx context.Context) (policyList, error) {
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("TimeoutPolicyList"))
	if err := p.reader.List(ctx, &list); err != nil {
		return policyList{}, fmt.Errorf("list TimeoutPolicies: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.memo == nil {
		p.memo = map[types.UID]convertedPolicy{}
	}
	out := policyList{items: make([]v1alpha1.TimeoutPolicy, 0, len(list.Items))}
	seen := make(map[types.UID]bool, len(list.Items))
	for i := range list.Items {
		u := &list.Items[i]
		seen[u.GetUID()] = true
		c, ok := p.memo[u.GetUID()]
		if !ok || c.resourceVersion != u.GetResourceVersion() || u.GetResourceVersion() == "" {
			c = convertedPolicy{resourceVersion: u.GetResourceVersion()}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c.policy); err != nil {
				return policyList{}, fmt.Errorf("read TimeoutPolicy %s: %w", u.GetName(), err)
			}
			p.memo[u.GetUID()] = c
		}
		out.items = append(out.items, c.policy)
	}
	for uid := range p.memo {
		if !seen[uid] {
			delete(p.memo, uid)
		}
	}
	return out, nil
}

// namespaceLabels returns the labels of a namespace, read as metadata.
func namespaceLabels(ctx context.Context, r client.Reader, name string) func() (map[string]string, error) {
	return func() (map[string]string, error) {
		var ns metav1.PartialObjectMetadata
		ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
		if err := r.Get(ctx, types.NamespacedName{Name: name}, &ns); err != nil {
			return nil, fmt.Errorf("read namespace %s: %w", name, err)
		}
		return ns.GetLabels(), nil
	}
}

// slackSecrets keeps the signing secrets of the Slack NotificationChannels
// (the key signingSecret of the Secret each names), read again after
// slackInterval.
type slackSecrets struct {
	reader client.Reader
	// namespace is the only one the Secrets may be in (--secret-namespace);
	// empty allows any.
	namespace string
	clock     clock.PassiveClock

	mu      sync.Mutex
	secrets [][]byte
	read    time.Time
}

const (
	slackInterval = time.Minute
	// SlackSigningSecretKey is the key of a Slack channel's Secret that
	// holds the Slack app's signing secret.
	SlackSigningSecretKey = "signingSecret"
)

func (s *slackSecrets) get(ctx context.Context) [][]byte {
	s.mu.Lock()
	secrets, fresh := s.secrets, !s.read.IsZero() && s.clock.Since(s.read) < slackInterval
	s.mu.Unlock()
	if fresh {
		return secrets
	}
	var channels v1alpha1.NotificationChannelList
	if err := s.reader.List(ctx, &channels); err != nil {
		return secrets
	}
	var out [][]byte
	for _, ch := range channels.Items {
		if ch.Spec.Slack == nil {
			continue
		}
		ref := ch.Spec.Slack.WebhookURLSecretRef
		if s.namespace != "" && ref.Namespace != s.namespace {
			continue
		}
		var sec corev1.Secret
		if err := s.reader.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, &sec); err != nil {
			continue
		}
		if v := sec.Data[SlackSigningSecretKey]; len(v) > 0 {
			out = append(out, v)
		}
	}
	s.mu.Lock()
	s.secrets, s.read = out, s.clock.Now()
	s.mu.Unlock()
	return out
}
