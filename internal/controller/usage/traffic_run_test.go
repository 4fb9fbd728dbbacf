// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package usage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// promServer answers the Prometheus HTTP API's instant queries, as
// Prometheus does, with the answer set last, and keeps the queries it
// was sent.
type promServer struct {
	*httptest.Server

	mu      sync.Mutex
	status  int
	body    string
	queries []url.Values
	auth    []string // the Authorization header of each query
}

func newPromServer(t *testing.T) *promServer {
	t.Helper()
	s := &promServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" || r.ParseForm() != nil {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		s.queries = append(s.queries, r.Form)
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		status, body := s.status, s.body
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(s.Close)
	s.answerVector(t)
	return s
}

// answerVector answers with an instant vector of samples.
func (s *promServer) answerVector(t *testing.T, samples ...*model.Sample) {
	t.Helper()
	for _, sm := range samples {
		sm.Timestamp = model.TimeFromUnix(fixture.T0.Unix())
	}
	result, err := json.Marshal(model.Vector(samples))
	if err != nil {
		t.Fatal(err)
	}
	if samples == nil {
		result = []byte("[]")
	}
	s.answer(http.StatusOK, fmt.Sprintf(`{"status":"success","data":{"resultType":"vector","result":%s}}`, result))
}

func (s *promServer) answer(status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, body
}

// sent returns the queries sent so far, and forgets them.
func (s *promServer) sent() []url.Values {
	q, _ := s.sentWith()
	return q
}

// sentWith returns the queries sent so far with their Authorization
// headers, and forgets them.
func (s *promServer) sentWith() ([]url.Values, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, a := s.queries, s.auth
	s.queries, s.auth = nil, nil
	return q, a
}

func queryTexts(qs []url.Values) []string {
	var out []string
	for _, q := range qs {
		out = append(out, q.Get("query"))
	}
	slices.Sort(out)
	return out
}

// trafficPolicy governs ConfigMaps with an idle clock of 20 minutes (a
// window of one minute); its query is its name.
func trafficPolicy(name string, opts ...func(*v1alpha1.TimeoutPolicy)) *v1alpha1.TimeoutPolicy {
	return fixture.Policy(name, append([]func(*v1alpha1.TimeoutPolicy){func(p *v1alpha1.TimeoutPolicy) {
		p.Spec.IdleTTL = "20m"
		p.Spec.Traffic = &v1alpha1.Traffic{Query: name, Interval: "30s"}
	}}, opts...)...)
}

func changedPolicies(ch chan event.GenericEvent) []string {
	var out []string
	for {
		select {
		case ev := <-ch:
			out = append(out, ev.Object.GetName())
		default:
			return out
		}
	}
}

