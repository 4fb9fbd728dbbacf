// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/notify/webhook"
)

// rawKey is both a signing key and a string that must never show up in an
// error or on the wire.
const rawKey = "s3cr3t-key-do-not-log"

// verify checks a delivery as a receiver would. It is written from the
// Standard Webhooks specification, not with the package's Sign, so that a
// mistake in Sign cannot hide itself.
func verify(h http.Header, body, key []byte, now time.Time) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q: %w", ts, err)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("webhook-timestamp is %v away from now", d)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		version, b64, _ := strings.Cut(s, ",")
		if version != "v1" {
			continue
		}
		if got, err := base64.StdEncoding.DecodeString(b64); err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no valid v1 signature")
}

type delivery struct {
	method string
	path   string
	header http.Header
	body   []byte
	dump   string
	err    error
}

// receiver records every request and, when it has a key, answers 401 to
// those it cannot verify, as a real receiver should.
type receiver struct {
	key []byte
	mu  sync.Mutex
	got []delivery
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	dump, _ := httputil.DumpRequest(r, false)
	body, err := io.ReadAll(r.Body)
	d := delivery{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body, dump: string(dump) + string(body), err: err}
	if d.err == nil && rc.key != nil {
		d.err = verify(r.Header, body, rc.key, time.Now())
	}
	rc.mu.Lock()
	rc.got = append(rc.got, d)
	rc.mu.Unlock()
	if d.err != nil {
		http.Error(w, "rejected", http.StatusUnauthorized)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

type fakeSecrets map[string]string

// Get fails with a message that names nothing, so that tests show the
// factory itself says which Secret and key are wrong.
func (f fakeSecrets) Get(_ context.Context, namespace, name, key string) ([]byte, error) {
	v, ok := f[namespace+"/"+name+"/"+key]
	if !ok {
		return nil, errors.New("not found")
	}
	return []byte(v), nil
}

var (
	sentAt  = time.Date(2026, 11, 21, 12, 0, 0, 250_000_000, time.UTC)
	expires = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
)

func reminder() notify.Message {
	obj := notify.Object{
		APIVersion: "amphitheatre.app/v1", Kind: "Playbook", Name: "pb-7f3a", Namespace: "team-a",
		UID: "0b4c6e1a-53a3-4c1e-9a53-5f0d2a8e6b11", Title: "Checkout service",
	}
	return notify.Message{
		ID: notify.NewID(obj.UID, expires, v1alpha1.EventReminder, "3d"), Type: v1alpha1.EventReminder,
		Time: sentAt, Object: obj, ExpiresAt: expires, Stage: "3d", Policy: "playbooks",
		Recipients: notify.Recipients{Emails: []string{"alice@example.com"}, SlackChannels: []string{"#team-a"}},
		Extend:     "kubectl timeout extend playbook pb-7f3a -n team-a 7d",
	}
}

func deletionFailed() notify.Message {
	obj := notify.Object{APIVersion: "example.com/v1", Kind: "Sandbox", Name: "sb-1", UID: "9e1f2a33-0000-4000-8000-000000000001"}
	return notify.Message{
		ID: notify.NewID(obj.UID, expires, v1alpha1.EventDeletionFailed, ""), Type: v1alpha1.EventDeletionFailed,
		Time: sentAt, Object: obj, ExpiresAt: expires, Policy: "sandboxes",
		Detail: `admission webhook "guard" denied the request`,
	}
}

func whsec(key []byte) string { return webhook.KeyPrefix + base64.StdEncoding.EncodeToString(key) }

func TestSendDeliversASignedCloudEvent(t *testing.T) {
	binaryKey := []byte{0x00, 0xff, 0x10, 0x80, 'k', 'e', 'y', 0x7f, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}
	tests := []struct {
		name      string
		secret    string
		verifyKey []byte
		msg       notify.Message
		wantType  string
		wantSrc   string
		wantSubj  string
		wantData  map[string]any
	}{
		{
			name:      "a reminder signed with a raw key carries the title and stage",
			secret:    rawKey,
			verifyKey: []byte(rawKey),
			msg:       reminder(),
			wantType:  "app.amphitheatre.timeout.reminder",
			wantSrc:   "/timeout-controller/policies/playbooks",
			wantSubj:  "pb-7f3a",
			wantData: map[string]any{
				"apiVersion": "amphitheatre.app/v1", "kind": "Playbook", "name": "pb-7f3a", "namespace": "team-a",
				"uid": "0b4c6e1a-53a3-4c1e-9a53-5f0d2a8e6b11", "title": "Checkout service",
				"expiresAt": "2026-11-24T12:00:00Z", "stage": "3d", "policy": "playbooks",
			},
		},
		{
			name:      "a deletion failure signed with a whsec_ key carries the detail and omits title and stage",
			secret:    whsec(binaryKey),
			verifyKey: binaryKey,
			msg:       deletionFailed(),
			wantType:  "app.amphitheatre.timeout.deletion-failed",
			wantSrc:   "/timeout-controller/policies/sandboxes",
			wantSubj:  "sb-1",
			wantData: map[string]any{
				"apiVersion": "example.com/v1", "kind": "Sandbox", "name": "sb-1", "namespace": "",
				"uid": "9e1f2a33-0000-4000-8000-000000000001", "expiresAt": "2026-11-24T12:00:00Z",
				"policy": "sandboxes", "detail": `admission webhook "guard" denied the request`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := &receiver{key: tt.verifyKey}
			srv := serve(t, rc)
			spec := channels(hook{
				Name: "audit", URL: srv.URL + "/hooks/timeout",
				SecretRef: v1alpha1.SecretKeySelector{Namespace: "tc-system", Name: "audit-webhook", Key: "key"},
			})
			ns, err := notify.Kinds{webhook.Kind}.Build(t.Context(), spec, fakeSecrets{"tc-system/audit-webhook/key": tt.secret})
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if len(ns) != 1 {
				t.Fatalf("Build returned %d notifiers, want 1", len(ns))
			}
			if err := ns[0].Send(t.Context(), tt.msg, notify.Content{Subject: "ignored"}); err != nil {
				t.Fatalf("Send: %v", err)
			}

			got := rc.deliveries()
			if len(got) != 1 {
				t.Fatalf("receiver got %d requests, want 1", len(got))
			}
			d := got[0]
			if d.err != nil {
				t.Fatalf("delivery does not verify: %v", d.err)
			}
			t.Logf("headers: webhook-id=%s webhook-timestamp=%s webhook-signature=%s", d.header.Get("webhook-id"), d.header.Get("webhook-timestamp"), d.header.Get("webhook-signature"))
			t.Logf("body: %s", d.body)
			if d.method != http.MethodPost || d.path != "/hooks/timeout" {
				t.Errorf("request is %s %s, want POST /hooks/timeout", d.method, d.path)
			}
			if ct := d.header.Get("Content-Type"); ct != "application/cloudevents+json" {
				t.Errorf("Content-Type = %q, want application/cloudevents+json", ct)
			}
			for _, leak := range []string{tt.secret, rawKey, "alice@example.com", "#team-a", "kubectl timeout extend"} {
				if strings.Contains(d.dump, leak) {
					t.Errorf("request contains %q:\n%s", leak, d.dump)
				}
			}

			var env map[string]any
			if err := json.Unmarshal(d.body, &env); err != nil {
				t.Fatalf("body is not a JSON object: %v\n%s", err, d.body)
			}
			wantEnv := map[string]any{
				"specversion":     "1.0",
				"id":              tt.msg.ID,
				"source":          tt.wantSrc,
				"type":            tt.wantType,
				"subject":         tt.wantSubj,
				"time":            "2026-11-21T12:00:00.25Z",
				"datacontenttype": "application/json",
				"data":            tt.wantData,
			}
			for k, want := range wantEnv {
				if got, ok := env[k]; !ok || !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %#v, want %#v", k, got, want)
				}
			}
			for k := range env {
				if _, ok := wantEnv[k]; !ok {
					t.Errorf("unexpected attribute %s = %#v", k, env[k])
				}
			}
			if id := d.header.Get("webhook-id"); id != tt.msg.ID {
				t.Errorf("webhook-id = %q, want the event id %q", id, tt.msg.ID)
			}
		})
	}
}

func TestEventIDs(t *testing.T) {
	base := reminder()
	with := func(change func(m *notify.Message)) notify.Message {
		m := base
		change(&m)
		m.ID = notify.NewID(m.Object.UID, m.ExpiresAt, m.Type, m.Stage)
		return m
	}
	tests := []struct {
		name string
		a, b notify.Message
		same bool
	}{
		{"is the same when the same message is sent again later", base, with(func(m *notify.Message) { m.Time = m.Time.Add(time.Hour) }), true},
		{"differs for the next reminder stage", base, with(func(m *notify.Message) { m.Stage = "2d" }), false},
		{"differs for a new expiry after an extension", base, with(func(m *notify.Message) { m.ExpiresAt = m.ExpiresAt.Add(24 * time.Hour) }), false},
		{"differs for another event type", base, with(func(m *notify.Message) { m.Type, m.Stage = v1alpha1.EventExpired, "" }), false},
		{"differs for another object with the same name", base, with(func(m *notify.Message) { m.Object.UID = "another-uid" }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := &receiver{key: []byte(rawKey)}
			srv := serve(t, rc)
			n := webhook.New("audit", srv.URL, []byte(rawKey), nil)
			for _, m := range []notify.Message{tt.a, tt.b} {
				if err := n.Send(t.Context(), m, notify.Content{}); err != nil {
					t.Fatalf("Send: %v", err)
				}
			}
			var ids []string
			for _, d := range rc.deliveries() {
				var env struct{ ID string }
				if err := json.Unmarshal(d.body, &env); err != nil {
					t.Fatalf("body: %v", err)
				}
				if h := d.header.Get("webhook-id"); h != env.ID {
					t.Errorf("webhook-id %q differs from the event id %q", h, env.ID)
				}
				ids = append(ids, env.ID)
			}
			if len(ids) != 2 {
				t.Fatalf("receiver got %d events, want 2", len(ids))
			}
			if same := ids[0] == ids[1]; same != tt.same {
				t.Errorf("ids %q and %q: same = %v, want %v", ids[0], ids[1], same, tt.same)
			}
		})
	}
}

// TestVerifierCanFail shows that the verifier the other tests rely on
// rejects what it should, so that their passing means something.
func TestVerifierCanFail(t *testing.T) {
	tests := []struct {
		name    string
		age     time.Duration
		key     string
		mutate  func(h http.Header, body []byte) []byte
		wantErr bool
	}{
		{name: "accepts the delivery as sent", key: rawKey},
		{name: "rejects a tampered body", key: rawKey, wantErr: true, mutate: func(_ http.Header, b []byte) []byte {
			return []byte(strings.Replace(string(b), `"namespace":"team-a"`, `"namespace":"team-b"`, 1))
		}},
		{name: "rejects a wrong key", key: rawKey + "x", wantErr: true},
		{name: "rejects the signature of another id", key: rawKey, wantErr: true, mutate: func(h http.Header, b []byte) []byte {
			h.Set("webhook-id", "0123456789abcdef0123456789abcdef")
			return b
		}},
		{name: "rejects a signed timestamp six minutes old", key: rawKey, age: 6 * time.Minute, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := &receiver{}
			srv := serve(t, rc)
			clock := clocktesting.NewFakePassiveClock(time.Now().Add(-tt.age))
			n := webhook.New("audit", srv.URL, []byte(rawKey), nil, webhook.WithClock(clock))
			if err := n.Send(t.Context(), reminder(), notify.Content{}); err != nil {
				t.Fatalf("Send: %v", err)
			}
			got := rc.deliveries()
			if len(got) != 1 {
				t.Fatalf("receiver got %d requests, want 1", len(got))
			}
			h, body := got[0].header.Clone(), got[0].body
			if tt.mutate != nil {
				body = tt.mutate(h, slices.Clone(body))
				if string(body) == string(got[0].body) && h.Get("webhook-id") == got[0].header.Get("webhook-id") {
					t.Fatal("mutate changed nothing")
				}
			}
			err := verify(h, body, []byte(tt.key), time.Now())
			if (err != nil) != tt.wantErr {
				t.Errorf("verify = %v, want error: %v", err, tt.wantErr)
			}
		})
	}
}

