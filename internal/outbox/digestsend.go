// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Sending owners' digests: closing, sending, and writing the members'
// records; digest.go keeps the entries.

package outbox

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Marker reads and writes the records of a digest's members.
type Marker interface {
	// Current reports whether m's object is still there, with m's UID and
	// the expiry m.ExpiresAt, and still owes its owner the stage.
	Current(ctx context.Context, d *Digest, m Member) (bool, error)
	// Mark writes on m's object that d's stage reached its owner at at,
	// only while its expiry is m.ExpiresAt (locked on its
	// resourceVersion). An object gone, or with another expiry since, is
	// no error: there is nothing to write.
	Mark(ctx context.Context, d *Digest, m Member, at time.Time) error
}

// AddDigest hands a digest just written to the sender.
func (o *Outbox) AddDigest(d *Digest) {
	o.mu.Lock()
	o.init()
	if _, ok := o.digests[d.Name()]; !ok {
		o.digests[d.Name()] = &trackedDigest{digest: d}
	}
	o.mu.Unlock()
	o.poke()
}

type trackedDigest struct {
	digest    *Digest
	notBefore time.Time
}

// loadDigests adds the stored digests to those this process knows.
func (o *Outbox) loadDigests(ctx context.Context) error {
	if o.Marker == nil {
		return nil
	}
	digests, errs, err := o.Store.ListDigests(ctx)
	if err != nil {
		return err
	}
	for _, err := range errs {
		o.Log.Error(err, "skipping an unreadable digest")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.init()
	for _, d := range digests {
		if _, ok := o.digests[d.Name()]; !ok {
			o.digests[d.Name()] = &trackedDigest{digest: d}
		}
	}
	return nil
}

// passDigests works on every digest that is due, one after the other, and
// returns when the next one is.
func (o *Outbox) passDigests(ctx context.Context, now time.Time) time.Time {
	next := now.Add(idle)
	if o.Marker == nil {
		return next
	}
	o.mu.Lock()
	var due []*trackedDigest
	for _, t := range o.digests {
		if at := digestDueAt(t); !at.After(now) {
			due = append(due, t)
		} else if at.Before(next) {
			next = at
		}
	}
	o.mu.Unlock()
	for _, t := range due {
		done := o.processDigest(ctx, t)
		o.mu.Lock()
		if done {
			delete(o.digests, t.digest.Name())
		} else if at := digestDueAt(t); at.Before(next) {
			next = at
		}
		o.mu.Unlock()
	}
	return next
}

// digestDueAt is when t needs looking at next. Called with o.mu held.
func digestDueAt(t *trackedDigest) time.Time {
	d := t.digest
	if d.State != DigestSending {
		return t.notBefore
	}
	var at time.Time
	for _, c := range d.Channels {
		if at.IsZero() || c.NextAttempt.Before(at) {
			at = c.NextAttempt
		}
	}
	return later(at, t.notBefore)
}

// processDigest takes t one step as far as it goes: it closes an open
// digest, sends a closed one, and writes the records of a sent one. It
// reports whether the digest is finished and removed.
func (o *Outbox) processDigest(ctx context.Context, t *trackedDigest) bool {
	d := t.digest
	log := o.Log.WithValues("digest", d.Name(), "policy", d.Policy, "stage", d.Stage)
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	retry := func(err error, msg string) bool {
		log.Error(err, msg)
		if apierrors.IsConflict(err) {
			// Someone joined it: read it again.
			if fresh, err := o.Store.GetDigest(writeCtx, d.Name()); err == nil {
				t.digest = fresh
			}
		}
		t.notBefore = o.Clock.Now().Add(apiRetry)
		return false
	}

	if d.State == DigestOpen {
		// Its members are fixed now: those still there, with the expiry
		// they were listed with.
		for i := range d.Members {
			m := &d.Members[i]
			current, err := o.Marker.Current(ctx, d, *m)
			if err != nil {
				return retry(err, "check a digest's member")
			}
			m.Dropped = !current
			m.Recorded = !current
		}
		d.State = DigestSending
		if err := o.Store.UpdateDigest(writeCtx, d); err != nil {
			d.State = DigestOpen
			return retry(err, "close a digest")
		}
	}

	if d.State == DigestSending && !slices.ContainsFunc(d.Members, func(m Member) bool { return !m.Dropped }) {
		log.Info("dropping a digest whose members are all gone or extended")
		if err := o.Store.RemoveDigest(writeCtx, d); err != nil {
			return retry(err, "remove an empty digest")
		}
		return true
	}

	if d.State == DigestSending {
		if !o.sendDigest(ctx, d, log) {
			if len(d.Channels) == 0 {
				// The policy was changed: its members' reminders go out
				// one by one, as their own reconciles plan them now.
				log.Info("dropping a digest that none of its channels carries any more")
				if err := o.Store.RemoveDigest(writeCtx, d); err != nil {
					return retry(err, "remove a digest no channel carries")
				}
				return true
			}
			// Each channel backs off on its own; a digest left with none
			// to try is looked at again later, not at once.
			t.notBefore = o.Clock.Now().Add(apiRetry)
			if err := o.Store.UpdateDigest(writeCtx, d); err != nil && !apierrors.IsNotFound(err) {
				log.Error(err, "record digest attempts")
			}
			return false
		}
		// Accepted. Until the entry says so, a next leader sends it again
		// with the same Message-ID: the window every message has.
		d.State = DigestSent
		if err := o.Store.UpdateDigest(writeCtx, d); err != nil {
			d.State = DigestSending
			return retry(err, "record a digest sent")
		}
	}

	// Sent: write every member's record.
	var failed error
	for i := range d.Members {
		m := &d.Members[i]
		if m.Recorded {
			continue
		}
		if err := o.Marker.Mark(writeCtx, d, *m, d.SentAt); err != nil {
			failed = errors.Join(failed, err)
			continue
		}
		m.Recorded = true
	}
	if failed != nil {
		if err := o.Store.UpdateDigest(writeCtx, d); err != nil {
			log.Error(err, "record the digest's marked members")
		}
		return retry(failed, "mark the members of a digest sent")
	}
	if err := o.Store.RemoveDigest(writeCtx, d); err != nil {
		return retry(err, "remove a digest done")
	}
	return true
}

// sendDigest tries d's channels that are due in turn until one accepts
// it, and reports whether one did. The owner gets it once, not once per
// channel.
func (o *Outbox) sendDigest(ctx context.Context, d *Digest, log logr.Logger) bool {
	sendCtx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	now := o.Clock.Now()
	msg := d.message(now)
	for _, name := range slices.Sorted(maps.Keys(d.Channels)) {
		c := d.Channels[name]
		if c.NextAttempt.After(now) {
			continue
		}
		results, err := o.Deliverer.Deliver(sendCtx, d.Policy, msg, []string{name})
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			err = results[name]
		}
		at := o.Clock.Now()
		if err == nil {
			c.Accepted, c.LastError = true, ""
			d.SentAt = at
			log.Info("digest sent", "channel", name, "members", len(msg.Digest.Items))
			return true
		}
		if errors.Is(err, ErrNotCarried) {
			log.Info("channel no longer carries the digest", "channel", name)
			delete(d.Channels, name)
			continue
		}
		c.Attempts++
		c.LastError = err.Error()
		c.NextAttempt = at.Add(backoff(c.Attempts))
		log.Error(err, "digest failed; retrying", "channel", name, "attempt", c.Attempts, "next", c.NextAttempt)
	}
	return false
}
