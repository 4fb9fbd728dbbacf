// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package channelset

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/notify/email"
	"github.com/amphitheatre-app/timeout-controller/internal/notify/slack"
	"github.com/amphitheatre-app/timeout-controller/internal/notify/webhook"
)

// ChannelKinds are the kinds of channel the controller sends through, one
// for each of NotificationChannelSpec's email, slack and webhook.
var ChannelKinds = notify.Kinds{email.Kind, slack.Kind, webhook.Kind}

// ChannelsTTL is how long a policy's channels are reused before they are
// built again, which picks up rotated Secrets. A change of a
// NotificationChannel, or of the policy's labels, rebuilds them at once.
const ChannelsTTL = time.Minute

// ChannelSet is a policy's notifiers, by name, and its templates.
type ChannelSet struct {
	// Names are, per recorded message type, the channels that carry it, or
	// notify.EventsChannel when none does.
	Names     map[v1alpha1.EventType][]string
	Notifiers map[string]notify.Notifier
	Templates *notify.Templates
	// emailDomains restricts the addresses an object's notify annotation
	// may name: nil when some e-mail channel of the policy takes any.
	emailDomains []string
	// remindersByAnnotation are, when every channel that carries
	// reminders reaches only the addresses an object's notify annotation
	// names, the allowed domains of each of them (nil for any domain);
	// nil when some channel reaches someone whatever the object says.
	remindersByAnnotation [][]string
	// EmailReminders are the e-mail channels that carry reminders: those
	// an owner's digest may go out over.
	EmailReminders []string
}

// RemindsNobody reports whether nobody can be reminded of an object with
// these annotations, which is then never deleted while the policy owes
// notice: every channel that carries reminders is an e-mail channel the
// policy gives no "to" (a NotificationChannel names no recipients of its
// own), and the object's notify annotation names no e-mail address that
// one of them sends to. An address the annotation's parser refuses, or
// one outside a channel's allowedEmailDomains, reaches nobody through it.
// Slack and webhook channels always reach someone (the incoming webhook's
// own channel, the receiver), an e-mail channel with a "to" reaches those
// addresses, and where no channel carries reminders the Kubernetes Event
// is the reminder. owner is the address of the object's owner when the
// policy tells owners and it has one, else empty: one more address.
func (s *ChannelSet) RemindsNobody(annotations map[string]string, owner string) bool {
	if !s.RemindsOnlyWhomObjectsName() {
		return false
	}
	r, _ := notify.ParseRecipients(annotations[notify.AnnotationNotify], s.AllowedEmailDomains())
	if owner != "" {
		r.Emails = notify.AddEmail(r.Emails, owner)
	}
	for _, domains := range s.remindersByAnnotation {
		for _, a := range r.Emails {
			if notify.AddressAllowed(a, domains) {
				return false
			}
		}
	}
	return true
}

// RemindsOnlyWhomObjectsName reports whether the policy's reminders reach
// only the addresses each object names (remindersByAnnotation).
func (s *ChannelSet) RemindsOnlyWhomObjectsName() bool {
	return s != nil && len(s.remindersByAnnotation) > 0
}

// byAnnotationOnly returns remindersByAnnotation for the channels named
// that carry reminders, out of resolved.
func byAnnotationOnly(names []string, resolved []notify.Channel) [][]string {
	var out [][]string
	for _, name := range names {
		i := slices.IndexFunc(resolved, func(c notify.Channel) bool { return c.Name == name })
		if i < 0 || resolved[i].Spec.Email == nil || len(resolved[i].To) > 0 {
			return nil
		}
		out = append(out, resolved[i].Spec.AllowedEmailDomains)
	}
	return out
}

// AllowedEmailDomains is what ParseRecipients checks the notify annotation
// against. Each e-mail channel checks its own domains again when it sends.
func (s *ChannelSet) AllowedEmailDomains() []string {
	if s == nil {
		return nil
	}
	return s.emailDomains
}

// Channels builds and caches each policy's channels.
type Channels struct {
	// Reader reads NotificationChannels: the manager's cache, which
	// watches them.
	Reader client.Reader
	// Secrets reads the channels' credentials and, through ConfigMaps when
	// it has that method, their CA bundles.
	Secrets notify.Secrets
	Clock   clock.PassiveClock
	// Limiter caps each channel's sends at once; nil means no cap.
	Limiter *notify.Limiter
	// Grants says whether a policy's author may use each channel it
	// names; nil checks nothing (tests and the simulation).
	Grants *Grants
	// Build builds the notifiers of a policy's channels; nil is
	// channelKinds.Build. Tests and the simulation build their own.
	Build func(ctx context.Context, channels []notify.Channel, secrets notify.Secrets) ([]notify.Notifier, error)

	mu    sync.Mutex
	cache map[types.UID]cachedChannels
	// building lets one caller at a time build: when a policy's set
	// expires, every worker misses it at once, and each would otherwise
	// read the Secrets and parse the templates again.
	building sync.Mutex
}

