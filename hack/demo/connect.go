// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/amphitheatre-app/timeout-controller/hack/internal/repo"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/usage"
)

// connectWebhook is the ValidatingWebhookConfiguration the demo registers
// for the controller's admission webhook, which counts a kubectl exec,
// attach or port-forward to a Pod as use of the Playbook that owns it.
const connectWebhook = "demo-connect"

// registerConnectWebhook registers the webhook as config/webhook ships it,
// pointed at the controller on loopback at hook (host:port) instead of
// its Service. The controller writes its caBundle when it starts.
func registerConnectWebhook(ctx context.Context, cfg *rest.Config, hook string) error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "webhook", "validatingwebhookconfiguration.yaml"))
	if err != nil {
		return err
	}
	wh := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := yaml.Unmarshal(raw, wh); err != nil {
		return fmt.Errorf("config/webhook: %w", err)
	}
	wh.Name = connectWebhook
	url := "https://" + hook + usage.ConnectPath
	for i := range wh.Webhooks {
		wh.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, wh, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create ValidatingWebhookConfiguration %s: %w", connectWebhook, err)
	}
	return nil
}

// awaitConnectWebhook waits until the webhook's registration carries a
// caBundle and the controller answers at hook with a certificate it
// trusts: from then on the API server tells it of each exec.
func awaitConnectWebhook(ctx context.Context, cfg *rest.Config, hook string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(hook)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	last := "no caBundle yet"
	for {
		wh, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, connectWebhook, metav1.GetOptions{})
		if err == nil && len(wh.Webhooks) > 0 && len(wh.Webhooks[0].ClientConfig.CABundle) > 0 {
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(wh.Webhooks[0].ClientConfig.CABundle)
			conn, err := tls.Dial("tcp", hook, &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12})
			if err == nil {
				return conn.Close()
			}
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the controller's admission webhook is not serving at %s after 30s: %s", hook, last)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
