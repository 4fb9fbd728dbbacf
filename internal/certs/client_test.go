// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRequireClientCertLetsInOnlyClientsItsCASigns(t *testing.T) {
	now := time.Now()
	caPEM, certPEM, keyPEM := NewClientCertificate(now, time.Hour, "kube-apiserver")
	_, otherCertPEM, otherKeyPEM := NewClientCertificate(now, time.Hour, "kube-apiserver")
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	require, err := RequireClientCert(caFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.TLS = &tls.Config{}
	require(srv.TLS)
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())

	pair := func(certPEM, keyPEM []byte) []tls.Certificate {
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{c}
	}
	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
		heard bool
	}{
		{"hears a client with a certificate its CA signs", pair(certPEM, keyPEM), true},
		{"refuses a client without a certificate", nil, false},
		{"refuses a client with a certificate another CA signs", pair(otherCertPEM, otherKeyPEM), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: tc.certs}}}
			resp, err := hc.Get(srv.URL)
			if err == nil {
				_ = resp.Body.Close()
			}
			if heard := err == nil; heard != tc.heard {
				t.Errorf("heard: %t (%v), want %t", heard, err, tc.heard)
			}
		})
	}
}

func TestRequireClientCertRefusesAFileWithoutACertificate(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.crt")
	if err := os.WriteFile(empty, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, file := range map[string]string{"a missing file": filepath.Join(dir, "missing.crt"), "a file without PEM": empty} {
		t.Run(name, func(t *testing.T) {
			if _, err := RequireClientCert(file); err == nil || !strings.Contains(err.Error(), "client CA") {
				t.Errorf("RequireClientCert(%s): %v, want an error about the client CA", file, err)
			}
		})
	}
}
