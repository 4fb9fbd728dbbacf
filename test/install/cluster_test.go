// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package install

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

var (
	playbooks = schema.GroupVersionResource{Group: "amphitheatre.app", Version: "v1", Resource: "playbooks"}
	policies  = schema.GroupVersionResource{Group: "timeout.amphitheatre.app", Version: "v1alpha1", Resource: "timeoutpolicies"}
	channels  = schema.GroupVersionResource{Group: "timeout.amphitheatre.app", Version: "v1alpha1", Resource: "notificationchannels"}
	crds      = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// saUser is the name the API server knows the controller's service account by.
var saUser = "system:serviceaccount:" + namespace + ":" + serviceAccount

// TestInstallWorksWithItsOwnPermissions applies config/default to a real
// API server, as `kubectl apply --server-side -k config/default` does, and
// runs the controller binary with a token of the ServiceAccount it
// installs, so that the API server authorizes every request against the
// installed roles alone. The controller must do its whole job: take the
// Lease, read its Secret, remind, delete on time, record its Events, and
// hand the Lease back, without one request being forbidden.
func TestInstallWorksWithItsOwnPermissions(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, which builds the control plane (etcd, kube-apiserver, kube-controller-manager) and sets it")
	}
	manifests := decode(t, kustomize(t, "config/default"))
	binary := buildController(t)

	env := &envtest.Environment{
		// Amphitheatre's CRDs stand for Amphitheatre's install; ours comes
		// from config/default below.
		CRDDirectoryPaths:     []string{filepath.Join(root, "third_party", "amphitheatre", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	// envtest defaults to RBAC; say so, so that a change of default cannot
	// quietly let every request through.
	env.ControlPlane.GetAPIServer().Configure().Set("authorization-mode", "RBAC")
	admin, err := env.Start()
	must(t, err, "start the control plane")
	t.Cleanup(func() { _ = env.Stop() })

	ctx := t.Context()
	dyn := dynamic.NewForConfigOrDie(admin)
	clients := kubernetes.NewForConfigOrDie(admin)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(clients.Discovery()))

	start := time.Now()
	apply(t, dyn, mapper, manifests)
	t.Logf("applied %d objects in %s", len(manifests), time.Since(start).Round(time.Millisecond))

	t.Run("the pod template passes the restricted Pod Security Standard", func(t *testing.T) {
		d := convert[appsv1.Deployment](t, find(t, manifests, "Deployment", deployment))
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "pss-check", Namespace: namespace, Labels: d.Spec.Template.Labels},
			Spec:       d.Spec.Template.Spec,
		}
		// The namespace enforces "restricted"; a dry run goes through
		// admission without creating anything.
		_, err := clients.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Errorf("a pod of the Deployment is refused: %v", err)
		}
	})

	// The notification Secret lives in the controller's namespace, the only
	// one it may read Secrets from.
	signingKey := "install-test-" + string(uuid.NewUUID())
	_, err = clients.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "install-test-webhook", Namespace: namespace},
		StringData: map[string]string{"key": signingKey},
	}, metav1.CreateOptions{})
	must(t, err, "create the webhook Secret")
	hooks := newReceiver(t, signingKey)

	token, err := clients.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	must(t, err, "request a token for the installed ServiceAccount")
	asController := rest.AnonymousClientConfig(admin)
	asController.BearerToken = token.Status.Token
	checkIdentity(t, asController)
	checkAccess(t, clients)

	kubeconfig := writeKubeconfig(t, asController)
	probeAddr, metricsAddr := freeAddr(t), freeAddr(t)
	ctrl := runController(t, binary, manifests,
		"--kubeconfig="+kubeconfig,
		// Out of the cluster there is no service account namespace file.
		"--leader-election-namespace="+namespace,
		"--secret-namespace="+namespace,
		"--cluster-event-namespace=kube-system",
		"--health-probe-bind-address="+probeAddr,
		"--metrics-bind-address="+metricsAddr,
		"--webhook-port="+freePort(t),
	)

	t.Run("takes the Lease", func(t *testing.T) {
		fixture.Eventually(t, 30*time.Second, "Lease held", func() (bool, error) {
			l, err := clients.CoordinationV1().Leases(namespace).Get(ctx, leaseName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return ptr.Deref(l.Spec.HolderIdentity, "") != "", errors.New("no holder")
		})
		// client-go's leader election records a core/v1 Event about the
		// Lease in the Lease's namespace.
		fixture.Eventually(t, 10*time.Second, "LeaderElection Event", func() (bool, error) {
			list, err := clients.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, e := range list.Items {
				if e.Reason == "LeaderElection" && e.InvolvedObject.Kind == "Lease" && e.InvolvedObject.Name == leaseName {
					return true, nil
				}
			}
			return false, fmt.Errorf("%d Events in %s, none about the Lease", len(list.Items), namespace)
		})
	})

	t.Run("serves its probes and metrics", func(t *testing.T) {
		for _, url := range []string{"http://" + probeAddr + "/healthz", "http://" + probeAddr + "/readyz"} {
			fixture.Eventually(t, 10*time.Second, url, func() (bool, error) {
				resp, err := http.Get(url)
				if err != nil {
					return false, err
				}
				_ = resp.Body.Close()
				return resp.StatusCode == http.StatusOK, errors.New(resp.Status)
			})
		}
		// Metrics are for authorized scrapers only (test/integration
		// checks that one with a token gets them).
		insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the controller's self-signed certificate
		fixture.Eventually(t, 10*time.Second, "metrics refuse a caller without a token", func() (bool, error) {
			resp, err := insecure.Get("https://" + metricsAddr + "/metrics")
			if err != nil {
				return false, err
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusUnauthorized, errors.New(resp.Status)
		})
	})

	t.Run("makes the shipped policy ready", func(t *testing.T) {
		waitReady(t, dyn, "playbooks")
	})

	t.Run("reminds and deletes a Playbook on time", func(t *testing.T) {
		// The shipped policy, on a scale of seconds, with a webhook channel
		// whose signing key is in the Secret.
		channel := map[string]any{
			"apiVersion": policies.GroupVersion().String(),
			"kind":       "NotificationChannel",
			"metadata":   map[string]any{"name": "install-test"},
			"spec": map[string]any{"webhook": map[string]any{
				"url":       hooks.URL,
				"secretRef": map[string]any{"namespace": namespace, "name": "install-test-webhook", "key": "key"},
			}},
		}
		_, err := dyn.Resource(channels).Apply(ctx, "install-test", &unstructured.Unstructured{Object: channel},
			metav1.ApplyOptions{FieldManager: "install-test", Force: true})
		must(t, err, "create the NotificationChannel")
		// Without config/admission nothing stamps the policy's author: a
		// channel serves it only when granted to every authenticated user,
		// as the administrator does here for this one channel.
		_, err = clients.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "install-test-channel"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"timeout.amphitheatre.app"}, Resources: []string{"notificationchannels"},
				ResourceNames: []string{"install-test"}, Verbs: []string{"use"}}},
		}, metav1.CreateOptions{})
		must(t, err, "create the ClusterRole that grants the channel")
		_, err = clients.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "install-test-channel"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "install-test-channel"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"}},
		}, metav1.CreateOptions{})
		must(t, err, "bind it")
		patch := map[string]any{
			"apiVersion": policies.GroupVersion().String(),
			"kind":       "TimeoutPolicy",
			"metadata":   map[string]any{"name": "playbooks"},
			"spec": map[string]any{
				"defaultTTL":    "8s",
				"reminders":     []any{"4s"},
				"minimumNotice": "2s",
				"notifications": map[string]any{"channels": []any{map[string]any{"name": "install-test"}}},
				// Into the default install's archive: a Secret in its own
				// namespace, with the permissions it ships with.
				"deletion": map[string]any{"archive": true},
			},
		}
		_, err = dyn.Resource(policies).Apply(ctx, "playbooks", &unstructured.Unstructured{Object: patch},
			metav1.ApplyOptions{FieldManager: "install-test", Force: true})
		must(t, err, "patch the policy")
		waitReady(t, dyn, "playbooks")

		pb := newPlaybook()
		created, err := dyn.Resource(playbooks).Create(ctx, pb, metav1.CreateOptions{})
		must(t, err, "create a Playbook")
		expiry := created.GetCreationTimestamp().Add(8 * time.Second)

		var gone time.Time
		fixture.Eventually(t, 30*time.Second, "Playbook deleted", func() (bool, error) {
			_, err := dyn.Resource(playbooks).Get(ctx, created.GetName(), metav1.GetOptions{})
			if err == nil {
				return false, errors.New("still there")
			}
			gone = time.Now()
			return true, nil
		})
		if _, err := clients.CoreV1().Secrets(namespace).Get(ctx, "timeout-archive-"+string(created.GetUID()), metav1.GetOptions{}); err != nil {
			t.Errorf("deleted without its archive Secret: %v", err)
		}
		// Polled every 50ms, against a creation time in whole seconds.
		if gone.Before(expiry) {
			t.Errorf("deleted %s before its expiry", expiry.Sub(gone))
		}
		if late := gone.Sub(expiry); late > 3*time.Second {
			t.Errorf("deleted %s after its expiry", late)
		}

		fixture.Eventually(t, 10*time.Second, "Events about the Playbook", func() (bool, error) {
			list, err := clients.EventsV1().Events("kube-system").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			var reasons []string
			for _, e := range list.Items {
				if e.Regarding.UID == created.GetUID() && e.ReportingController == "timeout-controller" {
					reasons = append(reasons, e.Reason)
				}
			}
			for _, want := range []string{"MessageSent", "Expired", "Deleted"} {
				if !slices.Contains(reasons, want) {
					return false, fmt.Errorf("reasons %v lack %s", reasons, want)
				}
			}
			return true, nil
		})
		if got := hooks.types(created.GetName()); !slices.Contains(got, "app.amphitheatre.timeout.reminder") {
			t.Errorf("the webhook got %v, no signed reminder", got)
		}
		// Through the outbox, a ConfigMap in the controller's namespace.
		fixture.Eventually(t, 15*time.Second, "the deleted message", func() (bool, error) {
			got := hooks.types(created.GetName())
			return slices.Contains(got, "app.amphitheatre.timeout.deleted"), fmt.Errorf("the webhook got %v", got)
		})
	})

	t.Run("hands the Lease back when stopped", func(t *testing.T) {
		ctrl.stop(t)
		l, err := clients.CoordinationV1().Leases(namespace).Get(ctx, leaseName, metav1.GetOptions{})
		must(t, err, "get the Lease")
		if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "" {
			t.Errorf("the Lease is still held by %s", h)
		}
	})

	t.Run("no request was forbidden", func(t *testing.T) {
		ctrl.stop(t)
		for _, line := range ctrl.lines() {
			if strings.Contains(strings.ToLower(line), "forbidden") {
				t.Errorf("controller log: %s", line)
			}
		}
	})
	if t.Failed() {
		t.Logf("controller log:\n%s", strings.Join(ctrl.lines(), "\n"))
	}
}

