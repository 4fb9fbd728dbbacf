// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package httpsend

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestARedirectIsTheAnswerNotFollowed(t *testing.T) {
	followed := false
	elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { followed = true }))
	defer elsewhere.Close()
	srv := httptest.NewServer(http.RedirectHandler(elsewhere.URL, http.StatusFound))
	defer srv.Close()

	resp, err := NewClient().Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusFound || followed {
		t.Fatalf("status %d, followed %v: want the 302 itself and nothing sent elsewhere", resp.StatusCode, followed)
	}
}

func TestATimeoutOfZeroKeepsTheBound(t *testing.T) {
	c := NewClient()
	SetTimeout(c, 0)
	SetTimeout(c, -time.Second)
	if c.Timeout != DefaultTimeout {
		t.Fatalf("timeout %s, want %s", c.Timeout, DefaultTimeout)
	}
	SetTimeout(c, time.Second)
	if c.Timeout != time.Second {
		t.Fatalf("timeout %s, want 1s", c.Timeout)
	}
}

func TestTheChannelsCAIsTheOneTrusted(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()

	if _, err := NewClient().Get(srv.URL); err == nil {
		t.Fatal("a server whose CA is not in the system roots was trusted")
	}
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c := NewClient()
	SetTLS(c, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("with the channel's CA: %v", err)
	}
	_ = resp.Body.Close()
}

func TestAnErrorDoesNotQuoteTheURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { time.Sleep(time.Second) }))
	defer srv.Close()
	secret := srv.URL + "/services/T000/B000/XXXXSECRET?token=XXXXSECRET"
	c := NewClient()
	SetTimeout(c, 50*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, secret, nil)
	_, err := c.Do(req)
	if err == nil {
		t.Fatal("no timeout")
	}
	if !strings.Contains(err.Error(), "XXXXSECRET") {
		t.Fatalf("net/http no longer quotes the URL (%v): this test proves nothing", err)
	}
	err = WithoutURL(err)
	if strings.Contains(err.Error(), "XXXXSECRET") {
		t.Fatalf("the error quotes the URL: %v", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "Client.Timeout") {
		t.Fatalf("what went wrong is lost: %v", err)
	}
}
