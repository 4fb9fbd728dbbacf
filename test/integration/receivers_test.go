// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// receiver is a webhook endpoint that checks each delivery's Standard
// Webhooks signature with its own implementation and keeps the CloudEvents
// it accepts.
type receiver struct {
	url string
	key []byte
	mu  sync.Mutex
	got []cloudEvent
	// failures, while positive, are answered with 500 and counted down.
	failures int
	// slow delays the answer to deliveries about these subjects.
	slow map[string]time.Duration
	// started counts the deliveries begun, per subject, answered or not.
	started map[string]int
	// breaks, per subject and event type, how the next delivery fails:
	// breakUnavailable or breakReset.
	breaks map[string]string
	bad    []string
}

type cloudEvent struct {
	SpecVersion string         `json:"specversion"`
	ID          string         `json:"id"`
	Type        string         `json:"type"`
	Source      string         `json:"source"`
	Subject     string         `json:"subject"`
	Data        map[string]any `json:"data"`
	// arrived is when the receiver accepted it.
	arrived time.Time
}

func startReceiver(t *testing.T, key []byte) *receiver {
	t.Helper()
	return startReceiverTLS(t, key, nil)
}

// startReceiverTLS starts a receiver that serves HTTPS with tc, or plain
// HTTP when tc is nil.
func startReceiverTLS(t *testing.T, key []byte, tc *tls.Config) *receiver {
	t.Helper()
	rc := &receiver{key: key}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(rc.serve))
	if tc != nil {
		srv.TLS = tc
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	rc.url = srv.URL + "/hooks/timeout"
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var peek cloudEvent
	_ = json.Unmarshal(body, &peek)
	rc.mu.Lock()
	delay := rc.slow[peek.Subject]
	if rc.started == nil {
		rc.started = map[string]int{}
	}
	rc.started[peek.Subject]++
	brk := rc.breaks[peek.Subject+" "+peek.Type]
	delete(rc.breaks, peek.Subject+" "+peek.Type)
	rc.mu.Unlock()
	switch brk {
	case breakUnavailable:
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
		return
	case breakReset:
		// What a receiver that closed an idle keep-alive connection looks
		// like to the sender: the connection is reset under the request.
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			if tcp, ok := conn.(*net.TCPConn); ok {
				_ = tcp.SetLinger(0)
			}
			_ = conn.Close()
		}
		return
	}
	time.Sleep(delay)

	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.failures > 0 {
		rc.failures--
		http.Error(w, "down for maintenance", http.StatusInternalServerError)
		return
	}
	id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
	mac := hmac.New(sha256.New, rc.key)
	fmt.Fprintf(mac, "%s.%s.%s", id, ts, body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	sent, _ := strconv.ParseInt(ts, 10, 64)
	var ev cloudEvent
	switch {
	case !hmac.Equal([]byte(r.Header.Get("webhook-signature")), []byte(want)):
		rc.bad = append(rc.bad, "bad signature")
	case time.Since(time.Unix(sent, 0)).Abs() > 5*time.Minute:
		rc.bad = append(rc.bad, "stale timestamp")
	case r.Header.Get("Content-Type") != "application/cloudevents+json":
		rc.bad = append(rc.bad, "content type "+r.Header.Get("Content-Type"))
	case json.Unmarshal(body, &ev) != nil || ev.SpecVersion != "1.0" || ev.ID != id:
		rc.bad = append(rc.bad, "bad envelope: "+string(body))
	default:
		ev.arrived = time.Now()
		rc.got = append(rc.got, ev)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Error(w, "rejected", http.StatusBadRequest)
}

// events returns the accepted events about subject of the given type.
func (rc *receiver) events(subject, typ string) []cloudEvent {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []cloudEvent
	for _, e := range rc.got {
		if e.Subject == subject && e.Type == "app.amphitheatre.timeout."+typ {
			out = append(out, e)
		}
	}
	return out
}

func (rc *receiver) slowFor(subject string, d time.Duration) {
	rc.mu.Lock()
	if rc.slow == nil {
		rc.slow = map[string]time.Duration{}
	}
	rc.slow[subject] = d
	rc.mu.Unlock()
}

// begun returns how many deliveries about subject have begun.
func (rc *receiver) begun(subject string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.started[subject]
}

// The ways breakNext makes a delivery fail.
const (
	breakUnavailable = "503"
	breakReset       = "reset"
)

// breakNext makes the next delivery of event type typ about subject fail
// the way how says.
func (rc *receiver) breakNext(subject, typ, how string) {
	rc.mu.Lock()
	if rc.breaks == nil {
		rc.breaks = map[string]string{}
	}
	rc.breaks[subject+" "+"app.amphitheatre.timeout."+typ] = how
	rc.mu.Unlock()
}

// ids returns the distinct ids of the accepted events about subject of
// type typ: receivers drop repeats by id.
func (rc *receiver) ids(subject, typ string) []string {
	var out []string
	for _, e := range rc.events(subject, typ) {
		if !slices.Contains(out, e.ID) {
			out = append(out, e.ID)
		}
	}
	return out
}

func (rc *receiver) failNext(n int) {
	rc.mu.Lock()
	rc.failures = n
	rc.mu.Unlock()
}

func (rc *receiver) rejected() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.bad...)
}
