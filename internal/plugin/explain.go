// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
)

// Explanation is explain's JSON and YAML output.
type Explanation struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Object     Object `json:"object"`
	// Policy is the governing policy; empty when none governs the object.
	Policy   string          `json:"policy,omitempty"`
	Policies []PolicyVerdict `json:"policies"`
	// Deletion is set when the object is in Terminating; lifetime,
	// notice, reminders and next steps are then absent.
	Deletion *DeletionInfo `json:"deletion,omitempty"`
	// Lifetime is absent when no policy with a usable spec governs it.
	Lifetime *LifetimeInfo `json:"lifetime,omitempty"`
	// Sleep is the object's sleep, under a policy with spec.sleep; WakesOn
	// says what wakes it.
	Sleep     *SleepInfo      `json:"sleep,omitempty"`
	WakesOn   string          `json:"wakesOn,omitempty"`
	Notice    *NoticeInfo     `json:"notice,omitempty"`
	Reminders []ReminderState `json:"reminders,omitempty"`
	// Next is what the controller will do, in order, if every message
	// is accepted on time; the deletion is last.
	Next     []NextStep `json:"next,omitempty"`
	DeleteAt *Time      `json:"deleteAt,omitempty"`
	Notes    []string   `json:"notes,omitempty"`
}

// objectOf names the object ev is about.
func objectOf(ev *Evaluation) Object {
	obj := ev.Object
	apiVersion, kind := ev.GVK.ToAPIVersionAndKind()
	return Object{
		APIVersion: apiVersion, Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(),
		UID: string(obj.GetUID()), Title: title(obj), Created: Time(obj.GetCreationTimestamp().Time),
	}
}

// Object names the explained or listed object.
type Object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	Title      string `json:"title,omitempty"`
	Created    Time   `json:"created"`
}

// PolicyVerdict is what one policy makes of the object.
type PolicyVerdict struct {
	Name     string `json:"name"`
	Priority int32  `json:"priority"`
	Governs  bool   `json:"governs"`
	// Reason and Detail say why it does not govern the object.
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Ready is the policy's Ready condition, when it has one.
	Ready string `json:"ready,omitempty"`
	// Problem says what is wrong with a governing policy that does
	// nothing: an unusable spec, or channels that cannot be built.
	Problem string `json:"problem,omitempty"`
}

// DeletionInfo is the deletion of an object in Terminating.
type DeletionInfo struct {
	// Since is the object's deletionTimestamp: when its deletion began.
	Since Time `json:"since"`
	// Finalizers are the finalizers left on the object: neither it nor
	// what it owns is freed until they have run.
	Finalizers []string `json:"finalizers"`
}

// deletionOf is the deletion of ev's object; nil when it has not begun.
func deletionOf(ev *Evaluation) *DeletionInfo {
	since := ev.Object.GetDeletionTimestamp()
	if since == nil {
		return nil
	}
	finalizers := ev.Object.GetFinalizers()
	if finalizers == nil {
		finalizers = []string{}
	}
	return &DeletionInfo{Since: Time(since.Time), Finalizers: finalizers}
}

