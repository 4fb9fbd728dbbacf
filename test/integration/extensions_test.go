// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/plugin"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// installLifetimeAdmission creates the shipped changed-by stamp and
// extension-limits policies, with copies of their bindings that select
// only the Playbooks labelled for test, and waits until the API server
// enforces both.
func installLifetimeAdmission(t *testing.T, test string) {
	t.Helper()
	ctx := context.Background()
	api := clients.AdmissionregistrationV1()
	scope := &admissionv1.MatchResources{ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{testLabel: test}}}

	var stamp admissionv1.MutatingAdmissionPolicy
	readManifest(t, "changed-by-policy.yaml", &stamp)
	var stampBinding admissionv1.MutatingAdmissionPolicyBinding
	readManifest(t, "changed-by-binding.yaml", &stampBinding)
	var limits admissionv1.ValidatingAdmissionPolicy
	readManifest(t, "extensions-policy.yaml", &limits)
	var limitsBinding admissionv1.ValidatingAdmissionPolicyBinding
	readManifest(t, "extensions-binding.yaml", &limitsBinding)
	if stampBinding.Spec.MatchResources != nil || limitsBinding.Spec.MatchResources != nil {
		t.Fatal("the shipped bindings have matchResources; want them to apply to every Playbook")
	}
	if stampBinding.Spec.PolicyName != stamp.Name || limitsBinding.Spec.PolicyName != limits.Name {
		t.Fatal("a shipped binding binds another policy")
	}
	stampBinding.Name, stampBinding.Spec.MatchResources = "e2e."+test+"."+stampBinding.Name, scope
	limitsBinding.Name, limitsBinding.Spec.MatchResources = "e2e."+test+"."+limitsBinding.Name, scope

	// The policies are cluster-wide and shared by the tests that install
	// them; each test binds them to its own Playbooks.
	if _, err := api.MutatingAdmissionPolicies().Create(ctx, &stamp, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, &limits, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := api.MutatingAdmissionPolicyBindings().Create(ctx, &stampBinding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = api.MutatingAdmissionPolicyBindings().Delete(context.Background(), stampBinding.Name, metav1.DeleteOptions{})
	})
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, &limitsBinding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = api.ValidatingAdmissionPolicyBindings().Delete(context.Background(), limitsBinding.Name, metav1.DeleteOptions{})
	})

	// The API server loads policies and bindings asynchronously: a dry
	// run by someone who is not the controller (nor an administrator, who
	// holds its verb too) shows the stamp, and the refusal of a forged
	// account.
	probe := asPerson(t, "e2e-probe-lifetime@example.com")
	fixture.Eventually(t, 30*time.Second, "the lifetime admission policies in force", func() (bool, error) {
		pb := newPlaybook(test, "probe", map[string]string{expiry.AnnotationTTL: "1h"})
		created, err := probe.Resource(playbooks).Namespace(pb.GetNamespace()).Create(ctx, pb, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		if created.GetAnnotations()[expiry.AnnotationChangedBy] == "" {
			return false, errors.New("not stamped yet")
		}
		pb = newPlaybook(test, "probe", map[string]string{expiry.AnnotationExtensions: "forged"})
		_, err = probe.Resource(playbooks).Namespace(pb.GetNamespace()).Create(ctx, pb, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsForbidden(err) {
			return false, fmt.Errorf("a forged account not refused yet: %v", err)
		}
		return true, nil
	})
}

// asPerson returns a client that acts as the user name in groups (and
// system:authenticated), who may create, get, list and patch Playbooks.
func asPerson(t *testing.T, name string, groups ...string) *dynamic.DynamicClient {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-playbook-user"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"amphitheatre.app"}, Resources: []string{"playbooks"}, Verbs: []string{"create", "get", "list", "patch"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-playbook-user-" + strings.ReplaceAll(name, "@", "-at-")},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return impersonating(t, rest.ImpersonationConfig{UserName: name, Groups: append(groups, "system:authenticated")})
}

