// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// AnnotationReminders holds the controller's Record on a governed object.
// The controller owns it; people should not edit it.
const AnnotationReminders = Prefix + "reminders"

// Message keys of the Record that are not reminder stages.
const (
	KeyExtended  = "extended"
	KeyPostponed = "postponed"
	// KeyWouldDelete is the report of a deletion rehearsed under a dry
	// run: said once per expiry, and the mark that whatever notice was
	// given then led to no deletion.
	KeyWouldDelete = "would-delete"
	// KeyLive is the postponement owed when a rehearsed deletion goes live
	// (the policy or the controller leaves dry run): people get the
	// minimum notice from then.
	KeyLive = "live"
)

// IsStage reports whether the Record key names a reminder stage rather
// than another message.
func IsStage(key string) bool {
	if _, ok := cycleKey(key); ok {
		return false
	}
	switch key {
	case KeyExtended, KeyPostponed, KeyWouldDelete, KeyLive:
		return false
	}
	return true
}

// StageKey is the Record key of the reminder with the given lead: "3d".
func StageKey(lead time.Duration) string {
	return FormatDuration(lead)
}

// Record is what the controller has told people about an object's current
// expiry. It lives on the object itself, so that a restart or another
// replica never sends the same thing twice.
type Record struct {
	// ExpiresAt is the expiry the record is about.
	ExpiresAt time.Time `json:"expiresAt"`
	// Since is when this expiry took effect: the object's creation, or the
	// moment an extension was seen. Reminders due before it do not apply.
	Since time.Time `json:"since"`
	// NoticeAt is when a reminder first reached someone. An extension
	// keeps it: people who were told of an earlier date have had notice.
	NoticeAt time.Time `json:"noticeAt,omitzero"`
	// ExtendedFrom is the previous expiry, when this one is an extension
	// that people had been told about.
	ExtendedFrom time.Time `json:"extendedFrom,omitzero"`
	// Title is the object's title (a Playbook's spec.title), read once for
	// its first message.
	Title string `json:"title,omitempty"`
	// PostponedTo is the deletion time a postponement message announced
	// (later, when its delivery was slow, by as much): the object is not
	// deleted before it, whatever the policy or its annotations say since.
	PostponedTo time.Time `json:"postponedTo,omitzero"`
	// Announced is the latest deletion time a message (a reminder, an
	// extension, a postponement) gave people, under this expiry or an
	// earlier one: the object is not deleted before it, so that a policy
	// edit or an annotation that shortens the lifetime never makes what
	// people were told false.
	Announced time.Time `json:"announced,omitzero"`
	// Noticed is when a reminder first reached someone about the object,
	// under this expiry or an earlier one: however the expiry moves, the
	// object is not deleted sooner than the minimum notice after it.
	Noticed time.Time `json:"noticed,omitzero"`
	// Rehearsed is when a rehearsed deletion (would-delete) was first
	// reported, until the postponement on going live (KeyLive) is out: it
	// outlives a change of the expiry, so that a dry run that goes live
	// gives its notice whatever the new policy makes of the lifetime.
	Rehearsed time.Time `json:"rehearsed,omitzero"`
	// Sent maps a message key (a reminder's StageKey, KeyExtended,
	// KeyPostponed, KeyWouldDelete, KeyLive) to its delivery.
	Sent map[string]Delivery `json:"sent,omitempty"`
	// Reported maps a warning said once per expiry (ReportNoticeNotGiven,
	// ReportDeletionFailed, ReportArchiveFailed, FailedReport) to when it
	// was said, so that a restart does not say it again.
	Reported map[string]time.Time `json:"reported,omitempty"`
	// Warned maps a warning about the object's annotations (WarnedTimeout,
	// WarnedRecipients) to a short digest of the values it complained
	// about, so that a restart does not repeat it while they stay wrong.
	// Unlike Reported it is about the object, not one expiry: it outlives
	// an extension. Two entries of 16 characters at most.
	Warned map[string]string `json:"warned,omitempty"`
	// Earlier are the latest earlier expiries that messages were delivered
	// about, newest first: when a policy edit moves the expiry back to one
	// of them, its reminders are not sent again. At most MaxEarlier, and
	// only while they fit in MaxEarlierSize; an expiry that comes back
	// after it was dropped gets its reminders again, with the same
	// message IDs.
	Earlier []Earlier `json:"earlier,omitempty"`
}

