// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package slack_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/notify/slack"
)

// hookPath is where the receiver listens, with a token that must never
// show up in an error.
const (
	hookPath = "/services/T000/B000/s3cr3tt0ken"
	token    = "s3cr3tt0ken"
)

// receiver stands in for Slack's incoming webhook: it records every JSON
// body posted to hookPath and answers with status.
type receiver struct {
	mu     sync.Mutex
	posts  []map[string]any
	status int
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != hookPath || req.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "no_service", http.StatusNotFound)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
		http.Error(w, "invalid_payload", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.posts = append(r.posts, body)
	if r.status != 0 && r.status != http.StatusOK {
		http.Error(w, "error", r.status)
		return
	}
	_, _ = w.Write([]byte("ok"))
}

func (r *receiver) received() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.posts)
}

// serve starts a receiver on loopback and returns it with its webhook URL.
func serve(t *testing.T, status int) (*receiver, string) {
	t.Helper()
	r := &receiver{status: status}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv.URL + hookPath
}

var now = time.Date(2026, 11, 24, 14, 0, 0, 0, time.UTC)

// message is a real message of type et about a Playbook that expires 72
// hours after it is sent.
func message(et v1alpha1.EventType) notify.Message {
	obj := notify.Object{APIVersion: "amphitheatre.app/v1", Kind: "Playbook", Name: "2b1e7c9e", UID: "uid-1", Title: "Checkout demo"}
	exp := now.Add(72 * time.Hour)
	m := notify.Message{
		ID: notify.NewID(obj.UID, exp, et, ""), Type: et, Time: now,
		Object: obj, ExpiresAt: exp, Policy: "playbooks",
		Extend: "kubectl annotate playbook 2b1e7c9e --overwrite timeout.amphitheatre.app/ttl=21d",
	}
	switch et {
	case v1alpha1.EventReminder:
		m.Stage = "3d"
		m.ID = notify.NewID(obj.UID, exp, et, m.Stage)
	case v1alpha1.EventDeletionFailed:
		m.Time = exp.Add(2 * time.Minute)
		m.Detail = "admission webhook denied the request"
	case v1alpha1.EventPostponed:
		m.Detail = "no reminder has been delivered yet"
	}
	return m
}

func render(t *testing.T, m notify.Message) notify.Content {
	t.Helper()
	tpl, err := notify.NewTemplates(nil)
	if err != nil {
		t.Fatalf("NewTemplates: %v", err)
	}
	c, err := tpl.Render(m)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return c
}

// blocks returns the blocks of a posted message.
func blocks(t *testing.T, post map[string]any) []map[string]any {
	t.Helper()
	raw, ok := post["blocks"].([]any)
	if !ok {
		t.Fatalf("post has no blocks: %v", post)
	}
	var out []map[string]any
	for _, b := range raw {
		out = append(out, b.(map[string]any))
	}
	return out
}

// texts collects every "text" string under v, in order.
func texts(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		if s, ok := v["text"].(string); ok {
			out = append(out, s)
		}
		for k, e := range v {
			if k != "text" {
				out = append(out, texts(e)...)
			}
		}
		if e, ok := v["text"].(map[string]any); ok {
			out = append(out, texts(e)...)
		}
	case []any:
		for _, e := range v {
			out = append(out, texts(e)...)
		}
	}
	return out
}

// mrkdwn collects the text of every mrkdwn text object under v.
func mrkdwn(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		if s, ok := v["text"].(string); ok && v["type"] == "mrkdwn" {
			out = append(out, s)
		}
		for _, e := range v {
			out = append(out, mrkdwn(e)...)
		}
	case []any:
		for _, e := range v {
			out = append(out, mrkdwn(e)...)
		}
	}
	return out
}

// ofType returns the blocks of type typ.
func ofType(bs []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, b := range bs {
		if b["type"] == typ {
			out = append(out, b)
		}
	}
	return out
}

