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
// keysInterval, and at once (at most every keysRetry) when a link names a
// key it lacks, so that a key the controller just added works at once.
type keys struct {
	reader client.Reader
	secret types.NamespacedName
	clock  clock.PassiveClock

	mu   sync.Mutex
	ring *Keyring
	read time.Time
}

const (
	keysInterval = time.Minute
	keysRetry    = 5 * time.Second
)

// get returns the keyring, read again when it is old or when fresh says a
// link named a key it lacks.
func (k *keys) get(ctx context.Context, fresh bool) (*Keyring, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	age := k.clock.Since(k.read)
	if k.ring != nil && age < keysInterval && (!fresh || age < keysRetry) {
		return k.ring, nil
	}
	var s corev1.Secret
	err := k.reader.Get(ctx, k.secret, &s)
	if err == nil {
		var ring *Keyring
		if ring, err = KeyringFromSecret(&s); err == nil {
			k.ring, k.read = ring, k.clock.Now()
			return ring, nil
		}
	}
	if k.ring != nil {
		// Keep serving with the keys last read: a Secret briefly
		// unreadable must not break every link.
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

// defaultLinkStep is a link's step under a policy that names none and has
// no extension step either.
const defaultLinkStep = 24 * time.Hour

// linkRulesOf reads spec.actions of a policy (issue 33): extendBy, else
// spec.extensions.maxStep, else a day, never past maxStep; deleteNow
// Allowed. It reads the policy as unstructured, since the API types of
// spec.actions come with the controller's side of the links.
func linkRulesOf(u *unstructured.Unstructured) linkRules {
	var r linkRules
	var maxStep time.Duration
	if v, ok, _ := unstructured.NestedString(u.Object, "spec", "extensions", "maxStep"); ok {
		maxStep, _ = expiry.ParseDuration(v)
	}
	if v, ok, _ := unstructured.NestedString(u.Object, "spec", "actions", "extendBy"); ok {
		r.step, _ = expiry.ParseDuration(v)
	}
	if r.step <= 0 {
		r.step = maxStep
	}
	if r.step <= 0 {
		r.step = defaultLinkStep
	}
	if maxStep > 0 {
		r.step = min(r.step, maxStep)
	}
	v, _, _ := unstructured.NestedString(u.Object, "spec", "actions", "deleteNow")
	r.deleteNow = v == "Allowed"
	return r
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
	links           linkRules
}

// policyList is the TimeoutPolicies, and what each lets links do, by name.
type policyList struct {
	items []v1alpha1.TimeoutPolicy
	links map[string]linkRules
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
	out := policyList{items: make([]v1alpha1.TimeoutPolicy, 0, len(list.Items)), links: make(map[string]linkRules, len(list.Items))}
	seen := make(map[types.UID]bool, len(list.Items))
	for i := range list.Items {
		u := &list.Items[i]
		seen[u.GetUID()] = true
		c, ok := p.memo[u.GetUID()]
		if !ok || c.resourceVersion != u.GetResourceVersion() || u.GetResourceVersion() == "" {
			c = convertedPolicy{resourceVersion: u.GetResourceVersion(), links: linkRulesOf(u)}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c.policy); err != nil {
				return policyList{}, fmt.Errorf("read TimeoutPolicy %s: %w", u.GetName(), err)
			}
			p.memo[u.GetUID()] = c
		}
		out.items = append(out.items, c.policy)
		out.links[c.policy.Name] = c.links
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
	defer s.mu.Unlock()
	if !s.read.IsZero() && s.clock.Since(s.read) < slackInterval {
		return s.secrets
	}
	s.read = s.clock.Now()
	var channels v1alpha1.NotificationChannelList
	if err := s.reader.List(ctx, &channels); err != nil {
		return s.secrets
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
	s.secrets = out
	return out
}