// Earlier is what was delivered about an expiry that is no longer the
// current one.
type Earlier struct {
	ExpiresAt time.Time `json:"expiresAt"`
	// NoticeAt is when a reminder about this expiry first reached someone.
	NoticeAt time.Time `json:"noticeAt,omitzero"`
	// ExtendedFrom is the expiry the extension message about this one
	// announced it was extended from.
	ExtendedFrom time.Time `json:"extendedFrom,omitzero"`
	// Sent are the reminder stages and the extension message delivered
	// about this expiry, as in Record.Sent.
	Sent map[string]Delivery `json:"sent"`
}

// The bounds of Record.Earlier. Four expiries cover a policy edit undone,
// and a few more; the size keeps the annotation far below the API server's
// 256 KiB for all of an object's annotations. Channels with ordinary names
// take about 1 KiB an expiry; ten channels with the longest names (253
// characters) for eleven messages take about 28 KiB, so that then only
// the latest earlier expiry is remembered, and the whole record stays
// under 72 KiB.
const (
	MaxEarlier     = 4
	MaxEarlierSize = 32 << 10
)

// Warnings said once per expiry.
const (
	ReportNoticeNotGiven = "notice-not-given"
	ReportDeletionFailed = "deletion-failed"
	ReportArchiveFailed  = "archive-failed"
)

// Keys of Record.Warned.
const (
	WarnedTimeout    = "invalid-timeout"
	WarnedRecipients = "invalid-recipient"
	WarnedOwner      = "owner-unreachable"
)

// FailedReport is the Reported key of the first failure to send the
// message key via channel.
func FailedReport(key, channel string) string {
	return "failed/" + key + "/" + channel
}

// Report records that the warning what was said at now, and reports
// whether it had not been said before.
func (r *Record) Report(what string, now time.Time) bool {
	if _, ok := r.Reported[what]; ok {
		return false
	}
	if r.Reported == nil {
		r.Reported = map[string]time.Time{}
	}
	r.Reported[what] = now
	return true
}

// Delivery records which channels accepted a message, and when the first
// of them did.
type Delivery struct {
	At       time.Time `json:"at"`
	Channels []string  `json:"channels"`
}

// ParseRecord reads the record annotation; an empty value is no record.
func ParseRecord(value string) (*Record, error) {
	if value == "" {
		return nil, nil
	}
	r := &Record{}
	if err := json.Unmarshal([]byte(value), r); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationReminders, err)
	}
	return r, nil
}

// Clone returns a copy of r that shares nothing with it.
func (r *Record) Clone() *Record {
	if r == nil {
		return nil
	}
	c := *r
	c.Sent = cloneSent(r.Sent)
	if c.Sent == nil {
		c.Sent = map[string]Delivery{}
	}
	c.Reported = maps.Clone(r.Reported)
	c.Warned = maps.Clone(r.Warned)
	c.Earlier = slices.Clone(r.Earlier)
	for i := range c.Earlier {
		c.Earlier[i].Sent = cloneSent(r.Earlier[i].Sent)
	}
	return &c
}

func cloneSent(sent map[string]Delivery) map[string]Delivery {
	if sent == nil {
		return nil
	}
	c := make(map[string]Delivery, len(sent))
	for k, d := range sent {
		d.Channels = slices.Clone(d.Channels)
		c[k] = d
	}
	return c
}

// String is the annotation value.
func (r *Record) String() string {
	b, _ := json.Marshal(r)
	return string(b)
}

