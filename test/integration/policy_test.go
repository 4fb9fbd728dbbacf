// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

func TestAdmissionRejectsBadPolicies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		spec  v1alpha1.TimeoutPolicySpec
		field string
	}{
		{"rejects a duration written in words", v1alpha1.TimeoutPolicySpec{DefaultTTL: "14 days"}, "spec.defaultTTL"},
		{"rejects a negative default TTL", v1alpha1.TimeoutPolicySpec{DefaultTTL: "-1h"}, "spec.defaultTTL"},
		{"rejects a negative reminder", v1alpha1.TimeoutPolicySpec{Reminders: []v1alpha1.Duration{"3d", "-2d"}}, "spec.reminders[1]"},
		{"rejects a negative minimum notice", v1alpha1.TimeoutPolicySpec{MinimumNotice: "-5m"}, "spec.minimumNotice"},
		{"rejects an empty target kind", v1alpha1.TimeoutPolicySpec{Target: v1alpha1.Target{APIVersion: "v1", Kind: ""}}, "spec.target.kind"},
		{"rejects an empty target apiVersion", v1alpha1.TimeoutPolicySpec{Target: v1alpha1.Target{APIVersion: "", Kind: "ConfigMap"}}, "spec.target.apiVersion"},
		{"rejects an unknown propagation policy", v1alpha1.TimeoutPolicySpec{Deletion: v1alpha1.Deletion{PropagationPolicy: "Later"}}, "spec.deletion.propagationPolicy"},
		{"rejects a selector operator in the wrong case", selecting(metav1.LabelSelectorRequirement{Key: "app", Operator: "in", Values: []string{"x"}}), "spec.selector: Invalid value"},
		{"rejects an unknown selector operator", selecting(metav1.LabelSelectorRequirement{Key: "app", Operator: "Like", Values: []string{"x"}}), "must be In, NotIn, Exists or DoesNotExist"},
		{"rejects In without values", selecting(metav1.LabelSelectorRequirement{Key: "app", Operator: metav1.LabelSelectorOpIn}), "values must be non-empty for In and NotIn"},
		{"rejects NotIn with an empty list of values", selecting(metav1.LabelSelectorRequirement{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{}}), "values must be non-empty for In and NotIn"},
		{"rejects Exists with values", selecting(metav1.LabelSelectorRequirement{Key: "app", Operator: metav1.LabelSelectorOpExists, Values: []string{"x"}}), "empty for Exists and DoesNotExist"},
		{"rejects a namespace selector operator in the wrong case", v1alpha1.TimeoutPolicySpec{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "exists"}}}}, "spec.namespaceSelector: Invalid value"},
		{"rejects a blank traffic query", v1alpha1.TimeoutPolicySpec{IdleTTL: "1h", Traffic: &v1alpha1.Traffic{Query: "  "}}, "query must not be blank"},
		{"rejects a traffic threshold that is not a number", v1alpha1.TimeoutPolicySpec{IdleTTL: "1h", Traffic: &v1alpha1.Traffic{Query: "up", Threshold: "lots"}}, "spec.traffic.threshold"},
		{"rejects a traffic name label Prometheus cannot have", v1alpha1.TimeoutPolicySpec{IdleTTL: "1h", Traffic: &v1alpha1.Traffic{Query: "up", NameLabel: "play-book"}}, "spec.traffic.nameLabel"},
		{"rejects DoesNotExist with values in a namespace selector", v1alpha1.TimeoutPolicySpec{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpDoesNotExist, Values: []string{"x"}}}}}, "spec.namespaceSelector: Invalid value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-"}, Spec: tc.spec}
			if tc.spec.Target.Kind == "" && tc.spec.Target.APIVersion == "" {
				p.Spec.Target = v1alpha1.Target{APIVersion: "amphitheatre.app/v1", Kind: "Playbook"}
			}
			err := k8s.Create(context.Background(), p)
			if err == nil {
				_ = k8s.Delete(context.Background(), p)
				t.Fatalf("created %+v; want it refused", tc.spec)
			}
			mustContain(t, err.Error(), tc.field)
		})
	}
}

