// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The pattern below must stay equal to expiry.DurationPattern; a test checks it.

// Duration is a length of time: a Go duration ("90m", "36h") in which days
// ("14d") and weeks ("2w") may also be used, alone or combined ("1w2d12h").
// Signs are not accepted, so a Duration is never negative.
// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h|d|w))+)$`
// +kubebuilder:validation:MaxLength=64
type Duration string

// Target names the kind of object a policy governs.
type Target struct {
	// APIVersion of the governed kind, e.g. "amphitheatre.app/v1".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?v[0-9]+((alpha|beta)[0-9]+)?$`
	APIVersion string `json:"apiVersion"`

	// Kind of the governed objects, e.g. "Playbook".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	Kind string `json:"kind"`
}

// Deletion says how an expired object is deleted.
type Deletion struct {
	// PropagationPolicy passed with the delete call: Background (the
	// default: owned objects are garbage-collected after the owner is gone),
	// Foreground or Orphan.
	// +kubebuilder:validation:Enum=Background;Foreground;Orphan
	// +kubebuilder:default=Background
	// +optional
	PropagationPolicy metav1.DeletionPropagation `json:"propagationPolicy,omitempty"`

	// DryRun records a WouldDelete Event at expiry and deletes nothing.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// Archive writes each object's full manifest to the controller's
	// archive (--archive) before deleting it. If the archive cannot be
	// written, the object is not deleted and the failure is reported.
	// +optional
	Archive bool `json:"archive,omitempty"`

	// MaxPerMinute caps how many of this policy's objects are deleted per
	// minute. Expiries beyond it wait their turn, in the order the
	// controller comes to them (the order of expiry, except for a backlog
	// after a restart or a change of the cap); none is skipped. Zero means
	// no cap (the controller's global cap, --max-deletions-per-minute,
	// still applies).
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxPerMinute int32 `json:"maxPerMinute,omitempty"`
}

// Sleep says when a governed object is put to sleep (its workloads scaled
// to zero) before it is deleted, and how long it sleeps before deletion.
// +kubebuilder:validation:XValidation:rule="has(self.afterIdle) != has(self.after)",message="sleep needs exactly one of afterIdle and after"
type Sleep struct {
	// AfterIdle puts the object to sleep this long after its last activity
	// (creation, the last-active annotation, a spec edit or a wake), the
	// clock spec.idleTTL reads.
	// +optional
	AfterIdle Duration `json:"afterIdle,omitempty"`

	// After puts the object to sleep this long after its creation, or
	// after its last wake.
	// +optional
	After Duration `json:"after,omitempty"`

	// DeleteAfter is how long the object sleeps before it is deleted: it
	// is deleted no earlier than this long after it went to sleep, nor
	// before the expiry its lifetime gives, and never past maxTTL. A
	// governed object is deleted only asleep, or at maxTTL.
	DeleteAfter Duration `json:"deleteAfter"`

	// Reminder sends a sleeping message this long before the object goes
	// to sleep, once for each time it is due to sleep: use that moves the
	// sleep sends it again before the new time. A reminder that would be
	// due at the last use or before is not sent. The sleep does not wait
	// for it: a wake undoes a sleep. Absent, no message goes out before a
	// sleep.
	// +optional
	Reminder Duration `json:"reminder,omitempty"`

	// Patch puts the object to sleep with this JSON merge patch of the
	// object itself, instead of scaling, for a kind that suspends through
	// a field: {"spec": {"suspend": true}} for a CronJob or a Flux object.
	// It may not touch metadata, apiVersion or kind, nor remove a
	// top-level field, and is at most 4 KiB. The wake puts back the values
	// it replaced, as the object had them before the sleep.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Patch *runtime.RawExtension `json:"patch,omitempty"`
}