type cachedChannels struct {
	generation int64
	// inputs says which channels, at which resourceVersions, and which
	// policy labels the set was built from.
	inputs string
	built  time.Time
	set    *ChannelSet
	err    error
}

// channelError says why a policy cannot use its channels, with the reason
// its Ready condition gives.
type channelError struct {
	reason string
	err    error
}

func (e *channelError) Error() string { return e.err.Error() }
func (e *channelError) Unwrap() error { return e.err }

// ChannelReason is the Ready reason for err, an error of Channels.get.
func ChannelReason(err error) string {
	if ce, ok := errors.AsType[*channelError](err); ok {
		return ce.reason
	}
	return v1alpha1.ReasonChannelsNotReady
}

// Get returns the channels policy p names. Its error says what is wrong
// with them, without secrets.
func (c *Channels) Get(ctx context.Context, p *v1alpha1.TimeoutPolicy) (*ChannelSet, error) {
	now := c.Clock.Now()
	chans, inputs, err := c.lookup(ctx, p)
	if err != nil {
		return nil, err
	}
	if e, ok := c.cached(p, inputs, now); ok {
		return e.set, e.err
	}
	c.building.Lock()
	defer c.building.Unlock()
	// Built by another caller while this one waited.
	if e, ok := c.cached(p, inputs, now); ok {
		return e.set, e.err
	}

	set, err := c.build(ctx, p, chans)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cache == nil {
		c.cache = map[types.UID]cachedChannels{}
	}
	c.cache[p.UID] = cachedChannels{generation: p.Generation, inputs: inputs, built: now, set: set, err: err}
	return set, err
}

func (c *Channels) cached(p *v1alpha1.TimeoutPolicy, inputs string, now time.Time) (cachedChannels, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cache[p.UID]
	return e, ok && e.generation == p.Generation && e.inputs == inputs && now.Sub(e.built) < ChannelsTTL
}

// lookup reads the NotificationChannels p names. A channel that is missing
// makes the policy unusable, like one it may not use: the controller never
// falls back to sending somewhere else.
func (c *Channels) lookup(ctx context.Context, p *v1alpha1.TimeoutPolicy) ([]*v1alpha1.NotificationChannel, string, error) {
	refs := p.Spec.Notifications.Channels
	if len(refs) == 0 {
		return nil, "", nil
	}
	if c.Reader == nil {
		return nil, "", errors.New("the controller reads no NotificationChannels")
	}
	var (
		out     []*v1alpha1.NotificationChannel
		missing []string
		inputs  strings.Builder
	)
	for _, ref := range refs {
		ch := &v1alpha1.NotificationChannel{}
		if err := c.Reader.Get(ctx, types.NamespacedName{Name: ref.Name}, ch); err != nil {
			if apierrors.IsNotFound(err) {
				missing = append(missing, ref.Name)
				continue
			}
			return nil, "", fmt.Errorf("read NotificationChannel %s: %w", ref.Name, err)
		}
		out = append(out, ch)
		fmt.Fprintf(&inputs, "%s=%s,", ch.Name, ch.ResourceVersion)
	}
	if len(missing) > 0 {
		return nil, "", &channelError{reason: v1alpha1.ReasonChannelNotFound,
			err: fmt.Errorf("NotificationChannel %s does not exist", strings.Join(missing, ", "))}
	}
	inputs.WriteString(labels.Set(p.Labels).String())
	// A new author is asked about afresh.
	inputs.WriteString("," + p.Annotations[v1alpha1.AnnotationAuthor])
	return out, inputs.String(), nil
}