// buildController builds the controller as the Dockerfile does.
func buildController(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "timeout-controller")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/timeout-controller")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/timeout-controller: %v\n%s", err, out)
	}
	return bin
}

// apply server-side applies objs in order. Like a second `kubectl apply`,
// it waits for the CRDs it applied to be established before the objects
// of their kinds.
func apply(t *testing.T, dyn dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := t.Context()
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			waitEstablished(t, dyn, objs)
			mapper.Reset()
			mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
		must(t, err, "map %s", gvk)

		namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
		if namespaced != !clusterScoped[gvk.Kind] {
			t.Errorf("%s is namespaced=%t on the API server, but this test's list says otherwise", gvk.Kind, namespaced)
		}
		if !namespaced && obj.GetNamespace() != "" && kustomizeNamespaces[gvk.Kind] {
			// kustomize's namespace transformer does not know this kind
			// is cluster-scoped; kubectl drops the namespace of a
			// cluster-scoped object, and so does this.
			obj = obj.DeepCopy()
			obj.SetNamespace("")
		}
		if namespaced && obj.GetNamespace() == "" || !namespaced && obj.GetNamespace() != "" {
			t.Fatalf("%s %s: namespace %q does not fit its scope", gvk.Kind, obj.GetName(), obj.GetNamespace())
		}
		_, err = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace()).Apply(ctx, obj.GetName(), obj,
			metav1.ApplyOptions{FieldManager: "kubectl", Force: true})
		must(t, err, "apply %s %s", gvk.Kind, obj.GetName())
	}
}

