// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package integration runs the controller against a real kube-apiserver and etcd with the real Amphitheatre CRDs.
package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller"
)

// eventNamespace receives the Events about cluster-scoped objects: not
// "default", to show the setting works.
const eventNamespace = "kube-system"

var (
	k8s     client.Client
	dyn     dynamic.Interface
	clients kubernetes.Interface
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		// Failing, not skipping: an integration suite that skips in CI
		// proves nothing.
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make test`, which builds etcd and kube-apiserver and sets it")
		return 1
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(logFile())))

	env := &envtest.Environment{
		CRDDirectoryPaths: []string{
			filepath.Join("..", "..", "config", "crd", "bases"),
			filepath.Join("..", "..", "third_party", "amphitheatre", "crds"),
		},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start control plane:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dyn = dynamic.NewForConfigOrDie(cfg)
	clients = kubernetes.NewForConfigOrDie(cfg)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = controller.Setup(ctx, mgr, controller.Options{
		Workers:               4,
		ClusterEventNamespace: eventNamespace,
		StatusInterval:        time.Second,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()

	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		code = 1
	}
	return code
}

// logFile keeps the controller's log out of the test output; set
// TEST_LOG=stderr to see it.
func logFile() *os.File {
	if os.Getenv("TEST_LOG") == "stderr" {
		return os.Stderr
	}
	f, err := os.CreateTemp("", "timeout-controller-integration-*.log")
	if err != nil {
		return os.Stderr
	}
	fmt.Fprintln(os.Stderr, "controller log:", f.Name())
	return f
}
