// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/certs"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/usage"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/plugin"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// connectWebhook is the controller's connection webhook, served as main
// serves it (its own manager, every replica's part: no leader election)
// on 127.0.0.1, with the certificate it keeps itself, and registered with
// the shipped configuration narrowed to one namespace and pointed at it.
type connectWebhook struct {
	name string
	stop func()
	// url is where it is served; serving the certificates roots trust.
	url   string
	roots *x509.CertPool
}

// startConnectWebhook serves the webhook for connections to Pods in
// namespace; t's cleanup stops it and removes its registration.
func startConnectWebhook(t *testing.T, name, namespace string) *connectWebhook {
	t.Helper()
	return serveConnectWebhook(t, name, namespace, "")
}

// serveConnectWebhook is startConnectWebhook with --webhook-client-ca
// clientCA when it is not empty.
func serveConnectWebhook(t *testing.T, name, namespace, clientCA string) *connectWebhook {
	t.Helper()
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()

	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "webhook", "validatingwebhookconfiguration.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := yaml.Unmarshal(raw, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Name = name
	for i := range cfg.Webhooks {
		w := &cfg.Webhooks[i]
		w.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", port, usage.ConnectPath))}
		w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: namespace}}
	}
	if err := k8s.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	secret := types.NamespacedName{Namespace: outboxNamespace, Name: name}
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), cfg)
		_ = k8s.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secret.Namespace, Name: secret.Name}})
	})

	rot := &certs.Rotator{Reader: k8s, Writer: k8s, Secret: secret, Webhook: name, DNSNames: []string{"127.0.0.1"}, Clock: clock.RealClock{}}
	tlsOpts := []func(*tls.Config){func(c *tls.Config) {
		c.GetCertificate = rot.GetCertificate
	}}
	// What the flag does, and the certificate the readiness check below
	// shows.
	var clientCerts []tls.Certificate
	if clientCA != "" {
		require, err := certs.RequireClientCert(clientCA)
		if err != nil {
			t.Fatal(err)
		}
		tlsOpts = append(tlsOpts, require)
		cert, err := tls.LoadX509KeyPair(webhookClient.Cert, webhookClient.Key)
		if err != nil {
			t.Fatal(err)
		}
		clientCerts = []tls.Certificate{cert}
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 testScheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		WebhookServer:          webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, TLSOpts: tlsOpts}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := usage.SetupConnections(mgr, nil); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(rot); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	w := &connectWebhook{name: name, url: *cfg.Webhooks[0].ClientConfig.URL}
	var once sync.Once
	w.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("webhook manager: %v", err)
			}
		})
	}
	t.Cleanup(w.stop)

	// Up when it answers over TLS with a certificate the registered
	// caBundle trusts.
	fixture.Eventually(t, 20*time.Second, "the webhook serving a certificate its caBundle trusts", func() (bool, error) {
		got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: name}, got); err != nil {
			return false, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(got.Webhooks[0].ClientConfig.CABundle) {
			return false, nil
		}
		conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: clientCerts})
		if err != nil {
			return false, nil
		}
		w.roots = pool
		return true, conn.Close()
	})
	return w
}

