// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"slices"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// Action is what the controller does next about an object.
type Action int

const (
	// Keep: the object never expires; nothing is scheduled.
	Keep Action = iota
	// Wait: nothing is due before Plan.At.
	Wait
	// Notify: a message is due to Plan.Channels.
	Notify
	// Delete: the object has expired and people have had their notice.
	Delete
	// Sleep: the object's sleep is due (or under way): scale it down.
	Sleep
	// Wake: the object is asleep and was used (or may no longer sleep):
	// restore what its sleep changed. Plan.WokeBy says why.
	Wake
)

func (a Action) String() string {
	switch a {
	case Keep:
		return "Keep"
	case Wait:
		return "Wait"
	case Notify:
		return "Notify"
	case Delete:
		return "Delete"
	case Sleep:
		return "Sleep"
	case Wake:
		return "Wake"
	}
	return "Unknown"
}

// Plan is the next action for an object.
type Plan struct {
	Action Action
	// At is, for Wait, when to look again; for Delete, the expiry; for
	// Notify, the time the message announces (the new deletion time for
	// a postponement, the expiry otherwise).
	At time.Time

	// Event, Key and Channels say, for Notify, what to send (a reminder,
	// an extension, a postponement), under which Record key, and to which
	// channels: those that have not accepted it yet.
	Event    v1alpha1.EventType
	Key      string
	Channels []string
	// Deadline is, for Notify, the next time something else falls due: a
	// failed delivery is retried no later than that, so that retries
	// never delay a reminder or a deletion.
	Deadline time.Time
	// WokeBy says, for Wake, what woke the object.
	WokeBy string
}

// Notice is what an object's record says of the reminders and the notice
// its current expiry owes.
type Notice struct {
	// Stages are the reminder leads that apply: those that fall due at or
	// after the record's Since, longest first.
	Stages []time.Duration
	// Sent says whether any of them went out, and ShortestSent is the
	// shortest that did.
	Sent         bool
	ShortestSent time.Duration
	// Given is when a reminder first reached someone; zero when none has.
	Given time.Time
	// Owed says the minimum notice applies: a stage applies, or a reminder
	// has gone out (the promise holds through extensions).
	Owed bool
}

// Applies reports whether the reminder with the given lead applies.
func (n Notice) Applies(lead time.Duration) bool {
	return slices.Contains(n.Stages, lead)
}

// NoticeOf reads the notice state of in's object. Next plans from it, and
// the plugin explains with it.
func NoticeOf(in Input) Notice {
	rec := in.Record
	n := Notice{Given: rec.NoticeAt}
	for _, lead := range in.Schedule.Reminders {
		due := in.Life.ExpiresAt.Add(-lead)
		// Under the idle clock, a reminder due at the last use or before
		// would warn people in the middle of using the object: a lead of
		// idleTTL or more does not apply.
		if (in.Life.Source == SourceIdle || in.Life.Source == SourceSleep) && !due.After(in.Life.LastActive) {
			continue
		}
		if !due.Before(rec.Since) {
			n.Stages = append(n.Stages, lead)
		}
	}
	for _, lead := range n.Stages {
		if d, ok := rec.Sent[StageKey(lead)]; ok {
			n.ShortestSent, n.Sent = lead, true
			// A record edited by hand may have lost its notice time: the
			// stages it shows sent are notice all the same.
			if rec.NoticeAt.IsZero() && (n.Given.IsZero() || d.At.Before(n.Given)) {
				n.Given = d.At
			}
		}
	}
	n.Owed = in.Schedule.MinimumNotice > 0 && (len(n.Stages) > 0 || !n.Given.IsZero())
	return n
}

// After is how long to wait from now until t. It is always positive, so a
// requeue can never turn into a hot loop.
func After(t, now time.Time) time.Duration {
	d := t.Sub(now)
	if d < time.Millisecond {
		return time.Millisecond
	}
	return d
}

