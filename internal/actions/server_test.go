// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package actions

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

var (
	playbookGVK = schema.GroupVersionKind{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook"}
	// created is when the test Playbooks were made; now is a day later.
	created = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	now     = created.Add(24 * time.Hour)
)

const playbookUID = types.UID("6f1c1d5e-8a55-4a4e-9d43-2a7f3f2f0b11")

// env is a server on a fake API server holding a Playbook "pr-42"
// (expiring 14 days after creation) under policy "playbooks".
type env struct {
	t      testing.TB
	srv    *Server
	c      client.Client
	ring   *Keyring
	clock  *clocktesting.FakeClock
	owners *Owners
}

type envOption func(*envConfig)

type envConfig struct {
	policy      v1alpha1.TimeoutPolicy
	annotations map[string]string
	objects     []client.Object
	options     func(*Options)
	wrap        func(client.Client) client.Client
}

func withPolicy(f func(*v1alpha1.TimeoutPolicySpec)) envOption {
	return func(c *envConfig) { f(&c.policy.Spec) }
}

func withAnnotations(a map[string]string) envOption {
	return func(c *envConfig) {
		for k, v := range a {
			c.annotations[k] = v
		}
	}
}

func withOptions(f func(*Options)) envOption { return func(c *envConfig) { c.options = f } }

func playbook(name string, uid types.UID, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(playbookGVK)
	u.SetName(name)
	u.SetUID(uid)
	u.SetCreationTimestamp(metav1.NewTime(created))
	u.SetAnnotations(annotations)
	_ = unstructured.SetNestedField(u.Object, "Weekend demo", "spec", "title")
	return u
}

func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	cfg := envConfig{
		policy: v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "playbooks", UID: "policy-uid"}, Spec: v1alpha1.TimeoutPolicySpec{
			Target:        v1alpha1.Target{APIVersion: "amphitheatre.app/v1", Kind: "Playbook"},
			DefaultTTL:    "14d",
			Reminders:     []v1alpha1.Duration{"3d"},
			MinimumNotice: "0s",
		}},
		annotations: map[string]string{notify.AnnotationOwner: "alice@example.com"},
	}
	for _, o := range opts {
		o(&cfg)
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(playbookGVK, meta.RESTScopeRoot)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Secret"), meta.RESTScopeNamespace)
	secret := testSecret(created)
	objs := append([]client.Object{secret, &cfg.policy, playbook("pr-42", playbookUID, cfg.annotations)}, cfg.objects...)
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithObjects(objs...).Build()
	ring, err := KeyringFromSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	clock := clocktesting.NewFakeClock(now)
	owners := NewOwners(nil, nil)
	var api client.Client = c
	if cfg.wrap != nil {
		api = cfg.wrap(c)
	}
	o := Options{
		API: api, Cache: c, Owners: owners, Clock: clock,
		KeyringSecret:   types.NamespacedName{Namespace: secret.Namespace, Name: secret.Name},
		SecretNamespace: "timeout-system",
	}
	if cfg.options != nil {
		cfg.options(&o)
	}
	return &env{t: t, srv: New(o), c: c, ring: ring, clock: clock, owners: owners}
}

