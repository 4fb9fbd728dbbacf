// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/rules"
)

// conflictAttempts bounds how often a change is tried again after the
// object changed under it.
const conflictAttempts = 5

// fieldManager names the plugin in managedFields.
const fieldManager = "kubectl-timeout"

func newExtendCommand(o *Options) *cobra.Command {
	var until string
	var allowShorten bool
	var target func(current, now time.Time) time.Time
	cmd := nameCommand(o, &cobra.Command{
		Use:   "extend [KIND/]NAME (DURATION | --until TIME)",
		Short: "Move an object's expiry later",
		Long: `Move an object's expiry: DURATION later than it is now (or than now, if it
has already passed), or to the time --until gives. The plugin writes the
timeout.amphitheatre.app/expires-at annotation, as you could by hand; it
never edits the controller's record.

A change that would shorten the object's life is refused unless
--allow-shorten is given. The write is locked on the object's
resourceVersion, and the controller deletes with the same kind of lock: if
the command says "extended", the object was not deleted for its old expiry.
If the controller deleted it first, the command says so and exits with 8.`,
		Example: `  kubectl timeout extend 2b1e7c9e-3f7a-4c61-9a51-0f3c2d7e8a10 3d
  kubectl timeout extend "Weekend demo" --until 2026-12-24T18:00:00Z
  kubectl timeout extend configmap/scratch -n dev 12h
  kubectl timeout extend playbook/2b1e7c9e-3f7a-4c61-9a51-0f3c2d7e8a10 --until 2026-11-20T00:00:00Z --allow-shorten`,
	}, nameArgs{
		suggest: []string{"1d", "3d", "7d", "14d"},
		rest: func(args []string) error {
			var err error
			target, err = extendTarget(args, until)
			return err
		},
		run: func(ctx context.Context, n *named) error {
			return n.change(ctx, func(ev *Evaluation) (*rules.Patch, error) {
				return extendPatch(ev, target, allowShorten)
			})
		},
	})
	cmd.Flags().StringVar(&until, "until", "", "The new expiry, an RFC 3339 time (2026-12-24T18:00:00Z) or a date (2026-12-24, midnight UTC)")
	cmd.Flags().BoolVar(&allowShorten, "allow-shorten", false, "Allow a new expiry earlier than the current one")
	return cmd
}

// extendTarget reads extend's arguments: NAME and DURATION, or NAME alone
// with --until. The target it returns is the new expiry, given the current
// one and now.
func extendTarget(args []string, until string) (func(current, now time.Time) time.Time, error) {
	switch {
	case len(args) == 2 && until == "":
		d, err := expiry.ParseDuration(args[1])
		if err != nil || d <= 0 {
			return nil, usageError("DURATION %q: expected %s", args[1], expiry.DurationForms)
		}
		return func(current, now time.Time) time.Time { return ceilSecond(later(current, now).Add(d)) }, nil
	case len(args) == 1 && until != "":
		t, err := parseTime(until)
		if err != nil {
			return nil, usageError("--until %q: %v", until, err)
		}
		return func(time.Time, time.Time) time.Time { return ceilSecond(t) }, nil
	}
	return nil, usageError("extend takes [KIND/]NAME and either DURATION or --until TIME\nSee 'kubectl timeout extend --help'.")
}

// extendPatch moves the expiry to target, within the policy's maximum and,
// unless allowShorten, never earlier (rules.Extend), and says a refusal
// the plugin's way.
func extendPatch(ev *Evaluation, target func(current, now time.Time) time.Time, allowShorten bool) (*rules.Patch, error) {
	p, err := rules.Extend(ev, target, allowShorten)
	var r *rules.Refusal
	if !errors.As(err, &r) {
		return p, err
	}
	switch r.Reason {
	case rules.BeforeCreation:
		return nil, usageError("%s is before the object was created (%s): the controller would ignore it", formatTime(r.At), formatTime(r.Limit))
	case rules.PastMaximum:
		return nil, withCode(ExitPastMaximum, "%s is past the maximum lifetime of %s: policy %s caps it at %s (maxTTL %s from creation); it was not extended",
			formatTime(r.At), describe(ev), ev.Governing.Name, formatTime(r.Limit), expiry.FormatDuration(ev.Governing.Schedule.MaxTTL))
	case rules.WouldShorten:
		return nil, withCode(ExitRefused, "%s would shorten the life of %s: it expires at %s; give --allow-shorten to do it anyway",
			formatTime(r.At), describe(ev), formatTime(r.Limit))
	}
	return nil, err
}

