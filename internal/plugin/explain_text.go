// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// The text form of an explanation; explain.go builds it.

package plugin

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
)

// writeDeletion says that an object in Terminating is being deleted, and
// what holds it; nothing when d is nil.
func writeDeletion(w io.Writer, d *DeletionInfo, now time.Time) {
	if d == nil {
		return
	}
	since := time.Time(d.Since)
	fmt.Fprintln(w, "\nDeletion:")
	fmt.Fprintf(w, "  it is being deleted: in Terminating since %s (%s)\n", formatTime(since), relative(since, now))
	fmt.Fprintln(w, "  "+heldBy(d.Finalizers))
}

// writeLifetime says what sets the object's expiry, its clocks, its last
// use and extensions, and what in its annotations is wrong.
func writeLifetime(w io.Writer, l *LifetimeInfo, now time.Time) {
	fmt.Fprintln(w, "\nLifetime:")
	switch {
	case l.Keep:
		fmt.Fprintf(w, "  kept: %s is %q; it never expires\n", expiry.AnnotationKeep, l.Value)
	case l.Source == expiry.SourceDefault:
		fmt.Fprintf(w, "  expires %s (%s)\n", formatTime(time.Time(*l.ExpiresAt)), relative(time.Time(*l.ExpiresAt), now))
		fmt.Fprintf(w, "  set by the policy's defaultTTL %s, counted from creation\n", l.Value)
	case l.Source == expiry.SourceIdle:
		fmt.Fprintf(w, "  expires %s (%s)\n", formatTime(time.Time(*l.ExpiresAt)), relative(time.Time(*l.ExpiresAt), now))
		fmt.Fprintf(w, "  set by the idle clock: idleTTL %s after its last use, which is later than its annotations or defaultTTL give\n", l.Value)
	case l.Source == expiry.SourceSleep:
		fmt.Fprintf(w, "  expires %s (%s)\n", formatTime(time.Time(*l.ExpiresAt)), relative(time.Time(*l.ExpiresAt), now))
		fmt.Fprintf(w, "  set by the sleep: the policy's sleep.deleteAfter %s after it goes to sleep, which is later than its annotations or defaultTTL give\n", l.Value)
	case l.Source == expiry.SourceMax:
		fmt.Fprintf(w, "  expires %s (%s)\n", formatTime(time.Time(*l.ExpiresAt)), relative(time.Time(*l.ExpiresAt), now))
		fmt.Fprintf(w, "  set by the maximum: the policy's maxTTL %s from creation caps a later expiry; no annotation, extension or use goes past it\n", l.Value)
	default:
		fmt.Fprintf(w, "  expires %s (%s)\n", formatTime(time.Time(*l.ExpiresAt)), relative(time.Time(*l.ExpiresAt), now))
		fmt.Fprintf(w, "  set by the annotation %s=%q", l.Source, l.Value)
		if l.Source != expiry.AnnotationExpiresAt {
			fmt.Fprint(w, ", counted from creation")
		}
		fmt.Fprintln(w)
	}
	if l.CreationClock != nil {
		fmt.Fprintf(w, "  clocks: creation %s", formatTime(time.Time(*l.CreationClock)))
		if l.IdleClock != nil {
			fmt.Fprintf(w, ", idle %s (last active %s, by %s)", formatTime(time.Time(*l.IdleClock)), formatTime(time.Time(*l.LastActive)), l.ActiveBy)
		}
		if l.Maximum != nil {
			fmt.Fprintf(w, ", maximum %s", formatTime(time.Time(*l.Maximum)))
		}
		fmt.Fprintf(w, "; the %s clock decides\n", l.Clock)
	}
	if l.LastUse != nil {
		fmt.Fprintf(w, "  last use: %s %s\n", l.LastUse, relative(l.LastUse.At, now))
	}
	if e := l.Extensions; e != nil {
		fmt.Fprintf(w, "  extensions: %s\n", extensionsText(e))
	}
	if c := l.ChangedBy; c != nil {
		fmt.Fprintf(w, "  last changed by %s (%s)\n", c.By, strings.Join(c.Changed, ", "))
	}
	for _, inv := range l.Invalid {
		fmt.Fprintf(w, "  invalid: %s=%q: expected %s; %s\n", inv.Annotation, inv.Value, inv.Expected, inv.Fallback)
	}
}

