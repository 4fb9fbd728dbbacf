// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package e2e installs the controller as shipped, the image built from
// source and the Helm chart or config/default, on a one-node cluster built
// from source (internal/testenv/cluster), and checks its whole job there:
// Pods Ready through their probes, a leader, a Playbook whose namespace runs
// real Pods reminded by mail and reclaimed, a failover and an upgrade with no
// early deletion and no message twice, metrics through the Service, and the
// Pod's security settings as the kernel sees them.
//
// `make e2e` runs it (and `make test` runs `make e2e`). It needs root,
// containerd, runc, the CNI plugins and iptables: it fails, naming what is
// missing, rather than skip.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/cluster"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/image"
)

// The controller's image as the chart names it, under two tags: the
// upgrade moves from the first to the second.
const (
	repository = "ghcr.io/amphitheatre-app/timeout-controller"
	tagV1      = "e2e-1"
	tagV2      = "e2e-2"
)

var (
	root    = filepath.Join("..", "..")
	c       *cluster.Cluster
	k8s     client.Client
	inbox   *fixture.Mailbox
	kubectl string
	helm    string
	// kustomize builds config/default.
	kustomize string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	assets := os.Getenv("TIMEOUT_E2E_ASSETS")
	if assets == "" {
		// Failing, not skipping: an e2e suite that skips in CI proves
		// nothing.
		fmt.Fprintln(os.Stderr, "TIMEOUT_E2E_ASSETS is not set: run `make e2e`, which builds the cluster's binaries (hack/control-plane.sh --node) and sets it")
		return 1
	}
	if err := cluster.Preflight(assets); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	var err error
	if root, err = filepath.Abs(root); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubectl, helm, kustomize = filepath.Join(assets, "kubectl"), filepath.Join(root, "bin", "helm"), filepath.Join(root, "bin", "kustomize")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	start := time.Now()
	c, err = cluster.Start(ctx, cluster.Options{Root: root, Assets: assets, Progress: os.Stderr})
	code := 1
	defer func() {
		if code != 0 && c != nil && c.Dir != "" {
			c.KeepLogs()
			fmt.Fprintf(os.Stderr, "e2e: the cluster's logs are kept in %s/logs\n", c.Dir)
		}
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stop the cluster:", err)
		}
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start the cluster:", err)
		return code
	}
	fmt.Fprintf(os.Stderr, "e2e: cluster Ready in %s\n", time.Since(start).Round(time.Second))
	if err := setUp(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return code
	}
	code = m.Run()
	return code
}

// setUp builds and imports the controller's image, installs Amphitheatre's
// CRDs, and starts the mail inbox and Amphitheatre's finalizer stand-in.
func setUp(ctx context.Context) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	var err error
	if k8s, err = client.New(c.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	tarball := filepath.Join(c.Dir, "timeout-controller.tar")
	if err := image.Controller(ctx, root, tarball, "", repository+":"+tagV1, repository+":"+tagV2); err != nil {
		return fmt.Errorf("build the controller's image: %w", err)
	}
	if err := c.ImportImage(ctx, tarball); err != nil {
		return fmt.Errorf("import the controller's image: %w", err)
	}
	if _, err := kube(ctx, "apply", "--server-side", "-f", filepath.Join(root, "third_party", "amphitheatre", "crds")); err != nil {
		return err
	}
	if _, err := kube(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd/playbooks.amphitheatre.app", "crd/actors.amphitheatre.app"); err != nil {
		return err
	}
	if inbox, err = fixture.StartMailbox(cluster.HostIP, nil); err != nil {
		return err
	}
	if _, err := testenv.RunFinalizer(ctx, c.Config); err != nil {
		return fmt.Errorf("start the finalizer stand-in: %w", err)
	}
	return nil
}
