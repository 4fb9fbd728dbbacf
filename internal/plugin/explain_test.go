// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

var updateExplain = flag.Bool("update-explain", false, "rewrite testdata/explain/*.golden from what explain says now")

// recordOf is the record annotation of rec.
func recordOf(rec *expiry.Record) map[string]string {
	return map[string]string{expiry.AnnotationReminders: rec.String()}
}

// annotated adds annotations to a copy of a.
func annotated(a map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// TestExplainGolden pins what explain says, as JSON and as text, in every
// case it tells apart: each golden file holds both, so a change to either
// form shows in review. Run with -update-explain to rewrite them.
func TestExplainGolden(t *testing.T) {
	day := expiry.Day
	notReady := func(p *v1alpha1.TimeoutPolicy) {
		p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: v1alpha1.ReasonChannelsNotReady, Message: "channel mail has no Secret"}}
	}
	ready := func(p *v1alpha1.TimeoutPolicy) {
		p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonActive}}
	}
	withStatus := func(p v1alpha1.TimeoutPolicy, set func(*v1alpha1.TimeoutPolicy)) v1alpha1.TimeoutPolicy {
		set(&p)
		return p
	}
	twoChannels := func(s *v1alpha1.TimeoutPolicySpec) {
		s.Notifications.Channels = []v1alpha1.ChannelReference{{Name: "mail"}, {Name: "hook"}}
	}
	configMaps := func(s *v1alpha1.TimeoutPolicySpec) {
		s.Target = v1alpha1.Target{APIVersion: "v1", Kind: "ConfigMap"}
	}
	labelled := func(s *v1alpha1.TimeoutPolicySpec) {
		s.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
	}

	sentRecord := &expiry.Record{ExpiresAt: t0.Add(14 * day), Since: t0}
	sentRecord.Delivered("3d", true, []string{"events"}, t0.Add(11*day+time.Second))

	halfSent := &expiry.Record{ExpiresAt: t0.Add(14 * day), Since: t0}
	halfSent.Delivered("3d", true, []string{"mail"}, t0.Add(11*day+time.Second))

	bothSent := &expiry.Record{ExpiresAt: t0.Add(14 * day), Since: t0}
	bothSent.Delivered("3d", true, []string{"events"}, t0.Add(11*day+time.Second))
	bothSent.Delivered("2d", true, []string{"events"}, t0.Add(12*day+time.Second))

	movedRecord := &expiry.Record{ExpiresAt: t0.Add(13 * day), Since: t0.Add(10*day + 12*time.Hour)}

	laterSent := &expiry.Record{ExpiresAt: t0.Add(14 * day), Since: t0}
	laterSent.Delivered("2d", true, []string{"events"}, t0.Add(12*day+time.Minute))

	configMap := &unstructured.Unstructured{}
	configMap.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	configMap.SetName("scratch")
	configMap.SetNamespace("dev")
	configMap.SetCreationTimestamp(metav1.NewTime(t0))
	configMap.SetAnnotations(map[string]string{expiry.AnnotationTTL: "2d"})

	tests := []struct {
		name       string
		obj        *unstructured.Unstructured
		gvk        schema.GroupVersionKind
		namespaced bool
		policies   []v1alpha1.TimeoutPolicy
		now        time.Time
	}{
		{name: "there are no policies", obj: playbook(nil), now: t0},
		{
			name: "no policy governs it",
			obj:  playbook(nil),
			policies: []v1alpha1.TimeoutPolicy{
				playbookPolicy("labelled", labelled),
				playbookPolicy("configmaps", configMaps),
			},
			now: t0,
		},
		{
			name: "the governing policy's spec cannot be used",
			obj:  playbook(nil),
			policies: []v1alpha1.TimeoutPolicy{
				playbookPolicy("broken", func(s *v1alpha1.TimeoutPolicySpec) { s.DefaultTTL = "0s"; s.Priority = 5 }),
				playbookPolicy("outranked"),
			},
			now: t0,
		},
		{
			name:     "the governing policy is not ready",
			obj:      playbook(nil),
			policies: []v1alpha1.TimeoutPolicy{withStatus(playbookPolicy("playbooks"), notReady)},
			now:      t0.Add(time.Hour),
		},
		{
			name:     "it is kept",
			obj:      playbook(map[string]string{expiry.AnnotationKeep: "true"}),
			policies: []v1alpha1.TimeoutPolicy{withStatus(playbookPolicy("playbooks"), ready)},
			now:      t0,
		},
		{
			name:     "the default TTL sets it and both reminders are upcoming",
			obj:      playbook(nil),
			policies: []v1alpha1.TimeoutPolicy{withStatus(playbookPolicy("playbooks", twoChannels), ready)},
			now:      t0.Add(time.Hour),
		},
		{
			name:     "an invalid ttl falls back to the default",
			obj:      playbook(map[string]string{expiry.AnnotationTTL: "3 days"}),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks")},
			now:      t0,
		},
		{
			name: "expires-at sets it under a dry-run, archiving, capped policy",
			obj:  playbook(map[string]string{expiry.AnnotationExpiresAt: "2026-03-10T12:00:00Z"}),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks", func(s *v1alpha1.TimeoutPolicySpec) {
				s.Deletion.DryRun, s.Deletion.Archive, s.Deletion.MaxPerMinute = true, true, 30
			})},
			now: t0.Add(time.Hour),
		},
		{
			name:     "the ttl annotation sets it, counted from creation",
			obj:      playbook(map[string]string{expiry.AnnotationTTL: "10d"}),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks")},
			now:      t0.Add(time.Hour),
		},
		{
			name:     "first seen late: the most urgent reminder is due now and the deletion is postponed",
			obj:      playbook(nil),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks")},
			now:      t0.Add(13*day + 12*time.Hour),
		},
		{
			name:     "first seen after expiry: notice is owed and none given yet",
			obj:      playbook(nil),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks")},
			now:      t0.Add(14*day + time.Hour),
		},
		{
			name:     "one reminder was sent and the next is upcoming",
			obj:      playbook(recordOf(sentRecord)),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks")},
			now:      t0.Add(11*day + time.Hour),
		},
		{
			name:     "a reminder sent on one channel is still owed to another",
			obj:      playbook(recordOf(halfSent)),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks", twoChannels)},
			now:      t0.Add(11*day + time.Hour),
		},
		{
			name:     "a reminder fell due before the expiry was last moved",
			obj:      playbook(annotated(recordOf(movedRecord), expiry.AnnotationTTL, "13d")),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks")},
			now:      t0.Add(10*day + 13*time.Hour),
		},
		{
			name:     "no reminder applies to a lifetime shorter than every lead",
			obj:      playbook(map[string]string{expiry.AnnotationTTL: "1d"}),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks")},
			now:      t0.Add(time.Hour),
		},
		{
			name:     "a reminder is skipped because a later one has gone out",
			obj:      playbook(recordOf(laterSent)),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks")},
			now:      t0.Add(12*day + time.Hour),
		},
		{
			name:     "the record does not parse",
			obj:      playbook(map[string]string{expiry.AnnotationReminders: "{not json"}),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks")},
			now:      t0.Add(time.Hour),
		},
		{
			name: "a policy without reminders or notice",
			obj:  playbook(nil),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks", func(s *v1alpha1.TimeoutPolicySpec) {
				s.Reminders, s.MinimumNotice = nil, "0s"
			})},
			now: t0.Add(time.Hour),
		},
		{
			name: "the idle clock decides",
			obj:  playbook(map[string]string{expiry.AnnotationTTL: "1d", expiry.AnnotationLastActive: "2026-03-06T09:00:00Z"}),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks", func(s *v1alpha1.TimeoutPolicySpec) {
				s.DefaultTTL, s.IdleTTL, s.MaxTTL = "1d", "2d", "10d"
			})},
			now: t0.Add(5*day + time.Hour),
		},
		{
			name: "the idle clock names the last use, an exec",
			obj:  playbook(expiry.Use{At: t0.Add(5*day + 48*time.Minute), Via: expiry.ViaExec, By: "alice"}.Annotations()),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks", func(s *v1alpha1.TimeoutPolicySpec) {
				s.DefaultTTL, s.IdleTTL = "1d", "2d"
			})},
			now: t0.Add(5*day + time.Hour),
		},
		{
			name: "the maximum caps a later expiry",
			obj:  playbook(map[string]string{expiry.AnnotationTTL: "7d"}),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks", func(s *v1alpha1.TimeoutPolicySpec) {
				s.DefaultTTL, s.MaxTTL = "2d", "4d"
			})},
			now: t0.Add(time.Hour),
		},
		{
			name: "keep is refused by the policy",
			obj:  playbook(map[string]string{expiry.AnnotationKeep: "true"}),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks", func(s *v1alpha1.TimeoutPolicySpec) {
				s.Keep = v1alpha1.KeepForbidden
			})},
			now: t0.Add(time.Hour),
		},
		{
			name:     "it is being deleted and Amphitheatre's finalizer holds it",
			obj:      terminating(playbook(recordOf(bothSent)), t0.Add(14*day+time.Second)),
			policies: []v1alpha1.TimeoutPolicy{withStatus(playbookPolicy("playbooks"), ready)},
			now:      t0.Add(14*day + 2*time.Hour),
		},
		{
			name:     "it sleeps after it is idle and is deleted after it slept",
			obj:      playbook(nil),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks", sleepy)},
			now:      t0.Add(time.Hour),
		},
		{
			name:     "it is asleep",
			obj:      playbook(asleep(t0.Add(3 * time.Hour))),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks", sleepy)},
			now:      t0.Add(6 * time.Hour),
		},
		{
			name:     "it was used since it went to sleep and wakes now",
			obj:      playbook(annotated(asleep(t0.Add(3*time.Hour)), expiry.AnnotationLastActive, "2026-03-01T14:00:00Z")),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks", sleepy)},
			now:      t0.Add(6 * time.Hour),
		},
		{
			name: "it was extended under limits and an extension past them is refused",
			obj: playbook(map[string]string{
				expiry.AnnotationTTL:        "30d",
				expiry.AnnotationChangedBy:  `{"by":"alice@example.com","groups":["developers"],"changed":["ttl"]}`,
				expiry.AnnotationExtensions: "granted=2026-03-17T12:00:00Z used=1 maxCount=3 maxStep=7d exempt=platform-team keep=false at=2026-03-14T12:00:00Z by=alice@example.com",
			}),
			policies: []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks", func(s *v1alpha1.TimeoutPolicySpec) {
				s.Extensions = &v1alpha1.Extensions{MaxStep: "7d", MaxCount: new(int32(3)), ExemptGroups: []string{"platform-team"}}
			})},
			now: t0.Add(15 * day),
		},
		{
			name:       "a namespaced object without a title",
			obj:        configMap,
			gvk:        configMap.GroupVersionKind(),
			namespaced: true,
			policies: []v1alpha1.TimeoutPolicy{
				playbookPolicy("configmaps", configMaps, func(s *v1alpha1.TimeoutPolicySpec) { s.Reminders = []v1alpha1.Duration{"1d"} }),
				playbookPolicy("playbooks"),
			},
			now: t0.Add(time.Hour),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gvk := tt.gvk
			if gvk.Empty() {
				gvk = playbookGVK
			}
			nsLabels := noNamespace
			if tt.namespaced {
				nsLabels = func() (map[string]string, error) { return map[string]string{}, nil }
			}
			ev, err := Evaluate(tt.obj, gvk, tt.namespaced, tt.policies, nsLabels, tt.now)
			if err != nil {
				t.Fatal(err)
			}
			x := Explain(ev)
			var got bytes.Buffer
			if err := writeStructured(&got, "json", x); err != nil {
				t.Fatal(err)
			}
			got.WriteString("---\n")
			writeExplanation(&got, x, ev.Now)

			path := filepath.Join("testdata", "explain", slug(tt.name)+".golden")
			if *updateExplain {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got.Bytes(), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update-explain to write it)", err)
			}
			if got.String() != string(want) {
				t.Errorf("explain of %q differs from %s:\n%s", tt.name, path, lineDiff(string(want), got.String()))
			}
		})
	}
}

// lineDiff shows the first line where want and got part.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl
		}
	}
	return "(same lines)"
}

// slug makes a file name of a test name.
func slug(name string) string {
	return strings.Join(strings.FieldsFunc(name, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-'
	}), "-")
}