// patchAs merge-patches the annotations of the Playbook as the client
// acts, and returns the Playbook as written.
func patchAs(c dynamic.Interface, pb *unstructured.Unstructured, annotations map[string]any) (*unstructured.Unstructured, error) {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	return c.Resource(playbooks).Namespace(pb.GetNamespace()).Patch(context.Background(), pb.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
}

// awaitExtensions waits until the controller's account of the Playbook's
// extensions holds want.
func awaitExtensions(t *testing.T, pb *unstructured.Unstructured, what string, want func(expiry.Extensions) bool) expiry.Extensions {
	t.Helper()
	var got expiry.Extensions
	fixture.Eventually(t, 15*time.Second, what, func() (bool, error) {
		o, err := dyn.Resource(playbooks).Namespace(pb.GetNamespace()).Get(context.Background(), pb.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got, err = expiry.ParseExtensions(o.GetAnnotations()[expiry.AnnotationExtensions])
		return err == nil && want(got), err
	})
	return got
}

func stampOf(t *testing.T, o *unstructured.Unstructured) expiry.ChangedBy {
	t.Helper()
	c, ok := expiry.ParseChangedBy(o.GetAnnotations())
	if !ok {
		t.Fatalf("no changed-by stamp on %s: %v", o.GetName(), o.GetAnnotations())
	}
	return c
}

func TestExtensionLimitsAtAdmission(t *testing.T) {
	const test = "extension-limits-admission"
	installLifetimeAdmission(t, test)
	spec := playbookPolicy(test, "1h")
	spec.Extensions = &v1alpha1.Extensions{MaxStep: "2h", MaxCount: ptr.To[int32](1), ExemptGroups: []string{"platform-team"}}
	createPolicy(t, test, spec)
	alice := asPerson(t, "alice@example.com", "developers")
	bob := asPerson(t, "bob@example.com", "developers", "platform-team")

	pb := create(t, playbooks, newPlaybook(test, "limited", nil))
	awaitExtensions(t, pb.Unstructured, "the controller's account of the new Playbook", func(e expiry.Extensions) bool {
		return e.Granted.Equal(pb.after(time.Hour)) && e.Limits.MaxCount == 1
	})

	_, err := patchAs(alice, pb.Unstructured, map[string]any{expiry.AnnotationTTL: "5h"})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a developer's extension by 4h under a 2h step: want it refused, got %v", err)
	}
	mustContain(t, err.Error(), "annotation timeout.amphitheatre.app/ttl", "at most 2h past the current expiry", "0 of 1 extensions used", "ask a member of platform-team")

	if _, err := patchAs(alice, pb.Unstructured, map[string]any{expiry.AnnotationTTL: "3h"}); err != nil {
		t.Fatalf("a developer's extension within the step: %v", err)
	}
	e := awaitExtensions(t, pb.Unstructured, "the extension counted", func(e expiry.Extensions) bool { return e.Used == 1 })
	if e.By != "alice@example.com" || !e.Granted.Equal(pb.after(3*time.Hour)) {
		t.Fatalf("account after alice's extension: %+v", e)
	}

	_, err = patchAs(alice, pb.Unstructured, map[string]any{expiry.AnnotationExpiresAt: pb.after(4 * time.Hour).UTC().Format(time.RFC3339)})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a developer's second extension under a count of 1: want it refused, got %v", err)
	}
	mustContain(t, err.Error(), "annotation timeout.amphitheatre.app/expires-at", "no extension left: 1 of 1 extensions used", "ask a member of platform-team")

	_, err = patchAs(alice, pb.Unstructured, map[string]any{expiry.AnnotationKeep: "true"})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a developer's keep under limits: want it refused, got %v", err)
	}
	mustContain(t, err.Error(), "only its exempt groups may keep", "ask a member of platform-team")

	// Nobody but the controller writes its account: not to reset the
	// count, not to remove it.
	for _, forged := range []any{strings.Replace(e.String(), "used=1", "used=0", 1), nil} {
		if _, err := patchAs(bob, pb.Unstructured, map[string]any{expiry.AnnotationExtensions: forged}); !apierrors.IsForbidden(err) {
			t.Fatalf("writing the account %v: want it refused, got %v", forged, err)
		}
	}

	// A member of the platform team goes past both limits.
	o, err := patchAs(bob, pb.Unstructured, map[string]any{expiry.AnnotationTTL: "48h"})
	if err != nil {
		t.Fatalf("the platform team's extension: %v", err)
	}
	if c := stampOf(t, o); c.By != "bob@example.com" || !strings.Contains(strings.Join(c.Changed, ","), "ttl") {
		t.Fatalf("stamp of bob's extension: %+v", c)
	}
	e = awaitExtensions(t, pb.Unstructured, "bob's extension granted, not counted", func(e expiry.Extensions) bool {
		return e.Granted.Equal(pb.after(48 * time.Hour))
	})
	if e.Used != 1 || e.By != "bob@example.com" {
		t.Fatalf("account after bob's extension: %+v", e)
	}
	if _, err := patchAs(bob, pb.Unstructured, map[string]any{expiry.AnnotationKeep: "true"}); err != nil {
		t.Fatalf("the platform team's keep: %v", err)
	}
	awaitExtensions(t, pb.Unstructured, "bob's keep recorded", func(e expiry.Extensions) bool { return e.Keep })

	// A shorter lifetime is never refused.
	if _, err := patchAs(alice, pb.Unstructured, map[string]any{expiry.AnnotationKeep: nil, expiry.AnnotationTTL: "2h"}); err != nil {
		t.Fatalf("a developer shortening the lifetime: %v", err)
	}
}

