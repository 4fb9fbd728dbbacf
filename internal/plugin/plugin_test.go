// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

var (
	t0          = time.Date(2026, time.March, 1, 9, 0, 0, 0, time.UTC)
	playbookGVK = schema.GroupVersionKind{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook"}
)

// amphitheatreFinalizer is the finalizer Amphitheatre's controller puts
// on every Playbook.
const amphitheatreFinalizer = "playbooks.amphitheatre.app/finalizer"

// playbook is a Playbook as Amphitheatre makes it, finalizer included.
func playbook(annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(playbookGVK)
	u.SetName("2b1e7c9e")
	u.SetCreationTimestamp(metav1.NewTime(t0))
	u.SetAnnotations(annotations)
	u.SetFinalizers([]string{amphitheatreFinalizer})
	_ = unstructured.SetNestedField(u.Object, "2b1e7c9e", "spec", "id")
	_ = unstructured.SetNestedField(u.Object, "Weekend demo", "spec", "title")
	return u
}

// terminating is obj with its deletion begun at since: Amphitheatre's
// finalizer holds it in Terminating until Amphitheatre's controller runs.
func terminating(obj *unstructured.Unstructured, since time.Time) *unstructured.Unstructured {
	obj.SetDeletionTimestamp(&metav1.Time{Time: since})
	return obj
}

func playbookPolicy(name string, opts ...func(*v1alpha1.TimeoutPolicySpec)) v1alpha1.TimeoutPolicy {
	p := v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.TimeoutPolicySpec{
		Target:        v1alpha1.Target{APIVersion: "amphitheatre.app/v1", Kind: "Playbook"},
		DefaultTTL:    "14d",
		Reminders:     []v1alpha1.Duration{"3d", "2d"},
		MinimumNotice: "24h",
	}}
	for _, o := range opts {
		o(&p.Spec)
	}
	return p
}

func noNamespace() (map[string]string, error) { return nil, errors.New("not namespaced") }

func evaluateAt(t *testing.T, obj *unstructured.Unstructured, policies []v1alpha1.TimeoutPolicy, now time.Time) *Evaluation {
	t.Helper()
	ev, err := Evaluate(obj, playbookGVK, false, policies, noNamespace, now)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

type step struct {
	at     time.Duration // after t0
	action string
	stage  string
}

func steps(ev *Evaluation) []step {
	var out []step
	for _, s := range ev.Steps {
		out = append(out, step{s.At.Sub(t0), s.Action, s.Stage})
	}
	return out
}

func TestEvaluate(t *testing.T) {
	day := expiry.Day
	tests := []struct {
		name      string
		obj       *unstructured.Unstructured
		now       time.Time
		policy    v1alpha1.TimeoutPolicy
		want      []step
		flags     []string
		postponed bool
	}{
		{
			name:   "plans both reminders, then the deletion at expiry",
			obj:    playbook(nil),
			now:    t0.Add(time.Hour),
			policy: playbookPolicy("playbooks"),
			want:   []step{{11 * day, "reminder", "3d"}, {12 * day, "reminder", "2d"}, {14 * day, ActionDelete, ""}},
		},
		{
			name:   "an object first seen late gets the most urgent reminder now, then the deletion after the minimum notice",
			obj:    playbook(nil),
			now:    t0.Add(13*day + 12*time.Hour),
			policy: playbookPolicy("playbooks"),
			want: []step{
				{13*day + 12*time.Hour, "reminder", "2d"},
				{14 * day, "postponed", ""},
				{14*day + 12*time.Hour, ActionDelete, ""},
			},
			flags:     []string{"postponed"},
			postponed: true,
		},
		{
			name:   "a kept object has nothing planned",
			obj:    playbook(map[string]string{expiry.AnnotationKeep: "true"}),
			now:    t0,
			policy: playbookPolicy("playbooks"),
			flags:  []string{"keep"},
		},
		{
			name:   "an object in Terminating has nothing planned and is flagged terminating alone",
			obj:    terminating(playbook(map[string]string{expiry.AnnotationTTL: "3 days"}), t0.Add(14*day+time.Second)),
			now:    t0.Add(14*day + time.Hour),
			policy: playbookPolicy("playbooks", func(s *v1alpha1.TimeoutPolicySpec) { s.Deletion.DryRun = true }),
			flags:  []string{"terminating"},
		},
		{
			name:   "an invalid ttl falls back to the default and is flagged",
			obj:    playbook(map[string]string{expiry.AnnotationTTL: "3 days"}),
			now:    t0,
			policy: playbookPolicy("playbooks", func(s *v1alpha1.TimeoutPolicySpec) { s.Reminders = nil }),
			want:   []step{{14 * day, ActionDelete, ""}},
			flags:  []string{"invalid"},
		},
		{
			name: "a dry-run policy is flagged",
			obj:  playbook(map[string]string{expiry.AnnotationTTL: "1h"}),
			now:  t0,
			policy: playbookPolicy("playbooks", func(s *v1alpha1.TimeoutPolicySpec) {
				s.Deletion.DryRun = true
			}),
			want:  []step{{time.Hour, ActionDelete, ""}},
			flags: []string{"dry-run"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := evaluateAt(t, tt.obj, []v1alpha1.TimeoutPolicy{tt.policy}, tt.now)
			if ev.Governing == nil || ev.Governing.Name != tt.policy.Name {
				t.Fatalf("governed by %v", ev.Governing)
			}
			if got := steps(ev); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("steps %v, want %v", got, tt.want)
			}
			if got := ev.Flags(); !reflect.DeepEqual(got, tt.flags) {
				t.Errorf("flags %v, want %v", got, tt.flags)
			}
			if ev.Postponed() != tt.postponed {
				t.Errorf("postponed = %t", ev.Postponed())
			}
		})
	}
}