// Extensions limits the extensions of an object's expiry: a change by
// someone other than the controller of the ttl or expires-at annotation
// that moves the expiry later. Under limits, keep=true is an extension
// without end: only the exempt groups may set it.
// +kubebuilder:validation:XValidation:rule="has(self.maxStep) || has(self.maxCount)",message="extensions needs maxStep, maxCount or both"
type Extensions struct {
	// MaxStep is how far one extension may move the expiry past the one
	// it replaces.
	// +optional
	MaxStep Duration `json:"maxStep,omitempty"`

	// MaxCount is how many extensions an object may have; 0 allows none.
	// Absent, the count is not limited.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxCount *int32 `json:"maxCount,omitempty"`

	// ExemptGroups are the groups (of Kubernetes users, as the API server
	// authenticates them) whose members may extend past the limits and
	// keep objects, such as the platform team.
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[^\s,]+$`
	// +kubebuilder:validation:XValidation:rule="self.all(g, g != '-')",message="a group may not be named -, which the extensions annotation writes for none"
	// +listType=set
	// +optional
	ExemptGroups []string `json:"exemptGroups,omitempty"`
}

// Traffic counts what a Prometheus query sees as use of the governed
// objects: a sample above the threshold is use of the objects its
// namespace label (and nameLabel, when set) names, as
// docs/guides/idle-expiry.md describes. The Prometheus server is the
// controller's (--prometheus-url), not the policy's.
type Traffic struct {
	// Query is a PromQL expression evaluated at each interval. Its samples
	// must carry a namespace label, e.g.
	// sum by (namespace) (rate(nginx_ingress_controller_requests[5m])).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.trim().size() > 0",message="query must not be blank"
	Query string `json:"query"`

	// Threshold: a sample whose value is above it counts as use. A
	// decimal number, such as "0", "0.5" or "1e3"; "0" when absent.
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Threshold string `json:"threshold,omitempty"`

	// Interval is how often the query is evaluated: at least 15s; 1m when
	// absent.
	// +optional
	Interval Duration `json:"interval,omitempty"`

	// NameLabel, when set, names the label whose value is the name of the
	// object a sample is about: a sample counts only for the object of
	// that name, and a sample without the label counts for none.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-zA-Z_][a-zA-Z0-9_]*$`
	// +optional
	NameLabel string `json:"nameLabel,omitempty"`
}

// DeleteNowPolicy says whether the links in messages offer to delete the
// object at once.
type DeleteNowPolicy string

const (
	// DeleteNowAllowed puts "I am done: delete it now" in messages.
	DeleteNowAllowed DeleteNowPolicy = "Allowed"
	// DeleteNowForbidden leaves it out.
	DeleteNowForbidden DeleteNowPolicy = "Forbidden"
)

// Actions says what the links in messages let the people who get them do
// (docs/guides/acting-from-messages.md). Messages carry links only when
// the controller runs with --actions-url; every action through a link is
// judged by the same rules as one made with kubectl timeout.
type Actions struct {
	// ExtendBy is how far "Keep it longer" moves the expiry past the
	// current one: spec.extensions.maxStep when absent, or 1d when that
	// is absent too. It may not exceed spec.extensions.maxStep; maxTTL
	// and the extension count still apply.
	// +optional
	ExtendBy Duration `json:"extendBy,omitempty"`

	// DeleteNow says whether messages offer "I am done: delete it now":
	// Allowed or Forbidden (the default). The object is then deleted as
	// at any expiry (archive, audit, the deleted message), after the
	// minimum notice when a reminder promised it.
	// +kubebuilder:validation:Enum=Allowed;Forbidden
	// +kubebuilder:default=Forbidden
	// +optional
	DeleteNow DeleteNowPolicy `json:"deleteNow,omitempty"`
}

// KeepPolicy says whether a policy honours the keep annotation.
type KeepPolicy string

const (
	// KeepAllowed honours the keep annotation.
	KeepAllowed KeepPolicy = "Allowed"
	// KeepForbidden ignores the keep annotation, with a Warning Event.
	KeepForbidden KeepPolicy = "Forbidden"
)

