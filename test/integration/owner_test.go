// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// ownerAddresses is the ConfigMap the suite's controller maps owners'
// usernames through (--owner-addresses), in its own namespace.
const ownerAddresses = "e2e-owner-addresses"

var ownerAddressesOnce sync.Once

// writeOwnerAddresses writes, once for the suite, the owner addresses
// ConfigMap, before any test's object makes the controller read it.
func writeOwnerAddresses(t *testing.T) {
	ownerAddressesOnce.Do(func() {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: outboxNamespace, Name: ownerAddresses},
			Data: map[string]string{notify.OwnerAddressesKey: `
"oidc:bob": bob.jones@example.com
"system:serviceaccount:amp:amphitheatre": ""
`},
		}
		if err := k8s.Create(context.Background(), cm); err != nil {
			t.Fatal(err)
		}
	})
}

// installOwnerAdmission creates the shipped owner stamp and the shipped
// annotations policy, each under a name of this test's and with a copy of
// its binding that selects only the Playbooks labelled for test, and
// waits until the API server enforces both.
func installOwnerAdmission(t *testing.T, test string, as *dynamic.DynamicClient) {
	t.Helper()
	ctx := context.Background()
	api := clients.AdmissionregistrationV1()
	scope := &admissionv1.MatchResources{ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{testLabel: test}}}

	var stamp admissionv1.MutatingAdmissionPolicy
	readManifest(t, "owner-policy.yaml", &stamp)
	var stampBinding admissionv1.MutatingAdmissionPolicyBinding
	readManifest(t, "owner-binding.yaml", &stampBinding)
	var check admissionv1.ValidatingAdmissionPolicy
	readManifest(t, "policy.yaml", &check)
	var checkBinding admissionv1.ValidatingAdmissionPolicyBinding
	readManifest(t, "binding.yaml", &checkBinding)
	if stampBinding.Spec.PolicyName != stamp.Name || stampBinding.Spec.MatchResources != nil {
		t.Fatalf("owner-binding.yaml binds %q with %+v; want %q, for every object", stampBinding.Spec.PolicyName, stampBinding.Spec.MatchResources, stamp.Name)
	}
	stamp.Name = "e2e-" + test + "." + stamp.Name
	stampBinding.Name, stampBinding.Spec.PolicyName, stampBinding.Spec.MatchResources = stamp.Name, stamp.Name, scope
	check.Name = "e2e-" + test + "." + check.Name
	checkBinding.Name, checkBinding.Spec.PolicyName, checkBinding.Spec.MatchResources = check.Name, check.Name, scope

	if _, err := api.MutatingAdmissionPolicies().Create(ctx, &stamp, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the owner stamp: %v", err)
	}
	if _, err := api.MutatingAdmissionPolicyBindings().Create(ctx, &stampBinding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create its binding: %v", err)
	}
	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, &check, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the annotations policy: %v", err)
	}
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, &checkBinding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create its binding: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = api.MutatingAdmissionPolicyBindings().Delete(ctx, stampBinding.Name, metav1.DeleteOptions{})
		_ = api.MutatingAdmissionPolicies().Delete(ctx, stamp.Name, metav1.DeleteOptions{})
		_ = api.ValidatingAdmissionPolicyBindings().Delete(ctx, checkBinding.Name, metav1.DeleteOptions{})
		_ = api.ValidatingAdmissionPolicies().Delete(ctx, check.Name, metav1.DeleteOptions{})
	})

	// The API server loads policies and bindings asynchronously.
	fixture.Eventually(t, 30*time.Second, "the owner stamp and check in force", func() (bool, error) {
		stamped, err := as.Resource(playbooks).Create(ctx, newPlaybook(test, "probe", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil || stamped.GetAnnotations()[notify.AnnotationOwner] == "" {
			return false, err
		}
		_, err = as.Resource(playbooks).Create(ctx, newPlaybook(test, "probe", map[string]string{expiry.AnnotationTTL: "2x"}),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsInvalid(err), err
	})
}

// playbookWriter returns a client acting as who (with groups), who may
// create, read, patch and update Playbooks, and, when assign, is granted
// the verb assign on owners.
func playbookWriter(t *testing.T, who string, groups []string, assign bool) *dynamic.DynamicClient {
	t.Helper()
	ctx := context.Background()
	rules := []rbacv1.PolicyRule{{APIGroups: []string{"amphitheatre.app"}, Resources: []string{"playbooks"},
		Verbs: []string{"create", "get", "list", "watch", "patch", "update"}}}
	if assign {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"owners"}, Verbs: []string{"assign"}})
	}
	name := "e2e-owner-" + strings.NewReplacer("@", "-at-", ":", "-").Replace(who)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	subject := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: who}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{subject},
	}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
	}
	return impersonating(t, rest.ImpersonationConfig{UserName: who, Groups: groups})
}

