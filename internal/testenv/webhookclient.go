// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/amphitheatre-app/timeout-controller/internal/certs"
)

// WebhookClient names the PEM files of the client certificate
// kube-apiserver presents to admission webhooks, its key, and the CA that
// signs it (what --webhook-client-ca is given).
type WebhookClient struct {
	CA, Cert, Key string
}

// presentWebhookClientCert makes kube-apiserver present a client
// certificate to the admission webhooks it calls, as an administrator
// does with --webhook-client-ca (docs/reference/webhook.md): an
// AdmissionConfiguration whose kubeConfigFile names the certificate for
// every webhook ("*": the tests' webhooks listen on ports chosen at run
// time). Webhooks that do not ask for one never see it.
func (p *Plane) presentWebhookClientCert() error {
	dir, err := os.MkdirTemp("", "kube-apiserver-webhook-client-*")
	if err != nil {
		return err
	}
	p.webhookDir = dir
	caPEM, certPEM, keyPEM := certs.NewClientCertificate(time.Now(), 24*time.Hour, "kube-apiserver-webhook-client")
	p.WebhookClient = WebhookClient{CA: filepath.Join(dir, "client-ca.crt"), Cert: filepath.Join(dir, "client.crt"), Key: filepath.Join(dir, "client.key")}
	cert, key := p.WebhookClient.Cert, p.WebhookClient.Key
	kubeconfig, admission := filepath.Join(dir, "webhook-kubeconfig.yaml"), filepath.Join(dir, "admission.yaml")
	files := map[string][]byte{
		p.WebhookClient.CA: caPEM,
		cert:               certPEM,
		key:                keyPEM,
		kubeconfig: fmt.Appendf(nil, `apiVersion: v1
kind: Config
users:
  - name: "*"
    user:
      client-certificate: %s
      client-key: %s
`, cert, key),
		admission: fmt.Appendf(nil, `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: ValidatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: %s
`, kubeconfig),
	}
	for name, data := range files {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			return err
		}
	}
	p.Env.ControlPlane.GetAPIServer().Configure().Set("admission-control-config-file", admission)
	return nil
}