// TestAPolicyWithTheOldInlineChannelsIsRefused applies policies written
// before NotificationChannel as client-go does by default, without strict
// field validation: the API server would otherwise drop the old fields and
// the policy would give notice by Events alone, without a word.
func TestAPolicyWithTheOldInlineChannelsIsRefused(t *testing.T) {
	t.Parallel()
	const upgradePage = "docs/guides/upgrade.md"
	if _, err := os.Stat(filepath.Join("..", "..", upgradePage)); err != nil {
		t.Fatalf("the refusal points to %s: %v", upgradePage, err)
	}
	for _, tc := range []struct {
		name, notifications, field string
	}{
		{"refuses an inline e-mail server", `
email:
  host: smtp.example.com
  from: timeout-bot@example.com
  to: [platform-team@example.com]
  credentialsSecretRef: {namespace: timeout-system, name: smtp-credentials}`, "notifications.email was removed"},
		{"refuses an inline Slack webhook", `
slack:
  webhookURLSecretRef: {namespace: timeout-system, name: slack-webhook, key: url}`, "notifications.slack was removed"},
		{"refuses inline webhook receivers", `
webhooks:
- name: audit
  url: https://audit.example.com/hooks/timeout
  secretRef: {namespace: timeout-system, name: audit-webhook, key: key}`, "notifications.webhooks was removed"},
		{"refuses inline allowed e-mail domains", `
allowedEmailDomains: [example.com]`, "notifications.allowedEmailDomains was removed"},
	} {
		for _, validation := range []string{"", metav1.FieldValidationIgnore, metav1.FieldValidationWarn} {
			name := tc.name + " with field validation " + validation
			if validation == "" {
				name = tc.name + " with client-go's default field validation"
			}
			t.Run(name, func(t *testing.T) {
				var u unstructured.Unstructured
				manifest := "apiVersion: timeout.amphitheatre.app/v1alpha1\nkind: TimeoutPolicy\nmetadata:\n  generateName: inline-\nspec:\n  notifications:" +
					strings.ReplaceAll(tc.notifications, "\n", "\n    ")
				if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
					t.Fatal(err)
				}
				var opts []client.CreateOption
				if validation != "" {
					opts = append(opts, client.FieldValidation(validation))
				}
				err := k8s.Create(context.Background(), &u, opts...)
				if err == nil {
					_ = k8s.Delete(context.Background(), &u)
					t.Fatalf("created a policy with %s; want it refused", strings.TrimSpace(tc.notifications))
				}
				t.Logf("refused: %v", err)
				mustContain(t, err.Error(), "spec.notifications", tc.field, upgradePage)
			})
		}
	}
}

// selecting is a spec whose selector has the one requirement r.
func selecting(r metav1.LabelSelectorRequirement) v1alpha1.TimeoutPolicySpec {
	return v1alpha1.TimeoutPolicySpec{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{r}}}
}

func TestAdmissionAcceptsEveryValidSelectorOperator(t *testing.T) {
	t.Parallel()
	valid := []metav1.LabelSelectorRequirement{
		{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}},
		{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"gold"}},
		{Key: "team", Operator: metav1.LabelSelectorOpExists},
		{Key: "legacy", Operator: metav1.LabelSelectorOpDoesNotExist, Values: []string{}},
	}
	p := &v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{GenerateName: "valid-selectors-"}, Spec: v1alpha1.TimeoutPolicySpec{
		Target:            v1alpha1.Target{APIVersion: "amphitheatre.app/v1", Kind: "Playbook"},
		Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{testLabel: "valid-selectors"}, MatchExpressions: valid},
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: valid},
	}}
	if err := k8s.Create(context.Background(), p, client.DryRunAll); err != nil {
		t.Fatalf("a policy with every valid operator refused: %v", err)
	}
}

