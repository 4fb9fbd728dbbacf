// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import "k8s.io/apimachinery/pkg/runtime"

// EventType names something that happens to a governed object and that
// people can be told about.
// +kubebuilder:validation:Enum=reminder;expired;deleted;deletion-failed;extended;would-delete;postponed;sleeping;slept;woke
type EventType string

// The event types. Adding one means adding a constant here (and to the
// Enum above), a default template in internal/notify, and a row to the
// tables of event types of docs/guides/notifications.md and
// docs/guides/webhooks.md (`make docs-check` fails until then).
const (
	EventReminder EventType = "reminder"
	EventExpired  EventType = "expired"
	// EventDeleted: the API server accepted the delete. The object may
	// stay in Terminating until its finalizers have run.
	EventDeleted        EventType = "deleted"
	EventDeletionFailed EventType = "deletion-failed"
	EventExtended       EventType = "extended"
	EventWouldDelete    EventType = "would-delete"
	EventPostponed      EventType = "postponed"
	// EventSleeping: the object goes to sleep soon (spec.sleep.reminder);
	// EventSlept: it was put to sleep; EventWoke: it woke.
	EventSleeping EventType = "sleeping"
	EventSlept    EventType = "slept"
	EventWoke     EventType = "woke"
)

// EventTypes lists every event type.
var EventTypes = []EventType{
	EventReminder, EventExpired, EventDeleted, EventDeletionFailed, EventExtended, EventWouldDelete, EventPostponed,
	EventSleeping, EventSlept, EventWoke,
}

// SecretKeySelector names one key of a Secret.
type SecretKeySelector struct {
	// Namespace of the Secret: the one the controller reads Secrets from
	// (--secret-namespace, its own by default).
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Key of the Secret's data that holds the value.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// SecretReference names a Secret.
type SecretReference struct {
	// Namespace of the Secret: the one the controller reads Secrets from
	// (--secret-namespace, its own by default).
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// Notifications says who is told, and how, before and after an object
// expires. Kubernetes Events are always recorded as well. Where messages go
// is the business of the NotificationChannels the policy names.
//
// The inline channels of earlier builds (email, slack, webhooks,
// allowedEmailDomains) stay in the schema only to be refused: without
// them, an API server applying an old policy without strict field
// validation (client-go's default) would drop them and the policy would
// give notice by Events alone.
// +kubebuilder:validation:XValidation:rule="!has(self.email)",message="notifications.email was removed: the SMTP server is now a NotificationChannel that the policy names under notifications.channels (see docs/guides/upgrade.md)"
// +kubebuilder:validation:XValidation:rule="!has(self.slack)",message="notifications.slack was removed: the Slack webhook is now a NotificationChannel that the policy names under notifications.channels (see docs/guides/upgrade.md)"
// +kubebuilder:validation:XValidation:rule="!has(self.webhooks)",message="notifications.webhooks was removed: each receiver is now a NotificationChannel that the policy names under notifications.channels (see docs/guides/upgrade.md)"
// +kubebuilder:validation:XValidation:rule="!has(self.allowedEmailDomains)",message="notifications.allowedEmailDomains was removed: it is now a field of the e-mail NotificationChannel (see docs/guides/upgrade.md)"
type Notifications struct {
	// Channels are the NotificationChannels this policy's messages go to.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	// +optional
	Channels []ChannelReference `json:"channels,omitempty"`

	// Owner also sends every message about an object to its owner (the
	// timeout.amphitheatre.app/owner annotation, which the owner admission
	// policy stamps with the creator's username), through the policy's
	// e-mail channels that carry the message, at the address the
	// controller's --owner-addresses ConfigMap gives for that username,
	// else at the username itself when it is an e-mail address. An owner
	// with no address gets nothing and is reported once, in an
	// OwnerUnreachable Warning Event.
	// +optional
	Owner bool `json:"owner,omitempty"`

	// Templates override the default subject and bodies per event type.
	// +listType=map
	// +listMapKey=event
	// +optional
	Templates []MessageTemplate `json:"templates,omitempty"`

	// Email is refused: the inline e-mail channel of earlier builds, now a
	// NotificationChannel.
	//
	// Deprecated: name a NotificationChannel under channels.
	// +optional
	Email *runtime.RawExtension `json:"email,omitempty"`

	// Slack is refused: the inline Slack channel of earlier builds, now a
	// NotificationChannel.
	//
	// Deprecated: name a NotificationChannel under channels.
	// +optional
	Slack *runtime.RawExtension `json:"slack,omitempty"`

	// Webhooks is refused: the inline webhook receivers of earlier builds,
	// now one NotificationChannel each.
	//
	// Deprecated: name NotificationChannels under channels.
	// +optional
	Webhooks []runtime.RawExtension `json:"webhooks,omitempty"`

	// AllowedEmailDomains is refused: it is now a field of the e-mail
	// NotificationChannel.
	//
	// Deprecated: set allowedEmailDomains on the NotificationChannel.
	// +optional
	AllowedEmailDomains []string `json:"allowedEmailDomains,omitempty"`
}

// ChannelReference names a NotificationChannel and says what this policy
// sends through it.
type ChannelReference struct {
	// Name of the NotificationChannel.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Events this policy sends through the channel; every event type when
	// empty.
	// +optional
	Events []EventType `json:"events,omitempty"`

	// To are addresses that receive every message of an e-mail channel,
	// besides the ones the object's notify annotation names. They must be
	// in the channel's allowed domains.
	// +kubebuilder:validation:MaxItems=50
	// +optional
	To []string `json:"to,omitempty"`
}

// MessageTemplate overrides the messages of one event type. Each field is
// a Go text/template (html/template for HTML) executed with the message;
// an empty field keeps the default.
type MessageTemplate struct {
	// Event is the event type whose messages the template overrides.
	Event EventType `json:"event"`
	// Subject of the e-mail, and the header and notification text of a
	// Slack message.
	// +optional
	Subject string `json:"subject,omitempty"`
	// Text is the plain-text body of the e-mail.
	// +optional
	Text string `json:"text,omitempty"`
	// HTML replaces the whole HTML part of the e-mail; without it, the
	// HTML part is built from the text.
	// +optional
	HTML string `json:"html,omitempty"`
}