// claims are a link's claims for pr-42, sent to alice.
func (e *env) claims(actions ...Action) Claims {
	return Claims{
		Object:    &Ref{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook", Name: "pr-42", UID: playbookUID},
		Recipient: "alice@example.com",
		Actions:   append([]Action{View}, actions...),
		Expires:   now.Add(7 * 24 * time.Hour),
	}
}

func (e *env) token(c Claims) string {
	e.t.Helper()
	tok, err := e.ring.Sign(c)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// do sends a request to the server and returns the answer and its body.
func (e *env) do(req *http.Request) (*http.Response, string) {
	e.t.Helper()
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, req)
	res := rec.Result()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func (e *env) get(path string) (*http.Response, string) {
	return e.do(httptest.NewRequest(http.MethodGet, "https://timeout.example.com"+path, nil))
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// post sends a page's form for action, with the form token the page
// carries.
func (e *env) post(path string, form url.Values) (*http.Response, string) {
	return e.do(e.postRequest(path, form))
}

func (e *env) postRequest(path string, form url.Values) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "https://timeout.example.com"+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://timeout.example.com")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return req
}

// form is what the page of tok posts for action.
func (e *env) form(tok string, a Action) url.Values {
	e.t.Helper()
	_, body := e.get("/a/" + tok)
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		e.t.Fatalf("no form token on the page:\n%s", body)
	}
	return url.Values{"csrf": {m[1]}, "action": {string(a)}}
}

// csrf is the form token of tok's page.
func (e *env) csrf(tok string) string {
	return e.ring.formToken(KeyName(created)[len(keyPrefix):], mustVerify(e.t, e.ring, tok).ID)
}

// object reads pr-42 from the fake API server.
func (e *env) object() *unstructured.Unstructured {
	e.t.Helper()
	return getPlaybook(e.t, e, "pr-42")
}

func getPlaybook(t testing.TB, e *env, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(playbookGVK)
	if err := e.c.Get(context.Background(), types.NamespacedName{Name: name}, u); err != nil {
		t.Fatal(err)
	}
	return u
}

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

// countForms counts the objects with buttons on a page.
func countForms(body string) int {
	return len(regexp.MustCompile(`<section `).FindAllStringIndex(body, -1))
}

func TestGetChangesNothing(t *testing.T) {
	e := newEnv(t)
	tok := e.token(e.claims(Extend, Wake, Delete))
	before := e.object().GetResourceVersion()
	for _, path := range []string{"/a/" + tok, "/a/" + tok + "?do=extend", "/a/" + tok + "?do=delete"} {
		res, body := e.get(path)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, res.StatusCode, body)
		}
		for _, want := range []string{"Weekend demo", "Keep it longer, until 2026-11-16 09:00 UTC", "2026-11-15 09:00 UTC", "playbooks"} {
			if !strings.Contains(body, want) {
				t.Errorf("the page lacks %q:\n%s", want, body)
			}
		}
	}
	req := httptest.NewRequest(http.MethodHead, "https://timeout.example.com/a/"+tok, nil)
	if res, _ := e.do(req); res.StatusCode != http.StatusOK {
		t.Errorf("HEAD: %d", res.StatusCode)
	}
	if after := e.object().GetResourceVersion(); after != before {
		t.Errorf("GET changed the object: resourceVersion %s -> %s", before, after)
	}
}

func TestAClickActsOnceAndAReplaySaysSo(t *testing.T) {
	e := newEnv(t)
	c := e.claims(Extend)
	tok := e.token(c)
	form := e.form(tok, Extend)

	res, body := e.post("/a/"+tok, form)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "Done: it now expires 2026-11-16 09:00 UTC") {
		t.Fatalf("first click: %d\n%s", res.StatusCode, body)
	}
	obj := e.object()
	a := obj.GetAnnotations()
	if got := a[expiry.AnnotationExpiresAt]; got != "2026-11-16T09:00:00Z" {
		t.Errorf("expires-at %q, want a day past the old expiry", got)
	}
	var stamp map[string]any
	if err := json.Unmarshal([]byte(a[expiry.AnnotationChangedBy]), &stamp); err != nil || stamp["by"] != "alice@example.com" || stamp["via"] != "link" || stamp["groups"] != nil {
		t.Errorf("changed-by %s: want by the recipient, via link, no groups", a[expiry.AnnotationChangedBy])
	}
	uses := parseUses(a[expiry.AnnotationLinkUses])
	if len(uses) != 1 || uses[0].Action != Extend || !uses[0].At.Equal(now) {
		t.Errorf("link-uses %q", a[expiry.AnnotationLinkUses])
	}
	rv := obj.GetResourceVersion()

	// The same link again, later: it says what happened, and does nothing.
	e.clock.Step(time.Hour)
	res, body = e.post("/a/"+tok, form)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "This link was already used to keep it longer, 2026-11-02 09:00 UTC") {
		t.Fatalf("second click: %d\n%s", res.StatusCode, body)
	}
	if got := e.object().GetResourceVersion(); got != rv {
		t.Errorf("the second click wrote the object")
	}
	// Its page shows the button as used.
	if _, body := e.get("/a/" + tok); !strings.Contains(body, "disabled") || !strings.Contains(body, "each link acts once") {
		t.Errorf("the page of a used link offers its button again:\n%s", body)
	}
}

