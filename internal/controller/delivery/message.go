// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/eval"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/decide"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// message builds the message of type t about the object. Its ID is the
// same for the same object, expiry, type and stage (and, for a
// postponement, new date), so that receivers can drop repeats.
func (d *Deliverer) message(ctx context.Context, ev *eval.Evaluation, t v1alpha1.EventType, at time.Time, stage string) notify.Message {
	key, obj := ev.Key, ev.Obj
	recipients, problems := notify.ParseRecipients(obj.Annotations[notify.AnnotationNotify], ev.Channels.AllowedEmailDomains())
	if !oneOff(t) {
		d.warnRecipients(ctx, ev, problems)
	}
	if ev.Policy.Spec.Notifications.Owner && (t != v1alpha1.EventReminder || ev.Owner == "") {
		// A reminder reaches an owner with an address in the digest.
		recipients.Emails = d.addOwner(ctx, ev, t, recipients.Emails)
	}
	apiVersion, kind := key.GVK.ToAPIVersionAndKind()
	o := notify.Object{APIVersion: apiVersion, Kind: kind, Name: obj.Name, Namespace: obj.Namespace, UID: obj.UID}
	var expiresAt time.Time
	if ev.Record != nil {
		o.Title, expiresAt = ev.Record.Title, ev.Record.ExpiresAt
	}
	return notify.Message{
		ID:         notify.NewID(obj.UID, expiresAt, t, idStage(t, stage, at)),
		Type:       t,
		Time:       ev.Now,
		Object:     o,
		ExpiresAt:  at,
		Policy:     ev.Policy.Name,
		Recipients: recipients,
		Extend:     extendHint(key, obj, at),
		Linker:     d.Links.objectLinks(ctx, ev, t, at),
	}
}

// warnRecipients emits one InvalidRecipient Event per refused entry of
// the notify annotation, and again only when the refusals change.
func (d *Deliverer) warnRecipients(ctx context.Context, ev *eval.Evaluation, problems []error) {
	key, obj := ev.Key, ev.Obj
	var sig strings.Builder
	for _, p := range problems {
		sig.WriteString(p.Error() + "\n")
	}
	if !d.WarnOnce(ctx, ev, expiry.WarnedRecipients, sig.String()) {
		return
	}
	d.Recorder.Eventf(kube.Reference(key.GVK, obj), nil, corev1.EventTypeWarning, kube.ReasonInvalidRecipient, kube.ActionNotify,
		"annotation %s: %s; the other recipients are still told", notify.AnnotationNotify, errors.Join(problems...).Error())
}

// addOwner adds the address of the object's owner to emails, when it has
// one. An owner without one is reported once, in an OwnerUnreachable
// Event, and again only when the reason changes; the other recipients are
// told all the same.
func (d *Deliverer) addOwner(ctx context.Context, ev *eval.Evaluation, t v1alpha1.EventType, emails []string) []string {
	owner := strings.TrimSpace(ev.Obj.Annotations[notify.AnnotationOwner])
	if owner == "" {
		return emails
	}
	address, err := d.Owners.Address(ctx, owner, ev.Channels.AllowedEmailDomains())
	if err == nil {
		emails = notify.AddEmail(emails, address)
	}
	if oneOff(t) {
		// Said, if at all, with the reminders: the object is going.
		return emails
	}
	why := ""
	if err != nil && !errors.Is(err, notify.ErrOwnerSilenced) {
		why = err.Error()
	}
	if d.WarnOnce(ctx, ev, expiry.WarnedOwner, why) && why != "" {
		d.Recorder.Eventf(kube.Reference(ev.Key.GVK, ev.Obj), nil, corev1.EventTypeWarning, kube.ReasonOwnerUnreachable, kube.ActionNotify,
			"annotation %s: %s; the owner is not told, the other recipients are", notify.AnnotationOwner, why)
	}
	return emails
}

// idStage tells apart the messages of one type about one expiry: a
// reminder by its stage, a postponement by its new date. A retry of the
// same message keeps its ID, whatever else changed.
func idStage(t v1alpha1.EventType, stage string, at time.Time) string {
	if t == v1alpha1.EventPostponed {
		return at.UTC().Format(time.RFC3339)
	}
	return stage
}

// oneOff reports whether messages of type t go out once, when the thing
// happens, with no record kept on the object.
func oneOff(t v1alpha1.EventType) bool {
	switch t {
	case v1alpha1.EventReminder, v1alpha1.EventExtended, v1alpha1.EventPostponed, v1alpha1.EventWouldDelete,
		v1alpha1.EventSleeping, v1alpha1.EventSlept, v1alpha1.EventWoke:
		return false
	}
	return true
}

func extendHint(key wakeup.Key, obj *metav1.PartialObjectMetadata, at time.Time) string {
	resource := strings.ToLower(key.GVK.Kind)
	if key.GVK.Group != "" {
		resource += "." + key.GVK.Group
	}
	ns := ""
	if obj.Namespace != "" {
		ns = " -n " + obj.Namespace
	}
	return fmt.Sprintf("kubectl annotate %s %s%s --overwrite %s=%s (any later time), or %s=true to keep it",
		resource, obj.Name, ns, expiry.AnnotationExpiresAt, at.Add(7*expiry.Day).UTC().Format(time.RFC3339), expiry.AnnotationKeep)
}

// TitleOf returns a Playbook's spec.title, cut to what the record keeps.
func TitleOf(u *unstructured.Unstructured) string {
	t := decide.Title(u)
	// The title goes into the record annotation: keep it small, and whole
	// characters only.
	return kube.CutUTF8(t, MaxTitle)
}

// MaxTitle caps the bytes of a title kept in the record.
const MaxTitle = 200

func describeMessage(p expiry.Plan) string {
	switch p.Event {
	case v1alpha1.EventReminder:
		return "the " + p.Key + " reminder"
	default:
		return "the " + string(p.Event) + " message"
	}
}

func whenText(at time.Time) string {
	return "deletion at " + at.UTC().Format(time.RFC3339)
}

// whyRehearsed says why the deletions of the object are only rehearsed.
func (d *Deliverer) whyRehearsed() string {
	if d.DryRun {
		return "the controller runs with --dry-run"
	}
	return "the policy is in dry-run mode"
}

// reasonSent is the reason of the Event that says plan's message went out.
func reasonSent(plan expiry.Plan) string {
	if plan.Event == v1alpha1.EventWouldDelete {
		return kube.ReasonWouldDelete
	}
	return kube.ReasonMessageSent
}

// sentNote is the note of the Event that says plan's message went out via
// channels.
func sentNote(ev *eval.Evaluation, plan expiry.Plan, msg notify.Message, channels []string) string {
	if plan.Event == v1alpha1.EventWouldDelete {
		return fmt.Sprintf("Expired at %s (%s, policy %s); %s", ev.Life.ExpiresAt.UTC().Format(time.RFC3339), ev.Life.Source, ev.Policy.Name, msg.Detail)
	}
	when := whenText(plan.At)
	if plan.Event == v1alpha1.EventSleeping {
		when = "sleep at " + plan.At.UTC().Format(time.RFC3339)
	}
	if by := eval.ChangedBy(ev.Obj.Annotations); plan.Event == v1alpha1.EventExtended && by.Via != "" {
		// Made from a message: whom the link was sent to, and how.
		when += "; extended by " + by.Who()
	}
	return fmt.Sprintf("Sent %s via %s (%s)", describeMessage(plan), strings.Join(channels, ", "), when)
}
