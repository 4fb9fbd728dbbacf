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
// expires. Kubernetes Events are always recorded as well. Where messages go
// is the business of the NotificationChannels the policy names.
type Notifications struct {
	// Channels are the NotificationChannels this policy's messages go to.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	// +optional
	Channels []ChannelReference `json:"channels,omitempty"`

	// Templates override the default subject and bodies per event type.
	// +listType=map
	// +listMapKey=event
	// +optional
	Templates []MessageTemplate `json:"templates,omitempty"`
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
	Event EventType `json:"event"`
	// +optional
	Subject string `json:"subject,omitempty"`
	// +optional
	Text string `json:"text,omitempty"`
	// +optional
	HTML string `json:"html,omitempty"`
}