// TimeoutPolicySpec says which objects expire, and when.
type TimeoutPolicySpec struct {
	// Target is the kind of object governed. Namespaced and cluster-scoped
	// kinds both work.
	// +kubebuilder:default={apiVersion: "amphitheatre.app/v1", kind: "Playbook"}
	// +optional
	Target Target `json:"target,omitzero"`

	// Selector restricts the policy to objects with matching labels. Absent,
	// the policy governs every object of the target kind.
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="matchExpressions operators must be In, NotIn, Exists or DoesNotExist (case matters)"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn'] ? has(e.values) && size(e.values) > 0 : !has(e.values) || size(e.values) == 0)",message="matchExpressions values must be non-empty for In and NotIn, and empty for Exists and DoesNotExist"
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// NamespaceSelector restricts a policy for a namespaced kind to objects
	// in namespaces with matching labels. It is ignored for cluster-scoped
	// kinds.
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="matchExpressions operators must be In, NotIn, Exists or DoesNotExist (case matters)"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn'] ? has(e.values) && size(e.values) > 0 : !has(e.values) || size(e.values) == 0)",message="matchExpressions values must be non-empty for In and NotIn, and empty for Exists and DoesNotExist"
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// Priority decides between policies that match the same object: the
	// higher priority governs it; on a tie, the policy whose name sorts
	// first does.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	Priority int32 `json:"priority,omitempty"`

	// DefaultTTL is the lifetime, counted from creation, of an object that
	// carries no valid lifetime annotation of its own. It must be positive.
	// +kubebuilder:default="14d"
	// +optional
	DefaultTTL Duration `json:"defaultTTL,omitempty"`

	// IdleTTL, when set, lets an object live until this long after its
	// last activity, when that is later than what its annotations or
	// defaultTTL give. Activity is the latest of its creation, the
	// timeout.amphitheatre.app/last-active annotation (RFC 3339, written by
	// any client that sees the object used) and a change of
	// metadata.generation, which the controller observes and records at
	// most once per object per idleTTL/20.
	// +optional
	IdleTTL Duration `json:"idleTTL,omitempty"`

	// MaxTTL, when set, is a ceiling counted from creation: annotations,
	// extensions and activity cannot take an object past it. A lifetime
	// annotation beyond it is clamped to it, with a Warning Event. It must
	// be at least defaultTTL.
	// +optional
	MaxTTL Duration `json:"maxTTL,omitempty"`

	// Sleep, when set, puts objects to sleep before deleting them: a
	// Playbook's Deployments and StatefulSets (in the namespaces it owns),
	// or the object itself when its kind has a scale subresource, are
	// scaled to zero, and restored exactly when the object is used again
	// (see docs/guides/sleep.md). The keep annotation keeps from sleep too.
	// +optional
	Sleep *Sleep `json:"sleep,omitempty"`

	// Traffic, when set, counts traffic a Prometheus query sees as use,
	// as a last-active the controller writes (via traffic), under
	// idleTTL or sleep. The controller needs --prometheus-url for it.
	// +optional
	Traffic *Traffic `json:"traffic,omitempty"`

	// Keep says whether the keep annotation is honoured: Allowed (the
	// default) or Forbidden, under which it is ignored with a Warning
	// Event. maxTTL caps lifetimes, not keep: an allowed keep keeps an
	// object past maxTTL.
	// +kubebuilder:validation:Enum=Allowed;Forbidden
	// +kubebuilder:default=Allowed
	// +optional
	Keep KeepPolicy `json:"keep,omitempty"`

	// Extensions, when set, limits how people move an object's expiry
	// later with the ttl or expires-at annotation: how far one extension
	// may move it, how many extensions an object may have, and who may
	// exceed the limits or keep the object. Enforced when written by the
	// admission policies (docs/guides/admission-policy.md) and by the
	// controller: an extension beyond the limits is refused with a
	// Warning Event and the object keeps its previous expiry. Use
	// (last-active) is not an extension: idleTTL and maxTTL bound it.
	// +optional
	Extensions *Extensions `json:"extensions,omitempty"`

	// Actions, when set, says what the links in messages let their
	// recipients do: how far "Keep it longer" extends, and whether "delete
	// it now" is offered. Without it, links extend by the extensions'
	// maxStep (or 1d) and do not delete.
	// +optional
	Actions *Actions `json:"actions,omitempty"`

	// Reminders are the lead times before expiry at which the people
	// concerned are told. An empty list means no reminders; a lead given
	// twice counts once.
	// The list is atomic, so that applying [] server-side (helm upgrade,
	// kubectl apply --server-side) leaves it empty rather than dropping it
	// and letting the default back in.
	// +kubebuilder:default={"3d","2d"}
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	// +optional
	Reminders []Duration `json:"reminders"`

	// MinimumNotice is the least time between the first reminder delivered
	// and the deletion; "0s" turns the guarantee off.
	// +kubebuilder:default="24h"
	// +optional
	MinimumNotice Duration `json:"minimumNotice,omitempty"`

	// Notifications says who is told before and after expiry, and how.
	// +optional
	Notifications Notifications `json:"notifications,omitempty"`

	// Deletion says how expired objects are deleted.
	// +kubebuilder:default={}
	// +optional
	Deletion Deletion `json:"deletion,omitempty"`
}