// slow answers nothing until the client goes away. It reads the body
// first because the server notices a closed connection only after that.
func slow(_ http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
}

func TestSendFailures(t *testing.T) {
	tests := []struct {
		name string
		// handler is nil for an address where nothing listens.
		handler     http.HandlerFunc
		timeout     time.Duration
		want        []string
		notWant     []string
		wantTimeout bool
		// wantRequests shows that Send neither retries by itself nor
		// follows a redirect.
		wantRequests int
	}{
		{
			// The error becomes an Event that more people read than the
			// receiver's owner meant to answer.
			name: "reports HTTP 500 with its status and not the receiver's answer",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "database is down", http.StatusInternalServerError)
			},
			want:         []string{"webhook/audit", "500"},
			notWant:      []string{"database is down"},
			wantRequests: 1,
		},
		{
			name: "treats a redirect as a failure and does not follow it",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/moved", http.StatusTemporaryRedirect)
			},
			want:         []string{"307"},
			wantRequests: 1,
		},
		{
			name:         "gives up on a receiver slower than the timeout",
			handler:      slow,
			timeout:      300 * time.Millisecond,
			wantTimeout:  true,
			wantRequests: 1,
		},
		{
			name: "fails when nothing listens",
			want: []string{"connection refused"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu       sync.Mutex
				requests int
			)
			srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				requests++
				mu.Unlock()
				tt.handler(w, r)
			}))
			if tt.handler == nil {
				srv.Close()
			}
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			n := webhook.New("audit", srv.URL+"/hooks", []byte(rawKey), nil, webhook.WithTimeout(timeout))

			start := time.Now()
			err := n.Send(t.Context(), reminder(), notify.Content{})
			elapsed := time.Since(start)

			if err == nil {
				t.Fatal("Send succeeded, want an error")
			}
			t.Logf("error: %v", err)
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not contain %q", s)
				}
			}
			for _, s := range tt.notWant {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error contains %q", s)
				}
			}
			if tt.wantTimeout {
				if ne, ok := errors.AsType[net.Error](err); !ok || !ne.Timeout() {
					t.Errorf("error is not a timeout")
				}
				if elapsed < timeout || elapsed > timeout+time.Second {
					t.Errorf("Send returned after %v, want about %v", elapsed, timeout)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if requests != tt.wantRequests {
				t.Errorf("receiver got %d requests, want %d", requests, tt.wantRequests)
			}
		})
	}
}

