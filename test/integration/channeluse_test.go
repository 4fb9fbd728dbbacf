// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// unstampedLabel keeps a TimeoutPolicy out of the author stamp's binding
// in this suite: it stands for a policy written while the admission
// policies were not installed.
const unstampedLabel = "e2e.timeout.amphitheatre.app/unstamped"

// installChannelAdmission installs, for the whole suite, the shipped
// admission policies that make using a channel a permission of whoever
// writes a TimeoutPolicy: the author stamp (MutatingAdmissionPolicy) and
// the channel-use check (ValidatingAdmissionPolicy), as the install does.
// The only change is the stamp binding's scope, which leaves out the
// policies labelled unstampedLabel. It returns once both are in force.
func installChannelAdmission(ctx context.Context) error {
	api := clients.AdmissionregistrationV1()
	var (
		author         admissionv1.MutatingAdmissionPolicy
		authorBinding  admissionv1.MutatingAdmissionPolicyBinding
		channels       admissionv1.ValidatingAdmissionPolicy
		channelBinding admissionv1.ValidatingAdmissionPolicyBinding
	)
	for name, into := range map[string]any{
		"author-policy.yaml": &author, "author-binding.yaml": &authorBinding,
		"channel-use-policy.yaml": &channels, "channel-use-binding.yaml": &channelBinding,
	} {
		raw, err := os.ReadFile(filepath.Join(admissionDir, name))
		if err != nil {
			return err
		}
		if err := yaml.UnmarshalStrict(raw, into); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if authorBinding.Spec.MatchResources != nil || channelBinding.Spec.MatchResources != nil {
		return errors.New("the shipped bindings have matchResources; want them to apply to every TimeoutPolicy")
	}
	authorBinding.Spec.MatchResources = &admissionv1.MatchResources{ObjectSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: unstampedLabel, Operator: metav1.LabelSelectorOpDoesNotExist}},
	}}
	if _, err := api.MutatingAdmissionPolicies().Create(ctx, &author, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the author policy: %w", err)
	}
	if _, err := api.MutatingAdmissionPolicyBindings().Create(ctx, &authorBinding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the author binding: %w", err)
	}
	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, &channels, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the channel-use policy: %w", err)
	}
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, &channelBinding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the channel-use binding: %w", err)
	}

	// A user who may write policies and was granted no channel, to probe
	// the channel-use check with.
	probeRole := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-probe"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"timeoutpolicies"}, Verbs: []string{"create"}}}}
	probeBinding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-probe"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: probeRole.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "e2e-probe@example.com"}}}
	for _, o := range []client.Object{probeRole, probeBinding} {
		if err := k8s.Create(ctx, o); err != nil {
			return err
		}
	}

	// The API server loads policies and bindings asynchronously.
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := &v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Spec: playbookPolicy("probe", "1h")}
		err := k8s.Create(ctx, p, client.DryRunAll)
		stamped := err == nil && p.Annotations[v1alpha1.AnnotationAuthor] != ""
		_, err = probeChannelAs("e2e-probe@example.com", "e2e-granted-to-nobody")
		if stamped && apierrors.IsForbidden(err) && strings.Contains(err.Error(), "may not use NotificationChannel") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the admission policies are not in force after 30s (stamped %t, last refusal %v)", stamped, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// author is a person who may write TimeoutPolicies (the shipped
// policy-author ClusterRole) and use the channels granted to them.
type author struct {
	name string
	c    client.Client
}

func newAuthor(t *testing.T, name string) author {
	t.Helper()
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "policy_author_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-author-" + strings.ReplaceAll(name, "@", "-at-")},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}},
	}
	if err := k8s.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), b) })
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 10*time.Second, name+"'s role in force", func() (bool, error) {
		err := c.List(ctx, &v1alpha1.TimeoutPolicyList{})
		return err == nil, err
	})
	return author{name: name, c: c}
}

// grantUse grants subject the verb use on the channel, as its
// administrator would: a ClusterRole narrowed to it by resourceNames, like
// the shipped timeout-controller-channel-user. It returns the binding, to
// revoke it.
func grantUse(t *testing.T, channel string, subject rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	t.Helper()
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "channel_user_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		t.Fatal(err)
	}
	role.Name = "e2e-use-" + channel
	for i := range role.Rules {
		role.Rules[i].ResourceNames = []string{channel}
	}
	if err := k8s.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), role) })
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + strings.ToLower(strings.NewReplacer("@", "-at-", ":", "-").Replace(subject.Name))},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{subject},
	}
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), b) })
	return b
}