func TestAdmissionFillsInTheDefaults(t *testing.T) {
	t.Parallel()
	raw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "timeout.amphitheatre.app/v1alpha1",
		"kind":       "TimeoutPolicy",
		"metadata":   map[string]any{"name": "defaults"},
		"spec":       map[string]any{"selector": map[string]any{"matchLabels": map[string]any{testLabel: "defaults"}}},
	}}
	if err := k8s.Create(context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), raw) })
	p, err := getPolicy("defaults")
	if err != nil {
		t.Fatal(err)
	}
	s := p.Spec
	if s.Target.APIVersion != "amphitheatre.app/v1" || s.Target.Kind != "Playbook" || s.DefaultTTL != "14d" ||
		!slices.Equal(s.Reminders, []v1alpha1.Duration{"3d", "2d"}) || s.MinimumNotice != "24h" ||
		s.Deletion.PropagationPolicy != metav1.DeletePropagationBackground || s.Deletion.DryRun {
		t.Errorf("defaults = %+v", s)
	}

	// An explicit empty list means "no reminders", not "the default ones".
	none := createPolicy(t, "no-reminders", v1alpha1.TimeoutPolicySpec{
		Selector:  &metav1.LabelSelector{MatchLabels: map[string]string{testLabel: "no-reminders"}},
		Reminders: []v1alpha1.Duration{},
	})
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(none), none); err != nil {
		t.Fatal(err)
	}
	if len(none.Spec.Reminders) != 0 {
		t.Errorf("reminders = %v, want none", none.Spec.Reminders)
	}
}

func TestAPolicyTheControllerCannotUseIsNotReady(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, policy, reason, message string
		spec                          v1alpha1.TimeoutPolicySpec
	}{
		{
			name: "a zero default TTL", policy: "zero-ttl", reason: v1alpha1.ReasonInvalidSpec,
			message: `spec.defaultTTL: "0s" must be greater than zero`,
			spec:    playbookPolicy("zero-ttl", "0s"),
		},
		{
			name: "a traffic interval under the minimum", policy: "fast-traffic", reason: v1alpha1.ReasonInvalidSpec,
			message: `spec.traffic.interval: "5s" is shorter than the minimum, 15s`,
			spec: func() v1alpha1.TimeoutPolicySpec {
				s := idlePolicy("fast-traffic", "1h", "1h")
				s.Traffic = &v1alpha1.Traffic{Query: "up", Interval: "5s"}
				return s
			}(),
		},
		{
			name: "a template that does not parse", policy: "bad-template", reason: v1alpha1.ReasonChannelsNotReady,
			message: "spec.notifications.templates[0].subject",
			spec: func() v1alpha1.TimeoutPolicySpec {
				s := playbookPolicy("bad-template", "1h")
				s.Notifications.Templates = []v1alpha1.MessageTemplate{{Event: v1alpha1.EventReminder, Subject: "{{.Object.Name"}}
				return s
			}(),
		},
		{
			name: "a template that names a field that does not exist", policy: "bad-field", reason: v1alpha1.ReasonChannelsNotReady,
			message: "can't evaluate field Owner",
			spec: func() v1alpha1.TimeoutPolicySpec {
				s := playbookPolicy("bad-field", "1h")
				s.Notifications.Templates = []v1alpha1.MessageTemplate{{Event: v1alpha1.EventDeleted, Text: "Bye {{.Owner}}"}}
				return s
			}(),
		},
		{
			name: "a webhook whose signing key Secret is missing", policy: "no-secret", reason: v1alpha1.ReasonChannelsNotReady,
			message: "timeout-secrets/nowhere",
			spec: func() v1alpha1.TimeoutPolicySpec {
				s := playbookPolicy("no-secret", "1h")
				createChannel(t, "no-secret", v1alpha1.NotificationChannelSpec{Webhook: &v1alpha1.WebhookChannel{
					URL:       "http://127.0.0.1:9/hook",
					SecretRef: v1alpha1.SecretKeySelector{Namespace: "timeout-secrets", Name: "nowhere", Key: "key"},
				}})
				s.Notifications.Channels = []v1alpha1.ChannelReference{{Name: "no-secret"}}
				return s
			}(),
		},
		{
			name: "a Secret outside the controller's Secret namespace", policy: "foreign-secret", reason: v1alpha1.ReasonChannelsNotReady,
			message: "secret default/team-b-smtp is outside namespace timeout-secrets",
			spec: func() v1alpha1.TimeoutPolicySpec {
				s := playbookPolicy("foreign-secret", "1h")
				createChannel(t, "foreign-secret", v1alpha1.NotificationChannelSpec{Email: &v1alpha1.EmailChannel{
					Host: "smtp.example.com", From: "timeout@example.com",
					CredentialsSecretRef: &v1alpha1.SecretReference{Namespace: "default", Name: "team-b-smtp"},
				}})
				s.Notifications.Channels = []v1alpha1.ChannelReference{{Name: "foreign-secret"}}
				return s
			}(),
		},
		{
			name: "a channel that does not exist", policy: "no-channel", reason: v1alpha1.ReasonChannelNotFound,
			message: "NotificationChannel nowhere does not exist",
			spec: func() v1alpha1.TimeoutPolicySpec {
				s := playbookPolicy("no-channel", "1h")
				s.Notifications.Channels = []v1alpha1.ChannelReference{{Name: "nowhere"}}
				return s
			}(),
		},
		{
			name: "a kind the API server does not serve", policy: "no-such-kind", reason: v1alpha1.ReasonTargetNotFound,
			message: "does not serve example.com/v1 Widget",
			spec:    v1alpha1.TimeoutPolicySpec{Target: v1alpha1.Target{APIVersion: "example.com/v1", Kind: "Widget"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			createPolicy(t, tc.policy, tc.spec)
			fixture.Eventually(t, 10*time.Second, "Ready=False", func() (bool, error) {
				p, err := getPolicy(tc.policy)
				if err != nil {
					return false, err
				}
				c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
				return c != nil && c.Status == metav1.ConditionFalse && c.Reason == tc.reason, fmt.Errorf("conditions %+v", p.Status.Conditions)
			})
			p, _ := getPolicy(tc.policy)
			mustContain(t, meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady).Message, tc.message)
			warning := findEvent(t, eventNamespace, tc.policy, map[string]string{
				v1alpha1.ReasonInvalidSpec: "InvalidPolicy", v1alpha1.ReasonTargetNotFound: "TargetNotFound",
				v1alpha1.ReasonChannelsNotReady: "InvalidPolicy", v1alpha1.ReasonChannelNotFound: "InvalidPolicy",
			}[tc.reason])
			mustContain(t, warning.Note, tc.message)
		})
	}
}