func TestEvaluateReadsTheRecord(t *testing.T) {
	expires := t0.Add(14 * expiry.Day)
	rec := &expiry.Record{ExpiresAt: expires, Since: t0}
	rec.Delivered("3d", true, []string{"events"}, t0.Add(11*expiry.Day+time.Second))
	// Messages that are not stages: a rehearsal, and going live after it.
	rec.Delivered(expiry.KeyWouldDelete, false, []string{"events"}, t0.Add(11*expiry.Day+time.Second))
	rec.Delivered(expiry.KeyLive, false, []string{"events"}, t0.Add(11*expiry.Day+time.Second))
	obj := playbook(map[string]string{expiry.AnnotationReminders: rec.String()})

	ev := evaluateAt(t, obj, []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks")}, t0.Add(11*expiry.Day+time.Hour))
	if got := ev.SentStages(); !reflect.DeepEqual(got, []string{"3d"}) {
		t.Errorf("sent %v, want [3d]", got)
	}
	x := Explain(ev)
	if x.Notice == nil || x.Notice.GivenAt == nil || !time.Time(*x.Notice.GivenAt).Equal(t0.Add(11*expiry.Day+time.Second)) {
		t.Errorf("notice %+v", x.Notice)
	}
	states := map[string]string{}
	for _, r := range x.Reminders {
		states[r.Stage] = r.State
	}
	if want := map[string]string{"3d": "sent", "2d": "upcoming"}; !reflect.DeepEqual(states, want) {
		t.Errorf("reminder states %v, want %v", states, want)
	}

	t.Run("an extension not yet seen by the controller starts a new record", func(t *testing.T) {
		a := obj.DeepCopy()
		ann := a.GetAnnotations()
		ann[expiry.AnnotationExpiresAt] = expires.Add(7 * expiry.Day).Format(time.RFC3339)
		a.SetAnnotations(ann)
		ev := evaluateAt(t, a, []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks")}, t0.Add(11*expiry.Day+time.Hour))
		if len(ev.SentStages()) != 0 || ev.Record.ExtendedFrom.IsZero() {
			t.Errorf("record %+v", ev.Record)
		}
		if ev.Steps[0].Action != string(v1alpha1.EventExtended) {
			t.Errorf("first step %+v, want the extended message", ev.Steps[0])
		}
	})
}

func TestEvaluateWithoutAGoverningPolicy(t *testing.T) {
	other := playbookPolicy("other", func(s *v1alpha1.TimeoutPolicySpec) {
		s.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
	})
	ev := evaluateAt(t, playbook(nil), []v1alpha1.TimeoutPolicy{other}, t0)
	if ev.Governing != nil || len(ev.Steps) != 0 {
		t.Fatalf("governed by %v", ev.Governing)
	}
	x := Explain(ev)
	if x.Policy != "" || len(x.Policies) != 1 || x.Policies[0].Reason != "LabelsNotSelected" {
		t.Errorf("explanation %+v", x)
	}
}

func TestEvaluateUnderAPolicyWithAnUnusableSpec(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breakIt func(*v1alpha1.TimeoutPolicySpec)
		problem string
	}{
		{"a zero default TTL", func(s *v1alpha1.TimeoutPolicySpec) { s.DefaultTTL = "0s" }, "spec.defaultTTL"},
		{"a selector value that is not a label value", func(s *v1alpha1.TimeoutPolicySpec) {
			s.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "not a value!"}}
		}, "spec.selector"},
		{"a selector operator in the wrong case", func(s *v1alpha1.TimeoutPolicySpec) {
			s.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "in", Values: []string{"x"}}}}
		}, "spec.selector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broken := playbookPolicy("broken", tc.breakIt, func(s *v1alpha1.TimeoutPolicySpec) { s.Priority = 10 })
			short := playbookPolicy("short", func(s *v1alpha1.TimeoutPolicySpec) { s.DefaultTTL = "15s" })
			ev := evaluateAt(t, playbook(nil), []v1alpha1.TimeoutPolicy{short, broken}, t0)
			if ev.Governing == nil || ev.Governing.Name != "broken" || ev.Governing.SpecErr == nil || len(ev.Steps) != 0 {
				t.Fatalf("evaluation %+v", ev)
			}
			if got := ev.Flags(); !reflect.DeepEqual(got, []string{"inactive"}) {
				t.Errorf("flags %v", got)
			}
			if x := Explain(ev); !strings.Contains(x.Policies[0].Problem, tc.problem) || !strings.Contains(x.Policies[0].Problem, "does nothing") {
				t.Errorf("problem %q", x.Policies[0].Problem)
			}
		})
	}
}