func ownerOf(t *testing.T, name string) (string, bool) {
	t.Helper()
	got, err := dyn.Resource(playbooks).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner, ok := got.GetAnnotations()[notify.AnnotationOwner]
	return owner, ok
}

// createAs creates pb as the client's user and removes it when the test
// ends.
func createAs(t *testing.T, as *dynamic.DynamicClient, pb *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	t.Helper()
	created, err := as.Resource(playbooks).Create(context.Background(), pb, metav1.CreateOptions{})
	if err == nil {
		t.Cleanup(func() {
			_ = dyn.Resource(playbooks).Delete(context.Background(), created.GetName(), metav1.DeleteOptions{})
		})
	}
	return created, err
}

// TestTheCreatorIsStampedOwner creates Playbooks as real users through
// the shipped owner stamp and annotations policy, and tries to take or
// give away the owner without the permission to.
func TestTheCreatorIsStampedOwner(t *testing.T) {
	t.Parallel()
	const test = "owner-stamp"
	alice := playbookWriter(t, "alice@example.com", []string{"system:authenticated", "developers"}, false)
	bob := playbookWriter(t, "bob@example.com", []string{"system:authenticated", "developers"}, false)
	amphitheatre := playbookWriter(t, "system:serviceaccount:amp:amphitheatre", []string{"system:serviceaccounts", "system:authenticated"}, true)
	installOwnerAdmission(t, test, alice)
	writeOwnerAddresses(t)

	// The chain to the mailbox: the stamped creator is reminded.
	mb := fixture.NewMailbox(t, nil)
	spec := reminderPolicy(t, test, []v1alpha1.Duration{"3s"}, "2s", mb, nil)
	spec.Notifications.Owner = true
	createPolicy(t, test, spec)

	t.Run("stamps the creator", func(t *testing.T) {
		pb, err := createAs(t, alice, newPlaybook(test, "mine", map[string]string{expiry.AnnotationTTL: "5s"}))
		if err != nil {
			t.Fatal(err)
		}
		if owner, _ := ownerOf(t, pb.GetName()); owner != "alice@example.com" {
			t.Fatalf("owner %q, want the creator alice@example.com", owner)
		}
		// The policy's address gets the object's reminder; the owner, a
		// digest of their own.
		fixture.Eventually(t, 10*time.Second, "the reminder to ops@example.com and the digest to alice@example.com", func() (bool, error) {
			var ops, owner bool
			for _, m := range mb.WithHeader("X-Timeout-Object", pb.GetName()) {
				if m.Header.Get("X-Timeout-Event") == "reminder" {
					switch {
					case slices.Equal(m.To, []string{"ops@example.com"}):
						ops = true
					case slices.Equal(m.To, []string{"alice@example.com"}):
						owner = true
					default:
						t.Fatalf("a reminder went to %v, want the policy's ops@example.com, or the owner alone", m.To)
					}
				}
			}
			return ops && owner, nil
		})
	})

	for _, tc := range []struct {
		name        string
		as          *dynamic.DynamicClient
		annotations map[string]string
		want        string
	}{
		{"stamps the creator over a blank owner", bob, map[string]string{notify.AnnotationOwner: "  "}, "bob@example.com"},
		{"lets the creator name themselves", alice, map[string]string{notify.AnnotationOwner: "alice@example.com"}, "alice@example.com"},
		{"keeps the owner that what creates for people names", amphitheatre, map[string]string{notify.AnnotationOwner: "bob@example.com"}, "bob@example.com"},
		{"stamps a ServiceAccount that names nobody", amphitheatre, nil, "system:serviceaccount:amp:amphitheatre"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pb, err := createAs(t, tc.as, newPlaybook(test, "owned", tc.annotations))
			if err != nil {
				t.Fatal(err)
			}
			if owner, _ := ownerOf(t, pb.GetName()); owner != tc.want {
				t.Fatalf("owner %q, want %q", owner, tc.want)
			}
		})
	}

	t.Run("refuses a creator naming someone else", func(t *testing.T) {
		_, err := createAs(t, alice, newPlaybook(test, "spam", map[string]string{notify.AnnotationOwner: "victim@example.com"}))
		if !apierrors.IsForbidden(err) {
			t.Fatalf("create naming victim@example.com as owner: %v, want Forbidden", err)
		}
		mustContain(t, err.Error(), "annotation timeout.amphitheatre.app/owner", `you may name only yourself ("alice@example.com")`,
			"naming someone else takes the verb assign on owners in the API group timeout.amphitheatre.app")
	})

	t.Run("refuses taking or giving away the owner without assign", func(t *testing.T) {
		pb, err := createAs(t, bob, newPlaybook(test, "bobs", nil))
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			who   string
			as    *dynamic.DynamicClient
			patch string
		}{
			{"alice takes it", alice, `{"metadata":{"annotations":{"timeout.amphitheatre.app/owner":"alice@example.com"}}}`},
			{"alice removes it", alice, `{"metadata":{"annotations":{"timeout.amphitheatre.app/owner":null}}}`},
			{"bob gives it to a victim", bob, `{"metadata":{"annotations":{"timeout.amphitheatre.app/owner":"victim@example.com"}}}`},
			{"bob blanks it", bob, `{"metadata":{"annotations":{"timeout.amphitheatre.app/owner":""}}}`},
		} {
			_, err := tc.as.Resource(playbooks).Patch(context.Background(), pb.GetName(), types.MergePatchType, []byte(tc.patch), metav1.PatchOptions{})
			if !apierrors.IsForbidden(err) {
				t.Errorf("%s: %v, want Forbidden", tc.who, err)
				continue
			}
			mustContain(t, err.Error(), "changing or removing it takes the verb assign on owners in the API group timeout.amphitheatre.app")
		}
		if owner, _ := ownerOf(t, pb.GetName()); owner != "bob@example.com" {
			t.Fatalf("owner %q after the refused patches, want bob@example.com", owner)
		}
		// Other annotations are still written as before.
		if _, err := alice.Resource(playbooks).Patch(context.Background(), pb.GetName(), types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"timeout.amphitheatre.app/ttl":"2h"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("a patch that leaves the owner alone: %v", err)
		}
		// Whoever holds assign hands it over.
		if _, err := amphitheatre.Resource(playbooks).Patch(context.Background(), pb.GetName(), types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"timeout.amphitheatre.app/owner":"carol@example.com"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("a hand-over by a holder of assign: %v", err)
		}
		if owner, _ := ownerOf(t, pb.GetName()); owner != "carol@example.com" {
			t.Fatalf("owner %q after the hand-over, want carol@example.com", owner)
		}
	})
}