// LifetimeInfo is how the expiry was worked out.
type LifetimeInfo struct {
	Keep      bool   `json:"keep"`
	ExpiresAt *Time  `json:"expiresAt,omitempty"`
	Source    string `json:"source,omitempty"`
	// Value is the source annotation's value, or the policy's defaultTTL,
	// idleTTL or maxTTL.
	Value   string        `json:"value,omitempty"`
	Invalid []InvalidInfo `json:"invalid,omitempty"`
	// Clock says which clock sets the expiry: creation (annotations or
	// defaultTTL), idle (last activity plus idleTTL) or maximum (maxTTL).
	Clock string `json:"clock,omitempty"`
	// CreationClock is the expiry the annotations or defaultTTL give.
	CreationClock *Time `json:"creationClock,omitempty"`
	// IdleClock is the last activity plus idleTTL, under a policy with
	// idleTTL; LastActive is that activity and ActiveBy what recorded it.
	IdleClock  *Time  `json:"idleClock,omitempty"`
	LastActive *Time  `json:"lastActive,omitempty"`
	ActiveBy   string `json:"activeBy,omitempty"`
	// LastUse is how and by whom LastActive was used, when the
	// last-use annotation says (an exec, a port-forward, traffic...).
	LastUse *expiry.Use `json:"lastUse,omitempty"`
	// Maximum is creation plus maxTTL, under a policy with maxTTL.
	Maximum *Time `json:"maximum,omitempty"`
	// KeepRefused says the object asks to be kept and its policy forbids it.
	KeepRefused bool `json:"keepRefused,omitempty"`
	// Extensions is the account of the object's extensions under its
	// policy's extension limits.
	Extensions *ExtensionsInfo `json:"extensions,omitempty"`
	// ChangedBy is who last changed the lifetime annotations, as the
	// changed-by stamp says.
	ChangedBy *expiry.ChangedBy `json:"changedBy,omitempty"`
}

// ExtensionsInfo is the account of an object's extensions under limits.
type ExtensionsInfo struct {
	Used int `json:"used"`
	// MaxCount is how many the policy allows; absent without a bound.
	MaxCount *int `json:"maxCount,omitempty"`
	// MaxStep is how far one may move the expiry; "" without a bound.
	MaxStep string `json:"maxStep,omitempty"`
	// Exempt are the groups that may go past the limits.
	Exempt []string `json:"exempt,omitempty"`
	// By and At: who made the last extension, and when the controller
	// first saw it.
	By string `json:"by,omitempty"`
	At *Time  `json:"at,omitempty"`
	// Summary says it for people: "extended by alice@example.com 2d ago,
	// 1 of 3 extensions used".
	Summary string `json:"summary,omitempty"`
}

// InvalidInfo is an annotation whose value cannot be used.
type InvalidInfo struct {
	Annotation string `json:"annotation"`
	Value      string `json:"value"`
	Expected   string `json:"expected"`
	Fallback   string `json:"fallback"`
}

// NoticeInfo is the state of the minimum notice.
type NoticeInfo struct {
	MinimumNotice string `json:"minimumNotice"`
	// Owed is set when the object may not be deleted sooner than the
	// minimum notice after its first delivered reminder.
	Owed bool `json:"owed"`
	// GivenAt is when a reminder first reached someone.
	GivenAt *Time `json:"givenAt,omitempty"`
	// EarliestDeletion is GivenAt plus the minimum notice.
	EarliestDeletion *Time `json:"earliestDeletion,omitempty"`
}

// ReminderState is one reminder stage of the governing policy.
type ReminderState struct {
	Stage string `json:"stage"`
	DueAt Time   `json:"dueAt"`
	// State: sent, upcoming, due (now), skipped, not-applicable.
	State    string   `json:"state"`
	SentAt   *Time    `json:"sentAt,omitempty"`
	Channels []string `json:"channels,omitempty"`
	Detail   string   `json:"detail,omitempty"`
}

// NextStep is one thing the controller will do.
type NextStep struct {
	At        Time     `json:"at"`
	Action    string   `json:"action"`
	Stage     string   `json:"stage,omitempty"`
	Announces *Time    `json:"announces,omitempty"`
	Channels  []string `json:"channels,omitempty"`
	// WokeBy says, for a wake, what wakes the object.
	WokeBy string `json:"wokeBy,omitempty"`
}

func newExplainCommand(o *Options) *cobra.Command {
	return nameCommand(o, &cobra.Command{
		Use:   "explain [KIND/]NAME",
		Short: "Say why an object expires when it does",
		Long: `Say why an object expires when it does: which TimeoutPolicy governs it and
why the others do not, which annotation or default set its expiry, what
the minimum notice requires, which reminders were sent and which are due,
and what the controller will do next, and when. For an object in
Terminating, it says since when it is being deleted and which finalizers
still hold it. Under a policy with spec.sleep, it says when the object goes
to sleep (or since when it sleeps), what wakes it, and when it is deleted.

NAME is the object's name or, for a Playbook, its title. KIND/NAME
(playbook/2b1e7c9e-...) picks the kind when several are governed.`,
		Example: `  kubectl timeout explain 2b1e7c9e-3f7a-4c61-9a51-0f3c2d7e8a10
  kubectl timeout explain "Weekend demo"
  kubectl timeout explain configmap/scratch -n dev -o json`,
	}, nameArgs{run: runExplain})
}

