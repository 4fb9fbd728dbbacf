// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"crypto/tls"
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/amphitheatre-app/timeout-controller/internal/certs"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/usage"
)

// webhookOptions are the flags of the connection webhook.
type webhookOptions struct {
	port                                    int
	certDir, secret, configuration, service string
	// clientCA, when set, is the CA file whose client certificates alone
	// are let in: the API server's.
	clientCA string

	// rotator keeps the certificate when certDir is empty.
	rotator *certs.Rotator
}

// server is the manager's webhook server: serving the files in certDir,
// or the certificate the rotator keeps; with clientCA, to the clients
// whose certificate that CA signs only.
func (o *webhookOptions) server() (webhook.Server, error) {
	if o.port == 0 {
		// Never started: nothing is registered on it.
		return webhook.NewServer(webhook.Options{Port: -1}), nil
	}
	opts := webhook.Options{Port: o.port}
	if o.clientCA != "" {
		require, err := certs.RequireClientCert(o.clientCA)
		if err != nil {
			return nil, fmt.Errorf("--webhook-client-ca: %w", err)
		}
		opts.TLSOpts = append(opts.TLSOpts, require)
	}
	if o.certDir != "" {
		opts.CertDir = filepath.Clean(o.certDir)
		return webhook.NewServer(opts), nil
	}
	o.rotator = &certs.Rotator{Clock: clock.RealClock{}}
	opts.TLSOpts = append(opts.TLSOpts, func(c *tls.Config) {
		c.GetCertificate = o.rotator.GetCertificate
		c.MinVersion = tls.VersionTLS12
	})
	return webhook.NewServer(opts), nil
}

// setup registers the webhook and, without certDir, the rotator, which
// keeps its Secret in namespace, the pod's own.
func (o *webhookOptions) setup(mgr manager.Manager, namespace string) error {
	if o.port == 0 {
		return nil
	}
	if err := usage.SetupConnections(mgr, clock.RealClock{}); err != nil {
		return err
	}
	if o.rotator == nil {
		return nil
	}
	r := o.rotator
	r.Reader, r.Writer = mgr.GetAPIReader(), mgr.GetClient()
	r.Secret = types.NamespacedName{Namespace: namespace, Name: o.secret}
	r.Webhook = o.configuration
	r.DNSNames = []string{
		o.service + "." + namespace + ".svc",
		o.service + "." + namespace + ".svc.cluster.local",
		o.service + "." + namespace,
		o.service,
	}
	if err := mgr.Add(r); err != nil {
		return fmt.Errorf("add the webhook certificate rotator: %w", err)
	}
	return nil
}