// build checks that p's author may use each of its channels, and p the
// way it asks to, and builds their notifiers.
func (c *Channels) build(ctx context.Context, p *v1alpha1.TimeoutPolicy, chans []*v1alpha1.NotificationChannel) (*ChannelSet, error) {
	templates, err := notify.NewTemplates(p.Spec.Notifications.Templates)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(chans))
	for i, ch := range chans {
		names[i] = ch.Name
	}
	denied, err := c.Grants.refused(ctx, p, names)
	if err != nil {
		return nil, err
	}
	if len(denied) > 0 {
		return nil, &channelError{reason: v1alpha1.ReasonChannelNotGranted, err: notGranted(p, denied)}
	}
	var (
		resolved []notify.Channel
		refused  []error
		errs     []error
		domains  []string
		anyEmail bool
		open     bool
	)
	for i, ref := range p.Spec.Notifications.Channels {
		ch := chans[i]
		if err := permits(ch, p, ref); err != nil {
			refused = append(refused, err)
			continue
		}
		tc, err := ChannelTLS(ctx, ch, c.Secrets)
		if err != nil {
			errs = append(errs, fmt.Errorf("channel %s: %w", ch.Name, err))
			continue
		}
		if ch.Spec.Email != nil {
			anyEmail = true
			open = open || len(ch.Spec.AllowedEmailDomains) == 0
			domains = append(domains, ch.Spec.AllowedEmailDomains...)
		}
		resolved = append(resolved, notify.Channel{Name: ch.Name, Spec: ch.Spec, Events: ref.Events, To: ref.To, TLS: tc})
	}
	if len(refused) > 0 {
		return nil, &channelError{reason: v1alpha1.ReasonChannelRefused, err: errors.Join(refused...)}
	}
	buildNotifiers := c.Build
	if buildNotifiers == nil {
		buildNotifiers = ChannelKinds.Build
	}
	notifiers, err := buildNotifiers(ctx, resolved, c.Secrets)
	if err := errors.Join(append(errs, err)...); err != nil {
		return nil, err
	}
	set := &ChannelSet{Names: map[v1alpha1.EventType][]string{}, Notifiers: map[string]notify.Notifier{}, Templates: templates}
	if anyEmail && !open {
		set.emailDomains = slices.Compact(slices.Sorted(slices.Values(domains)))
	}
	for _, n := range notifiers {
		set.Notifiers[n.Name()] = c.Limiter.Limit(n)
	}
	// Only a channel that carries reminders can give notice, and a message
	// counts as delivered once the channels that carry it took it. These
	// are the names notify.ChannelNames plans with (the plugin does).
	for _, t := range notify.Recorded {
		for _, n := range notifiers {
			if n.Accepts(t) {
				set.Names[t] = append(set.Names[t], n.Name())
			}
		}
		if len(set.Names[t]) == 0 {
			set.Names[t] = []string{notify.EventsChannel}
		}
	}
	set.remindersByAnnotation = byAnnotationOnly(set.Names[v1alpha1.EventReminder], resolved)
	for _, name := range set.Names[v1alpha1.EventReminder] {
		if slices.ContainsFunc(resolved, func(c notify.Channel) bool { return c.Name == name && c.Spec.Email != nil }) {
			set.EmailReminders = append(set.EmailReminders, name)
		}
	}
	return set, nil
}

// permits reports why channel ch refuses to be used by policy p as ref
// asks, or nil.
func permits(ch *v1alpha1.NotificationChannel, p *v1alpha1.TimeoutPolicy, ref v1alpha1.ChannelReference) error {
	if ch.Spec.PolicySelector != nil {
		sel, err := match.Selector(ch.Spec.PolicySelector)
		if err != nil {
			return fmt.Errorf("NotificationChannel %s: spec.policySelector: %w", ch.Name, err)
		}
		if !sel.Matches(labels.Set(p.Labels)) {
			return fmt.Errorf("NotificationChannel %s does not let policy %s use it: its policySelector does not match the policy's labels", ch.Name, p.Name)
		}
	}
	if len(ref.To) > 0 && ch.Spec.Email == nil {
		return fmt.Errorf("NotificationChannel %s is not an e-mail channel; to is only for e-mail channels", ch.Name)
	}
	for _, a := range ref.To {
		if !notify.AddressAllowed(a, ch.Spec.AllowedEmailDomains) {
			return fmt.Errorf("NotificationChannel %s does not send to %q: it is outside the channel's allowed domains (%s)",
				ch.Name, a, strings.Join(ch.Spec.AllowedEmailDomains, ", "))
		}
	}
	return nil
}

// configMapReader reads keys of ConfigMaps; the controller's secretReader does.
type configMapReader interface {
	ConfigMap(ctx context.Context, namespace, name, key string) ([]byte, error)
}

