// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package actions

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Config is the actions mode's configuration (the flags of
// `timeout-controller --serve=actions`).
type Config struct {
	// Addr is where the pages are served.
	Addr string
	// CertDir holds tls.crt and tls.key to serve HTTPS, reloaded when they
	// change; empty serves plain HTTP (TLS ends at the Ingress).
	CertDir string
	// KeyringSecret is the links keyring's Secret.
	KeyringSecret types.NamespacedName
	// SecretNamespace is the only namespace a Slack channel's Secret may be
	// in; empty allows any.
	SecretNamespace string
	// TrustedProxies and UserHeader: see Options.
	TrustedProxies []netip.Prefix
	UserHeader     string
	// RequestsPerMinute and Burst: see Options.
	RequestsPerMinute, Burst int
	// PolicyInterval is how often the owners' index follows the policies'
	// targets.
	PolicyInterval time.Duration
}

// ParseCIDRs reads a comma-separated list of addresses and CIDRs
// (--trusted-proxy-cidrs); a bare address is a /32 or /128.
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a CIDR", f)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// ClientOptions are the options of the actions mode manager's client: the
// TimeoutPolicies are read as unstructured (for spec.actions), from the
// cache.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{Unstructured: true}}
}

// direct reads from the API server itself, never a cache, and writes
// through the manager's client.
type direct struct {
	client.Client
	reader client.Reader
}

func (d direct) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return d.reader.Get(ctx, key, obj, opts...)
}

func (d direct) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return d.reader.List(ctx, list, opts...)
}

// Setup adds the actions server to mgr: the HTTP server, the owners'
// index and a readiness check that the keyring can be read. It runs on
// every replica (no leader election): any replica may serve a click.
func Setup(mgr ctrl.Manager, cfg Config) (*Server, error) {
	meta, err := metadata.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	owners := NewOwners(meta, func(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
		m, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return schema.GroupVersionResource{}, err
		}
		return m.Resource, nil
	})
	rpm, burst := cfg.RequestsPerMinute, cfg.Burst
	srv := New(Options{
		API:               direct{Client: mgr.GetClient(), reader: mgr.GetAPIReader()},
		Cache:             mgr.GetClient(),
		Owners:            owners,
		KeyringSecret:     cfg.KeyringSecret,
		SecretNamespace:   cfg.SecretNamespace,
		TrustedProxies:    cfg.TrustedProxies,
		UserHeader:        cfg.UserHeader,
		RequestsPerMinute: rpm,
		Burst:             burst,
		Log:               ctrl.Log.WithName("actions"),
	})
	every := cfg.PolicyInterval
	if every <= 0 {
		every = 10 * time.Second
	}
	if err := mgr.Add(everyReplica(func(ctx context.Context) error {
		owners.Run(ctx, srv.policies, every)
		return nil
	})); err != nil {
		return nil, err
	}
	var tlsConfig *tls.Config
	if cfg.CertDir != "" {
		cw, err := certwatcher.New(filepath.Join(cfg.CertDir, "tls.crt"), filepath.Join(cfg.CertDir, "tls.key"))
		if err != nil {
			return nil, fmt.Errorf("--actions-tls-cert-dir: %w", err)
		}
		if err := mgr.Add(cw); err != nil {
			return nil, err
		}
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cw.GetCertificate}
	}
	if err := mgr.Add(everyReplica(func(ctx context.Context) error {
		return srv.Serve(ctx, cfg.Addr, tlsConfig)
	})); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("links-keyring", func(r *http.Request) error {
		_, err := srv.keys.get(r.Context(), false)
		return err
	}); err != nil {
		return nil, err
	}
	return srv, nil
}

// Serve serves the pages on addr (HTTPS with tlsConfig) until ctx ends,
// then lets the requests in flight finish.
func (s *Server) Serve(ctx context.Context, addr string, tlsConfig *tls.Config) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	if tlsConfig != nil {
		l = tls.NewListener(l, tlsConfig)
	}
	hs := s.HTTPServer(addr)
	done := make(chan error, 1)
	go func() { done <- hs.Serve(l) }()
	s.o.Log.Info("serving the pages of links", "address", l.Addr().String(), "tls", tlsConfig != nil)
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = hs.Shutdown(shutdown)
	if e := <-done; !errors.Is(e, http.ErrServerClosed) {
		err = errors.Join(err, e)
	}
	return err
}

// everyReplica is a runnable that runs on every replica, leader or not.
type everyReplica func(ctx context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (f everyReplica) NeedLeaderElection() bool        { return false }

var _ manager.LeaderElectionRunnable = everyReplica(nil)
