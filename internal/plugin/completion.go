// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"context"

	"github.com/spf13/cobra"
)

// Completions read the cluster with the flags given so far; any failure
// just means no suggestions.

func completeKinds(ctx context.Context, o *Options) ([]string, cobra.ShellCompDirective) {
	s, err := newSession(o, false)
	if err != nil || s.loadPolicies(ctx) != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	kinds, err := s.targetKinds("")
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, k := range kinds {
		out = append(out, k.resource.Resource)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

func completePolicies(ctx context.Context, o *Options) ([]string, cobra.ShellCompDirective) {
	s, err := newSession(o, false)
	if err != nil || s.loadPolicies(ctx) != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, p := range s.policies {
		out = append(out, p.Name)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeNames suggests the objects of the targeted kinds as KIND/NAME,
// with their titles as descriptions, without evaluating them.
func completeNames(ctx context.Context, o *Options) ([]string, cobra.ShellCompDirective) {
	s, err := newSession(o, false)
	if err != nil || s.loadPolicies(ctx) != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	kinds, err := s.targetKinds("")
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, k := range kinds {
		items, err := s.list(ctx, k, "")
		if err != nil {
			continue
		}
		for i := range items {
			c := k.String() + "/" + items[i].GetName()
			if t := title(&items[i]); t != "" {
				c += "\t" + t
			}
			out = append(out, c)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
