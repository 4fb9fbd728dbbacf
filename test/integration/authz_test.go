// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

var policiesGVR = schema.GroupVersionResource{Group: "timeout.amphitheatre.app", Version: "v1alpha1", Resource: "timeoutpolicies"}

// policyAuthor returns clients that act as a ServiceAccount bound to the
// shipped policy-author ClusterRole and nothing else.
func policyAuthor(t *testing.T) (client.Client, *dynamic.DynamicClient) {
	t.Helper()
	ctx := context.Background()
	const ns, sa = "authors", "policy-author"
	_ = k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	bindShippedClusterRole(t, "policy_author_role.yaml", "policy-author-test", ns, sa)
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
	c, err := client.New(cfg, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	// RBAC takes effect through the API server's informers: wait until the
	// binding is in force before testing what it forbids.
	fixture.Eventually(t, 10*time.Second, "policy-author role in force", func() (bool, error) {
		err := c.List(ctx, &v1alpha1.TimeoutPolicyList{})
		return err == nil, err
	})
	return c, dynamic.NewForConfigOrDie(cfg)
}

// A policy author who cannot read Secrets must not reach them through the
// controller, nor make it call an address of their choosing.
func TestAPolicyAuthorCannotPointCredentialsElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	author, authorDyn := policyAuthor(t)

	// Another team's channel, made by its administrator.
	_ = k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secretNamespace}})
	smtpSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: "team-b-smtp"},
		Data: map[string][]byte{"username": []byte("team-b"), "password": []byte("team-b-pa55-7d1e")}}
	if err := k8s.Create(ctx, smtpSecret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), smtpSecret) })
	secrets = append(secrets, "team-b-pa55-7d1e")
	teamB := createChannel(t, "team-b-mail", v1alpha1.NotificationChannelSpec{
		Email: &v1alpha1.EmailChannel{Host: "smtp.team-b.example.com", Security: "StartTLS", From: "timeout@team-b.example.com",
			CredentialsSecretRef: &v1alpha1.SecretReference{Namespace: secretNamespace, Name: "team-b-smtp"}},
		AllowedEmailDomains: []string{"team-b.example.com"},
		PolicySelector:      &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}},
	})
	hook := createChannel(t, "team-b-hook", v1alpha1.NotificationChannelSpec{
		Webhook: &v1alpha1.WebhookChannel{URL: "https://hooks.team-b.example.com/timeout",
			SecretRef: webhookSecret(t, "team-b-hook", []byte("whsec-team-b-3f9a"))},
	})

	t.Run("cannot read the Secret", func(t *testing.T) {
		err := author.Get(ctx, client.ObjectKeyFromObject(smtpSecret), &corev1.Secret{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("get Secret as the author: %v, want Forbidden", err)
		}
	})

	t.Run("cannot send an SMTP password to a host of their choosing", func(t *testing.T) {
		// Through a channel of their own...
		err := author.Create(ctx, &v1alpha1.NotificationChannel{
			ObjectMeta: metav1.ObjectMeta{Name: "exfiltrate"},
			Spec: v1alpha1.NotificationChannelSpec{Email: &v1alpha1.EmailChannel{Host: "smtp.attacker.example", Security: "TLS",
				From: "x@attacker.example", CredentialsSecretRef: teamB.Spec.Email.CredentialsSecretRef}},
		})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("create NotificationChannel as the author: %v, want Forbidden", err)
		}
		mustContain(t, err.Error(), "notificationchannels")
		// ...by moving the administrator's...
		err = author.Patch(ctx, teamB.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"email":{"host":"smtp.attacker.example"}}}`)))
		if !apierrors.IsForbidden(err) {
			t.Fatalf("patch NotificationChannel as the author: %v, want Forbidden", err)
		}
		// ...or in the policy, as before channels existed.
		inline := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "timeout.amphitheatre.app/v1alpha1", "kind": "TimeoutPolicy",
			"metadata": map[string]any{"name": "inline-exfiltrate"},
			"spec": map[string]any{"notifications": map[string]any{"email": map[string]any{
				"host": "smtp.attacker.example", "security": "TLS", "from": "x@attacker.example",
				"credentialsSecretRef": map[string]any{"namespace": secretNamespace, "name": "team-b-smtp"},
			}}},
		}}
		_, err = authorDyn.Resource(policiesGVR).Create(ctx, inline, metav1.CreateOptions{FieldValidation: "Strict"})
		if err == nil {
			_ = k8s.Delete(context.Background(), &v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "inline-exfiltrate"}})
			t.Fatal("the API server took a policy with its own e-mail server")
		}
		mustContain(t, err.Error(), "notifications.email was removed")
	})

	t.Run("cannot use a webhook key with a URL of their choosing", func(t *testing.T) {
		err := author.Patch(ctx, hook.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"webhook":{"url":"https://attacker.example/steal"}}}`)))
		if !apierrors.IsForbidden(err) {
			t.Fatalf("patch the webhook URL as the author: %v, want Forbidden", err)
		}
		err = author.Create(ctx, &v1alpha1.NotificationChannel{
			ObjectMeta: metav1.ObjectMeta{Name: "steal-hook"},
			Spec: v1alpha1.NotificationChannelSpec{Webhook: &v1alpha1.WebhookChannel{URL: "https://attacker.example/steal",
				SecretRef: hook.Spec.Webhook.SecretRef}},
		})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("create a webhook channel as the author: %v, want Forbidden", err)
		}
	})

	// The author may use team B's channels (the verb use), which their
	// policies must still use as the channels allow.
	authorSA := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "authors", Name: "policy-author"}
	grantUse(t, teamB.Name, authorSA)
	grantUse(t, hook.Name, authorSA)
	mayUse(t, "system:serviceaccount:authors:policy-author", teamB.Name, true)

	t.Run("cannot use a channel restricted to other policies", func(t *testing.T) {
		const test = "authz-refused"
		spec := playbookPolicy(test, "1h")
		spec.MinimumNotice = "0s"
		spec.Notifications.Channels = []v1alpha1.ChannelReference{{Name: teamB.Name}}
		p := &v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: test, Labels: map[string]string{"team": "a"}}, Spec: spec}
		if err := author.Create(ctx, p); err != nil {
			t.Fatalf("create policy as the author: %v", err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
		awaitPolicy(t, test, "Ready=False, ChannelRefused", func(p *v1alpha1.TimeoutPolicy) bool {
			c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonChannelRefused
		})
		got, err := getPolicy(test)
		if err != nil {
			t.Fatal(err)
		}
		mustContain(t, meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message,
			"NotificationChannel team-b-mail does not let policy authz-refused use it")
		// A policy that cannot give its notice holds its objects.
		pb := create(t, playbooks, newPlaybook(test, "held", map[string]string{expiry.AnnotationTTL: "1s"}))
		pb.expectKept(t, 4*time.Second)
	})

	t.Run("cannot send a channel's mail outside its domains", func(t *testing.T) {
		const test = "authz-domains"
		spec := playbookPolicy(test, "1h")
		spec.Notifications.Channels = []v1alpha1.ChannelReference{{Name: teamB.Name, To: []string{"me@attacker.example"}}}
		p := &v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: test, Labels: map[string]string{"team": "b"}}, Spec: spec}
		if err := author.Create(ctx, p); err != nil {
			t.Fatalf("create policy as the author: %v", err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
		awaitPolicy(t, test, "Ready=False, ChannelRefused", func(p *v1alpha1.TimeoutPolicy) bool {
			c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			return c != nil && c.Reason == v1alpha1.ReasonChannelRefused && strings.Contains(c.Message, `"me@attacker.example"`)
		})
	})

	t.Run("cannot read a receiver's answers through Events", func(t *testing.T) {
		const test, answer = "authz-answers", "receiver-private-detail-42"
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, answer, http.StatusInternalServerError)
		}))
		t.Cleanup(srv.Close)
		createChannel(t, test, v1alpha1.NotificationChannelSpec{Webhook: &v1alpha1.WebhookChannel{
			URL: srv.URL + "/hooks", SecretRef: webhookSecret(t, test, []byte("whsec-answers-77c2")),
		}})
		grantUse(t, test, authorSA)
		mayUse(t, "system:serviceaccount:authors:policy-author", test, true)
		spec := playbookPolicy(test, "1h")
		spec.Reminders = []v1alpha1.Duration{"2s"}
		spec.MinimumNotice = "0s"
		spec.Notifications.Channels = []v1alpha1.ChannelReference{{Name: test}}
		p := &v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: test}, Spec: spec}
		if err := author.Create(ctx, p); err != nil {
			t.Fatalf("create policy as the author: %v", err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
		pb := create(t, playbooks, newPlaybook(test, "answers", map[string]string{expiry.AnnotationTTL: "3s"}))
		failed := findEvent(t, eventNamespace, pb.GetName(), "MessageFailed")
		mustContain(t, failed.Note, "via "+test, "HTTP 500")
		if strings.Contains(failed.Note, answer) {
			t.Errorf("the Event quotes the receiver's answer: %q", failed.Note)
		}
	})
}