// ChannelTLS is how channel ch verifies its server, or nil for the
// defaults. Its CA bundle is trusted for this channel only.
func ChannelTLS(ctx context.Context, ch *v1alpha1.NotificationChannel, secrets notify.Secrets) (*tls.Config, error) {
	spec := ch.Spec.TLS
	if spec == nil {
		return nil, nil
	}
	tc := &tls.Config{ServerName: spec.ServerName, MinVersion: tls.VersionTLS12}
	// Only the administrator who owns the channel can set this, and the
	// channel then says so in its Insecure condition.
	tc.InsecureSkipVerify = spec.InsecureSkipVerify //nolint:gosec // explicit, per channel, reported
	b := spec.CABundle
	if b == nil {
		return tc, nil
	}
	var (
		pem   []byte
		where string
		err   error
	)
	switch {
	case b.ConfigMapRef != nil:
		r := b.ConfigMapRef
		where = fmt.Sprintf("ConfigMap %s/%s key %q", r.Namespace, r.Name, r.Key)
		cm, ok := secrets.(configMapReader)
		if !ok {
			return nil, fmt.Errorf("CA bundle from %s: the controller reads no ConfigMaps", where)
		}
		pem, err = cm.ConfigMap(ctx, r.Namespace, r.Name, r.Key)
	case b.SecretRef != nil:
		r := b.SecretRef
		where = fmt.Sprintf("Secret %s/%s key %q", r.Namespace, r.Name, r.Key)
		pem, err = secrets.Get(ctx, r.Namespace, r.Name, r.Key)
	default:
		return nil, errors.New("tls.caBundle names neither a ConfigMap nor a Secret")
	}
	if err != nil {
		return nil, fmt.Errorf("CA bundle from %s: %w", where, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA bundle in %s holds no PEM certificate", where)
	}
	tc.RootCAs = pool
	return tc, nil
}

// SecretReader reads Secrets, and the ConfigMaps that hold CA bundles,
// straight from the API server: the controller neither caches nor watches
// them, so it needs get on the named ones only. With a namespace set, it
// reads nothing outside it.
type SecretReader struct {
	Reader    client.Reader
	Namespace string
}

func (s SecretReader) Get(ctx context.Context, namespace, name, key string) ([]byte, error) {
	if s.Namespace != "" && namespace != s.Namespace {
		return nil, fmt.Errorf("secret %s/%s is outside namespace %s, the only one this controller reads Secrets from", namespace, name, s.Namespace)
	}
	secret := &corev1.Secret{}
	if err := s.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, secret); err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", namespace, name, err)
	}
	v, ok := secret.Data[key]
	if !ok {
		return nil, missingKey{fmt.Sprintf("secret %s/%s has no key %q", namespace, name, key)}
	}
	return v, nil
}

// missingKey says that a Secret lacks a key: notify.ErrKeyNotFound, in
// words that name the Secret and the key.
type missingKey struct{ msg string }

func (e missingKey) Error() string        { return e.msg }
func (e missingKey) Is(target error) bool { return target == notify.ErrKeyNotFound }

// ConfigMap returns the value of key in ConfigMap namespace/name.
func (s SecretReader) ConfigMap(ctx context.Context, namespace, name, key string) ([]byte, error) {
	if s.Namespace != "" && namespace != s.Namespace {
		return nil, fmt.Errorf("configmap %s/%s is outside namespace %s, the only one this controller reads CA bundles from", namespace, name, s.Namespace)
	}
	cm := &corev1.ConfigMap{}
	if err := s.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, cm); err != nil {
		return nil, fmt.Errorf("read ConfigMap %s/%s: %w", namespace, name, err)
	}
	if v, ok := cm.Data[key]; ok {
		return []byte(v), nil
	}
	if v, ok := cm.BinaryData[key]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("configmap %s/%s has no key %q", namespace, name, key)
}

// Reserve takes a slot of each named channel for the message about to be
// sent, so that a worker whose channels are all busy costs the API server
// nothing (the title's read comes after). It returns the set to send
// with, in which the reserved channels give their slot back when they
// send; the names it reserved, in their order; those that were busy; and
// a release for the slots of messages not sent after all.
func (s *ChannelSet) Reserve(names []string) (held *ChannelSet, reserved, busy []string, release func()) {
	held = &ChannelSet{Names: s.Names, Notifiers: maps.Clone(s.Notifiers), Templates: s.Templates, emailDomains: s.emailDomains}
	var releases []func()
	for _, name := range names {
		n, ok := s.Notifiers[name]
		if !ok {
			// The Kubernetes Event: never busy.
			reserved = append(reserved, name)
			continue
		}
		h, rel, ok := notify.Reserve(n)
		if !ok {
			busy = append(busy, name)
			continue
		}
		held.Notifiers[name] = h
		reserved = append(reserved, name)
		releases = append(releases, rel)
	}
	return held, reserved, busy, func() {
		for _, rel := range releases {
			rel()
		}
	}
}