func TestTheTrafficRunnerQueriesEachPolicyAtItsInterval(t *testing.T) {
	t0 := fixture.T0.Add(time.Hour) // an hour after the objects were created
	// The policies other than traffic select no object.
	nobody := fixture.Selecting(map[string]string{"team": "none"})
	leaving := trafficPolicy("leaving", nobody, func(p *v1alpha1.TimeoutPolicy) {
		p.Finalizers = []string{"example.com/hold"}
		p.DeletionTimestamp = &metav1.Time{Time: t0}
	})
	objs := []client.Object{
		trafficPolicy("traffic"),
		fixture.Policy("plain", nobody, fixture.Idle("20m")),
		trafficPolicy("wrong", nobody, func(p *v1alpha1.TimeoutPolicy) { p.Spec.Traffic.Interval = "14s" }),
		trafficPolicy("refused", nobody),
		leaving,
		fixture.NewConfigMap("busy", fixture.InNamespace("amp-busy"), firstGeneration),
		fixture.NewNamespace("amp-busy", nil),
	}
	h := newTrafficHarness(t, t0, objs...)
	prom := newPromServer(t)
	prom.answerVector(t, fixture.Sample(2, "namespace", "amp-busy"))
	api, err := NewPrometheus(prom.URL, "", "")
	if err != nil {
		t.Fatal(err)
	}
	tr := h.traffic(api)
	tr.Validate = func(p *v1alpha1.TimeoutPolicy) error {
		if p.Name == "refused" {
			return errors.New("spec.selector: refused")
		}
		return nil
	}
	tr.Changed = make(chan event.GenericEvent, 10)
	var logs fixture.Logs
	ctx := logs.Context(1)
	policy := func(name string) *v1alpha1.TimeoutPolicy {
		t.Helper()
		p := &v1alpha1.TimeoutPolicy{}
		if err := h.client.Get(ctx, types.NamespacedName{Name: name}, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pass := func(what string, queried ...string) {
		t.Helper()
		tr.pass(ctx)
		if got := queryTexts(prom.sent()); !slices.Equal(got, queried) {
			t.Fatalf("%s: queried %q, want %q", what, got, queried)
		}
	}
	condition := func(what, reason, message string) {
		t.Helper()
		c := tr.Condition(policy("traffic"))
		if c == nil || c.Reason != reason || c.Message != message {
			t.Fatalf("%s: condition %+v, want %s: %q", what, c, reason, message)
		}
	}
	changed := func(what string, want ...string) {
		t.Helper()
		if got := changedPolicies(tr.Changed); !slices.Equal(got, want) {
			t.Fatalf("%s: status refreshes asked for %q, want %q", what, got, want)
		}
	}

	pass("the first pass: only the valid policy with traffic, not being deleted", "traffic")
	condition("the first pass", v1alpha1.ReasonQueried, "The traffic query gave 1 samples; 1 namespaces above 0")
	changed("the first pass", "traffic")
	if u, ok := expiry.LastUse(h.stored(objs[5].(*corev1.ConfigMap)).Annotations); !ok || u.Via != expiry.ViaTraffic || !u.At.Equal(t0) {
		t.Fatalf("busy's last use %+v, %t; want traffic at %s", u, ok, t0)
	}

	h.clock.Step(10 * time.Second)
	pass("within the interval")
	p := policy("traffic")
	p.Generation = 2
	if err := h.client.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	pass("a new generation within the interval", "traffic")
	changed("a new generation giving the same answer")

	h.clock.Step(30 * time.Second)
	prom.answerVector(t, fixture.Sample(2, "namespace", "amp-busy"), fixture.Sample(1, "namespace", "amp-other"))
	pass("an interval after the last query", "traffic")
	condition("a new answer", v1alpha1.ReasonQueried, "The traffic query gave 2 samples; 2 namespaces above 0")
	changed("a new answer", "traffic")

	h.clock.Step(30 * time.Second)
	prom.answer(http.StatusOK, `{"status":"success","data":{"resultType":"scalar","result":[1772355600,"3"]}}`)
	pass("a query that gives a scalar", "traffic")
	condition("a query that gives a scalar", v1alpha1.ReasonQueryFailed, "The traffic query returned a scalar, not an instant vector: no traffic counted as use")
	changed("a query that gives a scalar", "traffic")

	// The policies cannot be listed: nothing is forgotten.
	h.clock.Step(30 * time.Second)
	h.listErr(apierrors.NewServiceUnavailable("the cache is not ready"))
	pass("the policies not listed")
	condition("the policies not listed", v1alpha1.ReasonQueryFailed, "The traffic query returned a scalar, not an instant vector: no traffic counted as use")
	if failed := logs.With("list policies"); len(failed) != 1 {
		t.Fatalf("logged %q, want the failure to list policies", failed)
	}
	h.listErr(nil)

	// A policy gone is forgotten.
	if err := h.client.Delete(ctx, policy("traffic")); err != nil {
		t.Fatal(err)
	}
	pass("the policy deleted")
	if c := tr.Condition(trafficPolicy("traffic")); c != nil {
		t.Fatalf("a policy deleted and created again: condition %+v, want none until its query runs", c)
	}
}

func TestTrafficWritesAreLoggedAndCounted(t *testing.T) {
	t0 := fixture.T0.Add(time.Hour) // an hour after the objects were created
	pol := trafficPolicy("traffic")
	busy := fixture.NewConfigMap("busy", fixture.InNamespace("amp-busy"), firstGeneration)
	for _, tc := range []struct {
		name     string
		patchErr error
		getErr   error
		written  bool
		logged   []string // what the log says, "" for nothing
		notLog   string
	}{
		{name: "says how many it wrote", written: true, logged: []string{`"written"=1`}, notLog: "record traffic"},
		{name: "logs a write the API server refused", patchErr: apierrors.NewInternalError(errors.New("etcd is down")),
			logged: []string{"record traffic", "record the traffic of ConfigMap amp-busy/busy", `"written"=0`}},
		{name: "writes nothing, and says so, when the namespace cannot be read", getErr: apierrors.NewInternalError(errors.New("etcd is down")),
			logged: []string{"record traffic", "get namespace amp-busy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newTrafficHarness(t, t0, pol, busy, fixture.NewNamespace("amp-busy", nil))
			h.patchErr, h.getErr = tc.patchErr, tc.getErr
			tr := h.traffic(fixture.FakeAPI{Vector: model.Vector{fixture.Sample(1, "namespace", "amp-busy")}})
			var logs fixture.Logs
			tr.evaluate(logs.Context(1), pol, TrafficQuery{Query: "q", Interval: time.Minute}, t0)
			h.patchErr, h.getErr = nil, nil
			if _, ok := h.stored(busy).Annotations[expiry.AnnotationLastUse]; ok != tc.written {
				t.Errorf("busy written: %t, want %t", ok, tc.written)
			}
			for _, want := range tc.logged {
				if len(logs.With(want)) == 0 {
					t.Errorf("nothing logged says %q: %q", want, logs.With(""))
				}
			}
			if tc.notLog != "" && len(logs.With(tc.notLog)) != 0 {
				t.Errorf("logged %q", logs.With(tc.notLog))
			}
		})
	}
}

func TestTrafficWritesOnlyWhatItsPolicyGovernsAndTheAnswerNames(t *testing.T) {
	t0 := fixture.T0.Add(time.Hour) // an hour after the objects were created
	team := func(name string) func(*corev1.ConfigMap) { return fixture.Labelled(map[string]string{"team": name}) }
	for _, tc := range []struct {
		name    string
		policy  *v1alpha1.TimeoutPolicy
		objs    []client.Object
		vector  model.Vector
		watches func(client.Reader) governedObjects
		written []string // the ConfigMaps written, as namespace/name
	}{
		{name: "writes the objects of each namespace named, and skips one that is gone",
			policy: trafficPolicy("traffic"),
			objs: []client.Object{
				fixture.NewConfigMap("a", fixture.InNamespace("amp-a"), firstGeneration), fixture.NewNamespace("amp-a", nil),
				fixture.NewConfigMap("b", fixture.InNamespace("amp-b"), firstGeneration), fixture.NewNamespace("amp-b", nil),
			},
			vector:  model.Vector{fixture.Sample(1, "namespace", "amp-a"), fixture.Sample(1, "namespace", "amp-b"), fixture.Sample(1, "namespace", "amp-gone")},
			written: []string{"amp-a/a", "amp-b/b"}},
		{name: "writes nothing on an object no policy governs",
			policy: trafficPolicy("traffic", fixture.Selecting(map[string]string{"team": "a"})),
			objs:   []client.Object{fixture.NewConfigMap("b", fixture.InNamespace("amp-a"), team("b"), firstGeneration), fixture.NewNamespace("amp-a", nil)},
			vector: model.Vector{fixture.Sample(1, "namespace", "amp-a")}},
		{name: "writes nothing under a policy whose spec is wrong",
			policy: trafficPolicy("traffic", func(p *v1alpha1.TimeoutPolicy) { p.Spec.MaxTTL = "30m" }),
			objs:   []client.Object{fixture.NewConfigMap("a", fixture.InNamespace("amp-a"), firstGeneration), fixture.NewNamespace("amp-a", nil)},
			vector: model.Vector{fixture.Sample(1, "namespace", "amp-a")}},
		{name: "writes nothing on an object active this instant, under the shortest window",
			policy: trafficPolicy("traffic", fixture.Idle("20ns")),
			objs: []client.Object{fixture.NewConfigMap("a", fixture.InNamespace("amp-a"), firstGeneration,
				fixture.Annotated(expiry.AnnotationLastActive, t0.Format(time.RFC3339))), fixture.NewNamespace("amp-a", nil)},
			vector: model.Vector{fixture.Sample(1, "namespace", "amp-a")}},
		{name: "reads nothing and writes nothing for a kind that is not watched",
			policy: trafficPolicy("traffic", fixture.Target("apps/v1", "Deployment")),
			objs:   []client.Object{fixture.NewConfigMap("a", fixture.InNamespace("amp-a"), firstGeneration), fixture.NewNamespace("amp-a", nil)},
			vector: model.Vector{fixture.Sample(1, "namespace", "amp-a")}},
		{name: "writes nothing without the watches",
			policy:  trafficPolicy("traffic"),
			objs:    []client.Object{fixture.NewConfigMap("a", fixture.InNamespace("amp-a"), firstGeneration), fixture.NewNamespace("amp-a", nil)},
			vector:  model.Vector{fixture.Sample(1, "namespace", "amp-a")},
			watches: func(client.Reader) governedObjects { return nil }},
		{name: "writes nothing while the watches have not listed the objects yet",
			policy: trafficPolicy("traffic"),
			objs: []client.Object{
				fixture.NewConfigMap("a", fixture.InNamespace("amp-a"), firstGeneration), fixture.NewNamespace("amp-a", nil),
				fixture.NewConfigMap("b", fixture.InNamespace("amp-b"), firstGeneration), fixture.NewNamespace("amp-b", nil),
			},
			vector:  model.Vector{fixture.Sample(1, "namespace", "amp-a"), fixture.Sample(1, "namespace", "amp-b")},
			watches: func(r client.Reader) governedObjects { return &notListedYet{cachedConfigMaps: cachedConfigMaps{r}} }},
		{name: "writes nothing of a listing cut short",
			policy:  trafficPolicy("traffic"),
			objs:    []client.Object{fixture.NewConfigMap("a", fixture.InNamespace("amp-a"), firstGeneration), fixture.NewNamespace("amp-a", nil)},
			vector:  model.Vector{fixture.Sample(1, "namespace", "amp-a")},
			watches: func(r client.Reader) governedObjects { return cutShort{cachedConfigMaps{r}} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newTrafficHarness(t, t0, append(tc.objs, tc.policy)...)
			tr := h.traffic(fixture.FakeAPI{Vector: tc.vector})
			if tc.watches != nil {
				tr.Watches = tc.watches(h.client)
			}
			reads := h.readCount()
			tr.evaluate(context.Background(), tc.policy, TrafficQuery{Query: "q", Interval: time.Minute}, t0)
			reads = h.readCount() - reads
			var written []string
			for _, o := range tc.objs {
				if cm, ok := o.(*corev1.ConfigMap); ok {
					if _, ok := h.stored(cm).Annotations[expiry.AnnotationLastUse]; ok {
						written = append(written, cm.Namespace+"/"+cm.Name)
					}
				}
			}
			slices.Sort(written)
			if !slices.Equal(written, tc.written) {
				t.Errorf("written %q, want %q", written, tc.written)
			}
			if _, watched := tr.watchedAs(match.TargetGVK(tc.policy).GroupKind()); !watched && reads != 0 {
				t.Errorf("%d reads for a kind not watched, want none", reads)
			}
		})
	}
}

// notListedYet are watches whose first listing fails, as the object
// controller's do while its cache waits for the API server.
type notListedYet struct {
	cachedConfigMaps
	mu    sync.Mutex
	calls int
}

func (w *notListedYet) EachCached(ctx context.Context, gvk schema.GroupVersionKind, namespace string, fn func(*metav1.PartialObjectMetadata) error) error {
	w.mu.Lock()
	w.calls++
	first := w.calls == 1
	w.mu.Unlock()
	if first {
		return errors.New("the configmaps are not listed yet: context deadline exceeded")
	}
	return w.cachedConfigMaps.EachCached(ctx, gvk, namespace, fn)
}

// cutShort are watches whose listing fails once it has visited every
// object.
type cutShort struct{ cachedConfigMaps }

func (w cutShort) EachCached(ctx context.Context, gvk schema.GroupVersionKind, namespace string, fn func(*metav1.PartialObjectMetadata) error) error {
	if err := w.cachedConfigMaps.EachCached(ctx, gvk, namespace, fn); err != nil {
		return err
	}
	return errors.New("the listing was cut short")
}

// A cluster-scoped object that owns a namespace (as a Playbook owns
// amp-<id>) is used by the traffic in that namespace: here a ClusterRole,
// a cluster-scoped kind the fake API server knows.
func TestTrafficInANamespaceUsesTheObjectThatOwnsIt(t *testing.T) {
	t0 := fixture.T0.Add(time.Hour)
	gvk := rbacv1.SchemeGroupVersion.WithKind("ClusterRole")
	pol := trafficPolicy("owners", fixture.Target("rbac.authorization.k8s.io/v1", "ClusterRole"))
	owner := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "api", UID: "uid-api", Generation: 1, CreationTimestamp: metav1.NewTime(fixture.T0)}}
	other := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "uid-web", Generation: 1, CreationTimestamp: metav1.NewTime(fixture.T0)}}
	ns := fixture.NewNamespace("amp-api", nil)
	ns.OwnerReferences = []metav1.OwnerReference{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "api", UID: "uid-api"}}
	h := newTrafficHarness(t, t0, pol, owner, other, ns)
	tr := h.traffic(fixture.FakeAPI{Vector: model.Vector{fixture.Sample(1, "namespace", "amp-api")}})
	tr.Watches = cachedKind{h.client, gvk}
	var logs fixture.Logs
	tr.evaluate(logs.Context(1), pol, TrafficQuery{Query: "q", Interval: time.Minute}, t0)
	for name, want := range map[string]bool{"api": true, "web": false} {
		got := kube.NewMetadata(gvk)
		if err := h.client.Get(context.Background(), types.NamespacedName{Name: name}, got); err != nil {
			t.Fatal(err)
		}
		if _, ok := got.Annotations[expiry.AnnotationLastUse]; ok != want {
			t.Errorf("ClusterRole %s written: %t, want %t (log %q)", name, ok, want, logs.With(""))
		}
	}
}