// A browser posts the page's form under the page's Referrer-Policy
// no-referrer with the origin "null" and Sec-Fetch-Site same-origin, as
// the browser test saw Chromium do: the click acts.
func TestAClickAsABrowserSendsItUnderNoReferrerActs(t *testing.T) {
	e := newEnv(t)
	tok := e.token(e.claims(Extend))
	r := e.postRequest("/a/"+tok, e.form(tok, Extend))
	r.Header.Set("Origin", "null")
	res, body := e.do(r)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "Done: it now expires") {
		t.Fatalf("click: %d\n%s", res.StatusCode, body)
	}
}

func TestTwoClicksAtOnceGiveOneChange(t *testing.T) {
	e := newEnv(t)
	tok := e.token(e.claims(Extend))
	form := e.form(tok, Extend)
	var wg sync.WaitGroup
	bodies := make([]string, 8)
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, bodies[i] = e.post("/a/"+tok, form)
		}()
	}
	wg.Wait()
	done := 0
	for _, b := range bodies {
		if strings.Contains(b, "Done:") {
			done++
		} else if !strings.Contains(b, "already used to keep it longer") {
			t.Errorf("a click neither acted nor said it had:\n%s", b)
		}
	}
	a := e.object().GetAnnotations()
	if done != 1 || a[expiry.AnnotationExpiresAt] != "2026-11-16T09:00:00Z" || len(parseUses(a[expiry.AnnotationLinkUses])) != 1 {
		t.Errorf("%d clicks acted, expires-at %s, uses %s; want one extension", done, a[expiry.AnnotationExpiresAt], a[expiry.AnnotationLinkUses])
	}
}

func TestALinkForAnotherObjectDoesNothing(t *testing.T) {
	e := newEnv(t)
	c := e.claims(Extend)
	c.Object.UID = "0b0b0b0b-old-one"
	tok := e.token(c)
	rv := e.object().GetResourceVersion()
	res, body := e.get("/a/" + tok)
	if res.StatusCode != http.StatusGone || !strings.Contains(body, "This link is for an object that no longer exists") {
		t.Errorf("GET: %d\n%s", res.StatusCode, body)
	}
	form := url.Values{"csrf": {e.csrf(tok)}, "action": {"extend"}}
	res, body = e.post("/a/"+tok, form)
	if res.StatusCode != http.StatusGone || !strings.Contains(body, "Nothing was done") {
		t.Errorf("POST: %d\n%s", res.StatusCode, body)
	}
	if e.object().GetResourceVersion() != rv {
		t.Error("the object was changed")
	}
}

// flipAt changes the character at i of a base64url text.
func flipAt(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}

