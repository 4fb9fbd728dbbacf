// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package notify tells people what happens to their objects: the Notifier interface, the kinds of channel, messages and templates.
package notify

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"k8s.io/apimachinery/pkg/api/resource"
	"slices"
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
	// ExpiresAt is the time the message announces: for a reminder, an
	// extension or a postponement, the time of deletion (the expiry, or
	// later for the notice owed); for a sleeping message, the time of the
	// sleep; for the others, the expiry (docs/guides/webhooks.md#event-types).
	ExpiresAt time.Time
	// Stage is the reminder's lead time ("3d") for reminders, empty otherwise.
	Stage  string
	Policy string
	// Detail says why, for deletion-failed and postponed messages.
	Detail     string
	Recipients Recipients
	// Extend tells the reader how to extend the object.
	Extend string
	// Reclaimed is what the namespaces the object owned held when it was
	// deleted, for deleted messages; nil when it owned none.
	Reclaimed *Reclaimed
	// Digest, when set, makes the message an owner's digest: one reminder
	// stage about several objects, to the owner alone (Recipients.Emails).
	// Object is then the first of them.
	Digest *Digest
	// Linker, when set, signs the links each recipient's copy carries
	// (Content.For); nil without --actions-url. Never stored.
	Linker Linker `json:"-"`
	// Actions are the links of the recipient of this copy, which
	// Content.For sets: the object's, or, for a digest, the owner's page.
	// Nil in a message without links. Never stored.
	Actions *Links `json:"-"`
}

// Digest is the reminder stage Stage about several objects of one owner.
type Digest struct {
	Stage string
	Items []DigestItem
	// Owner is the owner's name as the owner annotation gives it, whose
	// page the digest's links open; empty when unknown.
	Owner string
}

// DigestItem is one object of a digest: when it will be deleted and how
// to keep it.
type DigestItem struct {
	Object    Object
	ExpiresAt time.Time
	Extend    string
	// Actions are the object's links for the digest's recipient, which
	// Content.For sets; nil without links.
	Actions *Links `json:"-"`
}

// Reclaimed is what a deleted object's namespaces held just before the
// delete: what garbage collection then removes.
type Reclaimed struct {
	// Namespaces are the namespaces the object owned.
	Namespaces []string `json:"namespaces"`
	// Objects counts the Pods and the objects of the counted kinds
	// (Deployments, StatefulSets, ReplicaSets, Jobs, Services,
	// PersistentVolumeClaims, Actors) in them.
	Objects int `json:"objects"`
	Pods    int `json:"pods"`
	// CPUMillis and MemoryBytes are the Pods' requests.
	CPUMillis   int64 `json:"cpuMillis"`
	MemoryBytes int64 `json:"memoryBytes"`
}

// String says what r counts, for people: "1 namespace, 9 objects (3 Pods),
// 1 CPU and 1Gi of memory requested".
func (r *Reclaimed) String() string {
	if r == nil {
		return ""
	}
	cpu := resource.NewMilliQuantity(r.CPUMillis, resource.DecimalSI)
	mem := resource.NewQuantity(r.MemoryBytes, resource.BinarySI)
	return fmt.Sprintf("%s, %s (%s), %s CPU and %s of memory requested",
		Plural(len(r.Namespaces), "namespace"), Plural(r.Objects, "object"), Plural(r.Pods, "Pod"), cpu, mem)
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
	// templates rendered it, and render each recipient's copy with its
	// links (For).
	templates *Templates
}

// Notifier delivers messages over one channel.
type Notifier interface {
	// Name identifies the channel in delivery records, logs and Events;
	// Build names each notifier after its NotificationChannel.
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
	// name the Secret and key, never a value; a Secret without the key
	// is an error that errors.Is ErrKeyNotFound.
	Get(ctx context.Context, namespace, name, key string) ([]byte, error)
}

// ErrKeyNotFound is what Secrets.Get reports for a Secret without the key
// asked for, which an optional key (a Slack app's signing secret) may be.
var ErrKeyNotFound = errors.New("no such key in the Secret")

