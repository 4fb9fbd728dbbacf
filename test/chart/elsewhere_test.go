// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
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
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The chart installed as another release in another namespace, with the
// admission policy: testdata/elsewhere.golden.yaml.
const (
	elsewhereRelease   = "amp-timeout"
	elsewhereNamespace = "platform"
	elsewhereGolden    = "testdata/elsewhere.golden.yaml"
)

var playbookResource = schema.GroupVersionResource{Group: "amphitheatre.app", Version: "v1", Resource: "playbooks"}

func renderElsewhere(t *testing.T) []byte {
	t.Helper()
	out, err := helm(t, "template", elsewhereRelease, chartDir, "--namespace", elsewhereNamespace,
		"--values", valueSet{file: "admission"}.values())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAnotherReleaseInAnotherNamespaceMatchesGolden(t *testing.T) {
	got := renderElsewhere(t)
	if *update {
		if err := os.WriteFile(elsewhereGolden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(elsewhereGolden)
	if err != nil {
		t.Fatalf("%v: run `go test ./test/chart -run TestAnotherReleaseInAnotherNamespaceMatchesGolden -update` to write it", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the chart renders release %s in %s differently from %s:\n%s\nIf the change is intended, run `go test ./test/chart -run TestAnotherReleaseInAnotherNamespaceMatchesGolden -update` and review the diff",
			elsewhereRelease, elsewhereNamespace, elsewhereGolden, firstDifference(string(want), string(got)))
	}
}

// The admission policy lets only the controller write the reminders
// record. It names no user: the ServiceAccount of a release in any
// namespace, which the chart's ClusterRoleBinding grants "record" on
// timeout.amphitheatre.app/reminders, is let through, and someone else who
// may patch Playbooks is refused.
func TestTheRecordIsTheReleasesControllersInAnyNamespace(t *testing.T) {
	objs := objects(t, renderElsewhere(t))
	sa := find(objs, "ServiceAccount", "timeout-controller")
	if sa == nil || sa.GetNamespace() != elsewhereNamespace {
		t.Fatalf("ServiceAccount %v, want timeout-controller in %s", sa, elsewhereNamespace)
	}
	policy := find(objs, "ValidatingAdmissionPolicy", "timeout-annotations.amphitheatre.app")
	if policy == nil {
		t.Fatal("no admission policy rendered")
	}
	if data, _ := json.Marshal(policy.Object); bytes.Contains(data, []byte("system:serviceaccount")) {
		t.Error("the admission policy names a ServiceAccount")
	}

	apiServer(t)
	ctx := context.Background()
	clients := kubernetes.NewForConfigOrDie(server.env.Config)
	_, err := clients.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: elsewhereNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			applyAnywhere(t, o)
		}
	}

	// Someone who may patch Playbooks, as Amphitheatre's users may.
	const editor = "playbook-editor@example.com"
	_, err = clients.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "chart-test-playbook-editor"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"amphitheatre.app"}, Resources: []string{"playbooks"}, Verbs: []string{"get", "patch"}}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, err = clients.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "chart-test-playbook-editor"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "chart-test-playbook-editor"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: editor}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	id := string(uuid.NewUUID())
	pb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "amphitheatre.app/v1", "kind": "Playbook",
		"metadata": map[string]any{"name": id},
		"spec": map[string]any{
			"id": id, "title": "chart test",
			"preface": map[string]any{"repository": map[string]any{"repo": "https://github.com/amphitheatre-app/amp-example-go"}},
		},
	}}
	if _, err := server.dyn.Resource(playbookResource).Create(ctx, pb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = server.dyn.Resource(playbookResource).Delete(context.Background(), id, metav1.DeleteOptions{})
	})

	as := func(user string, groups ...string) dynamic.ResourceInterface {
		cfg := rest.CopyConfig(server.env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
		return dynamic.NewForConfigOrDie(cfg).Resource(playbookResource)
	}
	controller := as("system:serviceaccount:"+elsewhereNamespace+":timeout-controller", "system:serviceaccounts")
	other := as(editor)
	record := func(expiresAt string) []byte {
		return fmt.Appendf(nil, `{"metadata":{"annotations":{"timeout.amphitheatre.app/reminders":%q}}}`, `{"expiresAt":"`+expiresAt+`","sent":{}}`)
	}
	patch := func(r dynamic.ResourceInterface, body []byte, dryRun ...string) error {
		_, err := r.Patch(ctx, id, types.MergePatchType, body, metav1.PatchOptions{DryRun: dryRun})
		return err
	}

	// The policy, its binding and the roles take effect asynchronously: a
	// dry run probes until the other user is refused for the policy's
	// reason.
	deadline := time.Now().Add(30 * time.Second)
	var refusal error
	for {
		refusal = patch(other, record("2030-01-01T00:00:00Z"), metav1.DryRunAll)
		if apierrors.IsForbidden(refusal) && strings.Contains(refusal.Error(), "only the controller writes it") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("another user's record write: %v, want it refused by the admission policy", refusal)
		}
		time.Sleep(100 * time.Millisecond)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		err := patch(controller, record("2030-01-01T00:00:00Z"))
		if err == nil {
			break
		}
		// Until its ClusterRoleBinding is in force, RBAC refuses it; the
		// admission policy's refusal is no such wait.
		if strings.Contains(err.Error(), "only the controller writes it") || time.Now().After(deadline) {
			t.Fatalf("the release's controller writing its record in %s: %v", elsewhereNamespace, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := patch(other, []byte(`{"metadata":{"labels":{"edited":"yes"}}}`)); err != nil {
		t.Errorf("the other user's edit of something else: %v", err)
	}
}

// applyAnywhere server-side applies obj in the namespace it names.
func applyAnywhere(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	gvk := obj.GroupVersionKind()
	mapping, err := server.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("%s %s: %v", gvk.Kind, obj.GetName(), err)
	}
	var ri dynamic.ResourceInterface = server.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = server.dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	force := true
	if _, err := ri.Patch(context.Background(), obj.GetName(), types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: fieldManager, Force: &force, FieldValidation: "Strict"}); err != nil {
		t.Fatalf("apply %s %s: %v", gvk.Kind, obj.GetName(), err)
	}
}