// For returns the record for the expiry at, given the object's creation
// time and now. The same expiry keeps the record. A later one starts a new
// record that keeps the notice already given and, when people had been
// told of the old date, owes them an extended message; once notice has
// been given, stages that fell due before the extension are not caught up,
// and until it has, notice owed stays owed. An earlier one starts afresh
// from the object's creation: notice of a later date is no notice of an
// earlier one. An expiry the record remembers (Earlier) gets back the
// reminders delivered about it, and the notice they gave, so that moving
// the expiry away and back never repeats a stage; its extension message
// too, when it would announce the same extension.
func (r *Record) For(at, created, now time.Time) *Record {
	next := r.moveTo(at, created, now)
	if next == r || r == nil || r.ExpiresAt.IsZero() {
		return next
	}
	next.Earlier = r.remember(at)
	for _, e := range r.Earlier {
		if e.ExpiresAt.Equal(at) {
			next.restore(e)
		}
	}
	return next
}

// remember returns Earlier with the record's own expiry put first, without
// the expiry at (which becomes the current one again), within the bounds.
func (r *Record) remember(at time.Time) []Earlier {
	var out []Earlier
	if own := r.delivered(); len(own.Sent) > 0 {
		out = append(out, own)
	}
	for _, e := range r.Earlier {
		if !e.ExpiresAt.Equal(at) && !e.ExpiresAt.Equal(r.ExpiresAt) {
			out = append(out, Earlier{ExpiresAt: e.ExpiresAt, NoticeAt: e.NoticeAt, ExtendedFrom: e.ExtendedFrom, Sent: cloneSent(e.Sent)})
		}
	}
	out = out[:min(len(out), MaxEarlier)]
	for len(out) > 0 {
		if b, _ := json.Marshal(out); len(b) <= MaxEarlierSize {
			break
		}
		out = out[:len(out)-1]
	}
	return out
}

// delivered is what was delivered about the record's expiry, as an entry
// of Earlier: the reminders and the extension message, the messages that
// are said once per expiry and that its return must not repeat.
func (r *Record) delivered() Earlier {
	e := Earlier{ExpiresAt: r.ExpiresAt, ExtendedFrom: r.ExtendedFrom, Sent: map[string]Delivery{}}
	for k, d := range r.Sent {
		if IsStage(k) || k == KeyExtended {
			d.Channels = slices.Clone(d.Channels)
			e.Sent[k] = d
		}
	}
	if hasStage(e.Sent) {
		e.NoticeAt = r.NoticeAt
	}
	return e
}

// onlyCycleKeys reports whether sent holds nothing but slept and woke
// messages.
func onlyCycleKeys(sent map[string]Delivery) bool {
	for k := range sent {
		if _, ok := cycleKey(k); !ok {
			return false
		}
	}
	return true
}

func hasStage(sent map[string]Delivery) bool {
	for k := range sent {
		if IsStage(k) {
			return true
		}
	}
	return false
}

// restore counts what was delivered about the returning expiry e as
// delivered. The extension message counts only when it announced the same
// extension; the notice is the earliest either record knows of, since a
// reminder about this very date reached people then.
func (r *Record) restore(e Earlier) {
	for k, d := range e.Sent {
		if k == KeyExtended && (r.ExtendedFrom.IsZero() || !r.ExtendedFrom.Equal(e.ExtendedFrom)) {
			continue
		}
		if r.Sent == nil {
			r.Sent = map[string]Delivery{}
		}
		d.Channels = slices.Clone(d.Channels)
		r.Sent[k] = d
	}
	if !e.NoticeAt.IsZero() && (r.NoticeAt.IsZero() || e.NoticeAt.Before(r.NoticeAt)) {
		r.NoticeAt = e.NoticeAt
	}
}