// Input is what Next decides from.
type Input struct {
	Life     Lifetime
	Schedule Schedule
	// Record is the record for Life.ExpiresAt (see Record.For).
	Record *Record
	// Channels name, per recorded message type (reminder, extended,
	// postponed), the ways people are told. When no channel of a policy
	// carries a type, the Kubernetes Event does, and its name is the only
	// one for that type.
	Channels map[v1alpha1.EventType][]string
	// DryRun says the deletion is only rehearsed (the policy's dryRun, or
	// the controller's --dry-run).
	DryRun bool
	// WokeBy is use of a sleeping object that the caller saw and the
	// annotations do not show: a spec edit, a workload scaled up by
	// someone else. Empty when none.
	WokeBy string
	Now    time.Time
}

// Next plans what to do about an object.
//
// A reminder stage applies when it falls due at or after the record's
// Since (the object's creation, or the moment an extension was seen): an
// object whose whole life is shorter than a lead gets no reminder for it.
// Of the stages that are due and not yet delivered, only the most urgent
// is sent, and a delivered stage supersedes every longer one, so an object
// first seen late gets one reminder, not a burst. When the policy has a
// minimum notice and a stage applies (or a reminder has already gone out),
// the object is deleted no earlier than that long after the first delivered
// reminder: after its
// expiry, a postponement message announces the new time. Retries of
// partly delivered messages never hold up a deletion that is due. Under a
// dry run a deletion that is due is reported instead (see deletion).
func Next(in Input) Plan {
	if p, ok := nextSleep(in); ok {
		return p
	}
	p := next(in)
	if p.Action != Wait {
		return p
	}
	return sleepMessages(in, p)
}

func next(in Input) Plan {
	l, rec, now := in.Life, in.Record, in.Now
	if l.Keep {
		return Plan{Action: Keep}
	}
	expiresAt := l.ExpiresAt
	n := NoticeOf(in)
	stages, shortestSent, sent, noticeAt, owed := n.Stages, n.ShortestSent, n.Sent, n.Given, n.Owed

	// When the object may be deleted. Without a delivered reminder, a
	// notice that is owed cannot have been given: no deletion time yet,
	// and a stage is then always due by the expiry, so the branch below
	// keeps trying to deliver it.
	deleteAt := expiresAt
	if owed && !noticeAt.IsZero() {
		if t := noticeAt.Add(in.Schedule.MinimumNotice); t.After(deleteAt) {
			deleteAt = t
		}
	}
	// A postponement announced is kept, even if the policy's notice has
	// been lowered since.
	if rec.PostponedTo.After(deleteAt) {
		deleteAt = rec.PostponedTo
	}
	// Nor before any time a message gave, even for an expiry since
	// shortened.
	if rec.Announced.After(deleteAt) {
		deleteAt = rec.Announced
	}
	// Nor sooner than the minimum notice after the first reminder that
	// reached someone, whatever expiry it was about.
	if noticed := rec.Noticed; in.Schedule.MinimumNotice > 0 && !noticed.IsZero() {
		if t := noticed.Add(in.Schedule.MinimumNotice); t.After(deleteAt) {
			deleteAt = t
		}
	}
	blocked := owed && noticeAt.IsZero()
	// A deletion that is due comes first: a reminder it would overtake
	// has nothing left to announce, unless it is the notice still owed.
	if !blocked && !now.Before(deleteAt) {
		return deletion(in, deleteAt)
	}

	// The next stage to send: the most urgent of those due, or else the
	// time the next one falls due. Stages are sorted longest first.
	var upcoming time.Time
	for i := len(stages) - 1; i >= 0; i-- {
		lead := stages[i]
		if sent && lead >= shortestSent {
			continue
		}
		due := expiresAt.Add(-lead)
		if !due.After(now) {
			// Shorter stages were looked at first: upcoming is the next one.
			deadline := expiresAt
			if !upcoming.IsZero() && upcoming.Before(deadline) {
				deadline = upcoming
			}
			// The reminder announces when the object will really go: a
			// notice still owed after expiry starts with this reminder.
			at := deleteAt
			if blocked {
				at = later(expiresAt, now.Add(in.Schedule.MinimumNotice))
			}
			return Plan{Action: Notify, Event: v1alpha1.EventReminder, Key: StageKey(lead), At: at,
				Channels: in.Channels[v1alpha1.EventReminder], Deadline: deadline}
		}
		if upcoming.IsZero() || due.Before(upcoming) {
			upcoming = due
		}
	}

	deadline := expiresAt
	if !now.Before(expiresAt) {
		deadline = deleteAt
	}
	if !upcoming.IsZero() && upcoming.Before(deadline) {
		deadline = upcoming
	}

	if !now.Before(expiresAt) && deleteAt.After(expiresAt) {
		// Once the postponement on going live is out, it is the one people
		// are told of: the time it announced is the deletion time.
		key := KeyPostponed
		if _, ok := rec.Sent[KeyLive]; ok {
			key = KeyLive
		}
		if missing := rec.missing(key, in.Channels[v1alpha1.EventPostponed]); len(missing) > 0 {
			return Plan{Action: Notify, Event: v1alpha1.EventPostponed, Key: key, At: deleteAt,
				Channels: missing, Deadline: deadline}
		}
	}
	if sent {
		if missing := rec.missing(StageKey(shortestSent), in.Channels[v1alpha1.EventReminder]); len(missing) > 0 {
			return Plan{Action: Notify, Event: v1alpha1.EventReminder, Key: StageKey(shortestSent), At: deleteAt,
				Channels: missing, Deadline: deadline}
		}
	} else if !rec.ExtendedFrom.IsZero() {
		// A reminder for the new date tells the same news: no extension
		// message once one has gone out.
		if missing := rec.missing(KeyExtended, in.Channels[v1alpha1.EventExtended]); len(missing) > 0 {
			return Plan{Action: Notify, Event: v1alpha1.EventExtended, Key: KeyExtended, At: deleteAt,
				Channels: missing, Deadline: deadline}
		}
	}
	return Plan{Action: Wait, At: deadline}
}

