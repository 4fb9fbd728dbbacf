// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package actions

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

const signingSecret = "8f742231b10e8888abcd99yyyzzz85a5"

// slackEnv is an env with a Slack channel whose Secret holds a signing
// secret, and a receiver standing in for Slack's response_url.
type slackEnv struct {
	*env
	receiver *httptest.Server
	mu       sync.Mutex
	replies  []string
	done     sync.WaitGroup
}

func newSlackEnv(t *testing.T) *slackEnv {
	se := &slackEnv{}
	se.receiver = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		se.mu.Lock()
		se.replies = append(se.replies, string(b))
		se.mu.Unlock()
	}))
	t.Cleanup(se.receiver.Close)
	channel := &v1alpha1.NotificationChannel{ObjectMeta: metav1.ObjectMeta{Name: "team-slack"}, Spec: v1alpha1.NotificationChannelSpec{
		Slack: &v1alpha1.SlackChannel{WebhookURLSecretRef: v1alpha1.SecretKeySelector{Namespace: "timeout-system", Name: "slack", Key: "url"}},
	}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "timeout-system", Name: "slack"},
		Data: map[string][]byte{"url": []byte("https://hooks.slack.com/services/T/B/X"), SlackSigningSecretKey: []byte(signingSecret)}}
	se.env = newEnv(t, func(c *envConfig) { c.objects = []client.Object{channel, secret} }, withOptions(func(o *Options) {
		o.SlackResponseURL = func(u *url.URL) bool { return u.Host == strings.TrimPrefix(se.receiver.URL, "http://") }
	}))
	se.srv.slackDone = se.done.Done
	return se
}

// interaction is a Slack request for a button carrying tok, signed with
// secret at ts.
func (se *slackEnv) interaction(tok string, a Action, secret string, ts time.Time) *http.Request {
	payload, _ := json.Marshal(map[string]any{
		"type":         "block_actions",
		"user":         map[string]string{"id": "U024BE7LH", "username": "alice"},
		"response_url": se.receiver.URL + "/actions/T/1/abc",
		"actions":      []map[string]string{{"action_id": string(a), "value": tok, "block_id": "b"}},
	})
	body := url.Values{"payload": {string(payload)}}.Encode()
	stamp := strconv.FormatInt(ts.Unix(), 10)
	r := httptest.NewRequest(http.MethodPost, "https://timeout.example.com/slack/interactions", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("X-Slack-Request-Timestamp", stamp)
	r.Header.Set("X-Slack-Signature", slackSignature([]byte(secret), stamp, []byte(body)))
	return r
}

func TestSlackButtons(t *testing.T) {
	for _, tc := range []struct {
		name    string
		secret  string
		at      time.Duration // the request's timestamp from now
		status  int
		acts    bool
		replies string
	}{
		{"a button signed by Slack acts and the message says so", signingSecret, -time.Minute, http.StatusOK, true, "Done: it now expires 2026-11-16 09:00 UTC"},
		{"a wrong signature does nothing", "not-the-secret", 0, http.StatusUnauthorized, false, ""},
		{"an old timestamp does nothing", signingSecret, -6 * time.Minute, http.StatusUnauthorized, false, ""},
		{"a timestamp from the future does nothing", signingSecret, 6 * time.Minute, http.StatusUnauthorized, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			se := newSlackEnv(t)
			c := se.claims(Extend)
			c.Recipient = "#team-amp"
			tok := se.token(c)
			rv := se.object().GetResourceVersion()
			if tc.replies != "" {
				se.done.Add(1)
			}
			res, _ := se.do(se.interaction(tok, Extend, tc.secret, now.Add(tc.at)))
			if res.StatusCode != tc.status {
				t.Fatalf("got %d, want %d", res.StatusCode, tc.status)
			}
			a := se.object().GetAnnotations()
			if changed := se.object().GetResourceVersion() != rv; changed != tc.acts {
				t.Fatalf("changed %t, want %t", changed, tc.acts)
			}
			if !tc.acts {
				return
			}
			var stamp struct{ By, Via string }
			_ = json.Unmarshal([]byte(a[expiry.AnnotationChangedBy]), &stamp)
			if stamp.Via != "slack" || stamp.By != "#team-amp (Slack user alice)" {
				t.Errorf("changed-by %s", a[expiry.AnnotationChangedBy])
			}
			se.done.Wait()
			se.mu.Lock()
			defer se.mu.Unlock()
			if len(se.replies) != 1 || !strings.Contains(se.replies[0], tc.replies) || !strings.Contains(se.replies[0], `"replace_original":true`) {
				t.Errorf("response_url received %q", se.replies)
			}
		})
	}
}

func TestASlackButtonUsedTwiceActsOnce(t *testing.T) {
	se := newSlackEnv(t)
	tok := se.token(se.claims(Extend))
	se.done.Add(2)
	for range 2 {
		if res, _ := se.do(se.interaction(tok, Extend, signingSecret, now)); res.StatusCode != http.StatusOK {
			t.Fatalf("status %d", res.StatusCode)
		}
	}
	se.done.Wait()
	if got := se.object().GetAnnotations()[expiry.AnnotationExpiresAt]; got != "2026-11-16T09:00:00Z" {
		t.Errorf("expires-at %s after two clicks, want one step", got)
	}
	// The replies are posted at once: either may come first.
	if all := strings.Join(se.replies, "\n"); len(se.replies) != 2 || !strings.Contains(all, "Done:") || !strings.Contains(all, "already used to keep it longer") {
		t.Errorf("replies %q", se.replies)
	}
}
