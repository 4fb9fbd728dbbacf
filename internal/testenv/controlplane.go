// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package testenv starts the local control plane that the tests, the demo
// and the bench run against: etcd and kube-apiserver (envtest) with the
// TimeoutPolicy and Amphitheatre CRDs, and kube-controller-manager, so that
// garbage collection and namespace deletion really happen. It also holds a
// stand-in for Amphitheatre's controller (amphitheatre.go).
package testenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Controllers are the kube-controller-manager controllers the plane runs:
// what it takes for a deleted Playbook to give its capacity back (garbage
// collection of what it owns, namespace deletion, the Deployments and
// ReplicaSets that make Pods) and for namespaces to get their service
// accounts and tokens, as in a cluster.
var Controllers = []string{
	"garbage-collector-controller",
	"namespace-controller",
	"deployment-controller",
	"replicaset-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
}

// ServiceCIDR is the plane's Service ClusterIP range: room for the
// Services of some 30,000 Playbooks deployed with DefaultActors.
const ServiceCIDR = "10.0.0.0/16"

// Options say what to start.
type Options struct {
	// Root is the repository, where the CRDs are read from.
	Root string
	// APIServerOnly leaves kube-controller-manager out: nothing is garbage
	// collected, as on envtest's usual plane.
	APIServerOnly bool
	// Log receives kube-controller-manager's output; discarded when nil.
	Log io.Writer
}

// Plane is a running local control plane.
type Plane struct {
	Env *envtest.Environment
	// Config is an administrator's client configuration.
	Config *rest.Config
	// ControllerManager is kube-controller-manager's process; nil on an
	// API-server-only plane.
	ControllerManager *os.Process
	// WebhookClient is the client certificate kube-apiserver presents to
	// admission webhooks.
	WebhookClient WebhookClient

	dir, webhookDir string
	done            chan error
}

// Start starts etcd and kube-apiserver from KUBEBUILDER_ASSETS with the
// CRDs installed, then kube-controller-manager from the same directory,
// and returns once each answers its health check. Stop it with Stop, also
// when Start fails.
func Start(ctx context.Context, opts Options) (*Plane, error) {
	p := &Plane{Env: &envtest.Environment{
		CRDDirectoryPaths: []string{
			filepath.Join(opts.Root, "config", "crd", "bases"),
			filepath.Join(opts.Root, "third_party", "amphitheatre", "crds"),
		},
		ErrorIfCRDPathMissing: true,
	}}
	// envtest's default range, a /24, has ClusterIPs for the Services of
	// about a hundred Playbooks that Deploy made; the bench makes thousands.
	p.Env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", ServiceCIDR)
	if err := p.presentWebhookClientCert(); err != nil {
		return p, fmt.Errorf("make the webhooks' client certificate: %w", err)
	}
	cfg, err := p.Env.Start()
	if err != nil {
		return p, fmt.Errorf("start etcd and kube-apiserver: %w", err)
	}
	p.Config = cfg
	if opts.APIServerOnly {
		return p, nil
	}
	if err := p.startControllerManager(ctx, opts.Log); err != nil {
		return p, fmt.Errorf("start kube-controller-manager: %w", err)
	}
	return p, nil
}

// Stop stops kube-controller-manager, then kube-apiserver and etcd.
func (p *Plane) Stop() error {
	var errs []error
	if p.ControllerManager != nil {
		_ = p.ControllerManager.Signal(syscall.SIGTERM)
		// Its exit status after a signal of ours says nothing.
		select {
		case exit := <-p.done:
			_ = exit
		case <-time.After(10 * time.Second):
			_ = p.ControllerManager.Kill()
			exit := <-p.done
			_ = exit
		}
	}
	if p.Env != nil {
		errs = append(errs, p.Env.Stop())
	}
	for _, dir := range []string{p.dir, p.webhookDir} {
		if dir != "" {
			errs = append(errs, os.RemoveAll(dir))
		}
	}
	return errors.Join(errs...)
}

func (p *Plane) startControllerManager(ctx context.Context, log io.Writer) error {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if p.Env.BinaryAssetsDirectory != "" {
		assets = p.Env.BinaryAssetsDirectory
	}
	bin := filepath.Join(assets, "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%w: hack/control-plane.sh builds it next to kube-apiserver", err)
	}
	dir, err := os.MkdirTemp("", "kube-controller-manager-*")
	if err != nil {
		return err
	}
	p.dir = dir
	kubeconfig, ca := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(kubeconfig, p.Env.KubeConfig, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(ca, p.Config.CAData, 0o600); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	cmd := exec.Command(bin,
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(dir, "serving"),
		"--leader-elect=false",
		"--controllers="+strings.Join(Controllers, ","),
		// The key kube-apiserver verifies service account tokens with.
		"--service-account-private-key-file="+filepath.Join(p.Env.ControlPlane.APIServer.CertDir, "sa-signer.key"),
		"--root-ca-file="+ca,
		"--use-service-account-credentials=false",
	)
	if log == nil {
		log = io.Discard
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return err
	}
	p.ControllerManager = cmd.Process
	p.done = make(chan error, 1)
	go func() { p.done <- cmd.Wait() }()
	return p.waitHealthy(ctx, port)
}

// waitHealthy polls kube-controller-manager's /healthz, which answers ok
// once its controllers are started.
func (p *Plane) waitHealthy(ctx context.Context, port int) error {
	// Its serving certificate is self-signed; the address is loopback.
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health check of a process this package started
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s answered %s", url, resp.Status)
		}
		last = err
		select {
		case err := <-p.done:
			p.done <- err
			return fmt.Errorf("exited before it was healthy: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("not healthy within a minute: %w", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func freePort() (int, error) {
	addr, err := FreeAddr()
	if err != nil {
		return 0, err
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(port)
}

// FreeAddr returns a loopback address nothing listens on right now, for
// a server a test starts: another process may take it meanwhile.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}
