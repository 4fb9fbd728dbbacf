// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package decide

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
)

var playbookGVK = schema.GroupVersionKind{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook"}

func policy(name string, prio int32, ttl v1alpha1.Duration, sel map[string]string, nsSel map[string]string) v1alpha1.TimeoutPolicy {
	p := v1alpha1.TimeoutPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.TimeoutPolicySpec{
			Target:     v1alpha1.Target{APIVersion: "amphitheatre.app/v1", Kind: "Playbook"},
			Priority:   prio,
			DefaultTTL: ttl,
		},
	}
	if sel != nil {
		p.Spec.Selector = &metav1.LabelSelector{MatchLabels: sel}
	}
	if nsSel != nil {
		p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: nsSel}
	}
	return p
}

// TestGoverningIsThePolicyThatRanksFirst: the policy that governs decides
// the lifetime, so handing an object to another one that selects it (a
// shorter defaultTTL) would delete it early.
func TestGoverningIsThePolicyThatRanksFirst(t *testing.T) {
	team := map[string]string{"team": "a"}
	nsLabels := func() (map[string]string, error) { return map[string]string{"env": "dev"}, nil }
	for _, tt := range []struct {
		name     string
		policies []v1alpha1.TimeoutPolicy
		obj      match.Object
		want     string
	}{
		{"is the only policy that selects the object",
			[]v1alpha1.TimeoutPolicy{policy("short", 0, "1h", map[string]string{"team": "b"}, nil), policy("long", 0, "30d", team, nil)},
			match.Object{Labels: team, Namespaced: true, NamespaceLabels: nsLabels}, "long"},
		{"is the one of higher priority when two select the object",
			[]v1alpha1.TimeoutPolicy{policy("short", 1, "1h", nil, nil), policy("long", 5, "30d", team, nil)},
			match.Object{Labels: team, Namespaced: true, NamespaceLabels: nsLabels}, "long"},
		{"is none when no policy selects the object",
			[]v1alpha1.TimeoutPolicy{policy("short", 0, "1h", map[string]string{"team": "b"}, nil)},
			match.Object{Labels: team, Namespaced: true, NamespaceLabels: nsLabels}, ""},
		{"is none when there is no policy", nil,
			match.Object{Labels: team, Namespaced: true, NamespaceLabels: nsLabels}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Governing(tt.policies, playbookGVK, tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if c != nil {
				got = c.Name
			}
			if got != tt.want {
				t.Errorf("Governing = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestGoverningReportsANamespaceItCannotRead: without the namespace's
// labels the controller cannot tell which policy governs, and must not
// fall back to another.
func TestGoverningReportsANamespaceItCannotRead(t *testing.T) {
	broken := errors.New("namespace unreadable")
	policies := []v1alpha1.TimeoutPolicy{
		policy("long", 5, "30d", nil, map[string]string{"env": "dev"}),
		policy("short", 1, "1h", nil, nil),
	}
	obj := match.Object{Namespaced: true, NamespaceLabels: func() (map[string]string, error) { return nil, broken }}
	c, err := Governing(policies, playbookGVK, obj)
	if !errors.Is(err, broken) || c != nil {
		t.Errorf("Governing = %v, %v; want no policy and the namespace's error", c, err)
	}
}