func mustVerify(t testing.TB, k *Keyring, tok string) Claims {
	t.Helper()
	c, err := k.Verify(tok, now)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestBadTokensGetAClearAnswer(t *testing.T) {
	e := newEnv(t)
	good := e.token(e.claims(Extend))
	expired := e.claims(Extend)
	expired.Expires = now.Add(-time.Hour)
	other, err := KeyringFromSecret(testSecret(created.Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	foreign, _ := other.Sign(e.claims(Extend))
	payload, sig, _ := strings.Cut(good, ".")
	for _, tc := range []struct {
		name, token string
		status      int
		says        string
	}{
		{"a tampered token", flipAt(payload, 10) + "." + sig, http.StatusBadRequest, "This link is"},
		{"a token with a changed signature", payload + "." + flipAt(sig, 5), http.StatusBadRequest, "not valid"},
		{"a truncated token", good[:len(good)-5], http.StatusBadRequest, "cut short"},
		{"an expired token", e.token(expired), http.StatusGone, "stopped working"},
		{"a token of a removed key", foreign, http.StatusGone, "key this link was signed with has been removed"},
		{"an owner's token on an object's page", e.token(Claims{Owner: "alice@example.com", Expires: now.Add(time.Hour)}), http.StatusNotFound, "does not open this page"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rv := e.object().GetResourceVersion()
			res, body := e.get("/a/" + tc.token)
			if res.StatusCode != tc.status || !strings.Contains(body, tc.says) {
				t.Errorf("GET: %d, want %d saying %q\n%s", res.StatusCode, tc.status, tc.says, body)
			}
			res, _ = e.post("/a/"+tc.token, url.Values{"csrf": {"x"}, "action": {"extend"}})
			if res.StatusCode != tc.status {
				t.Errorf("POST: %d, want %d", res.StatusCode, tc.status)
			}
			if strings.Contains(body, tc.token) {
				t.Error("the page shows the token")
			}
			if e.object().GetResourceVersion() != rv {
				t.Error("the object was changed")
			}
		})
	}
}

func TestPostsNotFromThePageAreRefused(t *testing.T) {
	e := newEnv(t)
	tok := e.token(e.claims(Extend))
	form := e.form(tok, Extend)
	for _, tc := range []struct {
		name   string
		req    func() *http.Request
		status int
	}{
		{"without the form token", func() *http.Request {
			return e.postRequest("/a/"+tok, url.Values{"action": {"extend"}})
		}, http.StatusForbidden},
		{"with another token's form token", func() *http.Request {
			return e.postRequest("/a/"+tok, url.Values{"action": {"extend"}, "csrf": {e.ring.formToken(KeyName(created)[len(keyPrefix):], "0123456789abcdef")}})
		}, http.StatusForbidden},
		{"from another site (Sec-Fetch-Site)", func() *http.Request {
			r := e.postRequest("/a/"+tok, form)
			r.Header.Set("Sec-Fetch-Site", "cross-site")
			return r
		}, http.StatusForbidden},
		{"from another origin", func() *http.Request {
			r := e.postRequest("/a/"+tok, form)
			r.Header.Del("Sec-Fetch-Site")
			r.Header.Set("Origin", "https://evil.example.net")
			return r
		}, http.StatusForbidden},
		{"from an opaque origin, without fetch metadata", func() *http.Request {
			r := e.postRequest("/a/"+tok, form)
			r.Header.Del("Sec-Fetch-Site")
			r.Header.Set("Origin", "null")
			return r
		}, http.StatusForbidden},
		{"from an opaque origin another site says it is", func() *http.Request {
			r := e.postRequest("/a/"+tok, form)
			r.Header.Set("Sec-Fetch-Site", "cross-site")
			r.Header.Set("Origin", "null")
			return r
		}, http.StatusForbidden},
		{"with a body over the limit", func() *http.Request {
			f := url.Values{"csrf": form["csrf"], "action": {"extend"}, "pad": {strings.Repeat("x", MaxBody)}}
			return e.postRequest("/a/"+tok, f)
		}, http.StatusRequestEntityTooLarge},
		{"with a malformed form", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "https://timeout.example.com/a/"+tok, strings.NewReader("csrf=%zz&action=extend"))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return r
		}, http.StatusBadRequest},
		{"as JSON", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "https://timeout.example.com/a/"+tok, strings.NewReader(`{"action":"extend"}`))
			r.Header.Set("Content-Type", "application/json")
			return r
		}, http.StatusUnsupportedMediaType},
		{"for an action the link does not allow", func() *http.Request {
			return e.postRequest("/a/"+tok, url.Values{"csrf": form["csrf"], "action": {"delete"}})
		}, http.StatusForbidden},
		{"for an unknown action", func() *http.Request {
			return e.postRequest("/a/"+tok, url.Values{"csrf": form["csrf"], "action": {"launch"}})
		}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rv := e.object().GetResourceVersion()
			res, body := e.do(tc.req())
			if res.StatusCode != tc.status {
				t.Errorf("got %d, want %d\n%s", res.StatusCode, tc.status, body)
			}
			if e.object().GetResourceVersion() != rv {
				t.Error("the object was changed")
			}
		})
	}
	// The same form from the page itself acts.
	if res, body := e.post("/a/"+tok, form); res.StatusCode != http.StatusOK || !strings.Contains(body, "Done:") {
		t.Errorf("the page's own form: %d\n%s", res.StatusCode, body)
	}
}

