// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Event reasons on governed objects.
const (
	ReasonExpired        = "Expired"
	ReasonDeleted        = "Deleted"
	ReasonWouldDelete    = "WouldDelete"
	ReasonDeletionFailed = "DeletionFailed"
	ReasonInvalidTimeout = "InvalidTimeout"
	// ReasonMessageSent: a recorded message (a reminder, an extended or a
	// postponed message) reached at least one channel; the note names the
	// message type and the channels.
	ReasonMessageSent = "MessageSent"
	// ReasonMessageFailed: a channel refused a message of any type; the
	// note names the message type. A recorded message is retried.
	ReasonMessageFailed = "MessageFailed"
	// ReasonDeletionPostponed: the object expired but is kept until people
	// have had the policy's minimum notice.
	ReasonDeletionPostponed = "DeletionPostponed"
	// ReasonNoticeNotGiven: the object expired but no reminder has reached
	// anyone yet, so it is not deleted.
	ReasonNoticeNotGiven = "NoticeNotGiven"
	// ReasonRecordFailed: what was sent could not be recorded on the object.
	ReasonRecordFailed = "RecordFailed"
	// ReasonInvalidRecipient: the notify annotation names something that
	// is not an allowed e-mail address or Slack channel.
	ReasonInvalidRecipient = "InvalidRecipient"
	// ReasonOwnerUnreachable: the policy tells owners, and the object's
	// owner has no e-mail address the controller may send to.
	ReasonOwnerUnreachable = "OwnerUnreachable"
	// ReasonDeletionThrottled: the object expired and waits for its turn
	// under a deletion cap.
	ReasonDeletionThrottled = "DeletionThrottled"
	// ReasonArchiveFailed: the object expired but its manifest could not be
	// archived, so it was not deleted.
	ReasonArchiveFailed = "ArchiveFailed"
	// ReasonDeletionPending: the delete was accepted and the object stays
	// in Terminating until its finalizers have run.
	ReasonDeletionPending = "DeletionPending"
	// ReasonDeletionStuck: the object has been in Terminating for longer
	// than the controller expects a finalizer to take; the note names the
	// finalizers left.
	ReasonDeletionStuck = "DeletionStuck"
)

// Event reasons on TimeoutPolicies.
const (
	ReasonInvalidPolicy  = "InvalidPolicy"
	ReasonTargetNotFound = "TargetNotFound"
	// ReasonTargetForbidden: the controller may not use a verb it needs on
	// the policy's target kind.
	ReasonTargetForbidden = "Forbidden"
	// ReasonNoRecipients: objects the policy governs have nobody to be
	// reminded, so they are not deleted.
	ReasonNoRecipients = "NoRecipients"
)

// Event actions, the events.k8s.io/v1 "action" field.
const (
	ActionDelete   = "Delete"
	ActionEvaluate = "Evaluate"
	ActionNotify   = "Notify"
)

// ClusterScopedSink writes the Events of cluster-scoped objects to a chosen
// namespace; client-go would put them in "default". The API server accepts
// only "default" and "kube-system" for them.
type ClusterScopedSink struct {
	events.EventSink
	Namespace string
}

func (s ClusterScopedSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.EventSink.Create(ctx, s.place(e))
}

// Update and Patch carry on a series the Create began: they must find
// the Event where Create put it.
func (s ClusterScopedSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.EventSink.Update(ctx, s.place(e))
}

func (s ClusterScopedSink) Patch(ctx context.Context, old *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	return s.EventSink.Patch(ctx, s.place(old), data)
}

func (s ClusterScopedSink) place(e *eventsv1.Event) *eventsv1.Event {
	if e.Regarding.Namespace != "" || s.Namespace == "" || e.Namespace == s.Namespace {
		return e
	}
	e = e.DeepCopy()
	e.Namespace = s.Namespace
	return e
}

// maxNote is the most bytes the API server accepts in an Event's note: it
// refuses a longer one for good, and the Event is lost.
const maxNote = 1024

// cutMark ends a note that was cut.
const cutMark = "…"

// NoteCutter cuts every note to what the API server accepts, so that a
// long value (an invalid annotation, the errors of several channels) is
// never the reason a Warning is not recorded. The logs and the audit
// trail keep the whole text.
type NoteCutter struct {
	events.EventRecorder
}

func (r NoteCutter) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", CutNote(fmt.Sprintf(note, args...)))
}

// CutNote returns note as valid UTF-8 of at most maxNote bytes. Invalid
// bytes are replaced first: JSON would turn each into a three-byte U+FFFD
// after the note was measured.
func CutNote(note string) string {
	note = strings.ToValidUTF8(note, "\uFFFD")
	if len(note) <= maxNote {
		return note
	}
	return CutUTF8(note, maxNote-len(cutMark)) + cutMark
}

// CutUTF8 returns the longest prefix of s of at most n bytes that does not
// split a character.
func CutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