func newKeepCommand(o *Options, keep bool) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keep [KIND/]NAME",
		Short: "Exempt an object: it never expires",
		Long: `Exempt an object from expiry by setting timeout.amphitheatre.app/keep=true.
Like extend, the write is locked on the object's resourceVersion: if the
controller deleted the object first, the command says so and exits with 8.`,
		Example: `  kubectl timeout keep 2b1e7c9e-3f7a-4c61-9a51-0f3c2d7e8a10
  kubectl timeout keep "Weekend demo"`,
	}
	if !keep {
		cmd.Use = "unkeep [KIND/]NAME"
		cmd.Short = "Put a kept object back under its policy"
		cmd.Long = `Remove timeout.amphitheatre.app/keep, putting the object back under its
policy with the expiry its other annotations or the policy's default give.
That expiry may be past: the object is then deleted at once, or, when
notice is owed, reminded first and deleted after the minimum notice. The
command prints which.`
		cmd.Example = `  kubectl timeout unkeep 2b1e7c9e-3f7a-4c61-9a51-0f3c2d7e8a10`
	}
	return nameCommand(o, cmd, nameArgs{run: func(ctx context.Context, n *named) error {
		return n.change(ctx, func(ev *Evaluation) (*rules.Patch, error) { return keepPatch(ev, keep) })
	}})
}

// keepPatch sets the keep annotation, or with keep false removes it
// (rules.Keep).
func keepPatch(ev *Evaluation, keep bool) (*rules.Patch, error) {
	p, err := rules.Keep(ev, keep)
	if r := (*rules.Refusal)(nil); errors.As(err, &r) && r.Reason == rules.KeepForbidden {
		return nil, withCode(ExitKeepForbidden, "policy %s forbids keep (spec.keep: Forbidden): %s was not kept; it expires at %s",
			ev.Governing.Name, describe(ev), formatTime(ev.Life.ExpiresAt))
	}
	return p, err
}

func newTouchCommand(o *Options) *cobra.Command {
	return nameCommand(o, &cobra.Command{
		Use:   "touch [KIND/]NAME",
		Short: "Record that an object is in use now",
		Long: `Record that an object is in use now, by setting the
timeout.amphitheatre.app/last-active annotation to the current time, as
Amphitheatre's API server or any other client may. Under a policy with
idleTTL the object then lives at least idleTTL from now (but never past the
policy's maxTTL).

Under a policy with spec.sleep, use also puts off the sleep (sleep.afterIdle)
and wakes an object asleep (see wake).

Like the controller, it writes at most once per idleTTL/20 (or
sleep.afterIdle/20, when that is shorter): when the object's
last activity is more recent than that, nothing is written (unless the object
is asleep). Under a policy without idleTTL or sleep.afterIdle, use does not
change an expiry and the command exits with 7, unless the object is asleep.`,
		Example: `  kubectl timeout touch 2b1e7c9e-3f7a-4c61-9a51-0f3c2d7e8a10
  kubectl timeout touch "Weekend demo"`,
	}, nameArgs{run: func(ctx context.Context, n *named) error {
		return n.change(ctx, touchPatch)
	}})
}

// touchPatch records use now, under the controller's throttling rule
// (rules.Touch).
func touchPatch(ev *Evaluation) (*rules.Patch, error) {
	p, err := rules.Touch(ev)
	if r := (*rules.Refusal)(nil); errors.As(err, &r) && r.Reason == rules.UseNotCounted {
		return nil, withCode(ExitRefused, "policy %s has no idleTTL (nor sleep.afterIdle): use does not move the expiry of %s; nothing was written", ev.Governing.Name, describe(ev))
	}
	return p, err
}

// change finds the object r names, decides the patch from its current
// state and writes it locked on the resourceVersion it was decided from.
// When the object changed meanwhile it starts again; when it is gone or
// being deleted, it fails with ExitGone.
func change(ctx context.Context, o *Options, r ref, all bool, output string, decide func(*Evaluation) (*rules.Patch, error)) error {
	s, err := newSession(o, all)
	if err != nil {
		return err
	}
	_, err = s.change(ctx, r, output, decide)
	return err
}