// TestMessagesReachTheOwnerAtTheMappedAddress governs Playbooks of
// several owners with a policy that tells owners, and checks who gets
// the reminder and the deleted message, and what is said about an owner
// with no address.
func TestMessagesReachTheOwnerAtTheMappedAddress(t *testing.T) {
	t.Parallel()
	const test = "owner-mail"
	writeOwnerAddresses(t)

	mb := fixture.NewMailbox(t, nil)
	spec := reminderPolicy(t, test, []v1alpha1.Duration{"3s"}, "2s", mb, nil)
	spec.Notifications.Owner = true
	createPolicy(t, test, spec)
	// The same, without owner: owners are not told.
	off := reminderPolicy(t, test+"-off", []v1alpha1.Duration{"3s"}, "2s", mb, nil)
	createPolicy(t, test+"-off", off)

	type object struct {
		owner string
		// to are the addresses every message about it goes to; the owner's
		// address, if any, gets the reminder alone, in a digest.
		to []string
		// unreachable is a part of the OwnerUnreachable Event; empty when
		// there is none.
		unreachable string
		pb          *tracked
	}
	objects := []*object{
		{owner: "alice@example.com", to: []string{"alice@example.com", "ops@example.com"}},
		{owner: "oidc:bob", to: []string{"bob.jones@example.com", "ops@example.com"}},
		{owner: "frank", to: []string{"ops@example.com"},
			unreachable: `annotation timeout.amphitheatre.app/owner: "frank" is not an e-mail address: expected user@domain, and the owner addresses do not map it; the owner is not told, the other recipients are`},
		{owner: "system:serviceaccount:ci:bot", to: []string{"ops@example.com"},
			unreachable: `"system:serviceaccount:ci:bot" is a ServiceAccount, which has no mailbox, and the owner addresses do not map it`},
		{owner: "system:serviceaccount:amp:amphitheatre", to: []string{"ops@example.com"}},
	}
	for _, o := range objects {
		o.pb = create(t, playbooks, newPlaybook(test, o.owner, map[string]string{expiry.AnnotationTTL: "5s", notify.AnnotationOwner: o.owner}))
	}
	notOwn := create(t, playbooks, newPlaybook(test+"-off", "off", map[string]string{expiry.AnnotationTTL: "5s", notify.AnnotationOwner: "alice@example.com"}))
	for _, o := range objects {
		o.pb.expectDeletedOnTime(t, o.pb.after(5*time.Second))
	}
	notOwn.expectDeletedOnTime(t, notOwn.after(5*time.Second))

	for _, o := range append(objects, &object{owner: "alice@example.com (policy without owner)", to: []string{"ops@example.com"}, pb: notOwn}) {
		for _, event := range []string{"reminder", "deleted"} {
			var got []string
			fixture.Eventually(t, 10*time.Second, "the "+event+" mail about "+o.owner+"'s Playbook", func() (bool, error) {
				for _, m := range mb.WithHeader("X-Timeout-Object", o.pb.GetName()) {
					// The object's own, not the owner's digest.
					if m.Header.Get("X-Timeout-Event") == event && slices.Contains(m.To, "ops@example.com") {
						got = slices.Sorted(slices.Values(m.To))
						return true, nil
					}
				}
				return false, nil
			})
			want := o.to
			if event == "reminder" {
				want = []string{"ops@example.com"}
			}
			if !slices.Equal(got, want) {
				t.Errorf("the %s mail about %s's Playbook went to %v, want %v", event, o.owner, got, want)
			}
			if event == "reminder" && len(o.to) > 1 {
				owner := o.to[slices.IndexFunc(o.to, func(a string) bool { return a != "ops@example.com" })]
				fixture.Eventually(t, 10*time.Second, "the digest to "+owner, func() (bool, error) {
					for _, m := range mb.WithHeader("X-Timeout-Object", o.pb.GetName()) {
						if m.Header.Get("X-Timeout-Event") == event && slices.Equal(m.To, []string{owner}) {
							return true, nil
						}
					}
					return false, nil
				})
			}
		}
		notes := eventNotes(t, eventNamespace, o.pb.GetName(), "OwnerUnreachable")
		switch {
		case o.unreachable == "" && len(notes) > 0:
			t.Errorf("OwnerUnreachable about %s's Playbook: %q, want none", o.owner, notes)
		case o.unreachable != "" && (len(notes) != 1 || !strings.Contains(notes[0], o.unreachable)):
			t.Errorf("OwnerUnreachable about %s's Playbook: %q, want one saying %q", o.owner, notes, o.unreachable)
		}
	}
}