// cachedKind are the watches of a controller that watches gvk alone.
type cachedKind struct {
	reader client.Reader
	gvk    schema.GroupVersionKind
}

func (c cachedKind) EachCached(ctx context.Context, gvk schema.GroupVersionKind, namespace string, fn func(*metav1.PartialObjectMetadata) error) error {
	return cachedConfigMaps{c.reader}.EachCached(ctx, gvk, namespace, fn)
}

func (c cachedKind) WatchedKind(gk schema.GroupKind) (schema.GroupVersionKind, bool, bool) {
	return c.gvk, false, gk == c.gvk.GroupKind()
}

func TestNewPrometheusTakesAnHTTPURLAndNeverShowsItsPassword(t *testing.T) {
	prom := newPromServer(t)
	prom.answerVector(t, fixture.Sample(1, "namespace", "amp-a"))
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cr3t-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, address, token, ca, err string
	}{
		{name: "queries Prometheus over http", address: prom.URL},
		{name: "sends the bearer token read from its file", address: prom.URL, token: tokenFile},
		{name: "accepts an https URL", address: "https://prometheus.example.com:9090"},
		{name: "refuses another scheme, without the password", address: "ftp://admin:hunter2@prometheus:9090", err: `--prometheus-url: "ftp://admin:xxxxx@prometheus:9090" is not an http or https URL`},
		{name: "refuses a URL without a host", address: "http:///api", err: "is not an http or https URL"},
		{name: "refuses a URL that does not parse, without showing it", address: "http://admin:hunter2@prom etheus:9090", err: `--prometheus-url: "(unparsable URL)" is not an http or https URL`},
		{name: "says when the CA file cannot be read", address: prom.URL, ca: filepath.Join(t.TempDir(), "missing.crt"), err: "prometheus transport"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, err := NewPrometheus(tc.address, tc.token, tc.ca)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("error %v, want one saying %q, without the password", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.address != prom.URL {
				return
			}
			prom.sent()
			v, _, err := api.Query(context.Background(), "up", fixture.T0)
			if err != nil || v.Type() != model.ValVector {
				t.Fatalf("query: %v, %v", v, err)
			}
			want := ""
			if tc.token != "" {
				want = "Bearer s3cr3t-token"
			}
			if q, auth := prom.sentWith(); len(q) != 1 || q[0].Get("query") != "up" || auth[0] != want {
				t.Fatalf("sent %v with Authorization %q, want the query up with %q", q, auth, want)
			}
		})
	}
}