func TestChangeStampsCannotBeForged(t *testing.T) {
	const test = "changed-by-forgery"
	installLifetimeAdmission(t, test)
	alice := asPerson(t, "alice@example.com", "developers")
	forged := `{"by":"bob@example.com","groups":["platform-team"],"changed":["ttl"]}`

	// On create.
	pb := newPlaybook(test, "stamped", map[string]string{expiry.AnnotationTTL: "1h", expiry.AnnotationChangedBy: forged})
	o, err := alice.Resource(playbooks).Namespace(pb.GetNamespace()).Create(context.Background(), pb, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(playbooks).Namespace(o.GetNamespace()).Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
	})
	if c := stampOf(t, o); c.By != "alice@example.com" || strings.Join(c.Groups, ",") != "developers,system:authenticated" || strings.Join(c.Changed, ",") != "ttl" {
		t.Fatalf("create with a forged stamp: %+v", c)
	}

	for _, tt := range []struct {
		name        string
		annotations map[string]any
		changed     string
	}{
		{"an update with a forged stamp", map[string]any{expiry.AnnotationTTL: "2h", expiry.AnnotationChangedBy: forged}, "ttl"},
		{"the stamp written alone", map[string]any{expiry.AnnotationChangedBy: forged}, ""},
		{"the stamp removed", map[string]any{expiry.AnnotationChangedBy: nil}, ""},
		{"keep and expires-at at once", map[string]any{expiry.AnnotationKeep: "false", expiry.AnnotationExpiresAt: "2099-01-01T00:00:00Z"}, "expires-at,keep"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err = patchAs(alice, o, tt.annotations)
			if err != nil {
				t.Fatal(err)
			}
			if c := stampOf(t, o); c.By != "alice@example.com" || strings.Join(c.Changed, ",") != tt.changed {
				t.Fatalf("stamp: %+v, want by alice, changed %q", c, tt.changed)
			}
		})
	}

	t.Run("a last-active written with a forged use", func(t *testing.T) {
		at := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
		o, err = patchAs(alice, o, map[string]any{
			expiry.AnnotationLastActive: at,
			expiry.AnnotationLastUse:    `{"at":"` + at + `","via":"exec","by":"bob@example.com"}`,
		})
		if err != nil {
			t.Fatal(err)
		}
		u, ok := expiry.LastUse(o.GetAnnotations())
		if !ok || u.Via != expiry.ViaAnnotation || u.By != "alice@example.com" {
			t.Fatalf("last-use %q: want via annotation by alice", o.GetAnnotations()[expiry.AnnotationLastUse])
		}
		if c := stampOf(t, o); strings.Join(c.Changed, ",") != "last-active" {
			t.Fatalf("stamp: %+v", c)
		}
	})

	t.Run("the controller's own use keeps what it wrote", func(t *testing.T) {
		at := time.Now().UTC().Truncate(time.Second).Add(time.Second).Format(time.RFC3339)
		use := `{"at":"` + at + `","via":"exec","by":"carol@example.com"}`
		before := o.GetAnnotations()[expiry.AnnotationChangedBy]
		o, err = patchAs(asController(t), o, map[string]any{expiry.AnnotationLastActive: at, expiry.AnnotationLastUse: use})
		if err != nil {
			t.Fatal(err)
		}
		if got := o.GetAnnotations()[expiry.AnnotationLastUse]; got != use {
			t.Fatalf("last-use %s, want the controller's %s", got, use)
		}
		if got := o.GetAnnotations()[expiry.AnnotationChangedBy]; got != before {
			t.Fatalf("the controller's write changed the stamp: %s", got)
		}
	})
}

