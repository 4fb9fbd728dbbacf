// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package match

import (
	"errors"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

func names(cs []Candidate) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func items(ps ...*v1alpha1.TimeoutPolicy) []v1alpha1.TimeoutPolicy {
	out := make([]v1alpha1.TimeoutPolicy, 0, len(ps))
	for _, p := range ps {
		out = append(out, *p)
	}
	return out
}

func deleting(p *v1alpha1.TimeoutPolicy) {
	now := metav1.NewTime(t0)
	p.DeletionTimestamp = &now
}

func bogusSelector(p *v1alpha1.TimeoutPolicy) {
	p.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "app", Operator: "Bogus", Values: []string{"x"}},
	}}
}

func bogusNamespaceSelector(p *v1alpha1.TimeoutPolicy) {
	p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "env", Operator: "Bogus"},
	}}
}

func TestCandidates(t *testing.T) {
	tests := []struct {
		name     string
		policies []*v1alpha1.TimeoutPolicy
		want     []string
	}{
		{
			name: "ranks the higher priority first, then the name that sorts first",
			policies: []*v1alpha1.TimeoutPolicy{
				fixture.Policy("bravo"), fixture.Policy("alpha"), fixture.Policy("zulu", fixture.Priority(10)), fixture.Policy("mike", fixture.Priority(5)), fixture.Policy("kilo", fixture.Priority(10)),
			},
			want: []string{"kilo", "zulu", "mike", "alpha", "bravo"},
		},
		{
			name: "ignores policies for another kind or group",
			policies: []*v1alpha1.TimeoutPolicy{
				fixture.Policy("secrets", fixture.Target("v1", "Secret")),
				fixture.Policy("other-group", fixture.Target("example.com/v1", "ConfigMap")),
				fixture.Policy("configmaps"),
			},
			want: []string{"configmaps"},
		},
		{
			name: "ranks a policy for another version of the kind with the others",
			policies: []*v1alpha1.TimeoutPolicy{
				fixture.Policy("v2-configmaps", fixture.Target("v2", "ConfigMap")),
				fixture.Policy("configmaps"),
			},
			want: []string{"configmaps", "v2-configmaps"},
		},
		{
			name:     "ignores a policy that is being deleted",
			policies: []*v1alpha1.TimeoutPolicy{fixture.Policy("going", deleting, fixture.Priority(100)), fixture.Policy("staying")},
			want:     []string{"staying"},
		},
		{
			name:     "keeps a policy whose selector does not parse, with the error",
			policies: []*v1alpha1.TimeoutPolicy{fixture.Policy("bogus", bogusSelector, fixture.Priority(100)), fixture.Policy("fine")},
			want:     []string{"bogus", "fine"},
		},
		{
			name:     "keeps a policy whose namespace selector does not parse, with the error",
			policies: []*v1alpha1.TimeoutPolicy{fixture.Policy("bogus", bogusNamespaceSelector, fixture.Priority(100)), fixture.Policy("fine")},
			want:     []string{"bogus", "fine"},
		},
		{
			name:     "keeps a policy whose schedule is invalid, with the error",
			policies: []*v1alpha1.TimeoutPolicy{fixture.Policy("broken", fixture.DefaultTTL("0s"), fixture.Priority(100)), fixture.Policy("fine")},
			want:     []string{"broken", "fine"},
		},
		{
			name:     "returns nothing when no policy targets the kind",
			policies: []*v1alpha1.TimeoutPolicy{fixture.Policy("secrets", fixture.Target("v1", "Secret"))},
			want:     []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Candidates(items(tt.policies...), configMapGVK)
			if !slices.Equal(names(got), tt.want) {
				t.Fatalf("candidates = %v, want %v", names(got), tt.want)
			}
			for _, c := range got {
				if c.Selector == nil || c.NamespaceSelector == nil {
					t.Errorf("candidate %s has a nil selector", c.Name)
				}
				if invalid := c.Spec.DefaultTTL == "0s" || c.Name == "bogus"; invalid != (c.SpecErr != nil) {
					t.Errorf("candidate %s: SpecErr = %v", c.Name, c.SpecErr)
				}
			}
		})
	}

	t.Run("does not reorder or change the caller's slice", func(t *testing.T) {
		all := items(fixture.Policy("b"), fixture.Policy("a", fixture.Priority(1)))
		Candidates(all, configMapGVK)
		if all[0].Name != "b" || all[1].Name != "a" {
			t.Fatalf("input reordered: %s, %s", all[0].Name, all[1].Name)
		}
	})
}