func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                             "0s",
		-time.Hour:                    "0s",
		42 * time.Second:              "42s",
		5*time.Minute + 3*time.Second: "5m 3s",
		5*time.Hour + 12*time.Minute:  "5h 12m",
		2*expiry.Day + 4*time.Hour + 59*time.Minute: "2d 4h",
		2 * expiry.Day:                "2d",
		2*expiry.Day + 30*time.Minute: "2d",
	} {
		if got := Age(d); got != want {
			t.Errorf("Age(%s) = %q, want %q", d, got, want)
		}
	}
	if got := Left(t0.Add(-time.Minute), t0); got != "due" {
		t.Errorf("Left of a past deletion = %q, want due", got)
	}
}

func TestSpanPastWhatADurationHolds(t *testing.T) {
	now := time.Date(2026, 11, 26, 0, 4, 0, 0, time.UTC)
	for _, tt := range []struct {
		to   time.Time
		want string
	}{
		{now.Add(5*time.Hour + 12*time.Minute), "5h 12m"},
		{now.AddDate(1, 0, 0).Add(-time.Second), "364d 23h"},
		{now.AddDate(1, 0, 0), "1y"},
		{now.AddDate(1, 0, 3).Add(time.Hour), "1y 3d"},
		{time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC), "972y 35d"},
		{now.Add(-time.Hour), "0s"},
	} {
		if got := Span(now, tt.to); got != tt.want {
			t.Errorf("Span to %s = %q, want %q", tt.to.Format(time.RFC3339), got, tt.want)
		}
	}
	far := time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := Left(far, now); got != "972y 35d" {
		t.Errorf("Left to 2999 = %q, want 972y 35d, not the 106751d 23h a Duration stops at", got)
	}
	if got := relative(now, far); got != "972y 35d ago" {
		t.Errorf("relative from 2999 = %q", got)
	}
	if got, want := secondsBetween(now, far), far.Unix()-now.Unix(); got != want {
		t.Errorf("seconds to 2999 = %d, want %d", got, want)
	}
	if got := secondsBetween(now, now.Add(90*time.Second+time.Millisecond)); got != 90 {
		t.Errorf("seconds = %d, want 90", got)
	}
}

