// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"
)

// RequireClientCert returns a TLS option that refuses, at the handshake,
// every client without a certificate for client authentication that a
// CA in the PEM file caFile signs: the webhook then hears only the API
// server, when the API server presents such a certificate to it (its
// admission configuration's kubeConfigFile). The file is read once, now.
func RequireClientCert(caFile string) (func(*tls.Config), error) {
	data, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read the webhook's client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, errors.New("the webhook's client CA file " + caFile + " holds no PEM certificate")
	}
	return func(c *tls.Config) {
		c.ClientCAs = pool
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}, nil
}

// NewClientCertificate makes a CA and a certificate for client
// authentication it signs for commonName, valid from an hour before now
// for validity, as PEM: the CA, the certificate and its key. The local
// control plane's API server presents one to webhooks (internal/testenv);
// an administrator makes theirs with their own tools.
func NewClientCertificate(now time.Time, validity time.Duration, commonName string) (caPEM, certPEM, keyPEM []byte) {
	ca, caKey, caPEM, _ := mustNewCA(now, validity)
	key := newKey()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     ca.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		panic(err)
	}
	return caPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), encodeKey(key)
}