// deletion plans a deletion that is due at deleteAt. Under a dry run it
// is rehearsed: reported once, and nothing more. A rehearsed deletion that
// goes live has had no notice that counts (whatever people were told led
// to nothing), so it is first postponed by the minimum notice from the
// moment it goes live; that moment is kept by the postponement's delivery
// (Record.PostponedTo), and until then nothing is deleted.
func deletion(in Input, deleteAt time.Time) Plan {
	rec, expiresAt := in.Record, in.Life.ExpiresAt
	if in.DryRun {
		if missing := rec.missing(KeyWouldDelete, in.Channels[v1alpha1.EventWouldDelete]); len(missing) > 0 {
			return Plan{Action: Notify, Event: v1alpha1.EventWouldDelete, Key: KeyWouldDelete, At: expiresAt, Channels: missing}
		}
		return Plan{Action: Delete, At: expiresAt}
	}
	// A record written before Rehearsed existed shows the rehearsal in Sent.
	_, rehearsed := rec.Sent[KeyWouldDelete]
	rehearsed = rehearsed || !rec.Rehearsed.IsZero()
	_, announced := rec.Sent[KeyLive]
	if rehearsed && !announced && in.Schedule.MinimumNotice > 0 {
		return Plan{Action: Notify, Event: v1alpha1.EventPostponed, Key: KeyLive,
			At: later(deleteAt, in.Now.Add(in.Schedule.MinimumNotice)), Channels: in.Channels[v1alpha1.EventPostponed]}
	}
	return Plan{Action: Delete, At: expiresAt}
}