// Condition types and reasons of a TimeoutPolicy.
const (
	// ConditionReady is True while the policy is valid and its target kind
	// is watched.
	ConditionReady = "Ready"
	// ConditionOverlapping is True while objects this policy matches are
	// governed by another policy instead.
	ConditionOverlapping = "Overlapping"
	// ConditionUnbounded is set on a policy that forbids keep: True while
	// it has no maxTTL, so that a lifetime annotation (expires-at in 2999)
	// still keeps an object as long as it says.
	ConditionUnbounded = "Unbounded"

	// ConditionTraffic is set on a policy with spec.traffic: True while
	// its query last succeeded, False when it failed or the controller
	// has no Prometheus to ask.
	ConditionTraffic = "Traffic"

	ReasonActive         = "Active"
	ReasonInvalidSpec    = "InvalidSpec"
	ReasonTargetNotFound = "TargetNotFound"
	// ReasonChannelsNotReady: a notification channel cannot be built (a
	// Secret is missing, a template does not parse).
	ReasonChannelsNotReady = "ChannelsNotReady"
	// ReasonArchiveUnavailable: the policy archives before deleting but the
	// controller has no archive (--archive); nothing is deleted.
	ReasonArchiveUnavailable = "ArchiveUnavailable"
	// ReasonForbidden: the API server does not let the controller get,
	// list, watch, patch or delete the target kind. The message names the
	// verbs it lacks (and the namespaces, when they are missing in some
	// only); a policy whose kind the controller may not list or watch
	// governs nothing until they are granted.
	ReasonForbidden = "Forbidden"
	// ReasonNoRecipients: objects the policy governs are owed notice that
	// nobody can receive, so they are not deleted: every channel that
	// carries reminders is an e-mail channel the policy gives no "to", and
	// their notify annotation names no address such a channel sends to.
	ReasonNoRecipients = "NoRecipients"
	ReasonOutranked    = "Outranked"
	ReasonNoOverlap    = "NoOverlap"
	// ReasonTrafficNotConfigured: the policy asks for traffic but the
	// controller runs without --prometheus-url; nothing else changes.
	ReasonTrafficNotConfigured = "NotConfigured"
	// ReasonQueryFailed: the last traffic query failed or timed out; it
	// counted as neither use nor the lack of it.
	ReasonQueryFailed = "QueryFailed"
	// ReasonQueried: the last traffic query succeeded.
	ReasonQueried = "Queried"
	// ReasonNoMaxTTL: keep is Forbidden and nothing caps lifetimes.
	ReasonNoMaxTTL = "NoMaxTTL"
	// ReasonMaxTTL: keep is Forbidden and maxTTL caps every lifetime.
	ReasonMaxTTL = "MaxTTL"
)

// TimeoutPolicyStatus is what the controller last saw of a policy's objects.
type TimeoutPolicyStatus struct {
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Overlapping, when keep is Forbidden Unbounded,
	// and with spec.traffic Traffic.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Tracked counts the objects this policy governs that will expire.
	// +optional
	Tracked int32 `json:"tracked"`

	// Kept counts the governed objects exempted with the keep annotation.
	// +optional
	Kept int32 `json:"kept"`

	// Idle counts the tracked objects whose expiry the idle clock sets:
	// their last activity plus idleTTL is later than what their
	// annotations or defaultTTL give.
	// +optional
	Idle int32 `json:"idle"`

	// Asleep counts the tracked objects that sleep.
	// +optional
	Asleep int32 `json:"asleep"`

	// ExpiringSoon counts tracked objects that expire within the longest
	// reminder lead; it is 0 when the policy has no reminders.
	// +optional
	ExpiringSoon int32 `json:"expiringSoon"`

	// NextExpiry is the earliest expiry among tracked objects.
	// +optional
	NextExpiry *metav1.Time `json:"nextExpiry,omitempty"`
}

// TimeoutPolicy sets how long objects of one kind live before they are
// deleted, and how their owners are told beforehand.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=tpol,categories=amphitheatre
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.target.kind`
// +kubebuilder:printcolumn:name="Default TTL",type=string,JSONPath=`.spec.defaultTTL`
// +kubebuilder:printcolumn:name="Idle TTL",type=string,JSONPath=`.spec.idleTTL`,priority=1
// +kubebuilder:printcolumn:name="Max TTL",type=string,JSONPath=`.spec.maxTTL`,priority=1
// +kubebuilder:printcolumn:name="Tracked",type=integer,JSONPath=`.status.tracked`
// +kubebuilder:printcolumn:name="Next Expiry",type=string,JSONPath=`.status.nextExpiry`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TimeoutPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TimeoutPolicySpec   `json:"spec,omitempty"`
	Status TimeoutPolicyStatus `json:"status,omitempty"`
}

// TimeoutPolicyList is a list of TimeoutPolicy.
// +kubebuilder:object:root=true
type TimeoutPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TimeoutPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TimeoutPolicy{}, &TimeoutPolicyList{})
}