// mustNotCall is an nsLabels func that fails the test when called.
func mustNotCall(t *testing.T) func() (map[string]string, error) {
	return func() (map[string]string, error) {
		t.Helper()
		t.Error("nsLabels was called, but no namespace selector needs it")
		return nil, errors.New("must not be called")
	}
}

func nsLabelsOf(l map[string]string) func() (map[string]string, error) {
	return func() (map[string]string, error) { return l, nil }
}

func TestMatching(t *testing.T) {
	dev := map[string]string{"env": "dev"}
	scratch := map[string]string{"app": "scratch"}

	tests := []struct {
		name     string
		policies []*v1alpha1.TimeoutPolicy
		// object is built per test so that mustNotCall can use its t.
		object      func(t *testing.T) Object
		want        []string
		wantSpecErr []string
	}{
		{
			name:     "matches an object whose labels the selector selects",
			policies: []*v1alpha1.TimeoutPolicy{fixture.Policy("scratch", fixture.Selecting(scratch))},
			object: func(t *testing.T) Object {
				return Object{Labels: map[string]string{"app": "scratch", "team": "a"}, Namespaced: true, NamespaceLabels: mustNotCall(t)}
			},
			want: []string{"scratch"},
		},
		{
			name:     "does not match an object whose labels the selector does not select",
			policies: []*v1alpha1.TimeoutPolicy{fixture.Policy("scratch", fixture.Selecting(scratch))},
			object: func(t *testing.T) Object {
				return Object{Labels: map[string]string{"app": "db"}, Namespaced: true, NamespaceLabels: mustNotCall(t)}
			},
			want: []string{},
		},
		{
			name:     "matches every object when there is no selector",
			policies: []*v1alpha1.TimeoutPolicy{fixture.Policy("all")},
			object: func(t *testing.T) Object {
				return Object{Namespaced: true, NamespaceLabels: mustNotCall(t)}
			},
			want: []string{"all"},
		},
		{
			name:     "matches a namespaced object in a namespace the namespace selector selects",
			policies: []*v1alpha1.TimeoutPolicy{fixture.Policy("dev", fixture.InNamespaces(dev))},
			object: func(t *testing.T) Object {
				return Object{Namespaced: true, NamespaceLabels: nsLabelsOf(map[string]string{"env": "dev", "team": "a"})}
			},
			want: []string{"dev"},
		},
		{
			name:     "does not match a namespaced object in a namespace the namespace selector does not select",
			policies: []*v1alpha1.TimeoutPolicy{fixture.Policy("dev", fixture.InNamespaces(dev))},
			object: func(t *testing.T) Object {
				return Object{Namespaced: true, NamespaceLabels: nsLabelsOf(map[string]string{"env": "prod"})}
			},
			want: []string{},
		},
		{
			name:     "ignores the namespace selector for a cluster-scoped object without reading namespace labels",
			policies: []*v1alpha1.TimeoutPolicy{fixture.Policy("dev", fixture.InNamespaces(dev))},
			object: func(t *testing.T) Object {
				return Object{Namespaced: false, NamespaceLabels: mustNotCall(t)}
			},
			want: []string{"dev"},
		},
		{
			name:     "does not read namespace labels when the label selector already fails",
			policies: []*v1alpha1.TimeoutPolicy{fixture.Policy("dev-scratch", fixture.Selecting(scratch), fixture.InNamespaces(dev))},
			object: func(t *testing.T) Object {
				return Object{Labels: map[string]string{"app": "db"}, Namespaced: true, NamespaceLabels: mustNotCall(t)}
			},
			want: []string{},
		},
		{
			name: "returns the matches in rank order",
			policies: []*v1alpha1.TimeoutPolicy{
				fixture.Policy("low"), fixture.Policy("high", fixture.Priority(9)), fixture.Policy("other", fixture.Selecting(map[string]string{"app": "db"}), fixture.Priority(50)), fixture.Policy("mid", fixture.Priority(3), fixture.InNamespaces(dev)),
			},
			object: func(t *testing.T) Object {
				return Object{Labels: scratch, Namespaced: true, NamespaceLabels: nsLabelsOf(dev)}
			},
			want: []string{"high", "mid", "low"},
		},
		{
			name:     "keeps a match whose schedule is invalid, with its error, ahead of a valid one it outranks",
			policies: []*v1alpha1.TimeoutPolicy{fixture.Policy("short", fixture.DefaultTTL("1m")), fixture.Policy("broken", fixture.DefaultTTL("0s"), fixture.Priority(10))},
			object: func(t *testing.T) Object {
				return Object{Namespaced: true, NamespaceLabels: mustNotCall(t)}
			},
			want:        []string{"broken", "short"},
			wantSpecErr: []string{"broken"},
		},
		{
			name:     "keeps objects of a policy whose selector is invalid: it outranks the valid one that would govern them",
			policies: []*v1alpha1.TimeoutPolicy{fixture.Policy("short", fixture.DefaultTTL("15s")), fixture.Policy("bogus", bogusSelector, fixture.Priority(10))},
			object: func(t *testing.T) Object {
				return Object{Labels: map[string]string{"app": "db"}, Namespaced: true, NamespaceLabels: mustNotCall(t)}
			},
			want:        []string{"bogus", "short"},
			wantSpecErr: []string{"bogus"},
		},
		{
			name:     "keeps objects of a policy whose label value is invalid",
			policies: []*v1alpha1.TimeoutPolicy{fixture.Policy("short", fixture.DefaultTTL("15s")), fixture.Policy("bogus", fixture.Selecting(map[string]string{"app": "not a value!"}), fixture.Priority(10))},
			object: func(t *testing.T) Object {
				return Object{Labels: map[string]string{"app": "db"}, Namespaced: true, NamespaceLabels: mustNotCall(t)}
			},
			want:        []string{"bogus", "short"},
			wantSpecErr: []string{"bogus"},
		},
		{
			name:     "keeps objects of a policy whose namespace selector is invalid, in any namespace",
			policies: []*v1alpha1.TimeoutPolicy{fixture.Policy("short", fixture.DefaultTTL("15s")), fixture.Policy("bogus", bogusNamespaceSelector, fixture.Priority(10))},
			object: func(t *testing.T) Object {
				return Object{Namespaced: true, NamespaceLabels: nsLabelsOf(map[string]string{"env": "prod"})}
			},
			want:        []string{"bogus", "short"},
			wantSpecErr: []string{"bogus"},
		},
		{
			name: "lets an invalid selector's valid requirements still narrow what it might govern",
			policies: []*v1alpha1.TimeoutPolicy{fixture.Policy("short", fixture.DefaultTTL("15s")), fixture.Policy("bogus", fixture.Priority(10), func(p *v1alpha1.TimeoutPolicy) {
				p.Spec.Selector = &metav1.LabelSelector{
					MatchLabels: map[string]string{"team": "a"},
					MatchExpressions: []metav1.LabelSelectorRequirement{
						{Key: "app", Operator: "in", Values: []string{"db"}},
						{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"gold"}},
					},
				}
			})},
			object: func(t *testing.T) Object {
				return Object{Labels: map[string]string{"team": "b", "app": "db"}, Namespaced: true, NamespaceLabels: mustNotCall(t)}
			},
			want: []string{"short"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Matching(Candidates(items(tt.policies...), configMapGVK), tt.object(t))
			if err != nil {
				t.Fatalf("matching: %v", err)
			}
			if !slices.Equal(names(got), tt.want) {
				t.Fatalf("matching = %v, want %v", names(got), tt.want)
			}
			for _, c := range got {
				if want := slices.Contains(tt.wantSpecErr, c.Name); want != (c.SpecErr != nil) {
					t.Errorf("%s: SpecErr = %v, want an error: %t", c.Name, c.SpecErr, want)
				}
			}
		})
	}

	t.Run("returns the error reading the namespace labels", func(t *testing.T) {
		boom := errors.New("namespace unavailable")
		ranked := Candidates(items(fixture.Policy("dev", fixture.InNamespaces(dev))), configMapGVK)
		got, err := Matching(ranked, Object{Namespaced: true, NamespaceLabels: func() (map[string]string, error) { return nil, boom }})
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want %v", err, boom)
		}
		if got != nil {
			t.Fatalf("matches = %v alongside an error", names(got))
		}
	})
}
