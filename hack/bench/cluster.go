// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
)

// benchAuthor stamps the bench's policies as config/admission's mutating
// policy would for a cluster administrator, whom the controller then finds
// allowed to use the bench's channels. The bench's API server runs no
// admission policies.
var benchAuthor = map[string]string{v1alpha1.AnnotationAuthor: `{"username":"bench","groups":["system:masters","system:authenticated"]}`}

var playbooks = schema.GroupVersionResource{Group: "amphitheatre.app", Version: "v1", Resource: "playbooks"}

const (
	policyName      = "bench"
	secretNamespace = "bench-system"
	secretName      = "bench-webhook"
	secretKey       = "key"
)

// cluster is the local control plane and the bench's clients of it.
type cluster struct {
	plane      *testenv.Plane
	bin        string
	kubeconfig string
	// counter counts the bench's own requests, to take them out of the
	// API server's totals.
	counter *counter
	// pids are those of etcd, kube-apiserver and kube-controller-manager,
	// by name.
	pids    map[string]int
	client  client.Client
	dynamic dynamic.Interface
	meta    metadata.Interface
	kube    kubernetes.Interface
	rest    rest.Interface
	// stopFinalizer stops the stand-in for Amphitheatre's controller and
	// waits for it.
	stopFinalizer func()
}

// startCluster starts the local control plane (etcd, kube-apiserver with
// the TimeoutPolicy and Amphitheatre CRDs installed, kube-controller-manager)
// and the stand-in for Amphitheatre's controller that runs its finalizer,
// and builds the controller meanwhile.
func startCluster(ctx context.Context, root, tmp string) (*cluster, error) {
	cl := &cluster{bin: filepath.Join(tmp, "timeout-controller"), counter: &counter{}, stopFinalizer: func() {}}
	built := make(chan error, 1)
	go func() {
		// Built as the image builds it (Dockerfile): static, without cgo,
		// so that the memory measured is the memory shipped.
		build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", cl.bin, "./cmd/timeout-controller")
		build.Dir = root
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			built <- fmt.Errorf("build the controller: %w\n%s", err, out)
			return
		}
		built <- nil
	}()
	plane, startErr := testenv.Start(ctx, testenv.Options{Root: root})
	cl.plane = plane
	// The build writes into tmp: it must end before tmp is removed.
	if err := errors.Join(startErr, <-built); err != nil {
		return cl, err
	}
	cl.pids = controlPlane()
	if cm := plane.ControllerManager; cm != nil {
		// Its name is longer than the kernel keeps: known by its process.
		cl.pids["kube-controller-manager"] = cm.Pid
	}
	cl.kubeconfig = filepath.Join(tmp, "kubeconfig")
	if err := os.WriteFile(cl.kubeconfig, plane.Env.KubeConfig, 0o600); err != nil {
		return cl, err
	}

	cfg := rest.CopyConfig(plane.Config)
	// No client-side limit: the bench must create fast, and it makes no
	// request while it measures but its one watch.
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = "timeout-bench"
	cfg.Wrap(cl.counter.wrap)
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	var err error
	if cl.client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return cl, err
	}
	if cl.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return cl, err
	}
	if cl.meta, err = metadata.NewForConfig(cfg); err != nil {
		return cl, err
	}
	if cl.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return cl, err
	}
	rc, err := rest.UnversionedRESTClientFor(withNegotiatedSerializer(cfg))
	if err != nil {
		return cl, err
	}
	cl.rest = rc

	// Amphitheatre's controller removes its finalizer from a Playbook
	// being deleted. Through the bench's counted client: its requests are
	// not the controller's.
	fctx, cancel := context.WithCancel(ctx)
	wait, err := testenv.RunFinalizer(fctx, cfg)
	if err != nil {
		cancel()
		return cl, fmt.Errorf("run Amphitheatre's finalizer: %w", err)
	}
	cl.stopFinalizer = func() { cancel(); wait() }
	return cl, nil
}