func TestAnInvalidPolicyKeepsItsObjects(t *testing.T) {
	t.Parallel()
	// The high-priority policy is broken; its objects must not fall to
	// the low-priority one, whose lifetime is much shorter.
	broken := playbookPolicy("broken", "0s")
	broken.Priority = 10
	createPolicy(t, "broken-high", broken)
	createPolicy(t, "broken-low", playbookPolicy("broken", "1s"))
	// Both taken up by the controller, so that keeping the object is its
	// decision, not a policy it has not seen yet.
	awaitPolicy(t, "broken-high", "rejected as invalid", func(p *v1alpha1.TimeoutPolicy) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonInvalidSpec
	})
	awaitPolicy(t, "broken-low", "ready", func(p *v1alpha1.TimeoutPolicy) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady)
	})

	pb := create(t, playbooks, newPlaybook("broken", "orphan", nil))
	pb.expectKept(t, 3*time.Second)
}

// TestAPolicyMadeInvalidKeepsItsObjects edits the policy that governs a
// Playbook (1h) into one the controller cannot use, in each way the CRD
// cannot refuse. A catch-all policy of lower priority (15s) would delete
// the Playbook if it were handed on; it must be kept well past that.
func TestAPolicyMadeInvalidKeepsItsObjects(t *testing.T) {
	t.Parallel()
	createChannel(t, "made-invalid-hook", v1alpha1.NotificationChannelSpec{Webhook: &v1alpha1.WebhookChannel{
		URL:       "http://127.0.0.1:9/hook",
		SecretRef: v1alpha1.SecretKeySelector{Namespace: "timeout-secrets", Name: "nowhere", Key: "key"},
	}})
	for i, tc := range []struct {
		name, patch, reason, message string
	}{
		{
			name:   "a selector value that is not a label value",
			patch:  `{"spec":{"selector":{"matchExpressions":[{"key":"tier","operator":"In","values":["not a value!"]}]}}}`,
			reason: v1alpha1.ReasonInvalidSpec, message: "spec.selector",
		},
		{
			name:   "a selector key that is not a label key",
			patch:  `{"spec":{"selector":{"matchLabels":{"not a key!":"x"}}}}`,
			reason: v1alpha1.ReasonInvalidSpec, message: "spec.selector",
		},
		{
			name:   "a namespace selector that does not parse",
			patch:  `{"spec":{"namespaceSelector":{"matchLabels":{"env":"not a value!"}}}}`,
			reason: v1alpha1.ReasonInvalidSpec, message: "spec.namespaceSelector",
		},
		{
			name:   "a zero default TTL",
			patch:  `{"spec":{"defaultTTL":"0"}}`,
			reason: v1alpha1.ReasonInvalidSpec, message: "spec.defaultTTL",
		},
		{
			name:   "a webhook whose signing key Secret is missing",
			patch:  `{"spec":{"notifications":{"channels":[{"name":"made-invalid-hook"}]}}}`,
			reason: v1alpha1.ReasonChannelsNotReady, message: "timeout-secrets/nowhere",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			test := fmt.Sprintf("made-invalid-%d", i)
			high := playbookPolicy(test, "1h")
			high.Priority = 100
			p := createPolicy(t, test+"-high", high)
			createPolicy(t, test+"-low", playbookPolicy(test, "15s"))
			pb := create(t, playbooks, newPlaybook(test, "governed for an hour", nil))
			awaitPolicy(t, test+"-high", "governing the Playbook", func(p *v1alpha1.TimeoutPolicy) bool { return p.Status.Tracked == 1 })

			mergePatchPolicy(t, p, tc.patch)
			awaitPolicy(t, test+"-high", "Ready=False, "+tc.reason, func(p *v1alpha1.TimeoutPolicy) bool {
				c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
				return c != nil && c.Status == metav1.ConditionFalse && c.Reason == tc.reason && strings.Contains(c.Message, tc.message)
			})
			pb.expectKept(t, time.Until(pb.after(35*time.Second)))
		})
	}
}