func TestSendPostsOneBlockKitMessage(t *testing.T) {
	tests := []struct {
		name   string
		event  v1alpha1.EventType
		want   []string
		absent []string
	}{
		{
			name:  "a reminder shows the title, name, expiry in UTC, time left, stage, how to extend and the policy",
			event: v1alpha1.EventReminder,
			want: []string{
				"*Checkout demo*", "2b1e7c9e", "Playbook",
				"*Expires*\nFriday 27 November 2026, 14:00 UTC\nin 3 days",
				"*Reminder*\n3d before expiry",
				"```kubectl annotate playbook 2b1e7c9e --overwrite timeout.amphitheatre.app/ttl=21d```",
			},
			absent: []string{"*Why*"},
		},
		{
			name:  "a failed deletion says why",
			event: v1alpha1.EventDeletionFailed,
			want:  []string{"*Why*\nadmission webhook denied the request", "*Expired*\nFriday 27 November 2026, 14:00 UTC\n2 minutes ago", "```kubectl annotate"},
		},
		{
			name:  "a postponement says why and until when",
			event: v1alpha1.EventPostponed,
			want:  []string{"*Why*\nno reminder has been delivered yet", "*Not deleted before*\nFriday 27 November 2026, 14:00 UTC\nin 3 days"},
		},
		{
			name:   "a deletion does not tell how to extend what is gone",
			event:  v1alpha1.EventDeleted,
			want:   []string{"*Checkout demo*", "Friday 27 November 2026, 14:00 UTC"},
			absent: []string{"To keep it longer", "*Reminder*", "*Why*"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, url := serve(t, http.StatusOK)
			m := message(tt.event)
			c := render(t, m)

			if err := slack.New(url, nil).Send(context.Background(), m, c); err != nil {
				t.Fatalf("Send: %v", err)
			}

			posts := r.received()
			if len(posts) != 1 {
				t.Fatalf("got %d posts, want 1", len(posts))
			}
			post := posts[0]
			if post["text"] != c.Subject {
				t.Errorf("fallback text = %q, want the subject %q", post["text"], c.Subject)
			}
			if _, ok := post["channel"]; ok {
				t.Errorf("post to the webhook's own channel names channel %v", post["channel"])
			}
			bs := blocks(t, post)
			if bs[0]["type"] != "header" || !slices.Equal(texts(bs[0]), []string{c.Subject}) {
				t.Errorf("first block = %v, want a header with the subject %q", bs[0], c.Subject)
			}
			all := strings.Join(texts(post["blocks"]), "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("blocks lack %q; their text:\n%s", w, all)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(all, a) {
					t.Errorf("blocks contain %q; their text:\n%s", a, all)
				}
			}
			ctx := ofType(bs, "context")
			if len(ctx) != 1 || !strings.Contains(strings.Join(texts(ctx[0]), ""), "policy *playbooks*") {
				t.Errorf("context blocks = %v, want one naming policy playbooks", ctx)
			}
		})
	}
}

func TestSendEscapesAndShortensWhatSlackWouldMisread(t *testing.T) {
	tests := []struct {
		name   string
		title  string
		want   string
		absent string
	}{
		{
			name:   "a title cannot mention everyone in the channel",
			title:  "<!channel> & friends",
			want:   "*&lt;!channel&gt; &amp; friends*",
			absent: "<!channel>",
		},
		{
			name:  "a very long title is cut short rather than refused by Slack",
			title: strings.Repeat("x", 5000),
			want:  "x…*",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, url := serve(t, http.StatusOK)
			m := message(v1alpha1.EventReminder)
			m.Object.Title = tt.title
			c := render(t, m)

			if err := slack.New(url, nil).Send(context.Background(), m, c); err != nil {
				t.Fatalf("Send: %v", err)
			}

			post := r.received()[0]
			for _, b := range blocks(t, post) {
				for _, s := range texts(b) {
					limit := 3000
					if b["type"] == "header" {
						limit = 150
					}
					if n := utf8.RuneCountInString(s); n > limit {
						t.Errorf("%s block has a text of %d characters, more than Slack's %d", b["type"], n, limit)
					}
				}
			}
			all := strings.Join(texts(post["blocks"]), "\n")
			if !strings.Contains(all, tt.want) {
				t.Errorf("blocks lack %q", tt.want)
			}
			if tt.absent != "" {
				// Slack parses the fallback text and mrkdwn texts for
				// mentions; it shows plain_text (the header) as it is.
				for _, s := range append(mrkdwn(post["blocks"]), post["text"].(string)) {
					if strings.Contains(s, tt.absent) {
						t.Errorf("mrkdwn %q contains %q unescaped", s, tt.absent)
					}
				}
			}
		})
	}
}

func TestSendPostsOnceMoreForEachNamedChannel(t *testing.T) {
	tests := []struct {
		name     string
		channels []string
		want     []string // the channel of each post, "" for none
	}{
		{name: "posts once when no channel is named", want: []string{""}},
		{name: "posts again to a named channel", channels: []string{"#team-amp"}, want: []string{"", "#team-amp"}},
		{name: "posts to each named channel once", channels: []string{"#team-amp", "#ops", "#team-amp", " "}, want: []string{"", "#team-amp", "#ops"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, url := serve(t, http.StatusOK)
			m := message(v1alpha1.EventReminder)
			m.Recipients = notify.Recipients{Emails: []string{"alice@example.com"}, SlackChannels: tt.channels}
			c := render(t, m)

			if err := slack.New(url, nil).Send(context.Background(), m, c); err != nil {
				t.Fatalf("Send: %v", err)
			}

			var got []string
			for _, p := range r.received() {
				ch, _ := p["channel"].(string)
				got = append(got, ch)
				if p["text"] != c.Subject {
					t.Errorf("post to %q has text %q, want %q", ch, p["text"], c.Subject)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("posted to channels %q, want %q", got, tt.want)
			}
		})
	}
}

// refusedURL returns a webhook URL on a loopback port nothing listens on.
func refusedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr + hookPath
}