// runExplain explains the named object; one that no policy governs is
// explained too, and exits with ExitNotGoverned.
func runExplain(ctx context.Context, n *named) error {
	s, err := newSession(n.o, n.all)
	if err != nil {
		return err
	}
	if err := s.loadPolicies(ctx); err != nil {
		return err
	}
	f, err := s.find(ctx, n.ref)
	if err != nil {
		return err
	}
	ev, err := s.evaluate(ctx, f.kind, f.obj)
	if err != nil {
		return err
	}
	x := Explain(ev)
	if n.output != "text" {
		return writeStructured(n.o.Out, n.output, x)
	}
	writeExplanation(n.o.Out, x, ev.Now)
	if ev.Governing == nil {
		return withCode(ExitNotGoverned, "%s is not governed by any TimeoutPolicy", f)
	}
	return nil
}

// Explain turns an evaluation into its explanation. It stops where the
// controller stops: with no governing policy, an object being deleted, an
// unusable spec or a kept object there is no lifetime, notice or plan to
// tell.
func Explain(ev *Evaluation) Explanation {
	x := Explanation{
		APIVersion: "timeout.amphitheatre.app/v1alpha1", Kind: "Explanation",
		Object:   objectOf(ev),
		Policies: []PolicyVerdict{},
		Deletion: deletionOf(ev),
	}
	for _, v := range ev.Verdicts {
		x.Policies = append(x.Policies, verdictOf(v))
	}
	if ev.Governing == nil {
		return x
	}
	x.Policy = ev.Governing.Name
	if x.Deletion != nil {
		x.Notes = append(x.Notes, "The timeout-controller has nothing left to do: it neither reminds about nor deletes an object whose deletion has begun. "+
			"If the object stays in Terminating, the controller records a DeletionStuck Event naming the finalizers left.")
		return x
	}
	if ev.Governing.SpecErr != nil {
		x.Notes = append(x.Notes, "Nothing happens to the object until the policy's spec is fixed.")
		return x
	}
	x.Lifetime = lifetimeOf(ev)
	if x.Sleep = sleepOf(ev); x.Sleep != nil && ev.Governing.Schedule.Sleeps() && !ev.Life.Keep {
		x.WakesOn = wakesOn
	}
	if ev.Life.Keep {
		x.Notes = append(x.Notes, "The object is kept: it never expires. `kubectl timeout unkeep` puts it back under its policy.")
		return x
	}
	// The planner's own reading of the record: which stages apply, and the
	// notice given and owed.
	state := expiry.NoticeOf(expiry.Input{Life: ev.Life, Schedule: ev.Governing.Schedule, Record: ev.Record, Channels: ev.Channels, Now: ev.Now})
	x.Notice = noticeOf(state, ev.Governing.Schedule.MinimumNotice)
	x.Reminders = remindersOf(ev, state)
	x.Next = nextOf(ev)
	x.DeleteAt = timePtr(ev.DeleteAt())
	x.Notes = notesOf(ev, x.Notice)
	return x
}

// verdictOf is what one policy makes of the object, with what is wrong
// with it when it governs and does nothing.
func verdictOf(v match.Verdict) PolicyVerdict {
	pv := PolicyVerdict{Name: v.Policy.Name, Priority: v.Policy.Spec.Priority, Governs: v.Governs, Ready: readyStatus(v.Policy)}
	if v.Mismatch != nil {
		pv.Reason, pv.Detail = string(v.Mismatch.Reason), v.Mismatch.Detail
	}
	if !v.Governs {
		return pv
	}
	if v.Candidate.SpecErr != nil {
		pv.Problem = "its spec cannot be used, so it governs every object it might select, this one included, and does nothing to them: " + v.Candidate.SpecErr.Error()
	} else if c := meta.FindStatusCondition(v.Policy.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
		pv.Problem = fmt.Sprintf("it is not Ready (%s): %s", c.Reason, c.Message)
	}
	return pv
}