func waitEstablished(t *testing.T, dyn dynamic.Interface, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, obj := range objs {
		if obj.GetKind() != "CustomResourceDefinition" {
			continue
		}
		fixture.Eventually(t, 30*time.Second, "CRD "+obj.GetName()+" established", func() (bool, error) {
			u, err := dyn.Resource(crds).Get(t.Context(), obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				if c, _ := c.(map[string]any); c["type"] == "Established" && c["status"] == "True" {
					return true, nil
				}
			}
			return false, errors.New("not established")
		})
	}
}

// checkIdentity makes sure the controller's credentials are the
// ServiceAccount's, not the test's administrator's.
func checkIdentity(t *testing.T, cfg *rest.Config) {
	t.Helper()
	review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().
		Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	must(t, err, "review the token's identity")
	if u := review.Status.UserInfo; u.Username != saUser || slices.Contains(u.Groups, "system:masters") {
		t.Fatalf("the controller would run as %s in %v, not as %s alone", u.Username, u.Groups, saUser)
	}
}

// checkAccess asks the authorizer what the ServiceAccount may do: what the
// controller needs, yes; a selection of what it must not, no. The run
// below shows that what it may do is enough.
func checkAccess(t *testing.T, clients kubernetes.Interface) {
	t.Helper()
	type access struct {
		verb, group, resource, namespace, name string
		allowed                                bool
	}
	for _, a := range []access{
		{"get", "", "secrets", namespace, "any", true},
		{"get", "", "secrets", "default", "any", false},
		{"get", "", "secrets", "kube-system", "any", false},
		// The cluster archive: a Secret per archived manifest, in its own
		// namespace only, listed but never watched.
		{"list", "", "secrets", namespace, "", true},
		{"create", "", "secrets", namespace, "", true},
		{"delete", "", "secrets", namespace, "any", true},
		{"list", "", "secrets", "default", "", false},
		{"create", "", "secrets", "default", "", false},
		{"watch", "", "secrets", namespace, "", false},
		{"create", "coordination.k8s.io", "leases", namespace, "", true},
		{"update", "coordination.k8s.io", "leases", namespace, leaseName, true},
		{"update", "coordination.k8s.io", "leases", namespace, "someone-elses-lease", false},
		{"create", "coordination.k8s.io", "leases", "default", "", false},
		{"delete", "coordination.k8s.io", "leases", namespace, leaseName, false},
		{"create", "", "configmaps", namespace, "", true},
		{"list", "", "configmaps", namespace, "", true},
		{"delete", "", "configmaps", namespace, "any", true},
		{"watch", "", "configmaps", namespace, "", false},
		{"list", "", "configmaps", "default", "", false},
		{"create", "", "configmaps", "kube-system", "", false},
		{"create", "", "events", namespace, "", true},
		{"create", "", "events", "default", "", false},
		{"create", "events.k8s.io", "events", "kube-system", "", true},
		{"delete", "amphitheatre.app", "playbooks", "", "any", true},
		{"update", "amphitheatre.app", "playbooks", "", "any", false},
		{"create", "amphitheatre.app", "playbooks", "", "", false},
		{"update", "timeout.amphitheatre.app", "timeoutpolicies", "", "any", false},
		{"delete", "", "namespaces", "", "any", false},
		{"create", "", "pods", namespace, "", false},
		{"impersonate", "", "users", "", "", false},
	} {
		review, err := clients.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   saUser,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: a.verb, Group: a.group, Resource: a.resource, Namespace: a.namespace, Name: a.name,
				},
			},
		}, metav1.CreateOptions{})
		must(t, err, "review access")
		if review.Status.Allowed != a.allowed {
			t.Errorf("%s %s.%s %q in %q: allowed=%t, want %t", a.verb, a.resource, a.group, a.name, a.namespace, review.Status.Allowed, a.allowed)
		}
	}
}