// echoPath answers with a status line that repeats the request's path, as
// a misbehaving proxy might.
func echoPath(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		fmt.Fprintf(buf, "HTTP/1.1 502 cannot reach %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", req.URL.Path)
		_ = buf.Flush()
	}))
	t.Cleanup(srv.Close)
	return srv.URL + hookPath
}

// slow answers only after the client gave up.
func slow(t *testing.T) string {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-req.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv.URL + hookPath
}

func TestSendFailsWithoutRevealingTheWebhookURL(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name     string
		url      func(t *testing.T) string
		ctx      context.Context
		channels []string
		is       error
		contains string
	}{
		{
			name:     "fails when Slack answers 500",
			url:      func(t *testing.T) string { _, u := serve(t, http.StatusInternalServerError); return u },
			contains: "500",
		},
		{
			name:     "fails when the webhook is gone (404)",
			url:      func(t *testing.T) string { _, u := serve(t, http.StatusNotFound); return u },
			contains: "404",
		},
		{
			name:     "fails when Slack rate-limits",
			url:      func(t *testing.T) string { _, u := serve(t, http.StatusTooManyRequests); return u },
			contains: "429",
		},
		{
			name: "fails saying when to try again when Slack says so",
			url: func(t *testing.T) string {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
					w.Header().Set("Retry-After", "30")
					http.Error(w, "rate_limited", http.StatusTooManyRequests)
				}))
				t.Cleanup(srv.Close)
				return srv.URL + hookPath
			},
			contains: "retry after 30s",
		},
		{
			name:     "fails when the receiver is slower than the timeout",
			url:      slow,
			is:       context.DeadlineExceeded,
			contains: "Timeout",
		},
		{
			name: "fails when the connection is refused",
			url:  refusedURL,
			is:   syscall.ECONNREFUSED,
		},
		{
			name: "fails when the caller gave up",
			url:  func(t *testing.T) string { _, u := serve(t, http.StatusOK); return u },
			ctx:  cancelled,
			is:   context.Canceled,
		},
		{
			name: "fails when the URL does not parse",
			url:  func(t *testing.T) string { return "http://127.0.0.1:1" + hookPath + "\x7f" },
		},
		{
			name:     "fails with the status code alone when a proxy repeats the path",
			url:      echoPath,
			contains: "HTTP status 502",
		},
		{
			name: "fails when a named channel is refused",
			url: func(t *testing.T) string {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
					var body map[string]any
					_ = json.NewDecoder(req.Body).Decode(&body)
					if body["channel"] != nil {
						http.Error(w, "channel_not_found", http.StatusNotFound)
					}
				}))
				t.Cleanup(srv.Close)
				return srv.URL + hookPath
			},
			channels: []string{"#nope"},
			contains: "channel #nope",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := tt.url(t)
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			m := message(v1alpha1.EventReminder)
			m.Recipients.SlackChannels = tt.channels

			err := slack.New(url, nil, slack.WithTimeout(200*time.Millisecond)).Send(ctx, m, render(t, m))

			if err == nil {
				t.Fatal("Send succeeded, want an error")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q is not %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("error %q does not contain %q", err, tt.contains)
			}
			for e := range chain(err) {
				if strings.Contains(e.Error(), token) || strings.Contains(e.Error(), "/services/") {
					t.Errorf("error in the chain reveals the webhook URL: %q", e)
				}
			}
		})
	}
}

// chain yields err and every error it wraps.
func chain(err error) func(func(error) bool) {
	return func(yield func(error) bool) {
		var walk func(error) bool
		walk = func(e error) bool {
			if e == nil {
				return true
			}
			if !yield(e) {
				return false
			}
			switch w := e.(type) {
			case interface{ Unwrap() error }:
				return walk(w.Unwrap())
			case interface{ Unwrap() []error }:
				for _, x := range w.Unwrap() {
					if !walk(x) {
						return false
					}
				}
			}
			return true
		}
		walk(err)
	}
}