// Channel is one NotificationChannel as one policy uses it: what its
// administrator wrote, and what the policy chose.
type Channel struct {
	// Name is the NotificationChannel's name, and the Notifier's.
	Name string
	Spec v1alpha1.NotificationChannelSpec
	// Events the policy sends through the channel; every type when empty.
	Events []v1alpha1.EventType
	// To receive every e-mail, besides the addresses a message names.
	To []string
	// TLS verifies the channel's server (its CA bundle and server name);
	// nil means the system roots and the endpoint's host.
	TLS *tls.Config
}

// Factory builds the notifier of a channel of its kind, reading the
// channel's Secrets; it returns nil and no error for a channel of another
// kind.
type Factory func(ctx context.Context, ch Channel, secrets Secrets) (Notifier, error)

// Kind is one kind of channel: the field of NotificationChannelSpec it
// reads, and how its notifiers are built.
type Kind struct {
	// Name is the field's name ("email"); errors say which kind failed.
	Name  string
	Build Factory
}

// Kinds are the kinds of channel a controller can send through. There is
// no registry to add to: whoever builds channels says which kinds.
type Kinds []Kind

// Build returns the notifiers of channels, in their order, each named
// after its channel and taking only the events the policy chose. Exactly
// one of ks must build each channel. It reports every channel that cannot
// be built, not only the first, so that one look at the policy's status
// is enough to fix them all.
func (ks Kinds) Build(ctx context.Context, channels []Channel, secrets Secrets) ([]Notifier, error) {
	var (
		out  []Notifier
		errs []error
	)
	for _, ch := range channels {
		var built []Notifier
		var chErrs []error
		for _, k := range ks {
			n, err := k.Build(ctx, ch, secrets)
			if err != nil {
				chErrs = append(chErrs, fmt.Errorf("%s: %w", k.Name, err))
				continue
			}
			if n != nil {
				built = append(built, n)
			}
		}
		switch {
		case len(chErrs) > 0:
			errs = append(errs, fmt.Errorf("channel %s: %w", ch.Name, errors.Join(chErrs...)))
		case len(built) != 1:
			errs = append(errs, fmt.Errorf("channel %s: %d kinds of channel claim it, want exactly one", ch.Name, len(built)))
		default:
			out = append(out, named{Notifier: built[0], name: ch.Name, events: ch.Events})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// named is a channel's notifier as one policy uses it: called after the
// NotificationChannel, and subscribed to the events the policy chose.
type named struct {
	Notifier
	name   string
	events []v1alpha1.EventType
}

func (n named) Name() string { return n.name }

func (n named) Accepts(t v1alpha1.EventType) bool {
	return Subscribed(n.events, t) && n.Notifier.Accepts(t)
}

// Subscribed reports whether a channel configured with events accepts t:
// an empty list means every event type.
func Subscribed(events []v1alpha1.EventType, t v1alpha1.EventType) bool {
	return len(events) == 0 || slices.Contains(events, t)
}

// EventsChannel names the Kubernetes Event in the record, the audit trail
// and the metrics; it counts as the message only for a message type no
// channel of the policy carries. A NotificationChannel cannot be called
// that.
const EventsChannel = "events"

// Recorded are the message types whose deliveries the record on the
// object keeps.
var Recorded = []v1alpha1.EventType{v1alpha1.EventReminder, v1alpha1.EventExtended, v1alpha1.EventPostponed, v1alpha1.EventWouldDelete, v1alpha1.EventSleeping, v1alpha1.EventSlept, v1alpha1.EventWoke}

// ChannelNames returns, per recorded message type, the names of the
// channels spec names that carry it (the names their Notifiers have), or
// EventsChannel when none does. It reads no channel and no Secret: the
// controller and the plugin both plan from it. It knows no kind of
// channel: Kinds.Build names every notifier after its channel and
// subscribes it as the policy chose, whatever its kind, and each kind's
// notifiers carry every message type (the controller's tests check this
// for each kind it lists).
func ChannelNames(spec v1alpha1.Notifications) map[v1alpha1.EventType][]string {
	out := map[v1alpha1.EventType][]string{}
	for _, t := range Recorded {
		var names []string
		for _, c := range spec.Channels {
			if Subscribed(c.Events, t) {
				names = append(names, c.Name)
			}
		}
		if len(names) == 0 {
			names = []string{EventsChannel}
		}
		out[t] = names
	}
	return out
}
