// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Command timeout-controller deletes Kubernetes objects, Amphitheatre Playbooks by default, when they expire.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	goruntime "runtime"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/archive"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/controller"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/delivery"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/metrics"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/objectstore"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/usage"
	"github.com/amphitheatre-app/timeout-controller/internal/outbox"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "timeout-controller:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		metricsAddr, probeAddr  string
		metricsSecure           bool
		profileAddr             string
		leaderElect             bool
		leaderElectionNamespace string
		leaseDuration           time.Duration
		renewDeadline           time.Duration
		retryPeriod             time.Duration
		shutdownTimeout         time.Duration
		auditDest               string
		archiveTo, archiveDir   string
		archiveS3               archive.S3Options
		qps                     float64
		hook                    webhookOptions
		burst                   int
		opts                    controller.Options
		prometheusURL           string
		prometheusToken         string
		prometheusCA            string
		serve                   string
		act                     actionsOptions
	)
	flag.StringVar(&serve, "serve", "controller", `What the process runs: "controller", or "actions": the server of the links in messages (pages, clicks, Slack buttons; docs/guides/actions-server.md), as its own Deployment with its own ServiceAccount.`)
	act.bindFlags(flag.CommandLine)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", `Address the Prometheus metrics endpoint binds to; "0" turns it off.`)
	flag.BoolVar(&metricsSecure, "metrics-secure", true, "Serve metrics over HTTPS to callers the API server authenticates and authorizes (get on the non-resource URL /metrics); false serves plain HTTP to anyone.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	flag.StringVar(&profileAddr, "profile-bind-address", "0", `Address Go's pprof profiles (/debug/pprof/) are served on, for performance work; "0" turns them off.`)
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader through a Lease so that only one replica acts at a time.")
	flag.StringVar(&leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease; the pod's own namespace when empty (required with --leader-elect out of a cluster).")
	flag.DurationVar(&leaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a standby waits after the leader's last renewal before it takes over.")
	flag.DurationVar(&renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader keeps trying to renew its Lease before it stops acting.")
	flag.DurationVar(&retryPeriod, "leader-elect-retry-period", 2*time.Second, "How often replicas try to acquire or renew the Lease.")
	flag.DurationVar(&shutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "How long in-flight work may take to finish after SIGTERM before the process exits; the Lease is released either way.")
	flag.BoolVar(&opts.DryRun, "dry-run", false, "Delete nothing: record a WouldDelete Event and audit record at each expiry instead, whatever the policies say.")
	flag.IntVar(&opts.MaxDeletionsPerMinute, "max-deletions-per-minute", 0, "Cap on deletions per minute across all policies; expiries beyond it wait their turn. 0 means no cap.")
	flag.IntVar(&opts.SleepsPerSecond, "sleeps-per-second", 10, "Sleeps that may begin each second, across all policies; the others wait their turn, so that many objects falling idle at once never hold back deletions, reminders and wakes. Wakes are never held back. 0 means no cap.")
	flag.StringVar(&auditDest, "audit-log", "-", `Where the audit trail (JSON Lines) goes: "-" for standard output, or a file that records are appended and fsynced to.`)
	flag.StringVar(&archiveTo, "archive", "", `Where policies with deletion.archive keep each object's manifest before deleting it: "cluster" (a Secret per object in the controller's namespace), "s3://BUCKET/PREFIX", or a directory (on a volume); empty turns archiving off.`)
	flag.StringVar(&archiveDir, "archive-dir", "", "Directory to archive to; the same as --archive=DIR, kept for existing installs.")
	flag.DurationVar(&opts.ArchiveRetention, "archive-retention", 30*24*time.Hour, "How long archived manifests are kept, in every kind of archive; 0 keeps them forever (a bucket lifecycle rule can prune instead).")
	flag.StringVar(&archiveS3.Endpoint, "archive-s3-endpoint", os.Getenv("AWS_ENDPOINT_URL_S3"), "URL of the S3-compatible server, e.g. https://minio.example:9000 ($AWS_ENDPOINT_URL_S3; https://s3.amazonaws.com when empty). Credentials come from $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY, else from the pod's AWS identity.")
	flag.StringVar(&archiveS3.Region, "archive-s3-region", os.Getenv("AWS_REGION"), "Region of the bucket ($AWS_REGION).")
	flag.BoolVar(&archiveS3.PathStyle, "archive-s3-path-style", false, "Address the bucket in the URL's path rather than its host name, as most S3-compatible servers need.")
	flag.StringVar(&archiveS3.SSE, "archive-s3-sse", "", `Server-side encryption asked for on each object: "AES256" or "aws:kms"; empty leaves it to the bucket.`)
	flag.StringVar(&archiveS3.SSEKMSKeyID, "archive-s3-sse-kms-key-id", "", `KMS key for --archive-s3-sse=aws:kms; the bucket's default key when empty.`)
	// Sized with `make bench` on two cores (docs/performance.md): 1,000
	// objects expiring in the same second need 1,000 deletes (and, for
	// Playbooks no message has named yet, 1,000 reads of their titles),
	// each kind through its own client's limiter; 500 at once and 200 a
	// second let them all through faster than the API server can take
	// them, and 64 workers keep it busy while etcd commits.
	flag.Float64Var(&qps, "kube-api-qps", 200, "Requests per second the controller may send to the API server, per client.")
	flag.IntVar(&burst, "kube-api-burst", 500, "Requests the controller may send to the API server in a burst above --kube-api-qps, per client.")
	flag.IntVar(&opts.Workers, "workers", 64, "Objects reconciled at once.")
	flag.StringVar(&opts.ClusterEventNamespace, "cluster-event-namespace", "default", `Namespace that receives the Events about cluster-scoped objects such as Playbooks: "default" or "kube-system".`)
	flag.StringVar(&opts.SecretNamespace, "secret-namespace", os.Getenv("POD_NAMESPACE"),
		"The only namespace the Secrets and CA bundle ConfigMaps that NotificationChannels name may be in (the pod's own, from POD_NAMESPACE, by default); a channel naming one elsewhere is not Ready. Empty allows any.")
	flag.StringVar(&opts.OutboxNamespace, "outbox-namespace", os.Getenv("POD_NAMESPACE"),
		"Namespace the expired and deleted messages are kept in, as ConfigMaps, until every channel accepted them (the pod's own, from POD_NAMESPACE, by default; else --leader-election-namespace, else \"default\").")
	flag.DurationVar(&opts.NotificationGiveUpAfter, "notification-give-up-after", outbox.DefaultGiveUpAfter,
		"How long after a deletion its expired and deleted messages are retried on a channel that refuses them before the controller gives up.")
	// A reminder is sent from a worker: without a cap, a receiver taking
	// seconds per message could hold all of them and delay deletions.
	// 16 leaves 48 of the 64 default workers to everything else even when
	// three channels are slow at once, and is a number of connections
	// an SMTP server or webhook receiver accepts from one client.
	flag.IntVar(&opts.MaxSendsPerChannel, "max-sends-per-channel", 16,
		"Messages each NotificationChannel sends at once, whichever policies use it; a reminder finding its channel at the limit frees its worker and is sent once a slot frees, without backoff or failure. 0 means no limit.")
	flag.StringVar(&opts.OwnerAddresses, "owner-addresses", "",
		"ConfigMap in the controller's namespace (--outbox-namespace) whose key \"addresses\" maps owners' usernames to e-mail addresses, for policies with notifications.owner; empty mails only owners whose username is an e-mail address.")
	flag.DurationVar(&opts.StatusInterval, "policy-status-interval", 30*time.Second, "How often TimeoutPolicy status counts are refreshed from the cache.")
	flag.IntVar(&hook.port, "webhook-port", 9443, "Port of the admission webhook that counts kubectl exec, attach and port-forward as use, served by every replica; 0 turns it off.")
	flag.StringVar(&hook.certDir, "webhook-cert-dir", "", "Directory holding the webhook's serving certificate (tls.crt, tls.key), kept by someone else such as cert-manager and reloaded when it changes; empty: the controller keeps a self-signed one in --webhook-secret.")
	flag.StringVar(&hook.secret, "webhook-secret", "timeout-controller-webhook-cert", "Secret, in the pod's namespace, that the controller keeps the webhook's CA and serving certificate in when --webhook-cert-dir is empty.")
	flag.StringVar(&hook.configuration, "webhook-configuration", "timeout-controller", "ValidatingWebhookConfiguration whose caBundle the controller keeps when --webhook-cert-dir is empty.")
	flag.StringVar(&hook.clientCA, "webhook-client-ca", "", "PEM file of the CA that signs the client certificate the API server presents to the webhook (its admission configuration's kubeConfigFile): every other caller is refused at the TLS handshake. Read at start. Empty lets any caller in, and a SubjectAccessReview of the user each request names decides alone.")
	flag.StringVar(&hook.service, "webhook-service", "timeout-controller-webhook", "Service in front of the webhook, in the pod's namespace: the names its self-signed certificate is for.")
	flag.StringVar(&prometheusURL, "prometheus-url", "", "URL of the Prometheus HTTP API that policies' traffic queries (spec.traffic) are sent to, e.g. http://prometheus-operated.monitoring:9090; empty turns traffic off, and policies asking for it say so.")
	flag.StringVar(&prometheusToken, "prometheus-bearer-token-file", "", "File holding a bearer token sent to --prometheus-url, read again when it changes; none when empty.")
	flag.StringVar(&prometheusCA, "prometheus-ca-file", "", "PEM file of the CAs that --prometheus-url's certificate is checked against; the system's when empty.")
	flag.StringVar(&opts.ActionsURL, "actions-url", "", "Public https address of the actions server: reminders, sleeping and slept messages and owners' digests then carry links to it, signed for each recipient, that keep, wake or delete the object in one click; empty sends messages without links.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	switch serve {
	case "controller":
	case "actions":
		return act.run(metricsAddr, metricsSecure, probeAddr, qps, burst, opts.SecretNamespace)
	default:
		return fmt.Errorf(`--serve %q: expected "controller" or "actions"`, serve)
	}
	if _, err := delivery.ParseActionsURL(opts.ActionsURL); opts.ActionsURL != "" && err != nil {
		return fmt.Errorf("--actions-url: %w", err)
	}
	if opts.OutboxNamespace == "" {
		opts.OutboxNamespace = leaderElectionNamespace
	}
	if opts.OutboxNamespace == "" {
		opts.OutboxNamespace = metav1.NamespaceDefault
	}
	objectstore.SetGCPercent()
	if profileAddr == "0" {
		// Nobody will read the heap profile: do not keep its samples.
		goruntime.MemProfileRate = 0
	}

	// Only the typed objects the controller reads or refers to: Secrets
	// (core/v1), the Leases that leader election records Events about
	// (coordination/v1), Events (events/v1) and TimeoutPolicies. Governed
	// objects are read as metadata or unstructured and need no entry.
	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	// The workloads a sleep scales, and their scale subresource.
	utilruntime.Must(appsv1.AddToScheme(scheme))
	utilruntime.Must(autoscalingv1.AddToScheme(scheme))
	utilruntime.Must(coordinationv1.AddToScheme(scheme))
	utilruntime.Must(eventsv1.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	// The webhook configuration whose caBundle the controller keeps.
	utilruntime.Must(admissionregistrationv1.AddToScheme(scheme))

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
	cfg.UserAgent = kube.Name

	webhookServer, err := hook.server()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metrics.ServerOptions(metricsAddr, metricsSecure),
		HealthProbeBindAddress:  probeAddr,
		PprofBindAddress:        profileAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "timeout-controller.timeout.amphitheatre.app",
		LeaderElectionNamespace: leaderElectionNamespace,
		// A replica that stops hands over at once rather than after
		// --leader-elect-lease-duration.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &leaseDuration,
		RenewDeadline:                 &renewDeadline,
		RetryPeriod:                   &retryPeriod,
		GracefulShutdownTimeout:       &shutdownTimeout,
		// Governed objects are cached with only what decisions read.
		Cache:         objectstore.CacheOptions(),
		WebhookServer: webhookServer,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	auditLog, err := audit.Open(auditDest)
	if err != nil {
		return err
	}
	defer func() { _ = auditLog.Close() }()
	opts.Audit = auditLog
	if archiveTo == "" {
		archiveTo = archiveDir
	}
	if archiveTo != "" {
		archiveS3.AccessKeyID, archiveS3.SecretAccessKey, archiveS3.SessionToken = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN")
		// Secrets are read from the API server, never cached: the
		// controller watches none.
		opts.Archive, err = archive.Open(archiveTo, archive.Config{
			Namespace: opts.OutboxNamespace,
			Kube:      archive.Kube{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient()},
			S3:        archiveS3,
		})
		if err != nil {
			return fmt.Errorf("--archive: %w", err)
		}
	}

	if prometheusURL != "" {
		if opts.Prometheus, err = usage.NewPrometheus(prometheusURL, prometheusToken, prometheusCA); err != nil {
			return err
		}
	}

	ctx := ctrl.SetupSignalHandler()
	reopenOnHangup(ctx, auditLog)
	// What Setup starts (the Event recorder) outlives the signal until the
	// manager returns: reconciles that finish during the graceful shutdown
	// still record their Events.
	setupCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	if err := controller.Setup(setupCtx, mgr, opts); err != nil {
		return err
	}
	if err := hook.setup(mgr, opts.OutboxNamespace); err != nil {
		return err
	}
	ctrl.Log.Info("starting", "workers", opts.Workers, "qps", qps, "burst", burst)
	return mgr.Start(ctx)
}

// reopenOnHangup opens the audit file again on each SIGHUP, as a
// logrotate postrotate script expects; a rename alone is noticed within a
// second anyway.
func reopenOnHangup(ctx context.Context, l *audit.Log) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := l.Reopen(); err != nil {
					ctrl.Log.Error(err, "reopen the audit log")
					continue
				}
				ctrl.Log.Info("audit log reopened")
			}
		}
	}()
}
