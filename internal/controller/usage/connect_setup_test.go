// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package usage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// webhookManager is a manager that serves webhooks on server, reads and
// writes with c, and keeps what is added to it (or refuses it with
// addErr).
type webhookManager struct {
	manager.Manager
	config *rest.Config
	c      client.Client
	server webhook.Server
	addErr error
	added  []manager.Runnable
}

func (m *webhookManager) GetConfig() *rest.Config          { return m.config }
func (m *webhookManager) GetHTTPClient() *http.Client      { return http.DefaultClient }
func (m *webhookManager) GetAPIReader() client.Reader      { return m.c }
func (m *webhookManager) GetClient() client.Client         { return m.c }
func (m *webhookManager) GetWebhookServer() webhook.Server { return m.server }
func (m *webhookManager) Add(r manager.Runnable) error {
	if m.addErr != nil {
		return m.addErr
	}
	m.added = append(m.added, r)
	return nil
}

func TestSetupConnectionsServesTheWebhookAndAddsItsRecorder(t *testing.T) {
	h := newConnectHarness(t, chain()...)
	for _, tc := range []struct {
		name    string
		config  *rest.Config
		addErr  error
		wantErr string
	}{
		{name: "serves the webhook at /connect and adds the recorder, which sees what it is sent", config: &rest.Config{Host: "https://api.example.com"}},
		{name: "says when the API server's address makes no review client", config: &rest.Config{Host: "https://api.example.com:port"}, wantErr: "create the connection review client"},
		{name: "says when the manager refuses the recorder", config: &rest.Config{Host: "https://api.example.com"}, addErr: errors.New("manager started"),
			wantErr: "add the connection recorder: manager started"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mgr := &webhookManager{config: tc.config, c: h.client, server: webhook.NewServer(webhook.Options{}), addErr: tc.addErr}
			err := SetupConnections(mgr, clocktesting.NewFakeClock(fixture.T0))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(mgr.added) != 1 {
				t.Fatalf("%d runnables added, want the recorder", len(mgr.added))
			}
			conns, ok := mgr.added[0].(*Connections)
			if !ok || conns.NeedLeaderElection() {
				t.Fatalf("added %T, want the recorder, on every replica", mgr.added[0])
			}

			review, err := json.Marshal(admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
				Request: &admissionv1.AdmissionRequest{UID: "req-1", Operation: admissionv1.Connect,
					Resource:    metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
					SubResource: "exec", Namespace: "team-a", Name: "web-1", UserInfo: authenticationv1.UserInfo{Username: "alice"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, ConnectPath, bytes.NewReader(review))
			req.Header.Set("Content-Type", "application/json")
			mgr.server.WebhookMux().ServeHTTP(rec, req)
			var answer admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || answer.Response == nil || !answer.Response.Allowed || answer.Response.UID != "req-1" {
				t.Fatalf("answer %d %s (%v), want req-1 allowed", rec.Code, rec.Body, err)
			}
			select {
			case conn := <-conns.queue:
				if conn.use != (expiry.Use{At: fixture.T0, Via: expiry.ViaExec, By: "alice"}) {
					t.Errorf("queued %+v, want alice's exec at %s", conn.use, fixture.T0)
				}
			case <-time.After(time.Second):
				t.Fatal("the exec was not queued for the recorder")
			}
		})
	}
}

// The recorder logs a connection it could not record, with its Pod, and
// only such a connection.
func TestTheRecorderLogsWhatItCouldNotRecord(t *testing.T) {
	h := newConnectHarness(t, append(chain(), deploysIdle())...)
	conns := h.connections()
	var logs fixture.Logs
	ctx, cancel := context.WithCancel(logs.Context(1))
	done := make(chan error, 1)
	go func() { done <- conns.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	exec := connectRequest(admissionv1.Connect, "", "pods", "exec")
	conns.Handle(ctx, exec)
	fixture.Eventually(t, 5*time.Second, "alice's exec recorded", func() (bool, error) {
		u, ok := h.lastUse(deploymentWeb())
		return ok && u.By == "alice", nil
	})
	if failed := logs.With("record a connection as use"); len(failed) != 0 {
		t.Fatalf("logged %q for a connection recorded", failed)
	}

	h.mu.Lock()
	h.listErr = serverDown
	h.mu.Unlock()
	exec.Name = "web-2"
	conns.Handle(ctx, exec)
	fixture.Eventually(t, 5*time.Second, "the failure logged", func() (bool, error) {
		failed := logs.With("record a connection as use")
		return len(failed) == 1 && strings.Contains(failed[0], "etcd is down") && strings.Contains(failed[0], "web-2"), nil
	})
}
