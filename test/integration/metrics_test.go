// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"

	"github.com/amphitheatre-app/timeout-controller/internal/controller/metrics"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// scraperToken returns a token of a new ServiceAccount, bound to the
// shipped metrics-reader ClusterRole when bound is set.
func scraperToken(t *testing.T, name string, bound bool) string {
	t.Helper()
	ctx := context.Background()
	const ns = "monitoring"
	_ = k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k8s.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if bound {
		bindShippedClusterRole(t, "metrics_reader_role.yaml", "e2e-"+name, ns, name)
	}
	tr, err := clients.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s: %v", name, err)
	}
	return tr.Status.Token
}

func TestMetricsAreServedOnlyToAuthorizedScrapers(t *testing.T) {
	t.Parallel()
	addr := serveMetrics(t)
	scrape := func(token string) (int, error) {
		code, _, err := scrapeMetrics(addr, token)
		return code, err
	}
	expect := func(what, token string, want int) {
		t.Helper()
		var got int
		fixture.Eventually(t, 15*time.Second, what, func() (bool, error) {
			var err error
			got, err = scrape(token)
			return err == nil && got == want, err
		})
	}
	expect("scraping without a token is refused (401)", "", http.StatusUnauthorized)
	expect("scraping with a token not allowed /metrics is refused (403)", scraperToken(t, "not-a-scraper", false), http.StatusForbidden)
	expect("scraping with an authorized token works (200)", scraperToken(t, "prometheus", true), http.StatusOK)
	if code, err := scrape("not-a-token"); err != nil || code != http.StatusUnauthorized {
		t.Errorf("scraping with a made-up token: %d, %v; want it refused (401)", code, err)
	}
}

// serveMetrics starts a manager that serves the process's metrics registry,
// which the suite's controller fills, as main does: over HTTPS, to
// authorized callers. It returns the address.
func serveMetrics(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 testScheme,
		Metrics:                metrics.ServerOptions(addr, true),
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the manager stopped with %v", err)
		}
	})
	return addr
}

// scrapeMetrics GETs /metrics from addr with the bearer token, when set.
func scrapeMetrics(addr, token string) (int, []byte, error) {
	// The certificate is self-signed; what is checked here is the caller.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed test server
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}
