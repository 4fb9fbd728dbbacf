// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/actions"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// actionsAccount is the actions server's ServiceAccount, as config/actions
// names it.
const actionsAccount = "timeout-controller-actions"

// startActions runs the actions server in this process as its shipped
// ServiceAccount (impersonated, with config/actions's roles bound), until
// the test ends, and returns its base URL and the keyring it verifies
// with.
func startActions(t *testing.T) (string, *actions.Keyring) {
	t.Helper()
	ctx := context.Background()
	ring := ensureKeyring(t)
	applyActionsRoles(t)

	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + outboxNamespace + ":" + actionsAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + outboxNamespace, "system:authenticated"}}
	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Client:                 actions.ClientOptions(),
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := actions.Setup(mgr, actions.Config{
		Addr:            addr,
		KeyringSecret:   types.NamespacedName{Namespace: outboxNamespace, Name: actions.SecretName},
		SecretNamespace: outboxNamespace,
		PolicyInterval:  time.Second,
	}); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("actions server: %v", err)
		}
	})
	base := "http://" + addr
	fixture.Eventually(t, 30*time.Second, "the actions server serving", func() (bool, error) {
		res, err := http.Get(base + "/")
		if err != nil {
			return false, err
		}
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK, nil
	})
	return base, ring
}

// ensureKeyring creates the links keyring Secret, as the controller does
// with --actions-url, unless it exists, and reads it.
func ensureKeyring(t *testing.T) *actions.Keyring {
	t.Helper()
	ctx := context.Background()
	s, err := actions.NewKeyringSecret(outboxNamespace, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var got corev1.Secret
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: outboxNamespace, Name: actions.SecretName}, &got); err != nil {
		t.Fatal(err)
	}
	ring, err := actions.KeyringFromSecret(&got)
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