func sooner(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Wake reasons the planner gives.
const (
	WokeByUse    = "use"
	WokeByKeep   = "the keep annotation"
	WokeByPolicy = "the policy no longer puts it to sleep"
)

// activity names what LastActive is: the use last-use describes ("exec
// by alice"), else ActiveBy.
func (l Lifetime) activity() string {
	if l.Use != nil {
		return l.Use.String()
	}
	return l.ActiveBy
}

// nextSleep plans a sleep or a wake, when one is due.
//
// A sleep or a wake under way is completed first. An object that sleeps
// wakes when it is used (the annotations show activity after it went to
// sleep, or the caller saw some: WokeBy), when it is kept, and when its
// policy no longer puts objects to sleep. An awake object is put to sleep
// at its SleepAt, never before, unless its deletion is due first (maxTTL);
// nothing sleeps under a dry run, which changes nothing.
func nextSleep(in Input) (Plan, bool) {
	l, s, now := in.Life, in.Schedule, in.Now
	st := l.Sleep
	if st.Phase == PhaseWaking {
		return Plan{Action: Wake, WokeBy: st.WokeBy, At: now}, true
	}
	if st.Sleeping() {
		switch {
		case !l.Max.IsZero() && !now.Before(l.Max):
			// At its maximum the deletion comes first, even before a sleep
			// that keeps failing.
			return Plan{}, false
		case l.Keep:
			return Plan{Action: Wake, WokeBy: WokeByKeep, At: now}, true
		case !s.Sleeps():
			return Plan{Action: Wake, WokeBy: WokeByPolicy, At: now}, true
		case !l.Asleep:
			return Plan{Action: Wake, WokeBy: WokeByUse + " (" + l.activity() + ")", At: now}, true
		case in.WokeBy != "":
			return Plan{Action: Wake, WokeBy: in.WokeBy, At: now}, true
		case st.Phase == PhaseSleeping:
			return Plan{Action: Sleep, At: l.SleepAt}, true
		}
		return Plan{}, false
	}
	// An awake object is deleted only at its maximum: until then, a sleep
	// that is due (or keeps failing) comes first.
	if l.Keep || !s.Sleeps() || in.DryRun || now.Before(l.SleepAt) || (!l.Max.IsZero() && !now.Before(l.Max)) {
		return Plan{}, false
	}
	return Plan{Action: Sleep, At: l.SleepAt}, true
}

// sleepMessages returns, for an object with nothing else to do before
// p.At, the slept or woke message still owed, or p moved to the sleep
// when that comes first.
func sleepMessages(in Input, p Plan) Plan {
	l, rec := in.Life, in.Record
	if rec != nil {
		deadline := p.At
		switch {
		case l.Asleep && l.Sleep.Phase == PhaseAsleep:
			key := KeySlept(l.Sleep.Since)
			if missing := rec.missing(key, in.Channels[v1alpha1.EventSlept]); len(missing) > 0 {
				return Plan{Action: Notify, Event: v1alpha1.EventSlept, Key: key, At: l.ExpiresAt, Channels: missing, Deadline: deadline}
			}
		case l.Sleep.Phase == PhaseAwake && !l.Sleep.Woke.IsZero():
			key := KeyWoke(l.Sleep.Woke)
			if missing := rec.missing(key, in.Channels[v1alpha1.EventWoke]); len(missing) > 0 {
				return Plan{Action: Notify, Event: v1alpha1.EventWoke, Key: key, At: l.ExpiresAt, Channels: missing, Deadline: deadline}
			}
		}
	}
	// Only a sleep that can still come: none does at or past the maximum
	// (nextSleep), and waiting for one there would be a hot loop.
	if !in.Schedule.Sleeps() || l.Asleep || l.Keep || in.DryRun || !l.Max.IsZero() && (!in.Now.Before(l.Max) || !l.SleepAt.Before(l.Max)) {
		return p
	}
	if lead := in.Schedule.SleepReminder; lead > 0 && rec != nil {
		// The sleeping message, once for each sleep time, unless it would
		// be due at the last use or before; a sleep that is due does not
		// wait for it (nextSleep comes first).
		due, key := l.SleepAt.Add(-lead), KeySleeping(l.SleepAt)
		switch missing := rec.missing(key, in.Channels[v1alpha1.EventSleeping]); {
		case l.SleepByUse && !due.After(l.LastActive) || len(missing) == 0:
		case in.Now.Before(due):
			if due.Before(p.At) {
				p.At = due
			}
		default:
			return Plan{Action: Notify, Event: v1alpha1.EventSleeping, Key: key, At: l.SleepAt, Channels: missing, Deadline: sooner(p.At, l.SleepAt)}
		}
	}
	if l.SleepAt.Before(p.At) {
		p.At = l.SleepAt
	}
	return p
}
