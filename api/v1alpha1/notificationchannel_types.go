// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NotificationChannelSpec says where a channel's messages go and with which
// credentials. Only its owner, the cluster administrator, writes these:
// a policy names the channel and never pairs a Secret with an endpoint
// of its own choosing. Exactly one of email, slack and webhook is set.
// +kubebuilder:validation:XValidation:rule="(has(self.email) ? 1 : 0) + (has(self.slack) ? 1 : 0) + (has(self.webhook) ? 1 : 0) == 1",message="exactly one of email, slack and webhook must be set"
type NotificationChannelSpec struct {
	// Email sends messages over SMTP.
	// +optional
	Email *EmailChannel `json:"email,omitempty"`

	// Slack posts messages to a Slack incoming webhook.
	// +optional
	Slack *SlackChannel `json:"slack,omitempty"`

	// Webhook POSTs each event as a signed CloudEvent.
	// +optional
	Webhook *WebhookChannel `json:"webhook,omitempty"`

	// TLS says how the channel's server is verified: a private CA, a
	// server name. The system roots and the endpoint's host otherwise.
	// +optional
	TLS *ChannelTLS `json:"tls,omitempty"`

	// AllowedEmailDomains, when set, restricts the addresses an e-mail
	// channel sends to (the policy's to and the objects' notify
	// annotation) to these domains.
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$`
	// +kubebuilder:validation:MaxItems=64
	// +optional
	AllowedEmailDomains []string `json:"allowedEmailDomains,omitempty"`

	// PolicySelector restricts which TimeoutPolicies may use the channel,
	// by their labels. Absent, every policy may.
	// +optional
	PolicySelector *metav1.LabelSelector `json:"policySelector,omitempty"`
}

// EmailChannel is an SMTP server and the sender it sends as.
type EmailChannel struct {
	// Host of the SMTP server.
	// +kubebuilder:validation:MinLength=1
	Host string `json:"host"`

	// Port of the SMTP server. Unset, 465 with security TLS and 587
	// otherwise.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
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

	// CredentialsSecretRef names a Secret with the keys "username" and
	// "password" for SMTP authentication; no authentication when absent.
	// +optional
	CredentialsSecretRef *SecretReference `json:"credentialsSecretRef,omitempty"`
}

// SlackChannel is a Slack incoming webhook.
type SlackChannel struct {
	// WebhookURLSecretRef selects the Secret key holding the incoming
	// webhook URL.
	WebhookURLSecretRef SecretKeySelector `json:"webhookURLSecretRef"`
}

// WebhookChannel is one signed webhook receiver.
type WebhookChannel struct {
	// URL the events are POSTed to.
	// +kubebuilder:validation:Pattern=`^https?://`
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`

	// SecretRef selects the Secret key holding the signing key, raw or in
	// Standard Webhooks form ("whsec_" and base64).
	SecretRef SecretKeySelector `json:"secretRef"`
}

// ChannelTLS says how a channel verifies its server.
type ChannelTLS struct {
	// CABundle is PEM certificates trusted, for this channel only, instead
	// of the system roots: a private CA of an SMTP relay or receiver. The
	// ConfigMap or Secret must be in the namespace the controller reads
	// Secrets from (--secret-namespace, its own by default): one elsewhere
	// makes the channel, and the policies that name it, not Ready.
	// +optional
	CABundle *CABundleSource `json:"caBundle,omitempty"`

	// ServerName is the name the server's certificate must carry, when it
	// is not the endpoint's host.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ServerName string `json:"serverName,omitempty"`

	// InsecureSkipVerify accepts any certificate the server shows. Anyone
	// on the path can then read the messages and credentials; the channel
	// reports it with the condition Insecure.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// CABundleSource is where a CA bundle is read from: a key of a ConfigMap
// or of a Secret, in the namespace --secret-namespace names.
// +kubebuilder:validation:XValidation:rule="has(self.configMapRef) != has(self.secretRef)",message="exactly one of configMapRef and secretRef must be set"
type CABundleSource struct {
	// ConfigMapRef selects the ConfigMap key holding the PEM bundle; the
	// ConfigMap must be in the namespace --secret-namespace names.
	// +optional
	ConfigMapRef *KeySelector `json:"configMapRef,omitempty"`
	// SecretRef selects the Secret key holding the PEM bundle; the Secret
	// must be in the namespace --secret-namespace names.
	// +optional
	SecretRef *SecretKeySelector `json:"secretRef,omitempty"`
}

// KeySelector names one key of a ConfigMap.
type KeySelector struct {
	// Namespace of the ConfigMap: the one the controller reads Secrets
	// from (--secret-namespace, its own by default).
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// Name of the ConfigMap.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Key of the ConfigMap's data that holds the value.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// Condition types and reasons of a NotificationChannel.
const (
	// ConditionInsecure is True while the channel skips verifying its
	// server's certificate.
	ConditionInsecure = "Insecure"

	// ReasonChannelReady: the channel's Secrets and CA bundle were read.
	ReasonChannelReady = "Valid"
	// ReasonChannelInvalid: a Secret, key or CA bundle cannot be read or
	// used.
	ReasonChannelInvalid = "Invalid"
	// ReasonInsecureSkipVerify: spec.tls.insecureSkipVerify is set.
	ReasonInsecureSkipVerify = "InsecureSkipVerify"
	// ReasonVerified: the server's certificate is verified.
	ReasonVerified = "Verified"
)

// Reasons of a TimeoutPolicy's Ready condition about its channels.
const (
	// ReasonChannelNotFound: the policy names a NotificationChannel that
	// does not exist.
	ReasonChannelNotFound = "ChannelNotFound"
	// ReasonChannelRefused: a NotificationChannel the policy names does
	// not let it use the channel that way: its policySelector does not
	// match the policy, or the policy's to is outside its allowed domains.
	ReasonChannelRefused = "ChannelRefused"
	// ReasonChannelNotGranted: the policy's author may not use a
	// NotificationChannel it names (the verb use on notificationchannels,
	// by name), or the policy has no author stamp and the channel is not
	// granted to every authenticated user.
	ReasonChannelNotGranted = "ChannelNotGranted"
)

// Using a channel is a permission of the policy's author, which the
// author cannot give themselves.
const (
	// VerbUse is the RBAC verb on notificationchannels, by name, that
	// lets whoever writes a TimeoutPolicy name the channel in it.
	VerbUse = "use"
	// AnnotationAuthor is who last created or updated a TimeoutPolicy, as
	// the MutatingAdmissionPolicy timeout-policy-author.amphitheatre.app
	// stamps it on every write: JSON {"username": …, "groups": […]}. The
	// controller delivers through a channel only if that author may use
	// it.
	AnnotationAuthor = "timeout.amphitheatre.app/author"
)

// NotificationChannelStatus is what the controller last found of a channel.
type NotificationChannelStatus struct {
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready and Insecure.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NotificationChannel is where messages about expiring objects go, owned
// by the cluster's administrators. TimeoutPolicies name channels; they
// cannot say where a channel sends or with which credentials.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=nch,categories=amphitheatre
// +kubebuilder:validation:XValidation:rule="self.metadata.name != 'events'",message="events names the Kubernetes Events, not a channel"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NotificationChannel struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NotificationChannelSpec   `json:"spec"`
	Status NotificationChannelStatus `json:"status,omitempty"`
}

// NotificationChannelList is a list of NotificationChannel.
// +kubebuilder:object:root=true
type NotificationChannelList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NotificationChannel `json:"items"`
}

func init() {
	SchemeBuilder.Register(&NotificationChannel{}, &NotificationChannelList{})
}
