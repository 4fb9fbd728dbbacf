// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

// EventType names something that happens to a governed object and that
// people can be told about.
// +kubebuilder:validation:Enum=reminder;expired;deleted;deletion-failed;extended;would-delete;postponed
type EventType string

// The event types. Adding one means adding a constant here (and to the
// Enum above) and a default template in internal/notify.
const (
	EventReminder       EventType = "reminder"
	EventExpired        EventType = "expired"
	EventDeleted        EventType = "deleted"
	EventDeletionFailed EventType = "deletion-failed"
	EventExtended       EventType = "extended"
	EventWouldDelete    EventType = "would-delete"
	EventPostponed      EventType = "postponed"
)

// EventTypes lists every event type.
var EventTypes = []EventType{
	EventReminder, EventExpired, EventDeleted, EventDeletionFailed, EventExtended, EventWouldDelete, EventPostponed,
}

// SecretKeySelector names one key of a Secret.
type SecretKeySelector struct {
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// SecretReference names a Secret.
type SecretReference struct {
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// Notifications says who is told, and how, before and after an object
// expires. Kubernetes Events are always recorded as well.
type Notifications struct {
	// Email sends messages over SMTP.
	// +optional
	Email *EmailNotifications `json:"email,omitempty"`

	// Slack posts messages to a Slack incoming webhook.
	// +optional
	Slack *SlackNotifications `json:"slack,omitempty"`

	// Webhooks receive each event as a signed CloudEvent.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	// +optional
	Webhooks []WebhookNotifications `json:"webhooks,omitempty"`

	// AllowedEmailDomains, when set, restricts the e-mail addresses that
	// the notify annotation may name to these domains.
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$`
	// +optional
	AllowedEmailDomains []string `json:"allowedEmailDomains,omitempty"`

	// Templates override the default subject and bodies per event type.
	// +listType=map
	// +listMapKey=event
	// +optional
	Templates []MessageTemplate `json:"templates,omitempty"`
}

// EmailNotifications configures the SMTP channel.
type EmailNotifications struct {
	// Host of the SMTP server.
	// +kubebuilder:validation:MinLength=1
	Host string `json:"host"`

	// Port of the SMTP server.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=587
	// +optional
	Port int32 `json:"port,omitempty"`

	// Security of the connection: StartTLS (required, the default), TLS
	// (implicit TLS, usually port 465) or None (plain, for a local relay).
	// +kubebuilder:validation:Enum=StartTLS;TLS;None
	// +kubebuilder:default=StartTLS
	// +optional
	Security string `json:"security,omitempty"`

	// From is the sender address.
	// +kubebuilder:validation:MinLength=3
	From string `json:"from"`

	// To are addresses that receive every message, besides the ones the
	// object's notify annotation names.
	// +optional
	To []string `json:"to,omitempty"`

	// CredentialsSecretRef names a Secret with the keys "username" and
	// "password" for SMTP authentication; no authentication when absent.
	// +optional
	CredentialsSecretRef *SecretReference `json:"credentialsSecretRef,omitempty"`

	// Events this channel sends; every event type when empty.
	// +optional
	Events []EventType `json:"events,omitempty"`
}

// SlackNotifications configures the Slack channel.
type SlackNotifications struct {
	// WebhookURLSecretRef selects the Secret key holding the incoming
	// webhook URL.
	WebhookURLSecretRef SecretKeySelector `json:"webhookURLSecretRef"`

	// Events this channel sends; every event type when empty.
	// +optional
	Events []EventType `json:"events,omitempty"`
}

// WebhookNotifications configures one signed webhook receiver.
type WebhookNotifications struct {
	// Name identifies the receiver in records, logs and Events.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// URL the events are POSTed to.
	// +kubebuilder:validation:Pattern=`^https?://`
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`

	// SecretRef selects the Secret key holding the signing key, raw or in
	// Standard Webhooks form ("whsec_" and base64).
	SecretRef SecretKeySelector `json:"secretRef"`

	// Events this receiver gets; every event type when empty.
	// +optional
	Events []EventType `json:"events,omitempty"`
}

// MessageTemplate overrides the messages of one event type. Each field is
// a Go text/template (html/template for HTML) executed with the message;
// an empty field keeps the default.
type MessageTemplate struct {
	Event EventType `json:"event"`
	// +optional
	Subject string `json:"subject,omitempty"`
	// +optional
	Text string `json:"text,omitempty"`
	// +optional
	HTML string `json:"html,omitempty"`
}
