// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
)

// History is what happened in one run, as the world saw it: the checks
// read nothing else, so that each can be fed a hand-made history.
type History struct {
	Now time.Time
	// Deletions are the deletes the API server accepted, with what the
	// world's own reading of the policies said about the object then.
	Deletions []Deletion
	// Sends are the controller's attempts to hand a message to a channel.
	Sends []Send
	// Events are the Kubernetes Events that announce a deletion time.
	Events []Announcement
	Audit  []audit.Record
	// Live are the objects that exist now, read the same way as Deletions.
	Live []Facts
	// Healthy says no channel ever failed or was slow: the promptness
	// promise applies to the objects of policies without a cap.
	Healthy bool
	// Excused is the end of the last interval the controller could not
	// act in (a clock jump) or see in (a cache lag): nothing can be on
	// time inside one.
	Excused time.Time
	// Settled says the channels have been healthy for the delivery bound.
	Settled bool
	// SleepStarts, ScaleDowns and CycleEvents are the sleeps the
	// controller started, its scale-downs, and its Slept and Woke Events.
	SleepStarts []SleepStart
	ScaleDowns  []ScaleDown
	CycleEvents []CycleEvent
	// Looks are the controller's looks at objects someone else had scaled
	// a workload of up during their sleep, which left them in it; WakeEnds
	// its wakes ending; Overrides its writes of the replicas of a running
	// workload.
	Looks     []Look
	WakeEnds  []WakeEnd
	Overrides []Override
}

// Facts is the world's reading of one object at one moment: the policy
// that governs it, and when it expires under that policy.
type Facts struct {
	UID  types.UID
	Name string
	Kept bool
	// Policy governs the object; empty when none does.
	Policy string
	DryRun bool
	// Capped: the policy caps its deletions per minute.
	Capped bool
	// Shadowed: an invalid policy might govern the object.
	Shadowed  bool
	ExpiresAt time.Time
	// Since is when the expiry was last set by hand (or the creation).
	Since         time.Time
	MinimumNotice time.Duration
	// StageApplies: a reminder stage of the policy falls due at or after
	// Since, so notice is owed even before any reminder went out.
	StageApplies bool
	// IdleAt is the last use the controller could know of plus the
	// policy's idleTTL, capped at MaxAt; zero without idleTTL. MaxAt is
	// the creation plus the policy's maxTTL; zero without one.
	IdleAt, MaxAt time.Time
	// DueBy is the latest the expiry may be: ExpiresAt, or later where
	// the controller may count a use from when it saw it.
	DueBy time.Time
	// Sleeps: the policy puts objects to sleep, for SleepDeleteAfter
	// before deleting them, after SleepPeriod (afterIdle or after).
	// SleepAt is the earliest the object may sleep, or when it went to
	// sleep; SleptAt is when it went to sleep (zero when the state says it
	// is awake), and UsedAsleep (MaybeUsedAsleep) says it was surely
	// (perhaps) used since.
	Sleeps                      bool
	SleepDeleteAfter            time.Duration
	SleepPeriod                 time.Duration
	SleepAt, SleptAt            time.Time
	UsedAsleep, MaybeUsedAsleep bool
}

// Deletion is one accepted delete.
type Deletion struct {
	At time.Time
	Facts
}

// Send is one attempt to hand a message to a channel.
type Send struct {
	At      time.Time
	ID      string
	UID     types.UID
	Type    v1alpha1.EventType
	Stage   string
	Channel string
	// Announced is the deletion time the message gives.
	Announced time.Time
	// Accepted: the receiver took it. Reported: the controller was told
	// so (a reset is accepted but not reported).
	Accepted, Reported bool
	// Cycle is, for a slept or woke message, the sleep or wake it is
	// about, as the object said when it went out.
	Cycle time.Time
	// IdleAt is, for a reminder, the object's last use plus idleTTL as
	// the world knew it when the message went out, where the controller's
	// cache showed that use too; zero otherwise.
	IdleAt time.Time
}

// Announcement is an Event that gives a deletion time.
type Announcement struct {
	At        time.Time
	UID       types.UID
	Reason    string
	Announced time.Time
}

// Violation is one broken promise.
type Violation struct {
	Check  string
	Detail string
}

func (v Violation) String() string { return v.Check + ": " + v.Detail }