func TestSendAfterTheReceiverComesBack(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	n := webhook.New("audit", "http://"+addr+"/hooks", []byte(rawKey), nil, webhook.WithTimeout(5*time.Second))
	if err := n.Send(t.Context(), reminder(), notify.Content{}); err == nil {
		t.Fatal("first Send succeeded with the receiver down")
	}

	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	rc := &receiver{key: []byte(rawKey)}
	srv := httptest.NewUnstartedServer(rc)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)

	if err := n.Send(t.Context(), reminder(), notify.Content{}); err != nil {
		t.Fatalf("second Send: %v", err)
	}
	got := rc.deliveries()
	if len(got) != 1 {
		t.Fatalf("receiver got %d requests, want exactly 1", len(got))
	}
	if got[0].err != nil {
		t.Errorf("delivery does not verify: %v", got[0].err)
	}
}

func TestSendLogsTheReceiversAnswerAtDebugLevelOnly(t *testing.T) {
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, strings.Repeat("x", 1000))
	}))
	var lines []string
	logAt := func(verbosity int) context.Context {
		lines = nil
		log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: verbosity})
		return logr.NewContext(t.Context(), log)
	}
	n := webhook.New("audit", srv.URL+"/hooks", []byte(rawKey), nil)

	if err := n.Send(logAt(0), reminder(), notify.Content{}); err == nil || strings.Contains(err.Error(), "xxx") {
		t.Fatalf("Send error = %v, want one without the answer", err)
	}
	if strings.Contains(strings.Join(lines, "\n"), "xxx") {
		t.Errorf("the answer is logged above debug level: %q", lines)
	}
	if err := n.Send(logAt(1), reminder(), notify.Content{}); err == nil {
		t.Fatal("Send succeeded")
	}
	all := strings.Join(lines, "\n")
	if !strings.Contains(all, strings.Repeat("x", 200)) || strings.Contains(all, strings.Repeat("x", 201)) {
		t.Errorf("debug log = %q, want the first 200 bytes of the answer", lines)
	}
}