// connectAs sends a connection request (exec, attach or portforward) to
// the Pod as user (nil: the suite's administrator), and returns its
// error: with no kubelet here, every one fails once admitted.
func connectAs(cs kubernetes.Interface, namespace, pod, subresource string) error {
	req := cs.CoreV1().RESTClient().Post().Namespace(namespace).Resource("pods").Name(pod).SubResource(subresource)
	switch subresource {
	case "exec":
		req = req.Param("command", "sh").Param("stdin", "true").Param("stdout", "true")
	case "portforward":
		req = req.Param("ports", "8080")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return req.Do(ctx).Error()
}

// connector returns a clientset acting as user.
func connector(t *testing.T, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	cfg.QPS, cfg.Burst = 1000, 1000
	return kubernetes.NewForConfigOrDie(cfg)
}

// impersonatingDynamic returns a dynamic client acting as user.
func impersonatingDynamic(t *testing.T, user string) dynamic.Interface {
	t.Helper()
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	return dynamic.NewForConfigOrDie(cfg)
}

// deployForConnections deploys a Playbook as Amphitheatre does, with one
// Pod, governed by an idle policy whose activity window is idleTTL/20,
// and returns it, its namespace and its Pod.
func deployForConnections(t *testing.T, test string, idleTTL string) (*tracked, string, string) {
	t.Helper()
	ctx := context.Background()
	createPolicy(t, test, idlePolicy(test, "1h", v1alpha1.Duration(idleTTL)))
	pb := newPlaybook(test, test, nil)
	if err := testenv.Deploy(ctx, k8s, pb, []testenv.Actor{{Name: "web", Replicas: 1, CPU: "10m", Memory: "16Mi"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pb) })
	ns := testenv.Namespace(pb.GetName())
	var pod string
	fixture.Eventually(t, 20*time.Second, "the Deployment's Pod", func() (bool, error) {
		var pods corev1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, err
		}
		if len(pods.Items) == 0 {
			return false, nil
		}
		pod = pods.Items[0].Name
		return true, nil
	})
	return &tracked{Unstructured: pb}, ns, pod
}

// lastUseOf returns the Playbook's annotations, and the use its
// last-active names.
func lastUseOf(t *testing.T, name string) (map[string]string, expiry.Use, bool) {
	t.Helper()
	pb, err := dyn.Resource(playbooks).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u, ok := expiry.LastUse(pb.GetAnnotations())
	return pb.GetAnnotations(), u, ok
}

func awaitUse(t *testing.T, name, via, by string, after time.Time) expiry.Use {
	t.Helper()
	var u expiry.Use
	fixture.Eventually(t, 10*time.Second, fmt.Sprintf("last-use %s by %s", via, by), func() (bool, error) {
		var ok bool
		_, u, ok = lastUseOf(t, name)
		return ok && u.Via == via && u.By == by && !u.At.Before(after.Truncate(time.Second)), nil
	})
	return u
}

func TestExecAttachAndPortForwardToAPlaybooksPodMoveItsIdleClock(t *testing.T) {
	t.Parallel()
	const test = "connect-moves"
	// A window of a second: the second connection is worth a write too.
	pb, ns, pod := deployForConnections(t, test, "20s")
	startConnectWebhook(t, test, ns)

	before := time.Now()
	if err := connectAs(connector(t, "alice", "system:masters"), ns, pod, "exec"); err == nil {
		t.Fatal("an exec with no kubelet succeeded")
	}
	u := awaitUse(t, pb.GetName(), expiry.ViaExec, "alice", before)
	t.Logf("exec recorded: %+v", u)

	time.Sleep(1100 * time.Millisecond) // past the window: not an assertion
	before = time.Now()
	if err := connectAs(connector(t, "bob", "system:masters"), ns, pod, "portforward"); err == nil {
		t.Fatal("a port-forward with no kubelet succeeded")
	}
	awaitUse(t, pb.GetName(), expiry.ViaPortForward, "bob", before)

	time.Sleep(1100 * time.Millisecond) // past the window: not an assertion
	before = time.Now()
	if err := connectAs(connector(t, "dave", "system:masters"), ns, pod, "attach"); err == nil {
		t.Fatal("an attach with no kubelet succeeded")
	}
	awaitUse(t, pb.GetName(), expiry.ViaAttach, "dave", before)
	time.Sleep(1100 * time.Millisecond)
	if err := connectAs(connector(t, "bob", "system:masters"), ns, pod, "portforward"); err == nil {
		t.Fatal("a port-forward with no kubelet succeeded")
	}
	awaitUse(t, pb.GetName(), expiry.ViaPortForward, "bob", before)

	// The plugin names the use.
	out := kubectlTimeout(t, "explain", pb.GetName()).expect(t, plugin.ExitOK).out
	mustContain(t, out, "portforward by bob")
}