// check is one invariant.
type check struct {
	name string
	fn   func(h *History) []Violation
}

// checks are the invariants, each a named function of a History.
var checks = []check{
	{"keptNotDeleted", keptNotDeleted},
	{"deletedOnlyWhenGoverned", deletedOnlyWhenGoverned},
	{"notBeforeIdle", notBeforeIdle},
	{"notBeforeExpiry", notBeforeExpiry},
	{"notBeforeAnnounced", notBeforeAnnounced},
	{"noticeGiven", noticeGiven},
	{"liveAfterNotice", liveAfterNotice},
	{"stageAcceptedOnce", stageAcceptedOnce},
	{"remindsOfTheCurrentDate", remindsOfTheCurrentDate},
	{"extendedOnlyAfterNotice", extendedOnlyAfterNotice},
	{"oneOffDelivered", oneOffDelivered},
	{"deletedPromptly", deletedPromptly},
	{"auditIntentAndOutcome", auditIntentAndOutcome},
	{"notAsleepEarly", notAsleepEarly},
	{"deletedOnlyAsleep", deletedOnlyAsleep},
	{"noFight", noFight},
	{"sleptWokeOnce", sleptWokeOnce},
	{"wokeAtNextLook", wokeAtNextLook},
	{"wokeExternallyNamed", wokeExternallyNamed},
	{"restoredOnWake", restoredOnWake},
	{"keepsTheirReplicas", keepsTheirReplicas},
}

func violation(name, format string, args ...any) Violation {
	return Violation{Check: name, Detail: fmt.Sprintf(format, args...)}
}

// keptNotDeleted: no object annotated keep=true is deleted.
func keptNotDeleted(h *History) []Violation {
	var out []Violation
	for _, d := range h.Deletions {
		if d.Kept {
			out = append(out, violation("keptNotDeleted", "%s deleted at %s while kept", d.Name, d.At.Format(time.RFC3339Nano)))
		}
	}
	return out
}

// deletedOnlyWhenGoverned: an object is deleted only under a valid policy
// that governs it at that moment and is not in dry-run mode; an object an
// invalid policy might govern is left alone.
func deletedOnlyWhenGoverned(h *History) []Violation {
	var out []Violation
	for _, d := range h.Deletions {
		switch {
		case d.Shadowed:
			out = append(out, violation("deletedOnlyWhenGoverned", "%s deleted at %s although an invalid policy might govern it", d.Name, d.At.Format(time.RFC3339Nano)))
		case d.Policy == "":
			out = append(out, violation("deletedOnlyWhenGoverned", "%s deleted at %s although no policy governs it", d.Name, d.At.Format(time.RFC3339Nano)))
		case d.DryRun:
			out = append(out, violation("deletedOnlyWhenGoverned", "%s deleted at %s under policy %s in dry-run mode", d.Name, d.At.Format(time.RFC3339Nano), d.Policy))
		}
	}
	return out
}

// notBeforeIdle: under a policy with idleTTL, no object is deleted before
// its last use plus idleTTL (capped at its creation plus maxTTL): use is
// its creation, its last-active annotation, and its last spec edit, which
// the controller may count later than it happened but never earlier.
func notBeforeIdle(h *History) []Violation {
	return deletedBefore(h, "notBeforeIdle", "its last use plus idleTTL", func(d Deletion) time.Time { return d.IdleAt })
}

// notBeforeExpiry: no object is deleted before its expiry under the
// policy that governs it at that moment.
func notBeforeExpiry(h *History) []Violation {
	return deletedBefore(h, "notBeforeExpiry", "its expiry", func(d Deletion) time.Time { return d.ExpiresAt })
}

// deletedBefore reports, as invariant name, each governed deletion that
// came before the time earliest gives for it, which what names.
func deletedBefore(h *History, name, what string, earliest func(Deletion) time.Time) []Violation {
	var out []Violation
	for _, d := range h.Deletions {
		if at := earliest(d); d.Policy != "" && d.At.Before(at) {
			out = append(out, violation(name, "%s deleted at %s, %s before %s under policy %s",
				d.Name, d.At.Format(time.RFC3339Nano), at.Sub(d.At), what, d.Policy))
		}
	}
	return out
}