func TestErrorsNeverContainSecrets(t *testing.T) {
	secrets := []string{rawKey, "tok3n", base64.StdEncoding.EncodeToString([]byte("user:tok3n"))}
	tests := []struct {
		name    string
		handler http.HandlerFunc
		timeout time.Duration
	}{
		{
			name: "an error body that echoes the request",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, "bad %s %s raw=%s auth=%s", r.Method, r.RequestURI, r.URL.RawQuery, r.Header.Get("Authorization"))
			},
		},
		{
			name: "a redirect to a URL with the token",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/elsewhere?token=tok3n", http.StatusFound)
			},
		},
		{
			name:    "a receiver slower than the timeout",
			handler: slow,
			timeout: 200 * time.Millisecond,
		},
		{name: "nothing listening"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serve(t, tt.handler)
			if tt.handler == nil {
				srv.Close()
			}
			u, err := url.Parse(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			safe := u.String() + "/path"
			u.User = url.UserPassword("user", "tok3n")
			u.Path = "/path"
			u.RawQuery = "token=tok3n"
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			n := webhook.New("audit", u.String(), []byte(rawKey), nil, webhook.WithTimeout(timeout))

			err = n.Send(t.Context(), reminder(), notify.Content{})
			if err == nil {
				t.Fatal("Send succeeded, want an error")
			}
			t.Logf("error: %v", err)
			for _, s := range secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error contains %q", s)
				}
			}
			if !strings.Contains(err.Error(), safe) {
				t.Errorf("error does not name the receiver as %s", safe)
			}
		})
	}
}