func TestABurstFromOneAddressIsLimited(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.RequestsPerMinute, o.Burst = 60, 5 }))
	tok := e.token(e.claims(Extend))
	get := func(addr string) int {
		r := httptest.NewRequest(http.MethodGet, "https://timeout.example.com/a/"+tok, nil)
		r.RemoteAddr = addr + ":40000"
		res, _ := e.do(r)
		return res.StatusCode
	}
	for i := 0; i < 5; i++ {
		if got := get("192.0.2.1"); got != http.StatusOK {
			t.Fatalf("request %d: %d", i, got)
		}
	}
	if got := get("192.0.2.1"); got != http.StatusTooManyRequests {
		t.Errorf("the 6th request at once: %d, want 429", got)
	}
	if got := get("192.0.2.2"); got != http.StatusOK {
		t.Errorf("another address: %d", got)
	}
	e.clock.Step(time.Second)
	if got := get("192.0.2.1"); got != http.StatusOK {
		t.Errorf("a second later: %d, want a token back", got)
	}
}

func TestTheSignedInUserIsBelievedOnlyFromATrustedProxy(t *testing.T) {
	for _, tc := range []struct {
		name, remote, want string
	}{
		{"from the proxy, the header names the user", "10.0.0.5", "bob@example.com"},
		{"from anywhere else, the recipient", "192.0.2.7", "alice@example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, withOptions(func(o *Options) {
				o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}
				o.UserHeader = "X-Forwarded-Email"
			}))
			tok := e.token(e.claims(Extend))
			r := e.postRequest("/a/"+tok, e.form(tok, Extend))
			r.RemoteAddr = tc.remote + ":1234"
			r.Header.Set("X-Forwarded-Email", "bob@example.com")
			if res, body := e.do(r); res.StatusCode != http.StatusOK {
				t.Fatalf("%d\n%s", res.StatusCode, body)
			}
			var stamp struct{ By string }
			_ = json.Unmarshal([]byte(e.object().GetAnnotations()[expiry.AnnotationChangedBy]), &stamp)
			if stamp.By != tc.want {
				t.Errorf("changed-by names %q, want %q", stamp.By, tc.want)
			}
		})
	}
}

