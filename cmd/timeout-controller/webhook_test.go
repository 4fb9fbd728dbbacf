// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/amphitheatre-app/timeout-controller/internal/certs"
)

// serverTLS is the TLS configuration o's webhook server starts with.
func serverTLS(t *testing.T, o *webhookOptions) *tls.Config {
	t.Helper()
	srv, err := o.server()
	if err != nil {
		t.Fatal(err)
	}
	c := &tls.Config{}
	for _, opt := range srv.(*webhook.DefaultServer).Options.TLSOpts {
		opt(c)
	}
	return c
}

func TestWebhookClientCARequiresTheAPIServersCertificate(t *testing.T) {
	caPEM, _, _ := certs.NewClientCertificate(time.Now(), time.Hour, "kube-apiserver")
	dir := t.TempDir()
	ca := filepath.Join(dir, "client-ca.crt")
	if err := os.WriteFile(ca, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, certDir := range []string{"", dir} {
		o := &webhookOptions{port: 9443, certDir: certDir, clientCA: ca}
		if c := serverTLS(t, o); c.ClientAuth != tls.RequireAndVerifyClientCert || c.ClientCAs == nil {
			t.Errorf("with --webhook-cert-dir=%q and --webhook-client-ca, client auth %v with CAs %v, want every client's certificate verified", certDir, c.ClientAuth, c.ClientCAs)
		}
	}
	if c := serverTLS(t, &webhookOptions{port: 9443}); c.ClientAuth != tls.NoClientCert {
		t.Errorf("without --webhook-client-ca, client auth %v, want none asked", c.ClientAuth)
	}
	if _, err := (&webhookOptions{port: 9443, clientCA: filepath.Join(dir, "missing.crt")}).server(); err == nil || !strings.Contains(err.Error(), "--webhook-client-ca") {
		t.Errorf("a missing client CA file: %v, want an error naming the flag", err)
	}
}