func TestEditingAPolicyReplansItsObjects(t *testing.T) {
	t.Parallel()
	p := createPolicy(t, "edit", playbookPolicy("edit", "1h"))
	pb := create(t, playbooks, newPlaybook("edit", "replanned", nil))
	pb.expectKept(t, time.Second)

	edited := time.Now()
	mergePatchPolicy(t, p, `{"spec":{"defaultTTL":"2s"}}`)
	due := pb.after(2 * time.Second)
	if edited.After(due) {
		due = edited
	}
	pb.expectDeletedOnTime(t, due)
}

func TestDeletingAPolicyLeavesItsObjectsAlone(t *testing.T) {
	t.Parallel()
	p := createPolicy(t, "deleted-policy", playbookPolicy("deleted-policy", "6s"))
	pb := create(t, playbooks, newPlaybook("deleted-policy", "orphaned", nil))
	// Governed first: the policy's deletion, not its never being seen,
	// must be what spares the object.
	awaitPolicy(t, "deleted-policy", "tracking the Playbook", func(p *v1alpha1.TimeoutPolicy) bool { return p.Status.Tracked == 1 })
	if time.Now().After(pb.after(6 * time.Second)) {
		t.Fatal("the policy took up the Playbook only after it expired; the machine is too slow for this test")
	}
	if err := k8s.Delete(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	pb.expectKept(t, time.Until(pb.after(9*time.Second)))
}

func TestOverlappingPoliciesFollowPriorityAndReportIt(t *testing.T) {
	t.Parallel()
	high := playbookPolicy("overlap", "1h")
	high.Priority = 5
	createPolicy(t, "overlap-high", high)
	createPolicy(t, "overlap-low", playbookPolicy("overlap", "2s"))

	pb := create(t, playbooks, newPlaybook("overlap", "contested", nil))
	pb.expectKept(t, 4*time.Second)

	fixture.Eventually(t, 10*time.Second, "Overlapping condition on the outranked policy", func() (bool, error) {
		p, err := getPolicy("overlap-low")
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionOverlapping)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonOutranked, fmt.Errorf("conditions %+v", p.Status.Conditions)
	})
	low, _ := getPolicy("overlap-low")
	mustContain(t, meta.FindStatusCondition(low.Status.Conditions, v1alpha1.ConditionOverlapping).Message, "1 by overlap-high")
	winner, _ := getPolicy("overlap-high")
	if c := meta.FindStatusCondition(winner.Status.Conditions, v1alpha1.ConditionOverlapping); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("winning policy's Overlapping condition = %+v, want False", c)
	}
	if winner.Status.Tracked != 1 || low.Status.Tracked != 0 {
		t.Errorf("tracked: winner %d, outranked %d; want 1 and 0", winner.Status.Tracked, low.Status.Tracked)
	}
}

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func TestANamespacedKindWorksThroughTheSameCode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "team-amp", Labels: map[string]string{"team": "amp"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team-other"}},
	} {
		if err := k8s.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	createPolicy(t, "configmaps", v1alpha1.TimeoutPolicySpec{
		Target:            v1alpha1.Target{APIVersion: "v1", Kind: "ConfigMap"},
		Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{testLabel: "configmaps"}},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "amp"}},
		DefaultTTL:        "1h",
	})

	newConfigMap := func(ns string) *unstructured.Unstructured {
		cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
		cm.SetNamespace(ns)
		cm.SetName("scratch")
		cm.SetLabels(map[string]string{testLabel: "configmaps"})
		cm.SetAnnotations(map[string]string{expiry.AnnotationTTL: "2s"})
		return cm
	}
	selected := create(t, configMaps, newConfigMap("team-amp"))
	other := create(t, configMaps, newConfigMap("team-other"))

	selected.expectDeletedOnTime(t, selected.after(2*time.Second))
	findEvent(t, "team-amp", "scratch", "Deleted")
	other.expectKept(t, time.Second)

	// Labelling the namespace brings its objects under the policy.
	mergePatch(t, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", "team-other", `{"metadata":{"labels":{"team":"amp"}}}`)
	other.expectDeletedOnTime(t, time.Now())
}