func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["timeout-controller"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "timeout-controller"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	must(t, clientcmd.WriteToFile(*kc, path), "write the kubeconfig")
	return path
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := testenv.FreeAddr()
	must(t, err, "find a free port")
	return addr
}

// freePort is a port no one listens on, for the webhook: tests of other
// packages run binaries on this host at the same time.
func freePort(t *testing.T) string {
	t.Helper()
	_, port, err := net.SplitHostPort(freeAddr(t))
	must(t, err, "split the free address")
	return port
}

// controller is the controller binary running as a process.
type controller struct {
	cmd  *exec.Cmd
	done chan error
	mu   sync.Mutex
	out  bytes.Buffer
	once sync.Once
}

func (c *controller) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}

func (c *controller) lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(c.out.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// stop sends SIGTERM, as the kubelet does, and waits for a clean exit
// within the Deployment's grace period.
func (c *controller) stop(t *testing.T) {
	t.Helper()
	c.once.Do(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-c.done:
			if err != nil {
				t.Errorf("the controller exited with %v", err)
			}
		case <-time.After(45 * time.Second):
			_ = c.cmd.Process.Kill()
			t.Errorf("the controller did not stop within 45s of SIGTERM; killed: %v", <-c.done)
		}
	})
}

// runController starts binary with the args and environment of the
// installed Deployment's container, followed by extra, which override
// (the last value of a flag wins).
func runController(t *testing.T, binary string, manifests []*unstructured.Unstructured, extra ...string) *controller {
	t.Helper()
	d := convert[appsv1.Deployment](t, find(t, manifests, "Deployment", deployment))
	container := d.Spec.Template.Spec.Containers[0]
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for _, e := range container.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, e.Name+"="+d.Namespace)
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		default:
			t.Fatalf("env %s: only values and metadata.namespace are simulated", e.Name)
		}
	}
	c := &controller{done: make(chan error, 1)}
	c.cmd = exec.Command(binary, append(slices.Clone(container.Args), extra...)...)
	c.cmd.Env = env
	c.cmd.Stdout, c.cmd.Stderr = c, c
	must(t, c.cmd.Start(), "start the controller")
	go func() { c.done <- c.cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case err := <-c.done:
			// Stopped already: its exit was checked where it was stopped.
			_ = err
		default:
			_ = c.cmd.Process.Kill()
		}
	})
	return c
}