// announcedFor is the latest deletion time a message or Event gave for
// uid, whatever expiry it was about: the controller keeps it across
// changes of expiry and never deletes before it. Only messages the
// controller learned were accepted count (one accepted but reset is the
// at-least-once edge: it may be sent again, never counted), and a
// would-delete message gives no deletion time.
func announcedFor(h *History, uid types.UID) time.Time {
	var latest time.Time
	for _, s := range h.Sends {
		if s.UID == uid && s.Reported && s.Type != v1alpha1.EventWouldDelete && s.Announced.After(latest) {
			latest = s.Announced
		}
	}
	for _, e := range h.Events {
		if e.UID == uid && e.Announced.After(latest) {
			latest = e.Announced
		}
	}
	return latest
}

// notBeforeAnnounced: no object is deleted before the latest deletion
// time a message or Event announced for it, even after its owner or a
// policy edit shortened its lifetime.
func notBeforeAnnounced(h *History) []Violation {
	var out []Violation
	for _, d := range h.Deletions {
		if at := announcedFor(h, d.UID); d.At.Before(at) {
			out = append(out, violation("notBeforeAnnounced", "%s deleted at %s, %s before the deletion time announced for it",
				d.Name, d.At.Format(time.RFC3339Nano), at.Sub(d.At)))
		}
	}
	return out
}

// firstReminder is when a reminder about uid first reached a receiver;
// zero when none has.
func firstReminder(h *History, uid types.UID) time.Time {
	var first time.Time
	for _, s := range h.Sends {
		// A reminder the receiver took while the controller saw a reset
		// is the at-least-once edge: the controller cannot count it.
		if s.UID == uid && s.Reported && s.Type == v1alpha1.EventReminder && (first.IsZero() || s.At.Before(first)) {
			first = s.At
		}
	}
	for _, e := range h.Events {
		// Where no channel carries reminders, the Event is the reminder.
		if e.UID == uid && e.Reason == "MessageSent" && (first.IsZero() || e.At.Before(first)) {
			first = e.At
		}
	}
	return first
}

// noticeOwed reports whether f's deletion owes the minimum notice: a
// reminder stage applies, or a reminder went out (the promise holds
// through extensions).
func noticeOwed(h *History, f Facts) bool {
	return f.MinimumNotice > 0 && (f.StageApplies || !firstReminder(h, f.UID).IsZero())
}

// noticeGiven: when notice is owed, no object is deleted before its first
// delivered reminder plus the minimum notice.
func noticeGiven(h *History) []Violation {
	var out []Violation
	for _, d := range h.Deletions {
		if d.Policy == "" || !noticeOwed(h, d.Facts) {
			continue
		}
		first := firstReminder(h, d.UID)
		switch {
		case first.IsZero():
			out = append(out, violation("noticeGiven", "%s deleted at %s without any reminder reaching anyone, %s of notice owed",
				d.Name, d.At.Format(time.RFC3339Nano), d.MinimumNotice))
		case d.At.Before(first.Add(d.MinimumNotice)):
			out = append(out, violation("noticeGiven", "%s deleted at %s, %s after its first reminder; %s of notice owed",
				d.Name, d.At.Format(time.RFC3339Nano), d.At.Sub(first), d.MinimumNotice))
		}
	}
	return out
}

// liveAfterNotice: an object whose deletion a dry run rehearsed (a
// would-delete message reached someone, and the controller was told so)
// and that is then deleted for real under a policy with a minimum notice
// goes no sooner than that notice after the first message that gave
// people a date since the rehearsal: going live is announced, with the
// notice the policy promises, whatever else changed the lifetime
// meanwhile. A receiver that takes the message and then resets the
// connection leaves the controller with a failed send, which it cannot
// tell from one that never arrived: as for reminders, the promise is
// about the messages the controller knows reached someone.
func liveAfterNotice(h *History) []Violation {
	var out []Violation
	for _, d := range h.Deletions {
		if d.Policy == "" || d.DryRun || d.MinimumNotice <= 0 {
			continue
		}
		var rehearsed, first time.Time
		for _, s := range h.Sends {
			if s.UID != d.UID || !s.Reported || s.At.After(d.At) {
				continue
			}
			switch {
			case s.Type == v1alpha1.EventWouldDelete:
				rehearsed, first = s.At, time.Time{}
			case !rehearsed.IsZero() && first.IsZero() && announcing(s.Type):
				first = s.At
			}
		}
		if rehearsed.IsZero() {
			continue
		}
		for _, e := range h.Events {
			if e.UID == d.UID && e.At.After(rehearsed) && (first.IsZero() || e.At.Before(first)) {
				first = e.At
			}
		}
		switch {
		case first.IsZero():
			out = append(out, violation("liveAfterNotice", "%s deleted at %s with no message since its deletion was rehearsed at %s; %s of notice owed",
				d.Name, d.At.Format(time.RFC3339Nano), rehearsed.Format(time.RFC3339Nano), d.MinimumNotice))
		case d.At.Before(first.Add(d.MinimumNotice)):
			out = append(out, violation("liveAfterNotice", "%s deleted at %s, %s after the first message since its rehearsal; %s of notice owed",
				d.Name, d.At.Format(time.RFC3339Nano), d.At.Sub(first), d.MinimumNotice))
		}
	}
	return out
}

