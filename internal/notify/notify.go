// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package notify tells people what happens to their objects: the Notifier interface, the channel registry, messages and templates.
package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// CloudEventTypePrefix starts the CloudEvents type of every event type.
const CloudEventTypePrefix = "app.amphitheatre.timeout."

// CloudEventType is the CloudEvents "type" of t.
func CloudEventType(t v1alpha1.EventType) string {
	return CloudEventTypePrefix + string(t)
}

// Object describes the governed object a message is about.
type Object struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Name       string    `json:"name"`
	Namespace  string    `json:"namespace,omitempty"`
	UID        types.UID `json:"uid"`
	// Title is a Playbook's spec.title, when the object has one.
	Title string `json:"title,omitempty"`
}

// Recipients are the people an object's notify annotation names.
type Recipients struct {
	Emails        []string
	SlackChannels []string
}

// Message is one notification: what happened to which object, and for whom.
type Message struct {
	// ID is the same for the same object, expiry, event type and stage,
	// so that receivers can drop duplicates.
	ID   string
	Type v1alpha1.EventType
	// Time is when the controller decided to send it.
	Time   time.Time
	Object Object
	// ExpiresAt is the expiry the message is about; for a postponement,
	// the new time of deletion.
	ExpiresAt time.Time
	// Stage is the reminder's lead time ("3d") for reminders, empty otherwise.
	Stage  string
	Policy string
	// Detail says why, for deletion-failed and postponed messages.
	Detail     string
	Recipients Recipients
	// Extend tells the reader how to extend the object.
	Extend string
}

// NewID returns the message ID for an object, expiry, event type and stage.
func NewID(uid types.UID, expiresAt time.Time, t v1alpha1.EventType, stage string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%s", uid, expiresAt.UTC().Format(time.RFC3339Nano), t, stage))
	return hex.EncodeToString(sum[:16])
}

// Content is a message rendered for people: subject and bodies.
type Content struct {
	Subject string
	Text    string
	HTML    string
}

// Notifier delivers messages over one channel.
type Notifier interface {
	// Name identifies the channel in delivery records, logs and Events:
	// "email", "slack", "webhook/<name>".
	Name() string
	// Accepts reports whether the channel subscribes to event type t.
	Accepts(t v1alpha1.EventType) bool
	// Send delivers m. An error means the channel did not accept it; the
	// caller retries. Errors never contain secrets.
	Send(ctx context.Context, m Message, c Content) error
}

// Secrets reads keys of Secrets for the channels' credentials.
type Secrets interface {
	// Get returns the value of key in Secret namespace/name. Its errors
	// name the Secret and key, never a value.
	Get(ctx context.Context, namespace, name, key string) ([]byte, error)
}

// Factory builds the notifiers a policy's notifications configure for one
// kind of channel; none when the policy does not configure that kind.
type Factory func(ctx context.Context, spec v1alpha1.Notifications, secrets Secrets) ([]Notifier, error)

var (
	mu        sync.RWMutex
	factories = map[string]Factory{}
)

// Register makes a kind of channel available. Channel packages call it
// from init; registering a kind twice panics.
func Register(kind string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := factories[kind]; dup {
		panic("notify: channel " + kind + " registered twice")
	}
	factories[kind] = f
}

// Build returns every notifier spec configures, across registered kinds,
// in a stable order. It stops at the first kind that fails.
func Build(ctx context.Context, spec v1alpha1.Notifications, secrets Secrets) ([]Notifier, error) {
	mu.RLock()
	kinds := make([]string, 0, len(factories))
	for k := range factories {
		kinds = append(kinds, k)
	}
	mu.RUnlock()
	sort.Strings(kinds)
	var out []Notifier
	for _, k := range kinds {
		mu.RLock()
		f := factories[k]
		mu.RUnlock()
		ns, err := f(ctx, spec, secrets)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out = append(out, ns...)
	}
	return out, nil
}

// Subscribed reports whether a channel configured with events accepts t:
// an empty list means every event type.
func Subscribed(events []v1alpha1.EventType, t v1alpha1.EventType) bool {
	return len(events) == 0 || slices.Contains(events, t)
}

// The names of the channels: what Notifier.Name returns, and what the
// record, the audit trail and the metrics call them. EventsChannel is the
// Kubernetes Event, which counts as the message only for a message type no
// configured channel carries.
const (
	ChannelEmail  = "email"
	ChannelSlack  = "slack"
	EventsChannel = "events"
)

// WebhookChannel is the name of the webhook called name.
func WebhookChannel(name string) string { return "webhook/" + name }

// Recorded are the message types whose deliveries the record on the
// object keeps.
var Recorded = []v1alpha1.EventType{v1alpha1.EventReminder, v1alpha1.EventExtended, v1alpha1.EventPostponed, v1alpha1.EventWouldDelete}

// ChannelNames returns, per recorded message type, the names of the
// channels spec configures that carry it ("email", "slack",
// "webhook/<name>", the names their Notifiers have), or EventsChannel when
// none does. It reads no Secret: the controller and the plugin both plan
// from it.
func ChannelNames(spec v1alpha1.Notifications) map[v1alpha1.EventType][]string {
	out := map[v1alpha1.EventType][]string{}
	for _, t := range Recorded {
		var names []string
		if spec.Email != nil && Subscribed(spec.Email.Events, t) {
			names = append(names, ChannelEmail)
		}
		if spec.Slack != nil && Subscribed(spec.Slack.Events, t) {
			names = append(names, ChannelSlack)
		}
		for _, w := range spec.Webhooks {
			if Subscribed(w.Events, t) {
				names = append(names, WebhookChannel(w.Name))
			}
		}
		if len(names) == 0 {
			names = []string{EventsChannel}
		}
		out[t] = names
	}
	return out
}