func mergePatchPolicy(t *testing.T, p *v1alpha1.TimeoutPolicy, patch string) {
	t.Helper()
	if err := k8s.Patch(context.Background(), p, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatalf("patch policy %s: %v", p.Name, err)
	}
}

func TestTheSamplePoliciesAreValid(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples found: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			p := &v1alpha1.TimeoutPolicy{}
			if err := yaml.UnmarshalStrict(data, p); err != nil {
				t.Fatalf("decode: %v", err)
			}
			// A server-side dry run: admission checks it, nothing is stored.
			if err := k8s.Create(context.Background(), p, client.DryRunAll); err != nil {
				t.Fatalf("the API server refuses %s: %v", f, err)
			}
			if _, err := expiry.NewSchedule(p.Spec); err != nil {
				t.Fatalf("the controller refuses %s: %v", f, err)
			}
		})
	}
}

// Turning reminders off with a server-side apply, as helm upgrade does,
// must leave the list empty, not bring the default back.
func TestAnEmptyReminderListAppliedServerSideStaysEmpty(t *testing.T) {
	t.Parallel()
	gvr := v1alpha1.GroupVersion.WithResource("timeoutpolicies")
	apply := func(reminders string) []any {
		t.Helper()
		u := &unstructured.Unstructured{}
		doc := "apiVersion: timeout.amphitheatre.app/v1alpha1\nkind: TimeoutPolicy\nmetadata: {name: ssa-reminders}\n" +
			"spec:\n  selector: {matchLabels: {" + testLabel + ": ssa-reminders}}\n  reminders: " + reminders + "\n"
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		got, err := dyn.Resource(gvr).Apply(context.Background(), "ssa-reminders", u, metav1.ApplyOptions{FieldManager: "helm", Force: true})
		if err != nil {
			t.Fatal(err)
		}
		list, _, _ := unstructured.NestedSlice(got.Object, "spec", "reminders")
		return list
	}
	t.Cleanup(func() {
		_ = dyn.Resource(gvr).Delete(context.Background(), "ssa-reminders", metav1.DeleteOptions{})
	})
	if got := apply("[1h]"); len(got) != 1 {
		t.Fatalf("reminders %v after applying [1h]", got)
	}
	if got := apply("[]"); len(got) != 0 {
		t.Fatalf("reminders %v after applying [], want none", got)
	}
}