// moveTo is For without the memory of earlier expiries. The warnings
// given about the object's annotations come along whatever the expiry.
func (r *Record) moveTo(at, created, now time.Time) *Record {
	next := r.moveExpiry(at, created, now)
	if next != r && r != nil && len(r.Warned) > 0 {
		next.Warned = maps.Clone(r.Warned)
	}
	// The slept and woke messages are about a sleep, not an expiry: they
	// come along too, so that each is said once.
	if next != r && r != nil {
		for k, d := range r.Sent {
			if _, ok := cycleKey(k); ok {
				if next.Sent == nil {
					next.Sent = map[string]Delivery{}
				}
				d.Channels = slices.Clone(d.Channels)
				next.Sent[k] = d
			}
		}
	}
	return next
}

func (r *Record) moveExpiry(at, created, now time.Time) *Record {
	switch {
	case r == nil || r.ExpiresAt.IsZero():
		// No record, or one that says nothing (an edited annotation): as
		// for an object first seen.
		return &Record{ExpiresAt: at, Since: created}
	case r.ExpiresAt.Equal(at):
		return r
	case at.After(r.ExpiresAt):
		next := &Record{ExpiresAt: at, Since: now, NoticeAt: r.NoticeAt, Title: r.Title, Announced: r.Announced, Noticed: r.Noticed,
			Rehearsed: r.Rehearsed, PostponedTo: r.PostponedTo}
		if r.NoticeAt.IsZero() {
			// Nobody has been told anything yet: the stages that were owed
			// stay owed (the most urgent is sent, then the minimum notice
			// runs), or an extension shorter than the shortest lead would
			// let the object go at the new date unannounced.
			next.Since = r.Since
		}
		if r.toldDate() {
			next.ExtendedFrom = r.ExpiresAt
		} else {
			// Extended again before the first extension message went out:
			// it is still owed.
			next.ExtendedFrom = r.ExtendedFrom
		}
		return next
	default:
		// Counted from creation, as for an object first seen: stages
		// already due are caught up and the notice is owed again. What
		// people were told still holds: no deletion before it.
		return &Record{ExpiresAt: at, Since: created, Title: r.Title, Announced: r.Announced, Noticed: r.Noticed,
			Rehearsed: r.Rehearsed, PostponedTo: r.PostponedTo}
	}
}

// toldDate reports whether a message that gives the deletion time went
// out: any but the sleeping message, which gives the time of a sleep.
func (r *Record) toldDate() bool {
	for k := range r.Sent {
		if !strings.HasPrefix(k, "sleeping/") {
			return true
		}
	}
	return false
}

// Announce records that a message gave people at as the deletion time.
func (r *Record) Announce(at time.Time) {
	if at.After(r.Announced) {
		r.Announced = at
	}
}

// Delivered records that channels accepted the message key at now, and
// that people have had notice when it is a reminder.
func (r *Record) Delivered(key string, reminder bool, channels []string, now time.Time) {
	if len(channels) == 0 {
		return
	}
	if r.Sent == nil {
		r.Sent = map[string]Delivery{}
	}
	// The messages of an earlier sleep or wake are no longer needed.
	if p, ok := cycleKey(key); ok {
		for k := range r.Sent {
			if k != key && strings.HasPrefix(k, p) {
				delete(r.Sent, k)
			}
		}
	}
	d, ok := r.Sent[key]
	if !ok {
		d.At = now
	}
	for _, c := range channels {
		if !slices.Contains(d.Channels, c) {
			d.Channels = append(d.Channels, c)
		}
	}
	slices.Sort(d.Channels)
	r.Sent[key] = d
	switch {
	case key == KeyWouldDelete && r.Rehearsed.IsZero():
		r.Rehearsed = now
	case key == KeyLive:
		r.Rehearsed = time.Time{}
	}
	if reminder && r.NoticeAt.IsZero() {
		r.NoticeAt = now
	}
	if reminder && r.Noticed.IsZero() {
		r.Noticed = now
	}
}

// missing returns the channels that have not accepted key.
func (r *Record) missing(key string, channels []string) []string {
	d, ok := r.Sent[key]
	if !ok {
		return channels
	}
	var out []string
	for _, c := range channels {
		if !slices.Contains(d.Channels, c) {
			out = append(out, c)
		}
	}
	return out
}
