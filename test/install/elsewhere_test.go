// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package install

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// TestTheRecordIsTheControllersWhereverItIsInstalled installs the
// controller's RBAC, its Deployment and the admission policy in the
// namespace platform with the name prefix amp- (testdata/elsewhere), and
// writes a Playbook's reminders record with tokens of real
// ServiceAccounts: the installed controller's is let through, another one
// that may patch Playbooks is refused.
func TestTheRecordIsTheControllersWhereverItIsInstalled(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, which builds the control plane (etcd, kube-apiserver, kube-controller-manager) and sets it")
	}
	const ns, controllerSA = "platform", "amp-timeout-controller"
	manifests := decode(t, kustomize(t, "test/install/testdata/elsewhere"))
	for _, o := range manifests {
		if o.GetKind() == "ServiceAccount" && (o.GetNamespace() != ns || o.GetName() != controllerSA) {
			t.Fatalf("the overlay installs ServiceAccount %s/%s, want %s/%s", o.GetNamespace(), o.GetName(), ns, controllerSA)
		}
		if o.GetKind() == "ValidatingAdmissionPolicy" {
			data, err := json.Marshal(o.Object)
			must(t, err, "encode the policy")
			if strings.Contains(string(data), "system:serviceaccount") {
				t.Errorf("the admission policy names a ServiceAccount: it would refuse the controller of another install")
			}
		}
	}

	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "third_party", "amphitheatre", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	env.ControlPlane.GetAPIServer().Configure().Set("authorization-mode", "RBAC")
	admin, err := env.Start()
	must(t, err, "start the control plane")
	t.Cleanup(func() { _ = env.Stop() })
	ctx := t.Context()
	dyn := dynamic.NewForConfigOrDie(admin)
	clients := kubernetes.NewForConfigOrDie(admin)
	apply(t, dyn, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(clients.Discovery())), manifests)

	// Someone else who may patch Playbooks: a ServiceAccount in the same
	// namespace, which is no reason to trust it.
	const intruder = "playbook-editor"
	_, err = clients.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: intruder}}, metav1.CreateOptions{})
	must(t, err, "create ServiceAccount %s", intruder)
	_, err = clients.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: intruder},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"amphitheatre.app"}, Resources: []string{"playbooks"}, Verbs: []string{"get", "patch"}}},
	}, metav1.CreateOptions{})
	must(t, err, "create the ClusterRole")
	_, err = clients.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: intruder},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: intruder},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: intruder}},
	}, metav1.CreateOptions{})
	must(t, err, "bind the ClusterRole")

	as := func(sa string) dynamic.ResourceInterface {
		t.Helper()
		token, err := clients.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
		}, metav1.CreateOptions{})
		must(t, err, "request a token for %s", sa)
		cfg := rest.AnonymousClientConfig(admin)
		cfg.BearerToken = token.Status.Token
		return dynamic.NewForConfigOrDie(cfg).Resource(playbooks)
	}
	controller, other := as(controllerSA), as(intruder)

	pb, err := dyn.Resource(playbooks).Create(ctx, newPlaybook(), metav1.CreateOptions{})
	must(t, err, "create a Playbook")
	record := func(expiresAt string) []byte {
		return fmt.Appendf(nil, `{"metadata":{"annotations":{"timeout.amphitheatre.app/reminders":%q}}}`,
			`{"expiresAt":"`+expiresAt+`","sent":{}}`)
	}
	patch := func(r dynamic.ResourceInterface, body []byte, dryRun ...string) error {
		_, err := r.Patch(ctx, pb.GetName(), types.MergePatchType, body, metav1.PatchOptions{DryRun: dryRun})
		return err
	}

	// The API server loads the policy and its binding asynchronously, and
	// the bindings of the roles: until the intruder is refused for the
	// policy's reason, nothing is proved. The probe is a dry run, so that
	// one let through before then changes nothing.
	var refusal error
	fixture.Eventually(t, 30*time.Second, "the policy refuses another ServiceAccount's record", func() (bool, error) {
		refusal = patch(other, record("2030-01-01T00:00:00Z"), metav1.DryRunAll)
		return apierrors.IsForbidden(refusal) && strings.Contains(refusal.Error(), "only the controller writes it"), refusal
	})
	for _, want := range []string{"playbook " + pb.GetName(), "timeout.amphitheatre.app/reminders", "record of the notice it gave"} {
		if !strings.Contains(refusal.Error(), want) {
			t.Errorf("refusal %q does not say %q", refusal, want)
		}
	}
	must(t, patch(controller, record("2030-01-01T00:00:00Z")), "the controller's record write")
	must(t, patch(other, []byte(`{"metadata":{"labels":{"edited":"yes"}}}`)), "the other ServiceAccount's write of something else")
	if err := patch(other, []byte(`{"metadata":{"annotations":{"timeout.amphitheatre.app/reminders":null}}}`)); !apierrors.IsForbidden(err) {
		t.Errorf("the other ServiceAccount removing the record: %v, want it refused", err)
	}
	got, err := dyn.Resource(playbooks).Get(ctx, pb.GetName(), metav1.GetOptions{})
	must(t, err, "read the Playbook back")
	if v := got.GetAnnotations()["timeout.amphitheatre.app/reminders"]; !strings.Contains(v, "2030-01-01") {
		t.Errorf("reminders record %q, want the controller's", v)
	}
}