func waitReady(t *testing.T, dyn dynamic.Interface, name string) {
	t.Helper()
	fixture.Eventually(t, 30*time.Second, "policy "+name+" ready", func() (bool, error) {
		u, err := dyn.Resource(policies).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			c, _ := c.(map[string]any)
			if c["type"] == "Ready" {
				return c["status"] == "True" && observed == u.GetGeneration(),
					fmt.Errorf("Ready=%v (%v: %v), generation %d observed %d", c["status"], c["reason"], c["message"], u.GetGeneration(), observed)
			}
		}
		return false, errors.New("no Ready condition")
	})
}

// newPlaybook returns a Playbook as Amphitheatre's API server makes one.
func newPlaybook() *unstructured.Unstructured {
	id := string(uuid.NewUUID())
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "amphitheatre.app/v1",
		"kind":       "Playbook",
		"metadata":   map[string]any{"name": id},
		"spec": map[string]any{
			"id":      id,
			"title":   "install test",
			"preface": map[string]any{"repository": map[string]any{"repo": "https://github.com/amphitheatre-app/amp-example-go"}},
		},
	}}
}

// receiver is a webhook endpoint that accepts only deliveries signed
// with the key in the Secret, the Standard Webhooks way.
type receiver struct {
	*httptest.Server
	key []byte
	mu  sync.Mutex
	got map[string][]string // subject -> event types
	bad []string
}

func newReceiver(t *testing.T, key string) *receiver {
	rc := &receiver{key: []byte(key), got: map[string][]string{}}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	t.Cleanup(func() {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if len(rc.bad) > 0 {
			t.Errorf("the webhook receiver refused: %v", rc.bad)
		}
	})
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	mac := hmac.New(sha256.New, rc.key)
	fmt.Fprintf(mac, "%s.%s.%s", r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	var ev struct{ Type, Subject string }
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !hmac.Equal([]byte(r.Header.Get("webhook-signature")), []byte(want)) || json.Unmarshal(body, &ev) != nil {
		rc.bad = append(rc.bad, "unsigned or unreadable: "+string(body))
		http.Error(w, "rejected", http.StatusBadRequest)
		return
	}
	rc.got[ev.Subject] = append(rc.got[ev.Subject], ev.Type)
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) types(subject string) []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got[subject])
}
