// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package match

import (
	"errors"
	"strings"
	"testing"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

func TestExplain(t *testing.T) {
	dev := map[string]string{"env": "dev"}
	all := items(
		fixture.Policy("low"),
		fixture.Policy("high", fixture.Priority(9)),
		fixture.Policy("tie", fixture.Priority(9)),
		fixture.Policy("db-only", fixture.Selecting(map[string]string{"app": "db"}), fixture.Priority(50)),
		fixture.Policy("dev-only", fixture.InNamespaces(dev), fixture.Priority(40)),
		fixture.Policy("secrets", fixture.Target("v1", "Secret")),
		fixture.Policy("going", deleting, fixture.Priority(100)),
		// Its valid requirement leaves the object out; its invalid one
		// cannot bring it in.
		fixture.Policy("bogus", bogusSelector, fixture.Priority(100), func(p *v1alpha1.TimeoutPolicy) {
			p.Spec.Selector.MatchLabels = map[string]string{"app": "db"}
		}),
	)
	verdicts, err := Explain(all, configMapGVK, Object{
		Labels:          map[string]string{"app": "web"},
		Namespaced:      true,
		NamespaceLabels: nsLabelsOf(map[string]string{"env": "prod"}),
	})
	if err != nil {
		t.Fatal(err)
	}

	type want struct {
		name    string
		governs bool
		reason  Reason
		detail  string
	}
	wants := []want{
		{"high", true, "", ""},
		{"tie", false, Outranked, "policy high has the same priority (9) and a name that sorts first"},
		{"low", false, Outranked, "policy high has a higher priority (9 > 0)"},
		{"bogus", false, LabelsNotSelected, `spec.selector "app=db"`},
		{"db-only", false, LabelsNotSelected, `spec.selector "app=db"`},
		{"dev-only", false, NamespaceNotSelected, `spec.namespaceSelector "env=dev"`},
		{"secrets", false, OtherKind, "targets v1 Secret, not ConfigMap"},
		{"going", false, Deleting, "being deleted"},
	}
	if len(verdicts) != len(wants) {
		t.Fatalf("got %d verdicts, want %d", len(verdicts), len(wants))
	}
	for i, w := range wants {
		v := verdicts[i]
		t.Run(w.name, func(t *testing.T) {
			if v.Policy.Name != w.name {
				t.Fatalf("verdict %d is about %s, want %s", i, v.Policy.Name, w.name)
			}
			if v.Governs != w.governs {
				t.Errorf("Governs = %t, want %t", v.Governs, w.governs)
			}
			if w.governs {
				if v.Mismatch != nil {
					t.Errorf("governing policy has a mismatch: %+v", v.Mismatch)
				}
				if v.Candidate == nil {
					t.Error("governing policy has no candidate")
				}
				return
			}
			if v.Mismatch == nil {
				t.Fatalf("no mismatch, want %s", w.reason)
			}
			if v.Mismatch.Reason != w.reason || !strings.Contains(v.Mismatch.Detail, w.detail) {
				t.Errorf("mismatch = %s %q, want %s containing %q", v.Mismatch.Reason, v.Mismatch.Detail, w.reason, w.detail)
			}
		})
	}
}

func TestExplainAgreesWithMatching(t *testing.T) {
	all := items(fixture.Policy("a", fixture.Selecting(map[string]string{"app": "web"})), fixture.Policy("b", fixture.Priority(1)), fixture.Policy("c", fixture.Target("v1", "Secret")))
	for _, l := range []map[string]string{{"app": "web"}, {"app": "db"}, nil} {
		o := Object{Labels: l}
		matched, err := Matching(Candidates(all, configMapGVK), o)
		if err != nil {
			t.Fatal(err)
		}
		verdicts, err := Explain(all, configMapGVK, o)
		if err != nil {
			t.Fatal(err)
		}
		var selecting []string
		for _, v := range verdicts {
			if v.Governs || (v.Mismatch != nil && v.Mismatch.Reason == Outranked) {
				selecting = append(selecting, v.Policy.Name)
			}
		}
		if strings.Join(selecting, ",") != strings.Join(names(matched), ",") {
			t.Errorf("labels %v: Explain selects %v, Matching %v", l, selecting, names(matched))
		}
		if len(matched) > 0 && !verdicts[0].Governs {
			t.Errorf("labels %v: first verdict %s does not govern", l, verdicts[0].Policy.Name)
		}
	}
}

func TestExplainReturnsTheNamespaceError(t *testing.T) {
	boom := errors.New("forbidden")
	_, err := Explain(items(fixture.Policy("dev", fixture.InNamespaces(map[string]string{"env": "dev"}))), configMapGVK,
		Object{Namespaced: true, NamespaceLabels: func() (map[string]string, error) { return nil, boom }})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
}