// lifetimeOf says which clock sets the expiry, from what value, and the
// annotations it could not use.
func lifetimeOf(ev *Evaluation) *LifetimeInfo {
	life := ev.Life
	li := &LifetimeInfo{Keep: life.Keep, Source: life.Source}
	for _, inv := range life.Invalid {
		li.Invalid = append(li.Invalid, InvalidInfo{Annotation: inv.Annotation, Value: inv.Value, Expected: inv.Expected, Fallback: inv.Fallback})
	}
	li.Extensions = extensionsOf(life.Extensions, ev.Now)
	if c, ok := expiry.ParseChangedBy(ev.Object.GetAnnotations()); ok {
		li.ChangedBy = &c
	}
	if life.Keep {
		li.Source = expiry.AnnotationKeep
		li.Value = ev.Object.GetAnnotations()[expiry.AnnotationKeep]
		return li
	}
	li.ExpiresAt = timePtr(life.ExpiresAt)
	li.Value = sourceValue(ev)
	li.Clock, li.KeepRefused = life.Clock(), life.KeepRefused
	if !life.IdleAt.IsZero() || !life.Max.IsZero() {
		li.CreationClock = timePtr(life.Base)
		li.IdleClock, li.Maximum = timePtr(life.IdleAt), timePtr(life.Max)
	}
	if !life.IdleAt.IsZero() {
		li.LastActive, li.ActiveBy, li.LastUse = timePtr(life.LastActive), life.ActiveBy, life.Use
	}
	return li
}

// extensionsOf is the account of the extensions under limits, nil
// without limits.
func extensionsOf(e *expiry.Extensions, now time.Time) *ExtensionsInfo {
	if e == nil {
		return nil
	}
	info := &ExtensionsInfo{Used: e.Used, Exempt: e.Limits.Exempt, By: e.By, At: timePtr(e.At), Summary: e.Extended(now)}
	if e.Limits.MaxCount >= 0 {
		info.MaxCount = &e.Limits.MaxCount
	}
	if e.Limits.MaxStep > 0 {
		info.MaxStep = expiry.FormatDuration(e.Limits.MaxStep)
	}
	return info
}

// sourceValue is the value that set the expiry: the policy's duration for
// its own sources, or the annotation's value.
func sourceValue(ev *Evaluation) string {
	s := ev.Governing.Schedule
	switch ev.Life.Source {
	case expiry.SourceDefault:
		return expiry.FormatDuration(s.DefaultTTL)
	case expiry.SourceIdle:
		return expiry.FormatDuration(s.IdleTTL)
	case expiry.SourceMax:
		return expiry.FormatDuration(s.MaxTTL)
	case expiry.SourceSleep:
		return expiry.FormatDuration(s.SleepDeleteAfter)
	}
	return ev.Object.GetAnnotations()[ev.Life.Source]
}

// noticeOf is the minimum notice: whether it is owed, when it was given
// and so the earliest deletion.
func noticeOf(state expiry.Notice, minimum time.Duration) *NoticeInfo {
	n := &NoticeInfo{MinimumNotice: expiry.FormatDuration(minimum), Owed: state.Owed}
	if !state.Given.IsZero() {
		n.GivenAt = timePtr(state.Given)
		if n.Owed {
			n.EarliestDeletion = timePtr(state.Given.Add(minimum))
		}
	}
	return n
}

// remindersOf is the state of each reminder stage of the policy.
func remindersOf(ev *Evaluation, state expiry.Notice) []ReminderState {
	scheduled := map[string]Step{}
	for _, s := range ev.Steps {
		if s.Stage != "" {
			scheduled[s.Stage] = s
		}
	}
	var out []ReminderState
	for _, lead := range ev.Governing.Schedule.Reminders {
		out = append(out, reminderOf(ev, state, lead, scheduled))
	}
	return out
}