// Not parallel: it counts the webhook's writes in its metric, which the
// other connection tests would add to.
func TestAFloodOfExecsWritesOnePatchPerWindow(t *testing.T) {
	const test = "connect-flood"
	// A window of three minutes: the whole flood is in one.
	pb, ns, pod := deployForConnections(t, test, "1h")
	startConnectWebhook(t, test, ns)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := dyn.Resource(playbooks).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pb.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	uses := make(chan int, 1)
	go func() {
		seen := map[string]bool{}
		for ev := range w.ResultChan() {
			if ev.Type != watch.Modified && ev.Type != watch.Added {
				continue
			}
			if v := annotationsOf(ev.Object)[expiry.AnnotationLastUse]; v != "" {
				seen[v] = true
			}
		}
		uses <- len(seen)
	}()

	cs := connector(t, "flood", "system:masters")
	results := func() map[string]float64 {
		m := map[string]float64{}
		for _, r := range []string{"recorded", "throttled", "dropped", "failed", "ungoverned"} {
			m[r] = counter(t, "timeout_controller_connect_uses_total", map[string]string{"result": r})
		}
		return m
	}
	was := results()
	start := time.Now()
	var wg sync.WaitGroup
	var failed sync.Map
	for worker := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if err := connectAs(cs, ns, pod, "exec"); err != nil && !apierrors.IsBadRequest(err) {
					failed.Store(worker, err)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("1000 exec requests in %s", time.Since(start))
	failed.Range(func(k, v any) bool {
		t.Errorf("an exec failed otherwise than for want of a kubelet: %v", v)
		return false
	})
	awaitUse(t, pb.GetName(), expiry.ViaExec, "flood", start)
	// Whatever is still queued has had time to be written.
	time.Sleep(2 * time.Second)
	cancel()
	if n := <-uses; n != 1 {
		t.Errorf("%d distinct last-use values written during the flood, want 1", n)
	}
	now := results()
	for r := range now {
		now[r] -= was[r]
	}
	t.Logf("the flood's connections: %v", now)
	if now["recorded"] != 1 {
		t.Errorf("%v writes of use, want 1", now["recorded"])
	}
	if now["failed"] != 0 || now["ungoverned"] != 0 {
		t.Errorf("connections failed or found ungoverned: %v", now)
	}
	if now["recorded"]+now["throttled"]+now["dropped"] != 1000 {
		t.Errorf("%v connections seen, want 1000", now["recorded"]+now["throttled"]+now["dropped"])
	}
}

func annotationsOf(obj any) map[string]string {
	if o, ok := obj.(metav1.Object); ok {
		return o.GetAnnotations()
	}
	return nil
}

func TestExecWorksTheSameWithTheWebhookDown(t *testing.T) {
	t.Parallel()
	const test = "connect-down"
	pb, ns, pod := deployForConnections(t, test, "20s")
	cs := connector(t, "carol", "system:masters")
	without := connectAs(cs, ns, pod, "exec")
	if without == nil {
		t.Fatal("an exec with no kubelet succeeded")
	}

	w := startConnectWebhook(t, test, ns)
	with := connectAs(cs, ns, pod, "exec")
	awaitUse(t, pb.GetName(), expiry.ViaExec, "carol", time.Now().Add(-time.Minute))

	w.stop()
	start := time.Now()
	down := connectAs(cs, ns, pod, "exec")
	took := time.Since(start)
	for name, err := range map[string]error{"up": with, "down": down} {
		if !sameFailure(without, err) {
			t.Errorf("exec with the webhook %s: %v; without it: %v", name, err, without)
		}
	}
	t.Logf("exec with the webhook down answered in %s", took)
}

// sameFailure reports whether two failed requests failed alike: the
// same status code and reason.
func sameFailure(a, b error) bool {
	var sa, sb apierrors.APIStatus
	if !errors.As(a, &sa) || !errors.As(b, &sb) {
		return false
	}
	return sa.Status().Code == sb.Status().Code && sa.Status().Reason == sb.Status().Reason
}

func TestAUserWhoMayOnlyExecMovesNothingButTheLastUse(t *testing.T) {
	t.Parallel()
	const test = "connect-exec-only"
	pb, ns, pod := deployForConnections(t, test, "20s")
	startConnectWebhook(t, test, ns)

	// A name far past what last-use keeps, with characters JSON escapes.
	user := `mallory"}` + strings.Repeat("m", 300)
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exec-only"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exec-only"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if err := k8s.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	cs := connector(t, user)
	// The test means something: this user may not write the Playbook.
	fixture.Eventually(t, 10*time.Second, "the exec-only role in force", func() (bool, error) {
		err := connectAs(cs, ns, pod, "portforward")
		return apierrors.IsForbidden(err), nil
	})
	_, err := impersonatingDynamic(t, user).Resource(playbooks).Patch(ctx, pb.GetName(), types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"timeout.amphitheatre.app/keep":"true"}}}`), metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("the exec-only user patched the Playbook: %v", err)
	}

	beforeAnn, _, _ := lastUseOf(t, pb.GetName())
	beforeObj, err := dyn.Resource(playbooks).Get(ctx, pb.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if err := connectAs(cs, ns, pod, "exec"); apierrors.IsForbidden(err) || err == nil {
		t.Fatalf("exec as the exec-only user: %v", err)
	}
	u := awaitUse(t, pb.GetName(), expiry.ViaExec, strings.ToValidUTF8(user[:expiry.MaxUseBy], ""), before)
	after, err := dyn.Resource(playbooks).Get(ctx, pb.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Only the two annotations of use changed (and what the controller
	// itself keeps, which the user cannot reach).
	ignore := map[string]bool{expiry.AnnotationLastActive: true, expiry.AnnotationLastUse: true,
		expiry.AnnotationReminders: true, expiry.AnnotationActivity: true}
	strip := func(m map[string]string) map[string]string {
		out := maps.Clone(m)
		maps.DeleteFunc(out, func(k, _ string) bool { return ignore[k] })
		return out
	}
	if !maps.Equal(strip(beforeAnn), strip(after.GetAnnotations())) {
		t.Errorf("annotations changed: %v -> %v", beforeAnn, after.GetAnnotations())
	}
	if !maps.Equal(beforeObj.GetLabels(), after.GetLabels()) {
		t.Errorf("labels changed: %v -> %v", beforeObj.GetLabels(), after.GetLabels())
	}
	if fmt.Sprint(beforeObj.Object["spec"]) != fmt.Sprint(after.Object["spec"]) {
		t.Errorf("spec changed: %v -> %v", beforeObj.Object["spec"], after.Object["spec"])
	}
	if got := after.GetAnnotations()[expiry.AnnotationLastActive]; got != u.At.UTC().Format(time.RFC3339) {
		t.Errorf("last-active %s, last-use at %s", got, u.At)
	}
}

// forgeReview posts the AdmissionReview of a connection to pod in
// namespace by user straight to the webhook, as anything that reaches
// its Service can, presenting clientCerts; it returns the answer.
func forgeReview(w *connectWebhook, user authenticationv1.UserInfo, namespace, pod, subresource string, clientCerts ...tls.Certificate) (*admissionv1.AdmissionResponse, error) {
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:         types.UID(fmt.Sprintf("forged-%d", time.Now().UnixNano())),
			Kind:        metav1.GroupVersionKind{Version: "v1", Kind: "PodExecOptions"},
			Resource:    metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			SubResource: subresource, Namespace: namespace, Name: pod,
			Operation: admissionv1.Connect, UserInfo: user,
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: w.roots, ServerName: "127.0.0.1", Certificates: clientCerts},
	}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Post(w.url, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var answer admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return nil, fmt.Errorf("%s: %w", resp.Status, err)
	}
	if answer.Response == nil {
		return nil, fmt.Errorf("%s without a response", resp.Status)
	}
	return answer.Response, nil
}

// Anything that reaches the webhook's port can post it a review naming
// any user. One naming a user who may not connect to the Pod is answered
// (allowed, as every request is) and writes nothing, counted unverified,
// while a real exec by a user who may still counts.
func TestAReviewNamingAUserWhoMayNotConnectRecordsNothing(t *testing.T) {
	t.Parallel()
	const test = "connect-forged"
	pb, ns, pod := deployForConnections(t, test, "20s")
	w := startConnectWebhook(t, test, ns)
	mallory := authenticationv1.UserInfo{Username: "mallory", Groups: []string{"system:authenticated"}}
	// The test means something: mallory may not exec into the Pod.
	if err := connectAs(connector(t, mallory.Username), ns, pod, "exec"); !apierrors.IsForbidden(err) {
		t.Fatalf("exec as mallory: %v, want forbidden", err)
	}

	unverified := func() float64 {
		return counter(t, "timeout_controller_connect_uses_total", map[string]string{"result": "unverified"})
	}
	was := unverified()
	beforeAnn, _, _ := lastUseOf(t, pb.GetName())
	for _, sub := range []string{"exec", "attach", "portforward"} {
		answer, err := forgeReview(w, mallory, ns, pod, sub)
		if err != nil {
			t.Fatal(err)
		}
		if !answer.Allowed {
			t.Errorf("the forged %s was denied: %+v", sub, answer.Result)
		}
	}
	fixture.Eventually(t, 10*time.Second, "the forged reviews counted unverified", func() (bool, error) {
		return unverified() == was+3, nil
	})
	ann, u, ok := lastUseOf(t, pb.GetName())
	if ok || ann[expiry.AnnotationLastActive] != beforeAnn[expiry.AnnotationLastActive] {
		t.Errorf("the forged reviews recorded use: last-active %q, last-use %+v", ann[expiry.AnnotationLastActive], u)
	}

	before := time.Now()
	if err := connectAs(connector(t, "alice", "system:masters"), ns, pod, "exec"); err == nil {
		t.Fatal("an exec with no kubelet succeeded")
	}
	awaitUse(t, pb.GetName(), expiry.ViaExec, "alice", before)
}

// With --webhook-client-ca the webhook hears only callers with a client
// certificate the CA signs: the API server, whose admission configuration
// presents one (internal/testenv, as docs/reference/webhook.md shows). A
// review posted without one, or with one another CA signs, is refused at
// the handshake, even naming a user who may connect to the Pod.
func TestWithAClientCAOnlyTheAPIServerIsHeard(t *testing.T) {
	t.Parallel()
	const test = "connect-client-ca"
	pb, ns, pod := deployForConnections(t, test, "20s")
	w := serveConnectWebhook(t, test, ns, webhookClient.CA)

	admin := authenticationv1.UserInfo{Username: "kubernetes-admin", Groups: []string{"system:masters", "system:authenticated"}}
	_, certPEM, keyPEM := certs.NewClientCertificate(time.Now(), time.Hour, "kube-apiserver-webhook-client")
	other, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	for name, presented := range map[string][]tls.Certificate{"no certificate": nil, "a certificate another CA signs": {other}} {
		if answer, err := forgeReview(w, admin, ns, pod, "exec", presented...); err == nil {
			t.Errorf("a review with %s was answered: %+v", name, answer)
		} else {
			t.Logf("a review with %s: %v", name, err)
		}
	}
	if _, u, ok := lastUseOf(t, pb.GetName()); ok {
		t.Errorf("a refused review recorded %+v", u)
	}

	before := time.Now()
	if err := connectAs(connector(t, "alice", "system:masters"), ns, pod, "exec"); err == nil {
		t.Fatal("an exec with no kubelet succeeded")
	}
	awaitUse(t, pb.GetName(), expiry.ViaExec, "alice", before)
}