// announcing reports whether messages of type t give people a deletion
// date ahead of it.
func announcing(t v1alpha1.EventType) bool {
	switch t {
	case v1alpha1.EventReminder, v1alpha1.EventExtended, v1alpha1.EventPostponed, v1alpha1.EventSlept, v1alpha1.EventWoke:
		return true
	}
	return false
}

// stageAcceptedOnce: each reminder stage reaches each channel at most once
// per expiry (one message ID). A repeat after a connection reset, where
// the receiver took it but the controller was told it failed, is the
// at-least-once edge and allowed.
func stageAcceptedOnce(h *History) []Violation {
	type key struct{ id, channel string }
	reportedOK := map[key]bool{}
	var out []Violation
	for _, s := range h.Sends {
		if !s.Accepted || s.Type != v1alpha1.EventReminder {
			continue
		}
		k := key{s.ID, s.Channel}
		if reportedOK[k] {
			out = append(out, violation("stageAcceptedOnce", "reminder %s about %s reached %s again at %s",
				s.Stage, s.UID, s.Channel, s.At.Format(time.RFC3339Nano)))
		}
		if s.Reported {
			reportedOK[k] = true
		}
	}
	return out
}

// remindsOfTheCurrentDate: no reminder announces a deletion time that a
// use the controller could see had already moved later: use re-arms the
// reminders for the new date.
func remindsOfTheCurrentDate(h *History) []Violation {
	var out []Violation
	for _, s := range h.Sends {
		if s.Type == v1alpha1.EventReminder && s.Announced.Before(s.IdleAt) {
			out = append(out, violation("remindsOfTheCurrentDate", "reminder %s about %s sent at %s announces %s, %s before its last use plus idleTTL",
				s.Stage, s.UID, s.At.Format(time.RFC3339Nano), s.Announced.Format(time.RFC3339Nano), s.IdleAt.Sub(s.Announced)))
		}
	}
	return out
}

// extendedOnlyAfterNotice: an extended message goes out only about an
// object someone had been told a deletion time for: a use or an extension
// nobody was reminded of before says nothing.
func extendedOnlyAfterNotice(h *History) []Violation {
	var out []Violation
	for _, s := range h.Sends {
		if s.Type != v1alpha1.EventExtended {
			continue
		}
		told := false
		for _, e := range h.Sends {
			// A slept or woke message gives the deletion time too.
			if e.UID == s.UID && e.Accepted && e.Type != v1alpha1.EventExtended && (!oneOffType(e.Type) || cycleType(e.Type) && e.Type != v1alpha1.EventSleeping) && !e.At.After(s.At) {
				told = true
				break
			}
		}
		if !told {
			out = append(out, violation("extendedOnlyAfterNotice", "extended message about %s sent at %s, announcing %s, although nobody had been told a deletion time",
				s.UID, s.At.Format(time.RFC3339Nano), s.Announced.Format(time.RFC3339Nano)))
		}
	}
	return out
}