// reminderOf says whether the reminder with the given lead was sent, is
// planned (due now or upcoming), does not apply, or was skipped, and why.
func reminderOf(ev *Evaluation, state expiry.Notice, lead time.Duration, scheduled map[string]Step) ReminderState {
	rec := ev.Record
	key := expiry.StageKey(lead)
	rs := ReminderState{Stage: key, DueAt: Time(ev.Life.ExpiresAt.Add(-lead))}
	d, sent := rec.Sent[key]
	step, planned := scheduled[key]
	switch {
	case sent:
		rs.State, rs.SentAt, rs.Channels = "sent", timePtr(d.At), d.Channels
		if planned {
			rs.Detail = "still owed to " + strings.Join(step.Channels, ", ")
		}
	case !state.Applies(lead):
		rs.State = "not-applicable"
		if rec.Since.Equal(ev.Object.GetCreationTimestamp().Time) {
			rs.Detail = "it would fall due before the object was created"
		} else {
			rs.Detail = "it fell due before the expiry was last moved (" + formatTime(rec.Since) + ")"
		}
	case planned && !step.At.After(ev.Now):
		rs.State, rs.Channels = "due", step.Channels
		rs.Detail = "due now; the controller sends it as soon as a channel accepts it"
	case planned:
		rs.State, rs.Channels = "upcoming", step.Channels
	case state.ShortestSent > 0 && lead > state.ShortestSent:
		rs.State = "skipped"
		rs.Detail = "a later reminder has already gone out"
	default:
		rs.State = "skipped"
		rs.Detail = "a more urgent reminder was due by the time the object was seen"
	}
	return rs
}

// nextOf is what the controller will do, the deletion last; under a dry
// run the deletion is a rehearsal.
func nextOf(ev *Evaluation) []NextStep {
	var out []NextStep
	for _, s := range ev.Steps {
		ns := NextStep{At: Time(s.At), Action: s.Action, Stage: s.Stage, Channels: s.Channels, WokeBy: s.WokeBy}
		if s.Action != ActionDelete && s.Action != ActionSleep && s.Action != ActionWake {
			ns.Announces = timePtr(s.Announces)
		}
		if s.Action == ActionDelete && ev.Governing.Spec.Deletion.DryRun {
			ns.Action = "would-delete"
		}
		out = append(out, ns)
	}
	return out
}

// notesOf says what else changes when or whether the object goes: the
// policy's deletion settings, an unreadable record, the notice owed.
func notesOf(ev *Evaluation, notice *NoticeInfo) []string {
	var notes []string
	deletion := ev.Governing.Spec.Deletion
	if deletion.DryRun {
		notes = append(notes, "The policy is in dry-run mode: at expiry the controller records a WouldDelete Event and deletes nothing.")
	}
	if deletion.Archive {
		notes = append(notes, "The policy archives the object's manifest before deleting it; `kubectl timeout restore` can bring it back.")
	}
	if deletion.MaxPerMinute > 0 {
		notes = append(notes, fmt.Sprintf("The policy deletes at most %d objects a minute: in a burst the deletion may come a little later.", deletion.MaxPerMinute))
	}
	if ev.RecordUnreadable {
		notes = append(notes, "The controller's record ("+expiry.AnnotationReminders+") does not parse: the controller plans as if nothing had been sent, so reminders may be sent again.")
	}
	if ev.Postponed() {
		notes = append(notes, "The deletion waits past the expiry for the minimum notice.")
	}
	if notice.Owed && notice.GivenAt == nil && !ev.Now.Before(ev.Life.ExpiresAt) {
		notes = append(notes, "Notice is owed and no reminder has reached anyone yet: the object is not deleted until one has, and then not before the minimum notice has passed.")
	}
	return notes
}

func readyStatus(p *v1alpha1.TimeoutPolicy) string {
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return string(c.Status)
	}
	return ""
}