func TestSendDeliversOnceWhenTheReceiverComesBack(t *testing.T) {
	url := refusedURL(t)
	addr := strings.TrimPrefix(strings.TrimSuffix(url, hookPath), "http://")
	n := slack.New(url, nil, slack.WithTimeout(time.Second))
	m := message(v1alpha1.EventReminder)
	c := render(t, m)

	if err := n.Send(context.Background(), m, c); err == nil {
		t.Fatal("Send to a receiver that is down succeeded")
	}

	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	r := &receiver{}
	srv := httptest.NewUnstartedServer(r)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)

	if err := n.Send(context.Background(), m, c); err != nil {
		t.Fatalf("retried Send: %v", err)
	}
	if got := len(r.received()); got != 1 {
		t.Errorf("receiver got %d posts, want 1", got)
	}
}

// secrets is a notify.Secrets backed by a map of "namespace/name/key".
type secrets map[string]string

func (s secrets) Get(_ context.Context, namespace, name, key string) ([]byte, error) {
	v, ok := s[namespace+"/"+name+"/"+key]
	if !ok {
		return nil, fmt.Errorf("secret %s/%s has no key %q: %w", namespace, name, key, notify.ErrKeyNotFound)
	}
	return []byte(v), nil
}

func TestFactoryBuildsFromTheSecret(t *testing.T) {
	r, url := serve(t, http.StatusOK)
	ref := v1alpha1.SecretKeySelector{Namespace: "timeout-system", Name: "slack-webhook", Key: "url"}
	chat := []notify.Channel{{Name: "team-chat", Spec: v1alpha1.NotificationChannelSpec{Slack: &v1alpha1.SlackChannel{WebhookURLSecretRef: ref}}}}
	tests := []struct {
		name    string
		spec    []notify.Channel
		secrets secrets
		want    int    // notifiers built
		errHas  string // error names the Secret and key
		secret  string // must not be in the error
	}{
		{name: "builds nothing without channels"},
		{
			name:    "builds one notifier from the URL in the Secret, trailing newline and all",
			spec:    chat,
			secrets: secrets{"timeout-system/slack-webhook/url": url + "\n"},
			want:    1,
		},
		{
			name:   "fails naming the Secret and key when the key is missing",
			spec:   chat,
			errHas: `timeout-system/slack-webhook key "url"`,
		},
		{
			name:    "fails without the value when it is not a URL",
			spec:    chat,
			secrets: secrets{"timeout-system/slack-webhook/url": "https://hooks.slack.com" + hookPath + "\x7f"},
			errHas:  `timeout-system/slack-webhook key "url"`,
			secret:  token,
		},
		{
			name:    "fails without the value when it would send the token over plain HTTP",
			spec:    chat,
			secrets: secrets{"timeout-system/slack-webhook/url": "http://hooks.slack.com" + hookPath},
			errHas:  "https",
			secret:  token,
		},
		{
			name:    "fails when the value is empty",
			spec:    chat,
			secrets: secrets{"timeout-system/slack-webhook/url": " \n"},
			errHas:  "is empty",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns, err := notify.Kinds{slack.Kind}.Build(context.Background(), tt.spec, tt.secrets)

			if tt.errHas != "" {
				if err == nil {
					t.Fatalf("Build succeeded with %d notifiers, want an error", len(ns))
				}
				if !strings.Contains(err.Error(), tt.errHas) {
					t.Errorf("error %q does not contain %q", err, tt.errHas)
				}
				if tt.secret != "" && strings.Contains(err.Error(), tt.secret) {
					t.Errorf("error %q reveals the webhook URL", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if len(ns) != tt.want {
				t.Fatalf("built %d notifiers, want %d", len(ns), tt.want)
			}
			if tt.want == 0 {
				return
			}
			if ns[0].Name() != "team-chat" {
				t.Errorf("Name() = %q, want team-chat", ns[0].Name())
			}
			before := len(r.received())
			m := message(v1alpha1.EventReminder)
			if err := ns[0].Send(context.Background(), m, render(t, m)); err != nil {
				t.Fatalf("Send: %v", err)
			}
			if got := len(r.received()) - before; got != 1 {
				t.Errorf("receiver got %d posts, want 1", got)
			}
		})
	}
}

func TestAcceptsTheSubscribedEvents(t *testing.T) {
	tests := []struct {
		name   string
		events []v1alpha1.EventType
		event  v1alpha1.EventType
		want   bool
	}{
		{name: "accepts every event type when none is listed", event: v1alpha1.EventDeleted, want: true},
		{name: "accepts a listed event type", events: []v1alpha1.EventType{v1alpha1.EventReminder, v1alpha1.EventDeletionFailed}, event: v1alpha1.EventDeletionFailed, want: true},
		{name: "refuses an event type not listed", events: []v1alpha1.EventType{v1alpha1.EventReminder}, event: v1alpha1.EventDeleted, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := slack.New("https://hooks.slack.com"+hookPath, tt.events).Accepts(tt.event); got != tt.want {
				t.Errorf("Accepts(%s) = %v, want %v", tt.event, got, tt.want)
			}
		})
	}
}