func TestFactory(t *testing.T) {
	ref := func(name string) v1alpha1.SecretKeySelector {
		return v1alpha1.SecretKeySelector{Namespace: "tc-system", Name: name, Key: "key"}
	}
	secrets := fakeSecrets{
		"tc-system/ops/key":     rawKey,
		"tc-system/audit/key":   whsec([]byte(rawKey)),
		"tc-system/corrupt/key": "whsec_" + rawKey + "!!",
		"tc-system/empty/key":   "",
	}
	every := map[v1alpha1.EventType]bool{}
	for _, et := range v1alpha1.EventTypes {
		every[et] = true
	}
	tests := []struct {
		name        string
		webhooks    []hook
		wantNames   []string
		wantAccepts []map[v1alpha1.EventType]bool
		wantErr     []string
	}{
		{
			name: "builds nothing without webhooks",
		},
		{
			name: "builds one notifier per channel, named after it, with the events the policy chose",
			webhooks: []hook{
				{Name: "ops", URL: "https://ops.example.com/hooks", SecretRef: ref("ops"), Events: []v1alpha1.EventType{v1alpha1.EventReminder, v1alpha1.EventDeletionFailed}},
				{Name: "audit", URL: "https://audit.example.com/in", SecretRef: ref("audit")},
			},
			wantNames: []string{"ops", "audit"},
			wantAccepts: []map[v1alpha1.EventType]bool{
				{v1alpha1.EventReminder: true, v1alpha1.EventDeletionFailed: true},
				every,
			},
		},
		{
			name: "names the Secret and key it cannot read",
			webhooks: []hook{
				{Name: "ops", URL: "https://ops.example.com/hooks", SecretRef: ref("ops")},
				{Name: "missing", URL: "https://ops.example.com/hooks", SecretRef: ref("nope")},
			},
			wantErr: []string{"channel missing", "Secret tc-system/nope", `key "key"`, "not found"},
		},
		{
			name:     "refuses a whsec_ key that is not base64, without quoting it",
			webhooks: []hook{{Name: "corrupt", URL: "https://ops.example.com/hooks", SecretRef: ref("corrupt")}},
			wantErr:  []string{"channel corrupt", "Secret tc-system/corrupt", "base64"},
		},
		{
			name:     "refuses an empty key",
			webhooks: []hook{{Name: "empty", URL: "https://ops.example.com/hooks", SecretRef: ref("empty")}},
			wantErr:  []string{"channel empty", "Secret tc-system/empty", "empty"},
		},
		{
			name:     "refuses a URL that does not parse, without quoting it",
			webhooks: []hook{{Name: "bad-url", URL: "https://user:tok3n@ops.example.com:tok3n/hooks", SecretRef: ref("ops")}},
			wantErr:  []string{"channel bad-url", "url does not parse"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns, err := notify.Kinds{webhook.Kind}.Build(t.Context(), channels(tt.webhooks...), secrets)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("Build succeeded with %d notifiers, want an error", len(ns))
				}
				t.Logf("error: %v", err)
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error does not contain %q", s)
					}
				}
				for _, s := range []string{rawKey, "tok3n"} {
					if strings.Contains(err.Error(), s) {
						t.Errorf("error contains %q", s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			var names []string
			for _, n := range ns {
				names = append(names, n.Name())
			}
			if !slices.Equal(names, tt.wantNames) {
				t.Errorf("names = %q, want %q", names, tt.wantNames)
			}
			for i, n := range ns {
				if i >= len(tt.wantAccepts) {
					break
				}
				for _, et := range v1alpha1.EventTypes {
					if got := n.Accepts(et); got != tt.wantAccepts[i][et] {
						t.Errorf("%s accepts %s = %v, want %v", n.Name(), et, got, !got)
					}
				}
			}
		})
	}
}

// hook is a webhook channel and the events a policy sends through it.
type hook struct {
	Name      string
	URL       string
	SecretRef v1alpha1.SecretKeySelector
	Events    []v1alpha1.EventType
}

// channels are the webhook channels of hooks, as notify.Build takes them.
func channels(hooks ...hook) []notify.Channel {
	var out []notify.Channel
	for _, h := range hooks {
		out = append(out, notify.Channel{Name: h.Name, Events: h.Events, Spec: v1alpha1.NotificationChannelSpec{
			Webhook: &v1alpha1.WebhookChannel{URL: h.URL, SecretRef: h.SecretRef},
		}})
	}
	return out
}
