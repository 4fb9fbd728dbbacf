// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/actions"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/metrics"
)

// actionsOptions are the flags of --serve=actions.
type actionsOptions struct {
	addr, certDir     string
	keyring           string
	trustedProxies    string
	userHeader        string
	requestsPerMinute int
	burst             int
}

func (a *actionsOptions) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&a.addr, "actions-bind-address", ":8080", "With --serve=actions: the address the pages of links and the Slack endpoint (/slack/interactions) are served on.")
	fs.StringVar(&a.certDir, "actions-tls-cert-dir", "", "With --serve=actions: a directory holding tls.crt and tls.key (kept by cert-manager, say), reloaded when they change, to serve HTTPS; empty serves plain HTTP, for an Ingress that ends TLS.")
	fs.StringVar(&a.keyring, "actions-keyring-secret", actions.SecretName, "With --serve=actions: the Secret holding the keys links are signed with, NAME in the pod's namespace (POD_NAMESPACE) or NAMESPACE/NAME; the controller creates it.")
	fs.StringVar(&a.trustedProxies, "trusted-proxy-cidrs", "", "With --serve=actions: addresses and CIDRs of the proxies in front of the server (an auth proxy, the Ingress), comma-separated: only from them are --user-header and X-Forwarded-For believed. Empty trusts none.")
	fs.StringVar(&a.userHeader, "user-header", "", "With --serve=actions: the header in which a trusted proxy (an auth proxy such as oauth2-proxy) names the signed-in user, e.g. X-Forwarded-Email; a change is then stamped with that user instead of the link's recipient. Empty ignores it.")
	fs.IntVar(&a.requestsPerMinute, "actions-requests-per-minute", actions.DefaultRequestsPerMinute, "With --serve=actions: the page requests each client address may make a minute, past --actions-burst; more get 429. 0 turns the limit off.")
	fs.IntVar(&a.burst, "actions-burst", actions.DefaultBurst, "With --serve=actions: the page requests each client address may make at once.")
}

// run runs the actions server until a signal stops it.
func (a *actionsOptions) run(metricsAddr string, metricsSecure bool, probeAddr string, qps float64, burst int, secretNamespace string) error {
	proxies, err := actions.ParseCIDRs(a.trustedProxies)
	if err != nil {
		return fmt.Errorf("--trusted-proxy-cidrs: %w", err)
	}
	keyring := types.NamespacedName{Namespace: os.Getenv("POD_NAMESPACE"), Name: a.keyring}
	if ns, name, ok := strings.Cut(a.keyring, "/"); ok {
		keyring = types.NamespacedName{Namespace: ns, Name: name}
	}
	if keyring.Namespace == "" || keyring.Name == "" {
		return fmt.Errorf("--actions-keyring-secret %q: give NAMESPACE/NAME, or NAME with POD_NAMESPACE set", a.keyring)
	}
	// What the server reads: Secrets (the keyring, Slack's signing
	// secrets), namespaces (as metadata), TimeoutPolicies and
	// NotificationChannels. Governed objects are read as unstructured.
	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
	cfg.UserAgent = kube.Name + "-actions"
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metrics.ServerOptions(metricsAddr, metricsSecure),
		HealthProbeBindAddress: probeAddr,
		Client:                 actions.ClientOptions(),
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if _, err := actions.Setup(mgr, actions.Config{
		Addr: a.addr, CertDir: a.certDir, KeyringSecret: keyring, SecretNamespace: secretNamespace,
		TrustedProxies: proxies, UserHeader: a.userHeader, RequestsPerMinute: a.requestsPerMinute, Burst: a.burst,
	}); err != nil {
		return err
	}
	ctrl.Log.Info("starting the actions server", "address", a.addr, "keyring", keyring.String())
	return mgr.Start(ctrl.SetupSignalHandler())
}