// applyActionsRoles creates config/actions's ClusterRole, Role and their
// bindings, as shipped.
func applyActionsRoles(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, file := range []string{"role.yaml", "role_binding.yaml"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "config", "actions", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatal(err)
			}
			var obj client.Object
			switch meta.Kind {
			case "ClusterRole":
				obj = &rbacv1.ClusterRole{}
			case "Role":
				obj = &rbacv1.Role{}
			case "ClusterRoleBinding":
				obj = &rbacv1.ClusterRoleBinding{}
			case "RoleBinding":
				obj = &rbacv1.RoleBinding{}
			default:
				t.Fatalf("%s: unexpected kind %q", file, meta.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if err := k8s.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
}

var formToken = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// page GETs a page and returns its status and body.
func page(t *testing.T, u string) (int, string) {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// click posts the page's form for action, as a browser does from the
// page.
func click(t *testing.T, base, pageURL, csrf string, a actions.Action) (int, string) {
	t.Helper()
	form := url.Values{"csrf": {csrf}, "action": {string(a)}}
	req, err := http.NewRequest(http.MethodPost, pageURL, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestALinkExtendsAPlaybookOnceAndTheControllerSeesIt(t *testing.T) {
	const test = "actions-link"
	ctx := context.Background()
	base, ring := startActions(t)
	spec := playbookPolicy(test, "1h")
	spec.MinimumNotice = "0s"
	spec.Extensions = &v1alpha1.Extensions{MaxStep: "2d", MaxCount: ptr.To[int32](3)}
	createPolicy(t, "e2e-"+test, spec)
	pb := create(t, playbooks, newPlaybook(test, "Demo for a link", map[string]string{"timeout.amphitheatre.app/owner": "dev-" + test + "@example.com"}))
	// The controller's first look gives the extension limits their start.
	awaitExtensions(t, pb.Unstructured, "the controller's account of the extensions", func(e expiry.Extensions) bool { return e.Used == 0 })

	ref := &actions.Ref{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook", Name: pb.GetName(), UID: pb.GetUID()}
	links, err := ring.Links(mustParse(t, base), actions.Claims{Object: ref, Recipient: "dev@example.com", Actions: []actions.Action{actions.Extend}, Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}

	// A mail gateway fetches the link: nothing changes.
	before := get(t, pb.GetName()).GetResourceVersion()
	var body string
	fixture.Eventually(t, 15*time.Second, "the page of the link", func() (bool, error) {
		var status int
		status, body = page(t, links.Extend)
		if status != http.StatusOK {
			return false, fmt.Errorf("status %d: %s", status, short(body))
		}
		return true, nil
	})
	mustContain(t, body, "Demo for a link", "Keep it longer, until")
	if rv := get(t, pb.GetName()).GetResourceVersion(); rv != before {
		t.Fatal("a GET changed the Playbook")
	}
	m := formToken.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no form on the page:\n%s", body)
	}

	// The click: one extension, by maxStep, stamped via the link.
	status, body := click(t, base, links.Page, m[1], actions.Extend)
	if status != http.StatusOK || !strings.Contains(body, "Done: it now expires") {
		t.Fatalf("click: %d\n%s", status, body)
	}
	obj := get(t, pb.GetName())
	want := pb.after(time.Hour + 48*time.Hour).UTC().Format(time.RFC3339)
	if got := obj.GetAnnotations()[expiry.AnnotationExpiresAt]; got != want {
		t.Errorf("expires-at %q, want %q (the old expiry plus maxStep)", got, want)
	}
	mustContain(t, obj.GetAnnotations()[expiry.AnnotationChangedBy], `"by":"dev@example.com"`, `"via":"link"`)
	// The controller counts the extension, by the link's recipient.
	awaitExtensions(t, pb.Unstructured, "the extension counted by the controller", func(e expiry.Extensions) bool {
		return e.Used == 1 && e.By == "dev@example.com"
	})

	// The owner's page lists it, from the server's index of metadata.
	owner, err := ring.Links(mustParse(t, base), actions.Claims{Owner: "dev-" + test + "@example.com", Recipient: "dev@example.com", Actions: []actions.Action{actions.Extend}, Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 15*time.Second, "the owner's page listing the Playbook", func() (bool, error) {
		status, body := page(t, owner.Page)
		if status != http.StatusOK || !strings.Contains(body, pb.GetName()) {
			return false, fmt.Errorf("status %d: %s", status, short(body))
		}
		return true, nil
	})

	// The same link again acts no more. The controller writes the
	// Playbook meanwhile (the record of the new expiry), so what is
	// compared is what a click writes, not the resourceVersion.
	written := func() [3]string {
		a := get(t, pb.GetName()).GetAnnotations()
		return [3]string{a[expiry.AnnotationExpiresAt], a[expiry.AnnotationLinkUses], a[expiry.AnnotationChangedBy]}
	}
	clicked := written()
	status, body = click(t, base, links.Page, m[1], actions.Extend)
	if status != http.StatusOK || !strings.Contains(body, "already used") {
		t.Fatalf("second click: %d\n%s", status, body)
	}
	if again := written(); again != clicked {
		t.Errorf("the second click wrote the Playbook: expires-at, link-uses and changed-by %q, were %q", again, clicked)
	}

	// The Playbook is deleted and made again under the same name: the old
	// link does nothing to the new one.
	if err := dyn.Resource(playbooks).Delete(ctx, pb.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-pb.gone:
	case <-time.After(30 * time.Second):
		t.Fatal("the Playbook was not deleted")
	}
	again := testenv.NewPlaybook(pb.GetName(), "Demo for a link", nil)
	again.SetLabels(map[string]string{testLabel: test})
	reborn := create(t, playbooks, again)
	if reborn.GetUID() == pb.GetUID() {
		t.Fatal("the new Playbook has the old UID")
	}
	status, body = click(t, base, links.Page, m[1], actions.Extend)
	if status != http.StatusGone || !strings.Contains(body, "This link is for an object that no longer exists") {
		t.Fatalf("a click for the old Playbook: %d\n%s", status, body)
	}
	if a := get(t, pb.GetName()).GetAnnotations(); a[expiry.AnnotationExpiresAt] != "" || a[expiry.AnnotationLinkUses] != "" {
		t.Errorf("the new Playbook was changed: %v", a)
	}
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// get reads a Playbook from the API server.
func get(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	o, err := dyn.Resource(playbooks).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return o
}