func withNegotiatedSerializer(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	return cfg
}

func (cl *cluster) stop() {
	cl.stopFinalizer()
	if cl.plane != nil {
		_ = cl.plane.Stop()
	}
}

// createPolicy creates the webhook's Secret and the one policy: reminders
// by signed webhook, and no minimum notice, so that deletion times depend
// on the expiries alone.
func (cl *cluster) createPolicy(ctx context.Context, cfg config, rc *receiver) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secretNamespace}}
	if err := cl.client.Create(ctx, ns); err != nil {
		return fmt.Errorf("create namespace %s: %w", secretNamespace, err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: secretName},
		Data:       map[string][]byte{secretKey: []byte(rc.secret)},
	}
	if err := cl.client.Create(ctx, secret); err != nil {
		return fmt.Errorf("create Secret: %w", err)
	}
	reminders := []v1alpha1.Duration{}
	if cfg.Reminders > 0 {
		reminders = append(reminders, v1alpha1.Duration(expiry.FormatDuration(cfg.Reminders)))
	}
	channel := &v1alpha1.NotificationChannel{
		ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec: v1alpha1.NotificationChannelSpec{Webhook: &v1alpha1.WebhookChannel{URL: rc.url,
			SecretRef: v1alpha1.SecretKeySelector{Namespace: secretNamespace, Name: secretName, Key: secretKey}}},
	}
	if err := cl.client.Create(ctx, channel); err != nil {
		return fmt.Errorf("create NotificationChannel: %w", err)
	}
	if cfg.Slow > 0 {
		if err := cl.createSlowPolicy(ctx, rc); err != nil {
			return err
		}
	}
	policy := &v1alpha1.TimeoutPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName, Annotations: benchAuthor},
		Spec: v1alpha1.TimeoutPolicySpec{
			Target:        v1alpha1.Target{APIVersion: "amphitheatre.app/v1", Kind: "Playbook"},
			DefaultTTL:    "14d",
			Reminders:     reminders,
			MinimumNotice: "0s",
			Notifications: v1alpha1.Notifications{Channels: []v1alpha1.ChannelReference{{Name: channel.Name}}},
		},
	}
	// The Playbooks of the other policies are not this one's.
	var others []metav1.LabelSelectorRequirement
	if cfg.Slow > 0 {
		others = append(others, metav1.LabelSelectorRequirement{Key: slowLabel, Operator: metav1.LabelSelectorOpDoesNotExist})
	}
	if cfg.Sleepers > 0 {
		others = append(others, metav1.LabelSelectorRequirement{Key: sleeperLabel, Operator: metav1.LabelSelectorOpDoesNotExist})
	}
	if cfg.Touch > 0 {
		others = append(others, metav1.LabelSelectorRequirement{Key: usedLabel, Operator: metav1.LabelSelectorOpDoesNotExist})
		if err := cl.createUsedPolicy(ctx, cfg, channel.Name); err != nil {
			return err
		}
	}
	if len(others) > 0 {
		policy.Spec.Selector = &metav1.LabelSelector{MatchExpressions: others}
	}
	if err := cl.client.Create(ctx, policy); err != nil {
		return fmt.Errorf("create TimeoutPolicy: %w", err)
	}
	return nil
}

// population is the Playbooks the run created and when each expires.
type population struct {
	expiresAt map[string]time.Time
	// expiring are the names of those that expire during the run.
	expiring          []string
	firstDue, lastDue time.Time
	// slow are the Playbooks reminded through the slow SMTP server, all
	// due at slowDue.
	slow    []string
	slowDue time.Time
	// touched are the Playbooks the run edits (-touch), under the policy
	// usedPolicyName.
	touched []string
	took    time.Duration
	created time.Time
}

