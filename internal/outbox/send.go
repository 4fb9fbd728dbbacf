// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Sending the outbox's messages, and what is said when one is sent, fails or
// is given up; outbox.go keeps the entries and schedules the passes.

package outbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// process makes one attempt on t's due channels and stores the outcome.
// It reports whether the entry is finished (sent, given up or dropped).
func (o *Outbox) process(ctx context.Context, t *tracked) bool {
	e := t.entry
	o.mu.Lock()
	confirmed := t.confirmed
	o.mu.Unlock()
	log := o.Log.WithValues("entry", e.Name(), "kind", e.Object.Kind, "object", e.Object.Name, "namespace", e.Object.Namespace)
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()

	if !confirmed {
		deleted, err := o.deleted(ctx, e)
		if err != nil {
			log.Error(err, "check the object of a pending outbox entry")
			return o.retryLater(t)
		}
		if !deleted {
			// The delete did not happen: the object's own reconcile tries
			// again, with a new entry.
			log.Info("dropping the outbox entry of an object still there")
			if err := o.Store.Remove(writeCtx, e); err != nil {
				log.Error(err, "drop outbox entry")
				return o.retryLater(t)
			}
			return true
		}
		o.mu.Lock()
		t.confirmed = true
		o.mu.Unlock()
	}
	e.State = Deleted

	now := o.Clock.Now()
	if !now.Before(e.Created.Add(o.giveUpAfter())) {
		o.giveUp(ctx, e, now)
		if err := o.Store.Remove(writeCtx, e); err != nil {
			log.Error(err, "remove given-up outbox entry")
			return o.retryLater(t)
		}
		return true
	}

	sendCtx, cancelSend := context.WithTimeout(ctx, sendTimeout)
	defer cancelSend()
	for _, m := range e.Messages {
		var names []string
		for _, name := range slices.Sorted(maps.Keys(m.Channels)) {
			if d := m.Channels[name]; !d.Accepted && !d.NextAttempt.After(now) {
				names = append(names, name)
			}
		}
		if len(names) == 0 {
			continue
		}
		results, err := o.Deliverer.Deliver(sendCtx, e.Policy, m.Message, names)
		if ctx.Err() != nil {
			// Shutting down: this attempt does not count, and the next
			// leader makes it again.
			return false
		}
		at := o.Clock.Now()
		var recs []audit.Record
		var failed []string
		for _, name := range names {
			d := m.Channels[name]
			res := err
			if err == nil {
				res = results[name]
			}
			switch {
			case res == nil:
				d.Accepted, d.LastError = true, ""
				recs = append(recs, o.record(e, m, at, audit.Notified, name, ""))
				log.Info("notified", "event", m.Message.Type, "channel", name)
			case errors.Is(res, ErrNotCarried):
				d.Accepted, d.LastError = true, ""
				log.Info("channel no longer carries the message", "event", m.Message.Type, "channel", name)
			default:
				d.Attempts++
				d.LastError = res.Error()
				d.NextAttempt = at.Add(backoff(d.Attempts))
				recs = append(recs, o.record(e, m, at, audit.NotifyFailed, name, d.LastError))
				log.Error(res, "notification failed; retrying", "event", m.Message.Type, "channel", name, "attempt", d.Attempts, "next", d.NextAttempt)
				if d.Attempts == 1 {
					failed = append(failed, fmt.Sprintf("via %s: %s", name, d.LastError))
				}
			}
		}
		o.audit(log, recs...)
		if len(failed) > 0 {
			o.Recorder.Eventf(objectRef(e), nil, corev1.EventTypeWarning, "MessageFailed", "Notify",
				"Sending the %s message failed %s; retrying until %s", m.Message.Type, strings.Join(failed, "; "),
				e.Created.Add(o.giveUpAfter()).UTC().Format(time.RFC3339))
		}
	}

	if e.done() {
		if err := o.Store.Remove(writeCtx, e); err != nil {
			log.Error(err, "remove delivered outbox entry")
			// Nothing is sent again meanwhile: every channel accepted.
			return o.retryLater(t)
		}
		return true
	}
	// The attempts, the backoff and the state, for the next leader.
	if err := o.Store.Update(writeCtx, e); err != nil {
		log.Error(err, "record outbox attempts")
		if apierrors.IsNotFound(err) {
			return true
		}
	}
	return false
}

