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
	"github.com/amphitheatre-app/timeout-controller/internal/controller"
)

// webhookOptions are the flags of the connection webhook.
type webhookOptions struct {
	port                                    int
	certDir, secret, configuration, service string

	// rotator keeps the certificate when certDir is empty.
	rotator *certs.Rotator
}

// server is the manager's webhook server: serving the files in certDir,
// or the certificate the rotator keeps.
func (o *webhookOptions) server() webhook.Server {
	if o.port == 0 {
		// Never started: nothing is registered on it.
		return webhook.NewServer(webhook.Options{Port: -1})
	}
	opts := webhook.Options{Port: o.port}
	if o.certDir != "" {
		opts.CertDir = filepath.Clean(o.certDir)
		return webhook.NewServer(opts)
	}
	o.rotator = &certs.Rotator{Clock: clock.RealClock{}}
	opts.TLSOpts = []func(*tls.Config){func(c *tls.Config) {
		c.GetCertificate = o.rotator.GetCertificate
		c.MinVersion = tls.VersionTLS12
	}}
	return webhook.NewServer(opts)
}

// setup registers the webhook and, without certDir, the rotator, which
// keeps its Secret in namespace, the pod's own.
func (o *webhookOptions) setup(mgr manager.Manager, namespace string) error {
	if o.port == 0 {
		return nil
	}
	if err := controller.SetupConnections(mgr, clock.RealClock{}); err != nil {
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