// populate creates the Playbooks: first those that expire a day later,
// then the expiring ones, whose expiries are chosen only then so that the
// margin holds however long the first part took.
func (cl *cluster) populate(ctx context.Context, cfg config) (*population, error) {
	pop := &population{expiresAt: make(map[string]time.Time, cfg.N)}
	start := time.Now()
	later := cfg.N - cfg.Expiring
	far := start.Add(24 * time.Hour).Truncate(time.Second)
	farAt := func(i int) time.Time { return far.Add(time.Duration(i%3600) * time.Second) }
	if err := cl.create(ctx, cfg, touchedCount(cfg), farAt, touched, pop); err != nil {
		return nil, err
	}
	if err := cl.create(ctx, cfg, later-touchedCount(cfg), farAt, others, pop); err != nil {
		return nil, err
	}

	// Allow for creating the expiring ones at a conservative rate, of
	// objects: with -owned, each comes with its namespace and workload,
	// and kube-controller-manager writes their ReplicaSets, Pods and
	// Events meanwhile (176 objects/s on a loaded two-core machine).
	rate := 500.0
	if cfg.Owned {
		rate = 150
	}
	if later > 0 {
		rate = min(rate, float64(later)/time.Since(start).Seconds())
	}
	estimate := time.Duration(float64(cfg.Expiring*objectsPerExpiring(cfg)) / rate * float64(time.Second))
	windowStart := time.Now().Add(estimate + cfg.Margin + cfg.Reminders).Truncate(time.Second).Add(time.Second)
	spread := cfg.Expiring - cfg.Burst
	burstAt := windowStart.Add(cfg.Window / 2).Truncate(time.Second)
	at := func(i int) time.Time {
		if i < cfg.Burst {
			return burstAt
		}
		i -= cfg.Burst
		return windowStart.Add(time.Duration(int64(cfg.Window) * int64(i) / int64(spread))).Truncate(time.Second)
	}
	if err := cl.create(ctx, cfg, cfg.Expiring, at, expiring, pop); err != nil {
		return nil, err
	}
	if cfg.Slow > 0 {
		// Their reminders all fall due in one second, a quarter into the
		// window, while the expiring ones are being deleted; they expire
		// long after the run.
		pop.slowDue = windowStart.Add(cfg.Window / 4).Truncate(time.Second)
		slowAt := func(int) time.Time { return pop.slowDue.Add(slowLead) }
		if err := cl.create(ctx, cfg, cfg.Slow, slowAt, slow, pop); err != nil {
			return nil, err
		}
	}
	pop.created = time.Now()
	pop.took = pop.created.Sub(start)
	for _, name := range pop.expiring {
		at := pop.expiresAt[name]
		if pop.lastDue.IsZero() || at.After(pop.lastDue) {
			pop.lastDue = at
		}
		if due := at.Add(-cfg.Reminders); pop.firstDue.IsZero() || due.Before(pop.firstDue) {
			pop.firstDue = due
		}
	}
	if len(pop.expiring) == 0 {
		// A run for the cold start and memory alone still gives the
		// controller the margin to start in.
		pop.firstDue = pop.created.Add(cfg.Margin)
		pop.lastDue = pop.firstDue
	}
	return pop, nil
}

// The roles a created Playbook has in the run.
const (
	// others expire a day later.
	others = iota
	// expiring expire during the run: their deletions and reminders are
	// measured.
	expiring
	// slow are reminded through the slow SMTP server (-slow).
	slow
	// touched expire a day later and are edited during the run (-touch).
	touched
)