func TestRefusalsAreSaidInPlainWords(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []envOption
		action Action
		status int
		says   string
	}{
		{"past maxTTL", []envOption{withPolicy(func(s *v1alpha1.TimeoutPolicySpec) { s.MaxTTL = "14d" })}, Extend, http.StatusConflict,
			"It cannot be kept longer: policy playbooks ends every life 14d after creation"},
		{"past maxCount", []envOption{
			withPolicy(func(s *v1alpha1.TimeoutPolicySpec) {
				s.Extensions = &v1alpha1.Extensions{MaxCount: new(int32), ExemptGroups: []string{"platform-team"}}
			}),
			withAnnotations(map[string]string{expiry.AnnotationExtensions: "granted=2026-11-15T09:00:00Z used=0 maxCount=0 maxStep=- exempt=platform-team keep=false at=- by=-"}),
		}, Extend, http.StatusConflict, "0 of 0 extensions used"},
		{"a kept object", []envOption{withAnnotations(map[string]string{expiry.AnnotationKeep: "true"})}, Extend, http.StatusConflict,
			"It is kept (the keep annotation)"},
		{"delete now without the policy's opt-in", nil, Delete, http.StatusConflict, "does not let links delete objects"},
		{"a wake under a policy that never sleeps", nil, Wake, http.StatusConflict, "never puts it to sleep"},
		{"no longer governed", []envOption{withPolicy(func(s *v1alpha1.TimeoutPolicySpec) { s.Target.Kind = "Actor" })}, Extend, http.StatusOK,
			"No TimeoutPolicy governs playbook pr-42 any more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts...)
			tok := e.token(e.claims(tc.action))
			rv := e.object().GetResourceVersion()
			form := url.Values{"csrf": {e.csrf(tok)}, "action": {string(tc.action)}}
			res, body := e.post("/a/"+tok, form)
			if res.StatusCode != tc.status || !strings.Contains(body, tc.says) {
				t.Errorf("got %d, want %d saying %q\n%s", res.StatusCode, tc.status, tc.says, body)
			}
			if e.object().GetResourceVersion() != rv {
				t.Error("the object was changed")
			}
		})
	}
}

func TestEveryAnswerCarriesTheStrictHeaders(t *testing.T) {
	e := newEnv(t)
	tok := e.token(e.claims(Extend))
	for _, path := range []string{"/a/" + tok, "/a/garbage", "/", "/nothing/here", "/o/" + tok} {
		res, _ := e.get(path)
		h := res.Header
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "style-src 'sha256-", "form-action 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", path, csp, want)
			}
		}
		if h.Get("Referrer-Policy") != "no-referrer" || h.Get("Cache-Control") != "no-store" || h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", path, h)
		}
	}
}

// blocking is an API client whose reads hang until the request gives up,
// as a slow API server's do.
type blocking struct{ client.Client }

func (b blocking) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*unstructured.Unstructured); ok {
		<-ctx.Done()
		return ctx.Err()
	}
	return b.Client.Get(ctx, key, obj, opts...)
}

func TestASlowAPIServerGetsTryAgainWithinTwoSeconds(t *testing.T) {
	e := newEnv(t, func(c *envConfig) { c.wrap = func(c client.Client) client.Client { return blocking{c} } })
	tok := e.token(e.claims(Extend))
	start := time.Now()
	res, body := e.do(httptest.NewRequest(http.MethodGet, "https://timeout.example.com/a/"+tok, nil))
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the answer took %s", took)
	}
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "Try again") {
		t.Errorf("got %d\n%s", res.StatusCode, body)
	}
}

// A wake, or use before a sleep, through a link is use by the link's
// recipient: last-use names them and the link, as the admission policy
// names the user of a write through the API.
func TestAWakeThroughALinkNamesWhoUsedIt(t *testing.T) {
	e := newEnv(t, withPolicy(func(s *v1alpha1.TimeoutPolicySpec) {
		s.Sleep = &v1alpha1.Sleep{AfterIdle: "48h", DeleteAfter: "7d"}
	}))
	tok := e.token(e.claims(Wake))
	res, body := e.post("/a/"+tok, e.form(tok, Wake))
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "Done") {
		t.Fatalf("click: %d\n%s", res.StatusCode, body)
	}
	a := e.object().GetAnnotations()
	if a[expiry.AnnotationLastActive] != now.UTC().Format(time.RFC3339) {
		t.Errorf("last-active %q, want %s", a[expiry.AnnotationLastActive], now.UTC().Format(time.RFC3339))
	}
	use, err := expiry.ParseUse(a[expiry.AnnotationLastUse])
	if err != nil || use.Via != expiry.ViaLink || use.By == "" || !use.At.Equal(now.Truncate(time.Second)) {
		t.Errorf("last-use %q (%v), want the link's recipient via link at %s", a[expiry.AnnotationLastUse], err, now)
	}
}