func user(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

// mayUse waits until RBAC lets who use the channel (or not), as the
// authorizer the admission policy asks sees it.
func mayUse(t *testing.T, who, channel string, want bool) {
	t.Helper()
	fixture.Eventually(t, 10*time.Second, fmt.Sprintf("%s may use %s: %t", who, channel, want), func() (bool, error) {
		_, err := probeChannelAs(who, channel)
		return (err == nil) == want, err
	})
}

func probeChannelAs(who, channel string) (*v1alpha1.TimeoutPolicy, error) {
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: who, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: testScheme})
	if err != nil {
		return nil, err
	}
	p := &v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "probe-" + channel}, Spec: playbookPolicy("probe", "1h")}
	p.Spec.Notifications.Channels = []v1alpha1.ChannelReference{{Name: channel}}
	return p, c.Create(context.Background(), p, client.DryRunAll)
}

// TestOnlyWhoWasGrantedAChannelSendsThroughIt: a channel is used only by
// whoever its administrator granted the verb use on it. An author without
// it cannot send through another team's channel by copying its labels, by
// naming it, or by editing a policy that names it; with it, reminders go
// out; once it is revoked, or for a policy without an author stamp, the
// controller sends nothing through the channel and says why.
func TestOnlyWhoWasGrantedAChannelSendsThroughIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const test = "channel-use"
	rc := startReceiver(t, []byte("whsec-channel-use-5b1e"))
	channel := createChannel(t, test+"-team-a", v1alpha1.NotificationChannelSpec{
		Webhook:        &v1alpha1.WebhookChannel{URL: rc.url, SecretRef: webhookSecret(t, test+"-team-a", rc.key)},
		PolicySelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
	})
	alice, eve := newAuthor(t, "alice@team-a.example.com"), newAuthor(t, "eve@team-b.example.com")
	grant := grantUse(t, channel.Name, user(alice.name))
	mayUse(t, alice.name, channel.Name, true)

	spec := playbookPolicy(test, "1h")
	// A minimum notice, so that a reminder is owed even when the
	// controller, busy with other tests, first sees a Playbook late.
	spec.Reminders, spec.MinimumNotice = []v1alpha1.Duration{"2s"}, "1s"
	spec.Notifications.Channels = []v1alpha1.ChannelReference{{Name: channel.Name}}
	teamA := map[string]string{"team": "a"}

	t.Run("an author without use cannot name the channel, even with its team's labels", func(t *testing.T) {
		for _, labels := range []map[string]string{nil, teamA} {
			p := &v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: test + "-mallory", Labels: labels}, Spec: *spec.DeepCopy()}
			err := eve.c.Create(ctx, p)
			if err == nil {
				_ = k8s.Delete(context.Background(), p)
				t.Fatalf("eve created a policy naming %s with labels %v", channel.Name, labels)
			}
			if !apierrors.IsForbidden(err) {
				t.Fatalf("create as eve: %v, want Forbidden", err)
			}
			mustContain(t, err.Error(), "eve@team-b.example.com may not use NotificationChannel "+channel.Name, "the verb use on notificationchannels")
		}
	})

	// Alice's policy: stamped with her, and her reminders go out.
	p := &v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: test, Labels: teamA}, Spec: *spec.DeepCopy()}
	if err := alice.c.Create(ctx, p); err != nil {
		t.Fatalf("create as alice, who may use %s: %v", channel.Name, err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	var stamp struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	}
	if err := json.Unmarshal([]byte(p.Annotations[v1alpha1.AnnotationAuthor]), &stamp); err != nil || stamp.Username != alice.name {
		t.Fatalf("author stamp %q (%v); want alice", p.Annotations[v1alpha1.AnnotationAuthor], err)
	}

	t.Run("with use granted the policy's reminders go out through the channel", func(t *testing.T) {
		awaitPolicy(t, test, "Ready", func(p *v1alpha1.TimeoutPolicy) bool {
			return meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady)
		})
		pb := create(t, playbooks, newPlaybook(test, "granted", map[string]string{expiry.AnnotationTTL: "3s"}))
		rc.expectEvents(t, pb.GetName(), "reminder", 1, 10*time.Second)
		pb.expectDeletedOnTime(t, pb.after(3*time.Second))
	})

	t.Run("an author without use cannot take over a policy that names the channel", func(t *testing.T) {
		cur := &v1alpha1.TimeoutPolicy{}
		if err := eve.c.Get(ctx, types.NamespacedName{Name: test}, cur); err != nil {
			t.Fatal(err)
		}
		for _, edit := range []string{`{"spec":{"defaultTTL":"2h"}}`, `{"metadata":{"labels":{"owner":"eve"}}}`,
			`{"metadata":{"annotations":{"timeout.amphitheatre.app/author":"{\"username\":\"alice@team-a.example.com\"}"}}}`} {
			err := eve.c.Patch(ctx, cur.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(edit)))
			if !apierrors.IsForbidden(err) {
				t.Fatalf("patch %s as eve: %v, want Forbidden", edit, err)
			}
		}
		if got, _ := getPolicy(test); got.Annotations[v1alpha1.AnnotationAuthor] != p.Annotations[v1alpha1.AnnotationAuthor] {
			t.Fatalf("author stamp now %q", got.Annotations[v1alpha1.AnnotationAuthor])
		}
	})

	t.Run("once use is revoked the controller sends nothing through the channel and says what is needed", func(t *testing.T) {
		if err := k8s.Delete(ctx, grant); err != nil {
			t.Fatal(err)
		}
		mayUse(t, alice.name, channel.Name, false)
		// A change of the channel rebuilds it at once, rather than within
		// the minute a policy's channels are kept.
		touchChannel(t, channel.Name)
		awaitPolicy(t, test, "Ready=False, ChannelNotGranted", func(p *v1alpha1.TimeoutPolicy) bool {
			c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonChannelNotGranted
		})
		got, _ := getPolicy(test)
		msg := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message
		mustContain(t, msg, "policy "+test+" was last written by alice@team-a.example.com", "may not use NotificationChannel "+channel.Name,
			"grant the verb use on notificationchannels named "+channel.Name, "ClusterRole")
		fixture.Eventually(t, 10*time.Second, "a Warning Event on the policy naming the channel", func() (bool, error) {
			for _, n := range eventNotes(t, eventNamespace, test, "InvalidPolicy") {
				if strings.Contains(n, "may not use NotificationChannel "+channel.Name) {
					return true, nil
				}
			}
			return false, nil
		})

		pb := create(t, playbooks, newPlaybook(test, "revoked", map[string]string{expiry.AnnotationTTL: "3s"}))
		// Nothing is sent, and nothing is deleted without its notice.
		pb.expectKept(t, 6*time.Second)
		if got := rc.events(pb.GetName(), "reminder"); len(got) != 0 {
			t.Fatalf("%d reminders sent through %s after use was revoked", len(got), channel.Name)
		}
	})
}