// change is change in s, and returns the object it found.
func (s *session) change(ctx context.Context, r ref, output string, decide func(*Evaluation) (*rules.Patch, error)) (found, error) {
	o := s.o
	if err := s.loadPolicies(ctx); err != nil {
		return found{}, err
	}
	f, err := s.find(ctx, r)
	if err != nil {
		return found{}, err
	}
	obj := f.obj
	for attempt := 1; ; attempt++ {
		if obj.GetDeletionTimestamp() != nil {
			return f, withCode(ExitGone, "%s is being deleted (since %s): it was not changed", f, formatTime(obj.GetDeletionTimestamp().Time))
		}
		ev, err := s.evaluate(ctx, f.kind, obj)
		if err != nil {
			return f, err
		}
		if ev.Governing == nil {
			return f, withCode(ExitNotGoverned, "%s is not governed by any TimeoutPolicy: nothing will delete it (`kubectl timeout explain` says why)", f)
		}
		if ev.Governing.SpecErr != nil {
			return f, withCode(ExitError, "%s is governed by policy %s, whose spec cannot be used: %v", f, ev.Governing.Name, ev.Governing.SpecErr)
		}
		p, err := decide(ev)
		if err != nil {
			return f, err
		}
		if p.None {
			return f, report(o.Out, output, ev, describe(ev)+" "+p.Verb)
		}
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": obj.GetResourceVersion(),
			"annotations":     p.Set,
		}})
		if err != nil {
			return f, err
		}
		updated, err := s.dyn.Resource(f.kind.resource).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType, body,
			metav1.PatchOptions{FieldManager: fieldManager})
		switch {
		case apierrors.IsNotFound(err):
			return f, withCode(ExitGone, "%s was deleted before the change could be written: it was not changed", f)
		case apierrors.IsConflict(err) && attempt < conflictAttempts:
			// Someone wrote the object (the controller's record, or its
			// delete) since it was read: decide again from what it is now.
			obj, err = s.fresh(ctx, f)
			if apierrors.IsNotFound(err) {
				return f, withCode(ExitGone, "%s was deleted before the change could be written: it was not changed", f)
			}
			if err != nil {
				return f, err
			}
			continue
		case err != nil:
			return f, fmt.Errorf("update %s: %w", f, err)
		}
		if updated.GetDeletionTimestamp() != nil {
			return f, withCode(ExitGone, "%s is being deleted: the change came too late", f)
		}
		after, err := s.evaluate(ctx, f.kind, updated)
		if err != nil {
			return f, err
		}
		if err := report(o.Out, output, after, describe(after)+" "+p.Verb); err != nil {
			return f, err
		}
		return f, limited(after)
	}
}

// report prints the outcome of a change: a sentence and where the object
// stands now, or the object as list -o json shows it.
func report(w io.Writer, output string, ev *Evaluation, what string) error {
	if output != "text" {
		return writeStructured(w, output, itemOf(ev))
	}
	fmt.Fprintln(w, what)
	if ev.Life.Keep {
		fmt.Fprintln(w, "  kept: it never expires")
		return nil
	}
	fmt.Fprintf(w, "  expires %s (%s)\n", formatTime(ev.Life.ExpiresAt), relative(ev.Life.ExpiresAt, ev.Now))
	if si := sleepOf(ev); si != nil {
		fmt.Fprintln(w, "  "+sleepSentence(si, ev.Now))
	}
	d := ev.DeleteAt()
	switch {
	case d.IsZero():
	case !d.After(ev.Now):
		fmt.Fprintln(w, "  it is due: the controller deletes it now")
	case ev.Postponed():
		fmt.Fprintf(w, "  deleted at %s (%s), after the minimum notice\n", formatTime(d), relative(d, ev.Now))
	}
	if len(ev.Steps) > 1 && ev.Steps[0].Action != ActionDelete {
		if s := ev.Steps[0]; s.Stage != "" {
			fmt.Fprintf(w, "  next reminder: %s, %s\n", s.Stage, formatTime(s.At))
		}
	}
	return nil
}

func describe(ev *Evaluation) string {
	s := fmt.Sprintf("%s/%s", strings.ToLower(ev.GVK.Kind), ev.Object.GetName())
	if t := title(ev.Object); t != "" && t != ev.Object.GetName() {
		s += fmt.Sprintf(" (%q)", t)
	}
	return s
}

func parseTime(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("expected an RFC 3339 time such as 2026-12-24T18:00:00Z, or a date such as 2026-12-24")
}

// ceilSecond rounds t up to a whole second: the annotation holds whole
// seconds, and an extension must not come out a fraction shorter.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// limited fails with ExitPastLimits when the governing policy's extension
// limits refuse the change just written, which the controller then does
// not take (no admission policy refused it first).
func limited(ev *Evaluation) error {
	if inv := rules.Limited(ev.Life); inv != nil {
		return withCode(ExitPastLimits, "policy %s's extension limits refuse %s=%q: expected %s; %s",
			ev.Governing.Name, inv.Annotation, inv.Value, inv.Expected, inv.Fallback)
	}
	return nil
}