// oneOffDelivered: every one-off message (expired, deleted, deletion
// failed) that a channel refused reaches that channel once
// the channel has recovered for the delivery bound.
func oneOffDelivered(h *History) []Violation {
	if !h.Settled {
		return nil
	}
	type key struct{ id, channel string }
	accepted := map[key]bool{}
	for _, s := range h.Sends {
		if s.Accepted {
			accepted[key{s.ID, s.Channel}] = true
		}
	}
	var out []Violation
	seen := map[key]bool{}
	for _, s := range h.Sends {
		k := key{s.ID, s.Channel}
		if s.Accepted || seen[k] || !oneOffType(s.Type) || cycleType(s.Type) || accepted[k] {
			continue
		}
		seen[k] = true
		out = append(out, violation("oneOffDelivered", "the %s message about %s, refused by %s at %s, never reached it",
			s.Type, s.UID, s.Channel, s.At.Format(time.RFC3339Nano)))
	}
	return out
}

// cycleType reports whether messages of type t tell of a sleep or a
// wake: recorded and retried while the sleep (or wake) lasts, dropped
// once it is over; the sleeping message, while its sleep time stands.
func cycleType(t v1alpha1.EventType) bool {
	return t == v1alpha1.EventSlept || t == v1alpha1.EventWoke || t == v1alpha1.EventSleeping
}

// oneOffType reports whether messages of type t go out once, after the
// fact; would-delete is recorded on the object and retried like a
// reminder, as long as the rehearsal it reports still stands.
func oneOffType(t v1alpha1.EventType) bool {
	switch t {
	case v1alpha1.EventReminder, v1alpha1.EventExtended, v1alpha1.EventPostponed, v1alpha1.EventWouldDelete:
		return false
	}
	return true
}

// promptness is how late a deletion may be with healthy channels and no cap.
const promptness = time.Second

// deletedPromptly: with healthy channels, every object governed by a
// policy without a cap (whatever the caps of others)
// is deleted within a second of falling due: its expiry (the maximum
// included, and keep ignored where the policy forbids it), or its first
// reminder plus the minimum notice, or the latest time announced.
func deletedPromptly(h *History) []Violation {
	if !h.Healthy {
		return nil
	}
	var out []Violation
	for _, f := range h.Live {
		if f.Kept || f.Policy == "" || f.DryRun || f.Shadowed || f.Capped {
			continue
		}
		due := f.ExpiresAt
		if f.DueBy.After(due) {
			due = f.DueBy
		}
		if f.Sleeps && (f.SleptAt.IsZero() || f.MaybeUsedAsleep) {
			// Awake, it must sleep first, for deleteAfter, unless its
			// maximum comes first.
			if f.MaxAt.IsZero() {
				continue
			}
			due = later(due, f.MaxAt)
		}
		if noticeOwed(h, f) {
			first := firstReminder(h, f.UID)
			if first.IsZero() {
				// The reminder is due first; its own lateness shows in the
				// deletion it holds up once it is sent.
				continue
			}
			if at := first.Add(f.MinimumNotice); at.After(due) {
				due = at
			}
		}
		if at := announcedFor(h, f.UID); at.After(due) {
			due = at
		}
		if h.Excused.After(due) {
			due = h.Excused
		}
		if h.Now.Sub(due) > promptness {
			out = append(out, violation("deletedPromptly", "%s fell due at %s and still exists at %s",
				f.Name, due.Format(time.RFC3339Nano), h.Now.Format(time.RFC3339Nano)))
		}
	}
	return out
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// intentType is the audit record written before each delete.
const intentType audit.Type = "deleting"

// auditIntentAndOutcome: every deletion has, in the audit trail, an
// intent written before it and an outcome.
func auditIntentAndOutcome(h *History) []Violation {
	var out []Violation
	for _, d := range h.Deletions {
		intent, outcome := false, false
		for _, r := range h.Audit {
			if r.Object.UID != d.UID {
				continue
			}
			switch {
			case r.Type == intentType && !r.Time.After(d.At):
				intent = true
			case r.Type == audit.Deleted:
				outcome = true
			}
		}
		if !intent || !outcome {
			out = append(out, violation("auditIntentAndOutcome", "%s deleted at %s: intent recorded %t, outcome recorded %t",
				d.Name, d.At.Format(time.RFC3339Nano), intent, outcome))
		}
	}
	return out
}

// violations runs every check that is not disabled.
func violations(h *History, disabled map[string]string) []Violation {
	var out []Violation
	for _, c := range checks {
		if _, off := disabled[c.name]; off {
			continue
		}
		out = append(out, c.fn(h)...)
	}
	return out
}