// The actions server writes the stamp itself, naming the recipient of
// the link acted on: the stamp's admission policy keeps what a user
// granted "act" on timeout.amphitheatre.app/links wrote, and stamps over
// the same stamp from anyone else.
func TestTheActionsServersStampIsKept(t *testing.T) {
	const test = "changed-by-links"
	installLifetimeAdmission(t, test)
	server := asActionsServer(t)
	alice := asPerson(t, "alice@example.com", "developers")
	pb := create(t, playbooks, newPlaybook(test, "linked", map[string]string{expiry.AnnotationTTL: "1h"}))
	linked := `{"by":"carol@example.com","via":"link","changed":["expires-at"]}`

	for _, tt := range []struct {
		name   string
		writer dynamic.Interface
		// in is the new expiry, from now: each write changes it.
		in   time.Duration
		want func(expiry.ChangedBy) bool
	}{
		{"keeps the stamp the actions server writes with its change", server, 2 * time.Hour, func(c expiry.ChangedBy) bool {
			return c.By == "carol@example.com" && c.Via == expiry.ViaLink && len(c.Groups) == 0
		}},
		{"stamps over the same stamp written by someone else", alice, 3 * time.Hour, func(c expiry.ChangedBy) bool {
			return c.By == "alice@example.com" && c.Via == "" && strings.Join(c.Changed, ",") == "expires-at"
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			at := time.Now().Add(tt.in).UTC().Truncate(time.Second).Format(time.RFC3339)
			o, err := patchAs(tt.writer, pb.Unstructured, map[string]any{expiry.AnnotationExpiresAt: at, expiry.AnnotationChangedBy: linked})
			if err != nil {
				t.Fatal(err)
			}
			if c := stampOf(t, o); !tt.want(c) {
				t.Fatalf("stamp %+v", c)
			}
		})
	}
}

