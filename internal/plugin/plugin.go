// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package plugin is the kubectl plugin kubectl-timeout: it lists, explains, extends, keeps, wakes and restores governed objects.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/clock"
)

// Exit codes. They are part of the plugin's interface: scripts may test them.
const (
	// ExitOK: the command did what it was asked.
	ExitOK = 0
	// ExitError: any other failure (the API server cannot be reached, a
	// write failed, a file cannot be read).
	ExitError = 1
	// ExitUsage: wrong arguments or flags.
	ExitUsage = 2
	// ExitNotFound: no such object, no such archive entry, or no archive
	// where restore's --from points.
	ExitNotFound = 3
	// ExitNotGoverned: the object exists but no TimeoutPolicy governs it.
	ExitNotGoverned = 4
	// ExitForbidden: the API server refused access (RBAC Forbidden, or
	// Unauthorized).
	ExitForbidden = 5
	// ExitAmbiguous: the name stands for more than one object.
	ExitAmbiguous = 6
	// ExitRefused: the change was refused: it would shorten the lifetime
	// without --allow-shorten, or restore over an object that exists.
	ExitRefused = 7
	// ExitGone: the object was deleted, or is being deleted, before the
	// change could land: it was not extended or kept.
	ExitGone = 8
	// ExitPastMaximum: extend was refused: the new expiry is past the
	// maximum lifetime (maxTTL) of the governing policy.
	ExitPastMaximum = 9
	// ExitKeepForbidden: keep was refused: the governing policy forbids
	// keep (spec.keep: Forbidden).
	ExitKeepForbidden = 10
	// ExitPastLimits: extend or keep was written, but the governing
	// policy's extension limits refuse it: the controller keeps the
	// expiry the object had. (Where the admission policies are installed
	// the API server refuses the write instead, and the exit code is 5.)
	ExitPastLimits = 11
)

// Options configure one run of the plugin.
type Options struct {
	genericiooptions.IOStreams
	// ConfigFlags are the kubeconfig, context and namespace flags; the
	// standard ones when nil.
	ConfigFlags *genericclioptions.ConfigFlags
	// Clock tells the time; the real one when nil.
	Clock clock.PassiveClock
}

// Main runs the plugin with the process's arguments and streams and
// returns its exit code.
func Main() int {
	return Run(context.Background(), os.Args[1:], Options{
		IOStreams: genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr},
	})
}

// Run runs the plugin with args (without the program name) and returns
// its exit code. Errors are written to o.ErrOut.
func Run(ctx context.Context, args []string, o Options) int {
	if o.ConfigFlags == nil {
		o.ConfigFlags = genericclioptions.NewConfigFlags(true)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	root := newRootCommand(&o)
	root.SetArgs(args)
	root.SetIn(o.In)
	root.SetOut(o.Out)
	root.SetErr(o.ErrOut)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code, msg := classify(err)
	fmt.Fprintln(o.ErrOut, "error: "+msg)
	return code
}

// exitError is an error with the exit code it stands for.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

// usageError marks errors in arguments and flags.
func usageError(format string, args ...any) error {
	return withCode(ExitUsage, format, args...)
}

// classify turns an error into an exit code and a message for people.
func classify(err error) (int, string) {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code, err.Error()
	}
	var status apierrors.APIStatus
	switch {
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "AdmissionPolicy"):
		// An admission policy's refusal says why itself: not RBAC.
		return ExitForbidden, err.Error()
	case apierrors.IsForbidden(err):
		return ExitForbidden, err.Error() + "\n(your RBAC role does not allow this; `kubectl auth can-i` tells what it allows)"
	case apierrors.IsUnauthorized(err):
		return ExitForbidden, err.Error() + "\n(the API server did not accept your credentials; check your kubeconfig and context)"
	case apierrors.IsNotFound(err):
		return ExitNotFound, err.Error()
	case errors.As(err, &status):
		return ExitError, err.Error()
	}
	// Cobra's own errors about flags and arguments.
	msg := err.Error()
	for _, p := range []string{"unknown flag", "unknown shorthand flag", "unknown command", "flag needs an argument", "invalid argument", "accepts ", "requires "} {
		if strings.HasPrefix(msg, p) {
			return ExitUsage, msg + "\nSee 'kubectl timeout --help'."
		}
	}
	return ExitError, msg
}

const rootLong = `Inspect and change how long objects governed by a TimeoutPolicy live.

The timeout-controller deletes Amphitheatre Playbooks (and any other kind a
TimeoutPolicy targets) when they expire, after reminding people. This plugin
shows what it will do and when, and moves expiries by writing the same
annotations people can write by hand; it never edits the controller's own
record of reminders.

Exit codes:
  0  success
  1  other failure (API server unreachable, write failed, unreadable file)
  2  wrong arguments or flags
  3  no such object or archive entry, or no archive where --from points
  4  the object is not governed by any TimeoutPolicy
  5  the API server refused access (RBAC Forbidden, or Unauthorized)
  6  the name is ambiguous: more than one object matches
  7  refused: it would shorten a lifetime (see --allow-shorten), restore over an existing object, touch an object whose policy has neither idleTTL nor sleep.afterIdle, or wake one whose policy has no sleep
  8  the object was deleted, or is being deleted, before the change landed
  9  refused: the new expiry is past the policy's maximum lifetime (maxTTL)
  10 refused: the policy forbids keep (spec.keep: Forbidden)
  11 written, but the policy's extension limits refuse it: the expiry stays`

func newRootCommand(o *Options) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-timeout",
		Short: "See and change when governed objects expire",
		Long:  rootLong,
		Example: `  # everything that will expire, soonest first
  kubectl timeout list
  # why this Playbook expires when it does
  kubectl timeout explain 2b1e7c9e-3f7a-4c61-9a51-0f3c2d7e8a10
  # three more days
  kubectl timeout extend 2b1e7c9e-3f7a-4c61-9a51-0f3c2d7e8a10 3d`,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl timeout",
		},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError("%v\nSee 'kubectl timeout --help'.", err)
	})
	o.ConfigFlags.AddFlags(root.PersistentFlags())

	root.AddCommand(
		newListCommand(o),
		newExplainCommand(o),
		newExtendCommand(o),
		newKeepCommand(o, true),
		newTouchCommand(o),
		newWakeCommand(o),
		newKeepCommand(o, false),
		newRestoreCommand(o),
	)
	return root
}

// outputFlag adds -o to cmd with the formats it accepts.
func outputFlag(cmd *cobra.Command, p *string, formats ...string) {
	cmd.Flags().StringVarP(p, "output", "o", formats[0], "Output format: "+strings.Join(formats, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
}

func checkOutput(value string, formats ...string) error {
	for _, f := range formats {
		if value == f {
			return nil
		}
	}
	return usageError("unknown output format %q: use one of %s", value, strings.Join(formats, ", "))
}
