// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/amphitheatre-app/timeout-controller/internal/rules"
)

// named is the object a command names on its command line, with the flags
// every such command has.
type named struct {
	o      *Options
	ref    ref
	output string
	// all is -A: look for a namespaced object in every namespace.
	all bool
}

// change decides and writes a change to the named object; see change.
func (n *named) change(ctx context.Context, decide func(*Evaluation) (*rules.Patch, error)) error {
	return change(ctx, n.o, n.ref, n.all, n.output, decide)
}

// nameArgs is how a command about one named object differs from the
// others in what it takes and does.
type nameArgs struct {
	// rest reads the arguments after NAME, for a command that takes some
	// (extend's DURATION); without it the command takes NAME alone. It
	// runs after -o is checked and before NAME is, and reports every
	// wrong count of arguments itself.
	rest func(args []string) error
	// suggest completes the arguments after NAME.
	suggest []string
	// run does the command's work.
	run func(ctx context.Context, n *named) error
}

// nameCommand completes cmd, which says what it is (Use, Short, Long,
// Example), as a command about one object named [KIND/]NAME: explain,
// extend, keep, unkeep and touch. They complete NAME with the governed
// objects, print text, json or yaml (-o), and look in every namespace with
// -A; a bad -o or NAME is a usage error before anything is read.
func nameCommand(o *Options, cmd *cobra.Command, a nameArgs) *cobra.Command {
	n := &named{o: o}
	if a.rest == nil {
		cmd.Args = oneArg("[KIND/]NAME")
	}
	cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return a.suggest, cobra.ShellCompDirectiveNoFileComp
		}
		return completeNames(cmd.Context(), o)
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkOutput(n.output, "text", "json", "yaml"); err != nil {
			return err
		}
		if a.rest != nil {
			if err := a.rest(args); err != nil {
				return err
			}
		}
		r, err := parseRef(args[0])
		if err != nil {
			return err
		}
		n.ref = r
		return a.run(cmd.Context(), n)
	}
	outputFlag(cmd, &n.output, "text", "json", "yaml")
	cmd.Flags().BoolVarP(&n.all, "all-namespaces", "A", false, "Look for a namespaced object in every namespace")
	return cmd
}

// oneArg is cobra.ExactArgs(1) with a usage error that names the argument.
func oneArg(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageError("%s takes %s, got %d arguments\nSee 'kubectl timeout %s --help'.", cmd.Name(), what, len(args), cmd.Name())
		}
		return nil
	}
}