// asActionsServer returns a client that acts as a ServiceAccount granted
// what the actions server's role grants that matters here: patch on
// Playbooks and "act" on timeout.amphitheatre.app/links.
func asActionsServer(t *testing.T) *dynamic.DynamicClient {
	t.Helper()
	ctx := context.Background()
	const namespace, name = "timeout-system", "e2e-actions-server"
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-actions-server"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"amphitheatre.app"}, Resources: []string{"playbooks"}, Verbs: []string{"get", "list", "patch"}},
			{APIGroups: []string{"timeout.amphitheatre.app"}, Resources: []string{"links"}, Verbs: []string{"act"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return impersonating(t, rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:authenticated"},
	})
}

func TestControllerAloneRefusesExtensionsPastTheLimits(t *testing.T) {
	const test = "extension-limits-controller"
	spec := playbookPolicy(test, "12s")
	spec.Reminders = []v1alpha1.Duration{}
	spec.MinimumNotice = "0s"
	spec.Extensions = &v1alpha1.Extensions{MaxStep: "6s", MaxCount: ptr.To[int32](1), ExemptGroups: []string{"platform-team"}}
	createPolicy(t, test, spec)
	alice := asPerson(t, "alice@example.com", "developers")

	pb := create(t, playbooks, newPlaybook(test, "limited", nil))
	awaitExtensions(t, pb.Unstructured, "the controller's account", func(e expiry.Extensions) bool { return e.Granted.Equal(pb.after(12 * time.Second)) })
	// No admission policy: the API server takes any value, and the
	// controller judges it.
	if _, err := patchAs(alice, pb.Unstructured, map[string]any{expiry.AnnotationTTL: "18s"}); err != nil {
		t.Fatal(err)
	}
	awaitExtensions(t, pb.Unstructured, "the extension within the limits granted", func(e expiry.Extensions) bool {
		return e.Used == 1 && e.Granted.Equal(pb.after(18*time.Second))
	})
	// kubectl timeout extend writes the extension, which no admission
	// policy refuses here, and says that the controller will not take it.
	res := kubectlTimeout(t, "extend", pb.GetName(), "1h").expect(t, plugin.ExitPastLimits)
	mustContain(t, res.errOut, "extension limits refuse timeout.amphitheatre.app/expires-at", "no extension: 1 of 1 extensions used")
	ev := findEvent(t, pb.GetNamespace(), pb.GetName(), "InvalidTimeout")
	if ev.Type != "Warning" {
		t.Fatalf("event type %s", ev.Type)
	}
	mustContain(t, ev.Note, "annotation timeout.amphitheatre.app/expires-at", "no extension: 1 of 1 extensions used", "ask a member of platform-team",
		"the extension is refused: the object keeps its expiry "+pb.after(18*time.Second).UTC().Format(time.RFC3339))
	// Neither the 12s it had before nor the 1h asked: the 18s granted.
	pb.expectDeletedOnTime(t, pb.after(18*time.Second))
}

func TestTheCRDRefusesExtensionLimitsThatCannotWork(t *testing.T) {
	for _, tt := range []struct {
		name string
		ext  v1alpha1.Extensions
		want string
	}{
		{"limits that limit nothing", v1alpha1.Extensions{ExemptGroups: []string{"platform-team"}}, "extensions needs maxStep, maxCount or both"},
		{"a negative count", v1alpha1.Extensions{MaxCount: ptr.To[int32](-1)}, "spec.extensions.maxCount"},
		{"a step that is no duration", v1alpha1.Extensions{MaxStep: "7 days"}, "spec.extensions.maxStep"},
		{"a group with a comma", v1alpha1.Extensions{MaxStep: "7d", ExemptGroups: []string{"a,b"}}, "spec.extensions.exemptGroups[0]"},
		{"a group named -", v1alpha1.Extensions{MaxStep: "7d", ExemptGroups: []string{"-"}}, "a group may not be named -"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec := playbookPolicy("crd-extensions", "1h")
			spec.Extensions = &tt.ext
			p := &v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "crd-extensions"}, Spec: spec}
			err := k8s.Create(context.Background(), p, client.DryRunAll)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("want Invalid with %q, got %v", tt.want, err)
			}
		})
	}
}

// Every extension is audited with who made it, the first one too, made
// long before any reminder (the default reminders come days before the
// expiry): the stamp of the admission policy names the user and groups.
func TestEveryExtensionIsAuditedWithWhoMadeIt(t *testing.T) {
	const test = "extension-audited"
	installLifetimeAdmission(t, test)
	createPolicy(t, test, playbookPolicy(test, "14d"))
	alice := asPerson(t, "alice@example.com", "developers")

	pb := create(t, playbooks, newPlaybook(test, "audited", nil))
	for i, ttl := range []string{"15d", "16d"} {
		if _, err := patchAs(alice, pb.Unstructured, map[string]any{expiry.AnnotationTTL: ttl}); err != nil {
			t.Fatalf("extend to %s: %v", ttl, err)
		}
		fixture.Eventually(t, 15*time.Second, fmt.Sprintf("extension %d audited", i+1), func() (bool, error) {
			var extended []string
			for _, r := range auditRecords(t, pb.GetUID()) {
				if r.Type != audit.Extended {
					continue
				}
				if r.By != "alice@example.com" || !slices.Contains(r.Groups, "developers") {
					return false, fmt.Errorf("an extended record names %q of %v, want alice@example.com of developers", r.By, r.Groups)
				}
				extended = append(extended, r.ExpiresAt.UTC().Format(time.RFC3339))
			}
			if len(extended) > i+1 {
				return false, fmt.Errorf("%d extended records after %d extensions: %v", len(extended), i+1, extended)
			}
			return len(extended) == i+1, nil
		})
	}
}