// touchChannel changes a label of the channel, which makes the controller
// build the channels of the policies that name it again.
func touchChannel(t *testing.T, name string) {
	t.Helper()
	ch := &v1alpha1.NotificationChannel{ObjectMeta: metav1.ObjectMeta{Name: name}}
	patch := fmt.Sprintf(`{"metadata":{"labels":{"e2e.timeout.amphitheatre.app/touched":"%d"}}}`, time.Now().UnixNano())
	if err := k8s.Patch(context.Background(), ch, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// A policy written without the author stamp (the admission policies not
// installed) may use only the channels granted to every authenticated
// user: even a cluster administrator's policy sends nothing through a
// channel granted to people only.
func TestAPolicyWithoutAnAuthorStampUsesOnlyChannelsOpenToEveryone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const test = "channel-unstamped"
	rc := startReceiver(t, []byte("whsec-unstamped-91c4"))
	channel := createChannel(t, test, v1alpha1.NotificationChannelSpec{
		Webhook: &v1alpha1.WebhookChannel{URL: rc.url, SecretRef: webhookSecret(t, test, rc.key)},
	})
	spec := playbookPolicy(test, "1h")
	// A minimum notice, so that the reminder is owed: with "0s" a
	// controller that other tests keep busy until past the Playbook's
	// expiry drops it, as documented, and this test would see nothing.
	spec.Reminders, spec.MinimumNotice = []v1alpha1.Duration{"2s"}, "1s"
	spec.Notifications.Channels = []v1alpha1.ChannelReference{{Name: channel.Name}}
	p := &v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: test, Labels: map[string]string{unstampedLabel: "true"}}, Spec: spec}
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	if v, ok := p.Annotations[v1alpha1.AnnotationAuthor]; ok {
		t.Fatalf("the policy was stamped %q: the test binding should leave it out", v)
	}
	awaitPolicy(t, test, "Ready=False, ChannelNotGranted", func(p *v1alpha1.TimeoutPolicy) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonChannelNotGranted && strings.Contains(c.Message, "has no author stamp")
	})

	grantUse(t, channel.Name, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"})
	touchChannel(t, channel.Name)
	awaitPolicy(t, test, "Ready once the channel is open to everyone", func(p *v1alpha1.TimeoutPolicy) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady)
	})
	pb := create(t, playbooks, newPlaybook(test, "open", map[string]string{expiry.AnnotationTTL: "3s"}))
	rc.expectEvents(t, pb.GetName(), "reminder", 1, 10*time.Second)
}
