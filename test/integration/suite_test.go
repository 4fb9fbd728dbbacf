// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package integration runs the controller against a real kube-apiserver and etcd with the real Amphitheatre CRDs.
package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"go.uber.org/zap/zapcore"
	"k8s.io/utils/ptr"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/archive"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/controller"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/objectstore"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/usage"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
)

// eventNamespace receives the Events about cluster-scoped objects: not
// "default", to show the setting works.
const eventNamespace = "kube-system"

// outboxNamespace keeps the controller's outbox, as the pod's own
// namespace does in a cluster.
const outboxNamespace = "timeout-system"

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
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make test`, which builds the control plane (etcd, kube-apiserver, kube-controller-manager) and sets it")
		return 1
	}
	// Debug level, so the secret check below sees everything logged.
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.DebugLevel), zap.WriteTo(logFile())))

	// With kube-controller-manager: a deleted Playbook's namespace and
	// workloads are really garbage collected.
	plane, err := testenv.Start(context.Background(), testenv.Options{Root: filepath.Join("..", "..")})
	defer func() { _ = plane.Stop() }()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start control plane:", err)
		return 1
	}
	cfg := plane.Config
	webhookClient = plane.WebhookClient
	// Amphitheatre's controller, as far as deletion goes: every test
	// Playbook carries its finalizer.
	standInCtx, stopStandIn := context.WithCancel(context.Background())
	waitStandIn, err := testenv.RunFinalizer(standInCtx, cfg)
	if err != nil {
		stopStandIn()
		fmt.Fprintln(os.Stderr, "start the Amphitheatre stand-in:", err)
		return 1
	}
	defer func() { stopStandIn(); waitStandIn() }()

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dyn = dynamic.NewForConfigOrDie(cfg)
	clients = kubernetes.NewForConfigOrDie(cfg)

	dir, err := os.MkdirTemp("", "timeout-controller-integration-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	auditPath, archiveDir = filepath.Join(dir, "audit.jsonl"), filepath.Join(dir, "archive")
	archives = &routedArchive{Dir: archive.Dir(archiveDir)}
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: outboxNamespace}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if prometheusAddr, err = testenv.FreeAddr(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := startController(cfg, scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// As installed: every policy is stamped with its author, and names
	// only channels its writer may use.
	if err := installChannelAdmission(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "install the channel admission policies:", err)
		return 1
	}
	code := m.Run()
	stopS3Server()
	if err := stopController(); err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		code = 1
	}
	if leaked := secretsInLog(); len(leaked) > 0 {
		fmt.Fprintln(os.Stderr, "secrets found in the controller log:", leaked)
		code = 1
	}
	return code
}

var (
	// auditPath is the controller's audit log; archiveDir its archive.
	auditPath, archiveDir string

	// webhookClient is the client certificate the API server presents
	// to admission webhooks.
	webhookClient testenv.WebhookClient

	restConfig  *rest.Config
	testScheme  *runtime.Scheme
	stopCurrent func() error
	// actionsURL is the controller's --actions-url when it starts; empty
	// but while a test of links runs.
	actionsURL string
)

// startController runs the controller in this process, as main does,
// until stopController.
func startController(cfg *rest.Config, scheme *runtime.Scheme) (func() error, error) {
	restConfig, testScheme = cfg, scheme
	// The client limits the controller ships with (--kube-api-qps and
	// --kube-api-burst), not client-go's defaults.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 200, 500
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  objectstore.CacheOptions(),
		// Each start is a new process as far as the controller is concerned.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		cancel()
		return nil, err
	}
	auditLog, err := audit.Open(auditPath)
	if err != nil {
		cancel()
		return nil, err
	}
	// The traffic tests' Prometheus listens there once they start it.
	prom, err := usage.NewPrometheus("http://"+prometheusAddr, "", "")
	if err != nil {
		cancel()
		return nil, err
	}
	err = controller.Setup(ctx, mgr, controller.Options{
		Prometheus:            prom,
		Workers:               4,
		ClusterEventNamespace: eventNamespace,
		StatusInterval:        time.Second,
		SecretNamespace:       secretNamespace,
		OutboxNamespace:       outboxNamespace,
		OwnerAddresses:        ownerAddresses,
		Audit:                 auditLog,
		Archive:               archives,
		// A controller-wide cap high enough never to hold a test back, so
		// that every deletion goes through it as in a capped cluster.
		MaxDeletionsPerMinute: 60000,
		// The default: every send goes through the channel's limit.
		MaxSendsPerChannel: 16,
		ActionsURL:         actionsURL,
	})
	if err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopCurrent = func() error {
		cancel()
		err := <-done
		return errors.Join(err, auditLog.Close())
	}
	return stopCurrent, nil
}

func stopController() error {
	if stopCurrent == nil {
		return nil
	}
	err := stopCurrent()
	stopCurrent = nil
	return err
}

// secrets are the credentials the tests give the controller; none may
// reach its log.
var secrets []string

func secretsInLog() []string {
	if logPath == "" {
		fmt.Fprintln(os.Stderr, "the controller log went to standard error (TEST_LOG=stderr or no temporary file): secrets in it were not looked for")
		return nil
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		return []string{err.Error()}
	}
	var leaked []string
	for _, s := range secrets {
		if strings.Contains(string(data), s) {
			leaked = append(leaked, s)
		}
	}
	return leaked
}

var logPath string

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
	logPath = f.Name()
	fmt.Fprintln(os.Stderr, "controller log:", f.Name())
	return f
}