func writeExplanation(w io.Writer, x Explanation, now time.Time) {
	o := x.Object
	head := strings.ToLower(o.Kind) + "/" + o.Name
	if o.Namespace != "" {
		head += " in namespace " + o.Namespace
	}
	if o.Title != "" && o.Title != o.Name {
		head += fmt.Sprintf(" %q", o.Title)
	}
	fmt.Fprintln(w, head)
	fmt.Fprintf(w, "  created %s (%s)\n", formatTime(time.Time(o.Created)), relative(time.Time(o.Created), now))

	fmt.Fprintln(w, "\nPolicies:")
	if len(x.Policies) == 0 {
		fmt.Fprintln(w, "  there are no TimeoutPolicies")
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, p := range x.Policies {
		switch {
		case p.Governs:
			fmt.Fprintf(tw, "  %s\tgoverns it (priority %d)\n", p.Name, p.Priority)
			if p.Problem != "" {
				fmt.Fprintf(tw, "  \t%s\n", p.Problem)
			}
		case p.Reason == string(match.OtherKind) || p.Reason == string(match.Deleting):
			fmt.Fprintf(tw, "  %s\tdoes not apply: it %s\n", p.Name, p.Detail)
		case p.Reason == string(match.Outranked):
			fmt.Fprintf(tw, "  %s\t%s\n", p.Name, p.Detail)
		default:
			fmt.Fprintf(tw, "  %s\tdoes not select it: %s\n", p.Name, p.Detail)
		}
	}
	_ = tw.Flush()
	writeDeletion(w, x.Deletion, now)
	if x.Policy == "" {
		fmt.Fprintln(w, "\nNo policy governs it: the timeout-controller leaves it alone.")
		return
	}

	if l := x.Lifetime; l != nil {
		writeLifetime(w, l, now)
	}

	writeSleep(w, x, now)

	if n := x.Notice; n != nil {
		fmt.Fprintln(w, "\nMinimum notice:")
		switch {
		case n.MinimumNotice == "0s":
			fmt.Fprintln(w, "  none: the policy sets minimumNotice to 0s")
		case !n.Owed:
			fmt.Fprintf(w, "  %s, not owed: no reminder applies to this lifetime\n", n.MinimumNotice)
		case n.GivenAt == nil:
			fmt.Fprintf(w, "  %s, owed: no reminder has reached anyone yet; the deletion comes at least %s after the first one does\n", n.MinimumNotice, n.MinimumNotice)
		default:
			fmt.Fprintf(w, "  %s, owed: first given %s, so not deleted before %s\n", n.MinimumNotice,
				formatTime(time.Time(*n.GivenAt)), formatTime(time.Time(*n.EarliestDeletion)))
		}
	}

	if len(x.Reminders) > 0 {
		fmt.Fprintln(w, "\nReminders:")
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		for _, r := range x.Reminders {
			line := fmt.Sprintf("  %s\tdue %s\t%s", r.Stage, formatTime(time.Time(r.DueAt)), r.State)
			switch r.State {
			case "sent":
				line += fmt.Sprintf(" %s via %s", formatTime(time.Time(*r.SentAt)), strings.Join(r.Channels, ", "))
			case "upcoming":
				line += fmt.Sprintf(" (%s) via %s", relative(time.Time(r.DueAt), now), strings.Join(r.Channels, ", "))
			}
			if r.Detail != "" {
				line += ": " + r.Detail
			}
			fmt.Fprintln(tw, line)
		}
		_ = tw.Flush()
	} else if x.Lifetime != nil && !x.Lifetime.Keep {
		fmt.Fprintln(w, "\nReminders:\n  none: the policy has no reminders")
	}

	if len(x.Next) > 0 {
		fmt.Fprintln(w, "\nWhat happens next (if every message is accepted on time):")
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		for _, s := range x.Next {
			when := formatTime(time.Time(s.At)) + "\t(" + relative(time.Time(s.At), now) + ")"
			what := nextWhat(s)
			fmt.Fprintf(tw, "  %s\t%s\n", when, what)
		}
		_ = tw.Flush()
	}
	if len(x.Notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range x.Notes {
			fmt.Fprintln(w, "Note: "+n)
		}
	}
}

// nextWhat says what a step of the plan does.
func nextWhat(s NextStep) string {
	switch s.Action {
	case ActionDelete:
		return "deleted"
	case ActionSleep:
		return "put to sleep: its workloads scaled to 0"
	case ActionWake:
		return "woken by " + s.WokeBy + ": what its sleep scaled down is restored"
	case "would-delete":
		return "WouldDelete Event (dry run; not deleted)"
	case string(v1alpha1.EventReminder):
		return fmt.Sprintf("%s reminder via %s, announcing deletion at %s", s.Stage, strings.Join(s.Channels, ", "), formatTime(time.Time(*s.Announces)))
	default:
		return fmt.Sprintf("%s message via %s, announcing deletion at %s", s.Action, strings.Join(s.Channels, ", "), formatTime(time.Time(*s.Announces)))
	}
}

// writeSleep says when the object sleeps or since when it sleeps, what
// wakes it, and when it is deleted; nothing without a sleep.
func writeSleep(w io.Writer, x Explanation, now time.Time) {
	si := x.Sleep
	if si == nil {
		return
	}
	fmt.Fprintln(w, "\nSleep:")
	switch {
	case si.AfterIdle != "":
		fmt.Fprintf(w, "  the policy puts it to sleep %s after its last use, and deletes it %s after it went to sleep\n", si.AfterIdle, si.DeleteAfter)
	case si.After != "":
		fmt.Fprintf(w, "  the policy puts it to sleep %s after its creation or last wake, and deletes it %s after it went to sleep\n", si.After, si.DeleteAfter)
	default:
		fmt.Fprintln(w, "  the policy no longer puts objects to sleep")
	}
	fmt.Fprintln(w, "  "+sleepSentence(si, now))
	if si.State == SleepAsleep && si.FreedReplicas > 0 {
		fmt.Fprintln(w, "  its sleep freed "+freed(si))
	}
	if si.Woke != nil && si.State != SleepWaking {
		fmt.Fprintf(w, "  last woke %s (%s), by %s\n", formatTime(time.Time(*si.Woke)), relative(time.Time(*si.Woke), now), si.WokeBy)
	}
	if x.WakesOn != "" {
		fmt.Fprintln(w, "  wakes on "+x.WakesOn)
	}
	switch d := x.DeleteAt; {
	case x.Lifetime != nil && x.Lifetime.Keep:
		fmt.Fprintln(w, "  kept: it neither sleeps nor is deleted")
	case d == nil:
	case si.State == SleepAsleep:
		fmt.Fprintf(w, "  deleted %s (%s) if it sleeps until then\n", formatTime(time.Time(*d)), relative(time.Time(*d), now))
	default:
		fmt.Fprintf(w, "  deleted %s (%s) if nobody uses it\n", formatTime(time.Time(*d)), relative(time.Time(*d), now))
	}
}

// heldBy says which finalizers still hold an object in Terminating.
func heldBy(finalizers []string) string {
	switch len(finalizers) {
	case 0:
		return "no finalizer is left on it: it is gone as soon as the API server removes it"
	case 1:
		return "the finalizer " + finalizers[0] + " still holds it: neither it nor what it owns is freed until it has run"
	}
	return "the finalizers " + strings.Join(finalizers, ", ") + " still hold it: neither it nor what it owns is freed until they have run"
}

// extensionsText says what the limits allow and what was used.
func extensionsText(e *ExtensionsInfo) string {
	s := e.Summary
	if s == "" {
		s = "none used"
	}
	var limits []string
	if e.MaxStep != "" {
		limits = append(limits, "at most "+e.MaxStep+" each")
	}
	if e.MaxCount != nil {
		limits = append(limits, fmt.Sprintf("at most %d", *e.MaxCount))
	}
	if len(e.Exempt) > 0 {
		limits = append(limits, "more by "+strings.Join(e.Exempt, " or "))
	}
	return s + " (limits: " + strings.Join(limits, ", ") + ")"
}
