// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kptr "k8s.io/utils/ptr"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

var (
	t0          = time.Date(2026, time.March, 1, 9, 0, 0, 0, time.UTC)
	playbookGVK = schema.GroupVersionKind{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook"}
)

func playbook(annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(playbookGVK)
	u.SetName("2b1e7c9e")
	u.SetCreationTimestamp(metav1.NewTime(t0))
	u.SetAnnotations(annotations)
	return u
}

func policy(opts ...func(*v1alpha1.TimeoutPolicySpec)) []v1alpha1.TimeoutPolicy {
	p := v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "playbooks"}, Spec: v1alpha1.TimeoutPolicySpec{
		Target:        v1alpha1.Target{APIVersion: "amphitheatre.app/v1", Kind: "Playbook"},
		DefaultTTL:    "14d",
		Reminders:     []v1alpha1.Duration{"3d"},
		MinimumNotice: "24h",
	}}
	for _, o := range opts {
		o(&p.Spec)
	}
	return []v1alpha1.TimeoutPolicy{p}
}

func evaluate(t *testing.T, obj *unstructured.Unstructured, policies []v1alpha1.TimeoutPolicy, now time.Time) *Evaluation {
	t.Helper()
	ev, err := Evaluate(obj, playbookGVK, false, policies, func() (map[string]string, error) { return nil, nil }, now)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Governing == nil {
		t.Fatal("not governed")
	}
	return ev
}

func day(n int) time.Duration { return time.Duration(n) * 24 * time.Hour }

func TestExtendBy(t *testing.T) {
	maxTTL := func(d v1alpha1.Duration) func(*v1alpha1.TimeoutPolicySpec) {
		return func(s *v1alpha1.TimeoutPolicySpec) { s.MaxTTL = d }
	}
	maxStep := func(d v1alpha1.Duration) func(*v1alpha1.TimeoutPolicySpec) {
		return func(s *v1alpha1.TimeoutPolicySpec) { s.Extensions = &v1alpha1.Extensions{MaxStep: d} }
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		policy      []v1alpha1.TimeoutPolicy
		now         time.Time
		step        time.Duration
		want        time.Time // the expiry written; zero when nothing is
		refused     Reason
	}{
		{name: "moves the expiry a step past the current one",
			policy: policy(), now: t0.Add(day(1)), step: day(1), want: t0.Add(day(15))},
		{name: "moves a passed expiry a step past now",
			policy: policy(), now: t0.Add(day(14) + time.Hour), step: day(1), want: t0.Add(day(15) + time.Hour)},
		{name: "stops at maxTTL",
			policy: policy(maxTTL("15d")), now: t0.Add(day(1)), step: day(3), want: t0.Add(day(15))},
		{name: "refuses an object at maxTTL already",
			policy: policy(maxTTL("14d")), now: t0.Add(day(1)), step: day(1), refused: AtMaximum},
		{name: "stops at the extension limits' step past the granted expiry",
			annotations: map[string]string{expiry.AnnotationExtensions: "granted=2026-03-15T09:00:00Z used=0 maxCount=- maxStep=2d exempt=- keep=false at=- by=-"},
			policy:      policy(maxStep("2d")), now: t0.Add(day(14) + 12*time.Hour), step: day(2), want: t0.Add(day(16))},
		{name: "refuses a kept object",
			annotations: map[string]string{expiry.AnnotationKeep: "true"}, policy: policy(), now: t0, step: day(1), refused: Kept},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := evaluate(t, playbook(tc.annotations), tc.policy, tc.now)
			p, err := ExtendBy(ev, tc.step)
			if tc.refused != "" {
				var r *Refusal
				if !errors.As(err, &r) || r.Reason != tc.refused {
					t.Fatalf("got %v, %v; want refused %s", p, err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Set[expiry.AnnotationExpiresAt]; got == nil || *got != tc.want.Format(time.RFC3339) {
				t.Fatalf("wrote %v, want %s", p.Set, tc.want.Format(time.RFC3339))
			}
		})
	}
}

func TestDeleteNow(t *testing.T) {
	dryRun := func(s *v1alpha1.TimeoutPolicySpec) { s.Deletion.DryRun = true }
	now := t0.Add(day(2) + 500*time.Millisecond)
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		policy      []v1alpha1.TimeoutPolicy
		allowed     bool
		refused     Reason
	}{
		{name: "writes the expiry as now, rounded up", policy: policy(), allowed: true},
		{name: "is refused unless the policy allows it", policy: policy(), refused: DeleteForbidden},
		{name: "is refused for a kept object", annotations: map[string]string{expiry.AnnotationKeep: "true"}, policy: policy(), allowed: true, refused: Kept},
		{name: "is refused under a dry run", policy: policy(dryRun), allowed: true, refused: DryRun},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := evaluate(t, playbook(tc.annotations), tc.policy, now)
			p, err := DeleteNow(ev, tc.allowed)
			if tc.refused != "" {
				var r *Refusal
				if !errors.As(err, &r) || r.Reason != tc.refused {
					t.Fatalf("got %v, %v; want refused %s", p, err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Set[expiry.AnnotationExpiresAt]; got == nil || *got != "2026-03-03T09:00:01Z" {
				t.Fatalf("wrote %v", p.Set)
			}
		})
	}
}

func TestCheckLimits(t *testing.T) {
	limits := func(s *v1alpha1.TimeoutPolicySpec) {
		s.Extensions = &v1alpha1.Extensions{MaxStep: "2d", MaxCount: kptr.To[int32](1), ExemptGroups: []string{"platform"}}
	}
	stamp := map[string]string{expiry.AnnotationChangedBy: `{"by":"alice@example.com","via":"link","changed":["expires-at"]}`}
	used := func(n int) map[string]string {
		return map[string]string{expiry.AnnotationExtensions: "granted=2026-03-15T09:00:00Z used=" + string(rune('0'+n)) + " maxCount=1 maxStep=2d exempt=platform keep=false at=- by=-"}
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		refused     bool
	}{
		{"allows an extension within the step and the count", used(0), false},
		{"refuses one past the count, naming whom to ask", used(1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := evaluate(t, playbook(tc.annotations), policy(limits), t0.Add(day(13)))
			p, err := ExtendBy(ev, day(1))
			if err != nil {
				t.Fatal(err)
			}
			err = CheckLimits(ev, p, stamp)
			var r *Refusal
			if got := errors.As(err, &r) && r.Reason == PastLimits; got != tc.refused {
				t.Fatalf("refused %t (%v), want %t", got, err, tc.refused)
			}
			if tc.refused && r.Limits == nil {
				t.Fatal("no limits in the refusal")
			}
		})
	}
}