// ownersOnlyPolicy creates the policy test, which tells owners, with one
// reminder and the notice given, over an e-mail channel with no "to" of
// its own that mails the Mailbox it returns: owners are the only ones who
// can be reminded.
func ownersOnlyPolicy(t *testing.T, test string, reminder, notice v1alpha1.Duration) *fixture.Mailbox {
	t.Helper()
	mb := fixture.NewMailbox(t, nil)
	createChannel(t, test, v1alpha1.NotificationChannelSpec{Email: &v1alpha1.EmailChannel{
		Host: mb.Host, Port: mb.Port, Security: "None", From: "timeout@example.com",
	}})
	spec := playbookPolicy(test, "1h")
	spec.Reminders, spec.MinimumNotice = []v1alpha1.Duration{reminder}, notice
	spec.Notifications.Channels = []v1alpha1.ChannelReference{{Name: test}}
	spec.Notifications.Owner = true
	createPolicy(t, test, spec)
	return mb
}

// TestAnOwnerIsTheOnlyRecipient: the policy's e-mail channel has no "to",
// so the owner is the only one who can be reminded. An owner with an
// address is, and the Playbook goes on time; one without is not, and the
// Playbook stays, the policy says why, until the owner has an address.
func TestAnOwnerIsTheOnlyRecipient(t *testing.T) {
	t.Parallel()
	const test = "owner-only"
	writeOwnerAddresses(t)
	mb := ownersOnlyPolicy(t, test, "3s", "2s")

	reached := create(t, playbooks, newPlaybook(test, "alice", map[string]string{expiry.AnnotationTTL: "5s", notify.AnnotationOwner: "alice@example.com"}))
	unreached := create(t, playbooks, newPlaybook(test, "frank", map[string]string{expiry.AnnotationTTL: "5s", notify.AnnotationOwner: "frank"}))
	reached.expectDeletedOnTime(t, reached.after(5*time.Second))
	for _, m := range mb.WithHeader("X-Timeout-Object", reached.GetName()) {
		if !slices.Equal(m.To, []string{"alice@example.com"}) {
			t.Errorf("the %s mail went to %v, want the owner alone", m.Header.Get("X-Timeout-Event"), m.To)
		}
	}

	unreached.expectKept(t, time.Until(unreached.after(8*time.Second)))
	if got := mb.WithHeader("X-Timeout-Object", unreached.GetName()); len(got) != 0 {
		t.Fatalf("%d mails about a Playbook whose owner has no address: %+v", len(got), got)
	}
	awaitPolicy(t, test, "not ready for want of recipients", func(p *v1alpha1.TimeoutPolicy) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonNoRecipients &&
			strings.Contains(c.Message, "spec.notifications.owner")
	})
	mustContain(t, findEvent(t, eventNamespace, unreached.GetName(), "OwnerUnreachable").Note, `"frank" is not an e-mail address`)

	// An administrator hands it to someone with an address: reminded,
	// then deleted once the notice ran.
	mergePatch(t, playbooks, "", unreached.GetName(), fmt.Sprintf(`{"metadata":{"annotations":{%q:"frank@example.com"}}}`, notify.AnnotationOwner))
	var remindedAt time.Time
	fixture.Eventually(t, 15*time.Second, "the reminder to frank@example.com", func() (bool, error) {
		for _, m := range mb.WithHeader("X-Timeout-Object", unreached.GetName()) {
			if m.Header.Get("X-Timeout-Event") == "reminder" && slices.Equal(m.To, []string{"frank@example.com"}) {
				remindedAt = time.Now()
				return true, nil
			}
		}
		return false, nil
	})
	select {
	case at := <-unreached.gone:
		if notice := at.Sub(remindedAt); notice < 2*time.Second-100*time.Millisecond {
			t.Fatalf("deleted %s after the reminder, want at least the policy's 2s of notice", notice)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("%s not deleted 15s after its owner was reminded", unreached.GetName())
	}
	awaitPolicy(t, test, "ready once every owner can be reminded", func(p *v1alpha1.TimeoutPolicy) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady)
	})
}
