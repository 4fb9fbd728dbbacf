// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestHelmInstallUpgradeUninstall runs Helm itself against an API server of
// its own, without the chart's CRD, so that Helm installs it from crds/.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, which builds the control plane (make control-plane) and sets it")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "third_party", "amphitheatre", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	admin, err := env.AddUser(envtest.User{Name: "chart-admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigFile := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigFile, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	run := func(args ...string) {
		t.Helper()
		if out, err := helm(t, append(args, "--kubeconfig", kubeconfigFile, "--namespace", namespace)...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	get := func(gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
		if ns == "" {
			return dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		}
		return dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	}
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

	t.Run("install creates the CRD, the controller and the policy", func(t *testing.T) {
		run("install", release, chartDir, "--create-namespace")
		if _, err := get(crds, "", "timeoutpolicies.timeout.amphitheatre.app"); err != nil {
			t.Fatalf("CRD: %v", err)
		}
		if _, err := get(deployments, namespace, "timeout-controller"); err != nil {
			t.Fatalf("Deployment: %v", err)
		}
		p, err := get(policyResource, "", "playbooks")
		if err != nil {
			t.Fatalf("TimeoutPolicy: %v", err)
		}
		if got, _, _ := unstructured.NestedStringSlice(p.Object, "spec", "reminders"); !slices.Equal(got, []string{"3d", "2d"}) {
			t.Errorf("reminders %v, want [3d 2d]", got)
		}
	})

	t.Run("upgrade adds the notification channels and their Secrets", func(t *testing.T) {
		run("upgrade", release, chartDir, "--values", valueSets[1].values())
		p, err := get(policyResource, "", "playbooks")
		if err != nil {
			t.Fatal(err)
		}
		if refs, _, _ := unstructured.NestedSlice(p.Object, "spec", "notifications", "channels"); len(refs) == 0 {
			t.Error("the policy names no NotificationChannel")
		}
		ch, err := get(channelResource, "", "timeout-controller-email")
		if err != nil {
			t.Fatalf("NotificationChannel timeout-controller-email: %v", err)
		}
		if host, _, _ := unstructured.NestedString(ch.Object, "spec", "email", "host"); host != "smtp.example.com" {
			t.Errorf("email host %q, want smtp.example.com", host)
		}
		for _, name := range []string{"smtp-credentials", "slack-webhook", "portal-webhook"} {
			if _, err := get(secrets, namespace, name); err != nil {
				t.Errorf("Secret %s: %v", name, err)
			}
		}
	})

	// The CRD's reminders list is atomic: an upgrade to [] must not let
	// the default back in, whichever way Helm applies it.
	for _, serverSide := range []string{"true", "false"} {
		t.Run("upgrade to reminders [] turns them off with --server-side="+serverSide, func(t *testing.T) {
			run("upgrade", release, chartDir, "--values", valueSets[1].values(), "--set-json", `policy.reminders=["1h"]`, "--server-side="+serverSide)
			run("upgrade", release, chartDir, "--values", valueSets[1].values(), "--set-json", "policy.reminders=[]", "--server-side="+serverSide)
			p, err := get(policyResource, "", "playbooks")
			if err != nil {
				t.Fatal(err)
			}
			if got, found, _ := unstructured.NestedSlice(p.Object, "spec", "reminders"); !found || len(got) != 0 {
				t.Errorf("reminders %v (present %v), want []", got, found)
			}
		})
	}

	t.Run("uninstall removes the release and keeps the CRD", func(t *testing.T) {
		run("uninstall", release, "--wait")
		if _, err := get(policyResource, "", "playbooks"); !apierrors.IsNotFound(err) {
			t.Errorf("TimeoutPolicy after uninstall: %v, want NotFound", err)
		}
		if _, err := get(deployments, namespace, "timeout-controller"); !apierrors.IsNotFound(err) {
			t.Errorf("Deployment after uninstall: %v, want NotFound", err)
		}
		if _, err := get(secrets, namespace, "slack-webhook"); !apierrors.IsNotFound(err) {
			t.Errorf("Secret slack-webhook after uninstall: %v, want NotFound", err)
		}
		if _, err := get(crds, "", "timeoutpolicies.timeout.amphitheatre.app"); err != nil {
			t.Errorf("CRD after uninstall: %v, want it kept", err)
		}
	})
}