// backoff is the wait after the n-th failure on a channel.
func backoff(n int) time.Duration {
	return min(time.Second<<min(n-1, 16), maxBackoff)
}

// deleted reports whether the delete e was written before has happened:
// the object is gone, another object took its name, or it is being
// deleted.
func (o *Outbox) deleted(ctx context.Context, e *Entry) (bool, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(schema.FromAPIVersionAndKind(e.Object.APIVersion, e.Object.Kind))
	err := o.Objects.Get(ctx, types.NamespacedName{Namespace: e.Object.Namespace, Name: e.Object.Name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("get %s %s: %w", e.Object.Kind, e.Object.Name, err)
	}
	return obj.UID != e.Object.UID || obj.DeletionTimestamp != nil, nil
}

// giveUp reports the channels that still refuse e's messages.
func (o *Outbox) giveUp(ctx context.Context, e *Entry, now time.Time) {
	var recs []audit.Record
	var lost []string
	for _, m := range e.Messages {
		for _, name := range slices.Sorted(maps.Keys(m.Channels)) {
			d := m.Channels[name]
			if d.Accepted {
				continue
			}
			givenUp.WithLabelValues(name, string(m.Message.Type)).Inc()
			detail := fmt.Sprintf("gave up after %s and %d attempts", o.giveUpAfter(), d.Attempts)
			rec := o.record(e, m, now, audit.NotifyFailed, name, d.LastError)
			rec.Detail = detail
			recs = append(recs, rec)
			lost = append(lost, fmt.Sprintf("the %s message via %s (%s)", m.Message.Type, name, d.LastError))
		}
	}
	o.audit(o.Log, recs...)
	if len(lost) == 0 {
		return
	}
	o.Log.Info("gave up on one-off messages", "entry", e.Name(), "policy", e.Policy, "lost", lost)
	note := fmt.Sprintf("Gave up after %s on %s about %s %s", o.giveUpAfter(), strings.Join(lost, ", "), e.Object.Kind, objectName(e.Object))
	var regarding = objectRef(e)
	p := &v1alpha1.TimeoutPolicy{}
	if err := o.Objects.Get(ctx, types.NamespacedName{Name: e.Policy}, p); err == nil {
		regarding = &corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "TimeoutPolicy", Name: p.Name, UID: p.UID}
	}
	o.Recorder.Eventf(regarding, nil, corev1.EventTypeWarning, ReasonNotificationGivenUp, "Notify", "%s", note)
}

func (o *Outbox) record(e *Entry, m Message, at time.Time, typ audit.Type, channel, errText string) audit.Record {
	result := audit.OK
	if typ == audit.NotifyFailed {
		result = audit.Error
	}
	r := audit.Record{
		Time: at, Type: typ, Policy: e.Policy, Message: string(m.Message.Type), Channel: channel, Result: result, Error: errText,
		Object: audit.Object{APIVersion: e.Object.APIVersion, Kind: e.Object.Kind, Namespace: e.Object.Namespace, Name: e.Object.Name, UID: e.Object.UID},
	}
	if !m.Message.ExpiresAt.IsZero() {
		expires := m.Message.ExpiresAt
		r.ExpiresAt = &expires
	}
	return r
}

func (o *Outbox) audit(log logr.Logger, recs ...audit.Record) {
	if len(recs) == 0 {
		return
	}
	if err := o.Audit.Write(recs...); err != nil {
		log.Error(err, "audit trail", "records", len(recs))
	}
}

func objectRef(e *Entry) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: e.Object.APIVersion, Kind: e.Object.Kind, Namespace: e.Object.Namespace, Name: e.Object.Name, UID: e.Object.UID}
}

func objectName(o notify.Object) string {
	if o.Namespace == "" {
		return o.Name
	}
	return o.Namespace + "/" + o.Name
}