// create makes n Playbooks of one role, the i-th expiring at at(i), with
// cfg.Creators requests in flight.
func (cl *cluster) create(ctx context.Context, cfg config, n int, at func(int) time.Time, role int, pop *population) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range cfg.Creators {
		wg.Go(func() {
			for i := range next {
				obj := newPlaybook(i, at(i), cfg.Characters, cfg.LastApplied)
				if cfg.Owned {
					obj.SetFinalizers([]string{testenv.Finalizer})
				}
				if role == others && cfg.PlainOthers {
					a := obj.GetAnnotations()
					delete(a, expiry.AnnotationExpiresAt)
					obj.SetAnnotations(a)
				}
				if cfg.Peer != "" {
					setPeerTTL(obj, at(i), role == others && cfg.PlainOthers)
				}
				switch role {
				case slow:
					obj.SetLabels(map[string]string{slowLabel: "true"})
				case touched:
					obj.SetLabels(map[string]string{usedLabel: "true"})
				}
				create := cl.createOne
				if cfg.Owned && role == expiring {
					create = cl.deploy
				}
				if err := create(ctx, obj); err != nil {
					cancel(fmt.Errorf("create Playbook %d: %w", i, err))
					return
				}
				mu.Lock()
				pop.expiresAt[obj.GetName()] = at(i)
				switch role {
				case expiring:
					pop.expiring = append(pop.expiring, obj.GetName())
				case slow:
					pop.slow = append(pop.slow, obj.GetName())
				case touched:
					pop.touched = append(pop.touched, obj.GetName())
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// createOne retries what an API server under load may answer.
func (cl *cluster) createOne(ctx context.Context, obj *unstructured.Unstructured) error {
	var err error
	for attempt := range 5 {
		_, err = cl.dynamic.Resource(playbooks).Create(ctx, obj, metav1.CreateOptions{})
		if err == nil || !apierrors.IsTooManyRequests(err) && !apierrors.IsServerTimeout(err) && !apierrors.IsTimeout(err) {
			return err
		}
		time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
	}
	return err
}

// deploy creates obj as Amphitheatre does (-owned): with its namespace
// amp-<id>, and in it the Actors and their Deployments and Services, all
// owned by it and collected when it is deleted.
func (cl *cluster) deploy(ctx context.Context, obj *unstructured.Unstructured) error {
	return testenv.Deploy(ctx, cl.client, obj, testenv.DefaultActors)
}

// objectsPerExpiring is how many objects the bench creates for each
// expiring Playbook: with -owned, its namespace, and an Actor, a
// Deployment and a Service per actor.
func objectsPerExpiring(cfg config) int {
	if !cfg.Owned {
		return 1
	}
	return 2 + 3*len(testenv.DefaultActors)
}

// examples are Amphitheatre's sample characters, to make specs of the
// size and shape real Playbooks have.
var examples = []struct{ name, lang, port string }{
	{"amp-example-go", "go", "8080"},
	{"amp-example-rust", "rust", "8000"},
	{"amp-example-nodejs", "nodejs", "3000"},
	{"amp-example-python", "python", "5000"},
	{"amp-example-java", "java", "8080"},
}

// newPlaybook is a Playbook as Amphitheatre creates it (name = spec.id =
// a UUID, no labels), with the expiry annotation and several characters.
func newPlaybook(i int, expiresAt time.Time, characters int, lastAppliedShare float64) *unstructured.Unstructured {
	id := string(uuid.NewUUID())
	first := examples[i%len(examples)]
	chars := make([]any, 0, characters)
	for c := range characters {
		ex := examples[(i+c)%len(examples)]
		repo := "https://github.com/amphitheatre-app/" + ex.name
		chars = append(chars, map[string]any{
			"meta": map[string]any{
				"name":        ex.name,
				"version":     "0.1.0",
				"authors":     []any{"Amphitheatre Team <hello@amphitheatre.app>"},
				"description": "A simple " + ex.lang + " example for Amphitheatre",
				"license":     "Apache-2.0",
				"repository":  repo,
				"homepage":    "https://amphitheatre.app",
				"keywords":    []any{"amphitheatre", "example", ex.lang},
			},
			"live": c == 0,
			"once": false,
			"build": map[string]any{
				"dockerfile": "Dockerfile",
				"context":    ".",
				"env":        map[string]any{"BUILD_MODE": "debug"},
			},
			"deploy": map[string]any{
				"env": map[string]any{"PORT": ex.port, "LOG_LEVEL": "info"},
				"services": []any{map[string]any{
					"kind":  "ClusterIP",
					"ports": []any{map[string]any{"port": int64(len(ex.port) * 2000), "expose": c == 0}},
				}},
			},
		})
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"id":          id,
			"title":       fmt.Sprintf("%s-%d", first.name, i),
			"description": "Development environment for " + first.name,
			"preface": map[string]any{
				"repository": map[string]any{"repo": "https://github.com/amphitheatre-app/" + first.name, "branch": "master"},
			},
			"characters": chars,
			"sync":       true,
		},
	}}
	u.SetAPIVersion("amphitheatre.app/v1")
	u.SetKind("Playbook")
	u.SetName(id)
	annotations := map[string]string{expiry.AnnotationExpiresAt: expiresAt.UTC().Format(time.RFC3339)}
	if math.Ceil(float64(i)*lastAppliedShare) < math.Ceil(float64(i+1)*lastAppliedShare) {
		// A share of them (every other one by default) as `kubectl apply`
		// leaves them: the whole applied manifest in an annotation, as
		// real ConfigMaps and Deployments carry it. The controller must
		// not pay for it in memory.
		u.SetAnnotations(annotations)
		applied, err := json.Marshal(u.Object)
		if err != nil {
			panic(err) // a map of strings, numbers and booleans always marshals
		}
		annotations[lastApplied] = string(applied) + "\n"
	}
	u.SetAnnotations(annotations)
	return u
}

// lastApplied is the annotation kubectl apply writes.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// apiMetrics reads the API server's request counts (those that have
// ended, by verb and resource, and the watches open) and the histograms
// of how long it took to serve them and etcd to answer it.
func (cl *cluster) apiMetrics(ctx context.Context) (apiSnapshot, error) {
	body, err := cl.rest.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return apiSnapshot{}, fmt.Errorf("read the API server's metrics: %w", err)
	}
	s := apiSnapshot{ended: counts{}, open: counts{}, bench: cl.counter.snapshot(), cpu: cpuTimes(cl.pids)}
	fams, err := readFamilies(body)
	if err != nil {
		return apiSnapshot{}, fmt.Errorf("the API server's metrics: %w", err)
	}
	keep := func(r string) bool { return relevant[r] }
	s.served, s.etcd = requestDurations(fams, keep), etcdDurations(fams, keep)
	samples := fams.samples("apiserver_request_total", "apiserver_longrunning_requests")
	for _, m := range samples {
		if verb := m.labels["verb"]; m.name == "apiserver_request_total" && verb != "WATCH" {
			s.total += m.value
			if writeVerbs[verb] {
				s.writes += m.value
			}
		}
		resource := m.labels["resource"]
		if !relevant[resource] {
			continue
		}
		if sub := m.labels["subresource"]; sub != "" {
			resource += "/" + sub
		}
		key := m.labels["verb"] + " " + resource
		switch {
		case m.name == "apiserver_longrunning_requests":
			s.open[key] += m.value
		case m.labels["verb"] != "WATCH":
			// A watch is counted when it ends, which says nothing about
			// when it was made: open ones are counted instead.
			s.ended[key] += m.value
		}
	}
	return s, nil
}

// relevant are the resources the controller uses. The API server's own
// requests (leases, endpoints) would only blur the picture.
var relevant = map[string]bool{"playbooks": true, "timeoutpolicies": true, "events": true, "secrets": true, "namespaces": true,
	"deployments": true, "statefulsets": true, "configmaps": true}

// counts maps "VERB resource[/subresource]" to a number of requests.
type counts map[string]float64

// writeVerbs are the verbs of apiserver_request_total that write.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true}

type apiSnapshot struct {
	ended, open counts
	bench       counts
	// total and writes count every request but watches, of any resource
	// and client, that had ended, and those of them that wrote.
	total, writes float64
	// cpu is the CPU time etcd, kube-apiserver, kube-controller-manager
	// and the bench had spent.
	cpu map[string]time.Duration
	// served is how long the API server took to serve the requests it
	// had served, by "VERB resource[/subresource]".
	served map[string]buckets
	// etcd is how long etcd took to answer the API server, by
	// "operation resource".
	etcd map[string]buckets
}

// counter counts the bench's requests as the API server does: by verb
// and resource, a watch when it ends.
type counter struct {
	mu sync.Mutex
	n  counts
}

func (c *counter) add(key string) {
	c.mu.Lock()
	if c.n == nil {
		c.n = counts{}
	}
	c.n[key]++
	c.mu.Unlock()
}

func (c *counter) snapshot() counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := counts{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

func (c *counter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		key, watch := requestKey(req)
		resp, err := rt.RoundTrip(req)
		switch {
		case key == "":
		case watch && err == nil:
			resp.Body = &onClose{ReadCloser: resp.Body, fn: sync.OnceFunc(func() { c.add(key) })}
		default:
			c.add(key)
		}
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type onClose struct {
	io.ReadCloser
	fn func()
}

func (o *onClose) Close() error {
	o.fn()
	return o.ReadCloser.Close()
}

// requestKey names a resource request the way apiserver_request_total
// does; "" for other requests.
func requestKey(req *http.Request) (key string, watch bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "", false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	resource, name := parts[0], ""
	if len(parts) > 1 {
		name = parts[1]
	}
	if len(parts) > 2 {
		resource += "/" + parts[2]
	}
	if !relevant[parts[0]] {
		return "", false
	}
	verb := req.Method
	switch {
	case req.Method == http.MethodGet && req.URL.Query().Get("watch") == "true":
		verb, watch = "WATCH", true
	case req.Method == http.MethodGet && name == "":
		verb = "LIST"
	case req.Method == http.MethodDelete && name == "":
		verb = "DELETECOLLECTION"
	}
	return verb + " " + resource, watch
}

// controllerProc is the timeout-controller process.
type controllerProc struct {
	cmd         *exec.Cmd
	metricsAddr string
	profileAddr string
	done        chan struct{}
	err         error
}

func startController(bin, kubeconfig, logPath string, cfg config) (*controllerProc, error) {
	addr, err := testenv.FreeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig", kubeconfig,
		"--metrics-bind-address", addr,
		// The bench reads the figures over loopback, with no token.
		"--metrics-secure=false",
		"--health-probe-bind-address", "0",
		// No exec reaches a bench: no webhook, and no port to hold.
		"--webhook-port=0",
		"--secret-namespace", secretNamespace,
	}
	if cfg.Workers > 0 {
		args = append(args, fmt.Sprintf("--workers=%d", cfg.Workers))
	}
	if cfg.QPS > 0 {
		args = append(args, fmt.Sprintf("--kube-api-qps=%g", cfg.QPS))
	}
	if cfg.BurstAPI > 0 {
		args = append(args, fmt.Sprintf("--kube-api-burst=%d", cfg.BurstAPI))
	}
	profileAddr := ""
	if cfg.Profile != "" {
		if profileAddr, err = testenv.FreeAddr(); err != nil {
			return nil, err
		}
		args = append(args, "--profile-bind-address", profileAddr)
	}
	args = append(args, cfg.ControllerArgs...)
	c, err := launch("controller", bin, args, append(os.Environ(), cfg.ControllerEnv...), logPath)
	if err != nil {
		return nil, err
	}
	c.metricsAddr, c.profileAddr = addr, profileAddr
	return c, nil
}

// launch starts bin (what names it in errors) with args and env, its
// output in a new file at logPath.
func launch(what, bin string, args, env []string, logPath string) (*controllerProc, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start the %s: %w", what, err)
	}
	c := &controllerProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		log.Close()
		close(c.done)
	}()
	return c, nil
}

func (c *controllerProc) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *controllerProc) stop() {
	if c.exited() {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}