func TestClassify(t *testing.T) {
	gr := schema.GroupResource{Group: "amphitheatre.app", Resource: "playbooks"}
	tests := []struct {
		name string
		err  error
		code int
	}{
		{"RBAC forbids", apierrors.NewForbidden(gr, "x", errors.New("no")), ExitForbidden},
		{"not logged in", apierrors.NewUnauthorized("who are you"), ExitForbidden},
		{"no such object", apierrors.NewNotFound(gr, "x"), ExitNotFound},
		{"a coded error", withCode(ExitAmbiguous, "two"), ExitAmbiguous},
		{"a wrapped coded error", errors.Join(errors.New("context"), withCode(ExitGone, "gone")), ExitGone},
		{"an unknown flag", errors.New("unknown flag: --bogus"), ExitUsage},
		{"anything else", errors.New("connection refused"), ExitError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code, _ := classify(tt.err); code != tt.code {
				t.Errorf("classify(%v) = %d, want %d", tt.err, code, tt.code)
			}
		})
	}
}

func TestClassifyAnAdmissionRefusalNamesNoRBAC(t *testing.T) {
	gr := schema.GroupResource{Group: "amphitheatre.app", Resource: "playbooks"}
	err := apierrors.NewForbidden(gr, "x", errors.New("ValidatingAdmissionPolicy 'timeout-extensions.amphitheatre.app' with binding 'b' denied request: no extension left"))
	code, msg := classify(err)
	if code != ExitForbidden || strings.Contains(msg, "RBAC") || !strings.Contains(msg, "no extension left") {
		t.Fatalf("classify = %d %q", code, msg)
	}
	if _, msg := classify(apierrors.NewForbidden(gr, "x", errors.New("no"))); !strings.Contains(msg, "RBAC") {
		t.Fatalf("an RBAC refusal lost its hint: %q", msg)
	}
}

// These fail before any request, so they need no API server.
func TestRunRejectsBadArgumentsWithExitCode2(t *testing.T) {
	for _, args := range [][]string{
		{"explain"},
		{"explain", "a", "b"},
		{"extend", "x"},
		{"extend", "x", "3 days"},
		{"extend", "x", "3d", "--until", "2026-12-24T18:00:00Z"},
		{"extend", "x", "--until", "next tuesday"},
		{"list", "-o", "xml"},
		{"list", "--expiring-within", "soon"},
		{"keep", "a/b/c"},
		{"list", "--no-such-flag"},
		{"no-such-command"},
	} {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), args, Options{IOStreams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}})
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d; stderr: %s", args, code, ExitUsage, errOut.String())
		}
		if !strings.HasPrefix(errOut.String(), "error: ") {
			t.Errorf("%v: stderr %q", args, errOut.String())
		}
	}
}

func TestHelpHasExamples(t *testing.T) {
	for _, cmd := range []string{"list", "explain", "extend", "keep", "unkeep", "restore"} {
		var out bytes.Buffer
		code := Run(context.Background(), []string{cmd, "--help"}, Options{IOStreams: genericiooptions.IOStreams{Out: &out, ErrOut: &out}})
		if code != ExitOK || !strings.Contains(out.String(), "Examples:") || !strings.Contains(out.String(), "kubectl timeout "+cmd) {
			t.Errorf("%s --help: exit %d\n%s", cmd, code, out.String())
		}
	}
}

func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		var out bytes.Buffer
		if code := Run(context.Background(), []string{"completion", shell}, Options{IOStreams: genericiooptions.IOStreams{Out: &out, ErrOut: &out}}); code != ExitOK || out.Len() == 0 {
			t.Errorf("completion %s: exit %d", shell, code)
		}
	}
}

// The controller reads a title only from Playbooks (the one Amphitheatre
// kind with a spec.title); the plugin must show the same one.
func TestTitleIsReadAsTheControllerReadsIt(t *testing.T) {
	withTitle := func(gvk schema.GroupVersionKind) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"title": "Hello Go"}}}
		u.SetGroupVersionKind(gvk)
		return u
	}
	for _, tt := range []struct {
		name string
		gvk  schema.GroupVersionKind
		want string
	}{
		{"shows a Playbook's title", playbookGVK, "Hello Go"},
		{"shows no title for another Amphitheatre kind", schema.GroupVersionKind{Group: "amphitheatre.app", Version: "v1", Kind: "Actor"}, ""},
		{"shows no title for a Playbook of another group", schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Playbook"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := title(withTitle(tt.gvk)); got != tt.want {
				t.Errorf("title = %q, want %q", got, tt.want)
			}
		})
	}
}
