// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// TestTheControllerSaysWhatIsMissing runs the controller binary, as the
// ServiceAccount config/default installs and with its roles alone, against
// an API server that serves none of the CRDs it needs, and installs them
// one at a time. At each step /readyz fails naming what is missing, the
// log says it once, and the controller carries on without a restart once
// it is there. Then a policy for a kind the controller may not use says
// which verbs it lacks, until they are granted.
func TestTheControllerSaysWhatIsMissing(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, which builds the control plane (etcd, kube-apiserver, kube-controller-manager) and sets it")
	}
	manifests := decode(t, kustomize(t, "config/default"))
	var install, ownCRDs, shippedPolicy []*unstructured.Unstructured
	for _, o := range manifests {
		switch o.GetKind() {
		case "CustomResourceDefinition":
			ownCRDs = append(ownCRDs, o)
		case "TimeoutPolicy":
			shippedPolicy = append(shippedPolicy, o)
		default:
			install = append(install, o)
		}
	}
	binary := buildController(t)

	// No CRD at all: neither the controller's nor Amphitheatre's.
	env := &envtest.Environment{}
	env.ControlPlane.GetAPIServer().Configure().Set("authorization-mode", "RBAC")
	admin, err := env.Start()
	must(t, err, "start the control plane")
	t.Cleanup(func() { _ = env.Stop() })

	ctx := t.Context()
	dyn := dynamic.NewForConfigOrDie(admin)
	clients := kubernetes.NewForConfigOrDie(admin)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(clients.Discovery()))
	apply(t, dyn, mapper, install)

	token, err := clients.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	must(t, err, "request a token for the installed ServiceAccount")
	asController := rest.AnonymousClientConfig(admin)
	asController.BearerToken = token.Status.Token
	checkIdentity(t, asController)

	probeAddr := freeAddr(t)
	ctrl := runController(t, binary, manifests,
		"--kubeconfig="+writeKubeconfig(t, asController),
		"--leader-election-namespace="+namespace,
		"--secret-namespace="+namespace,
		"--cluster-event-namespace=kube-system",
		"--health-probe-bind-address="+probeAddr,
		"--metrics-bind-address="+freeAddr(t),
		"--webhook-port="+freePort(t),
	)
	// readyz returns the status and body of /readyz, or of one check.
	readyz := func(check string) (int, string) {
		url := "http://" + probeAddr + "/readyz"
		if check != "" {
			url += "/" + check
		}
		resp, err := http.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	expectReadyz := func(check string, wantStatus int, want ...string) {
		t.Helper()
		fixture.Eventually(t, 20*time.Second, fmt.Sprintf("/readyz/%s %d with %q", check, wantStatus, want), func() (bool, error) {
			status, body := readyz(check)
			if status != wantStatus {
				return false, fmt.Errorf("%d: %s", status, body)
			}
			for _, w := range want {
				if !strings.Contains(body, w) {
					return false, errors.New(body)
				}
			}
			return true, nil
		})
	}
	logged := func(what string) int {
		n := 0
		for _, l := range ctrl.lines() {
			if strings.Contains(l, what) {
				n++
			}
		}
		return n
	}

	t.Run("without its CRDs it is not ready, names them, and says so once", func(t *testing.T) {
		expectReadyz("crds", http.StatusInternalServerError,
			"timeoutpolicies.timeout.amphitheatre.app", "notificationchannels.timeout.amphitheatre.app", "config/crd")
		expectReadyz("", http.StatusInternalServerError, "[-]crds failed")
		fixture.Eventually(t, 10*time.Second, "the log says what it waits for", func() (bool, error) {
			return logged("waiting for CRDs") > 0, errors.New(strings.Join(ctrl.lines(), "\n"))
		})
		// Two more looks of the gate, five seconds apart: said once still,
		// and nothing retried in a loop.
		for end := time.Now().Add(11 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
			if n := logged("waiting for CRDs"); n != 1 {
				t.Fatalf("said %d times that it waits for its CRDs, want once:\n%s", n, strings.Join(ctrl.lines(), "\n"))
			}
		}
		if n := logged("no matches for kind"); n != 0 {
			t.Errorf(`logged "no matches for kind" %d times`, n)
		}
	})

	t.Run("with its CRDs it starts and names the CRD of the kind its policy governs", func(t *testing.T) {
		apply(t, dyn, mapper, ownCRDs)
		waitEstablished(t, dyn, ownCRDs)
		mapper.Reset()
		apply(t, dyn, mapper, shippedPolicy)
		expectReadyz("crds", http.StatusOK)
		expectReadyz("targets", http.StatusInternalServerError,
			"does not serve amphitheatre.app/v1 Playbook", "TimeoutPolicy playbooks", "playbooks.amphitheatre.app")
		expectReadyz("", http.StatusInternalServerError, "[-]targets failed")
		waitCondition(t, dyn, "playbooks", "False", "TargetNotFound", "does not serve amphitheatre.app/v1 Playbook")
		if n := logged("CRDs installed; starting the controllers"); n != 1 {
			t.Errorf("said %d times that the controllers start, want once", n)
		}
	})

	t.Run("with Amphitheatre's CRDs it is ready", func(t *testing.T) {
		_, err := envtest.InstallCRDs(admin, envtest.CRDInstallOptions{
			Paths: []string{filepath.Join(root, "third_party", "amphitheatre", "crds")}, ErrorIfPathMissing: true,
		})
		must(t, err, "install Amphitheatre's CRDs")
		expectReadyz("", http.StatusOK)
		waitReady(t, dyn, "playbooks")
	})

	t.Run("a policy for a kind it may not use says which verbs are missing until they are granted", func(t *testing.T) {
		const team = "team-a"
		_, err := clients.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}}, metav1.CreateOptions{})
		must(t, err, "create namespace %s", team)
		_, err = clients.CoreV1().ConfigMaps(team).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: "scratch", Labels: map[string]string{"expires": "yes"},
		}}, metav1.CreateOptions{})
		must(t, err, "create a ConfigMap")
		policy := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": policies.GroupVersion().String(),
			"kind":       "TimeoutPolicy",
			"metadata":   map[string]any{"name": "configmaps"},
			"spec": map[string]any{
				"target":     map[string]any{"apiVersion": "v1", "kind": "ConfigMap"},
				"selector":   map[string]any{"matchLabels": map[string]any{"expires": "yes"}},
				"defaultTTL": "1h",
				// No reminder to record: the patch is refused until the
				// end, and would be retried.
				"reminders": []any{},
			},
		}}
		_, err = dyn.Resource(policies).Create(ctx, policy, metav1.CreateOptions{})
		must(t, err, "create the ConfigMap policy")

		waitCondition(t, dyn, "configmaps", "False", "Forbidden",
			"does not let the controller list, watch configmaps, so this policy governs nothing", "docs/reference/rbac.md")

		// What a cluster administrator grants: following ConfigMaps
		// everywhere, and patching and deleting them in team-a only.
		sa := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: serviceAccount}}
		_, err = clients.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "timeout-controller-configmaps"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
		}, metav1.CreateOptions{})
		must(t, err, "create the ClusterRole")
		_, err = clients.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "timeout-controller-configmaps"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "timeout-controller-configmaps"},
			Subjects:   sa,
		}, metav1.CreateOptions{})
		must(t, err, "bind the ClusterRole")
		waitCondition(t, dyn, "configmaps", "False", "Forbidden",
			"does not let the controller patch, delete configmaps in namespace team-a, so this policy's objects are not reminded and deleted")

		_, err = clients.RbacV1().Roles(team).Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "timeout-controller"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"patch", "delete"}}},
		}, metav1.CreateOptions{})
		must(t, err, "create the Role")
		_, err = clients.RbacV1().RoleBindings(team).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "timeout-controller"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "timeout-controller"},
			Subjects:   sa,
		}, metav1.CreateOptions{})
		must(t, err, "bind the Role")
		waitReady(t, dyn, "configmaps")
	})

	t.Run("nothing was refused in a loop", func(t *testing.T) {
		ctrl.stop(t)
		for _, l := range ctrl.lines() {
			// The API server's words for a refused request; the policy's
			// Forbidden reason is the controller's own.
			if strings.Contains(l, "is forbidden") || strings.Contains(l, "no matches for kind") {
				t.Errorf("controller log: %s", l)
			}
		}
	})
	if t.Failed() {
		t.Logf("controller log:\n%s", strings.Join(ctrl.lines(), "\n"))
	}
}

// waitCondition waits until policy name's Ready condition has status and
// reason, and a message with each of want.
func waitCondition(t *testing.T, dyn dynamic.Interface, name, status, reason string, want ...string) {
	t.Helper()
	fixture.Eventually(t, 40*time.Second, fmt.Sprintf("policy %s Ready=%s (%s)", name, status, reason), func() (bool, error) {
		u, err := dyn.Resource(policies).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			c, _ := c.(map[string]any)
			if c["type"] != "Ready" {
				continue
			}
			msg, _ := c["message"].(string)
			if c["status"] != status || c["reason"] != reason {
				return false, fmt.Errorf("Ready=%v (%v: %v)", c["status"], c["reason"], msg)
			}
			for _, w := range want {
				if !strings.Contains(msg, w) {
					return false, fmt.Errorf("message %q lacks %q", msg, w)
				}
			}
			return true, nil
		}
		return false, errors.New("no Ready condition")
	})
}
