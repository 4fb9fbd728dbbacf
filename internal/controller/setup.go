// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controller wires the jobs of the controller (its sub-packages) into a manager:
// it builds each and hands it what it needs, and does nothing else.
package controller

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/amphitheatre-app/timeout-controller/internal/archive"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/channelset"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/delivery"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/object"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/policy"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/usage"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// The role's rules that no one controller owns: the Events every
// controller records, and who scrapes the metrics, which is checked with
// the API server. The rules of each controller stand beside it, in
// its package (object, policy, sleep, usage).
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// Whether a policy's author may use the channels it names is checked
// with the API server too.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
//
// In its own namespace only (test/install checks that this is enough): the
// leader election Lease, created once and then read and renewed by name;
// and the core/v1 Events client-go's leader election records about it.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=create,namespace=timeout-system
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;update,resourceNames=timeout-controller.timeout.amphitheatre.app,namespace=timeout-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=timeout-system

// Options tune the controllers.
type Options struct {
	// Workers is how many objects are reconciled at once.
	Workers int
	// ClusterEventNamespace is where Events about cluster-scoped objects,
	// such as Playbooks, are written: "default" or "kube-system", the only
	// two the API server accepts for them.
	ClusterEventNamespace string
	// StatusInterval is how often policy status counts are refreshed.
	StatusInterval time.Duration
	// SecretNamespace, when set, is the only namespace the Secrets that
	// policies name may be in.
	SecretNamespace string
	// Clock is the time source; the real clock when nil.
	Clock clock.PassiveClock
	// DryRun deletes nothing, whatever the policies say.
	DryRun bool
	// MaxDeletionsPerMinute caps deletions across all policies; 0 means no
	// cap.
	MaxDeletionsPerMinute int
	// SleepsPerSecond spaces the sleeps that begin; 0 holds none back.
	SleepsPerSecond int
	// Archive is where manifests are archived before deletion; nil turns
	// archiving off, and policies that ask for it are not ready.
	Archive archive.Store
	// ArchiveRetention is how long archived manifests are kept; 0 keeps
	// them forever.
	ArchiveRetention time.Duration
	// Audit receives the audit trail; nil writes none.
	Audit *audit.Log
	// OutboxNamespace is where the expired and deleted messages about
	// deleted objects are kept (as ConfigMaps) until every channel
	// accepted them: the controller's own namespace.
	OutboxNamespace string
	// NotificationGiveUpAfter bounds how long those messages are retried;
	// outbox.DefaultGiveUpAfter when 0.
	NotificationGiveUpAfter time.Duration
	// MaxSendsPerChannel is how many messages each NotificationChannel
	// sends at once; 0 means no cap.
	MaxSendsPerChannel int
	// OwnerAddresses names the ConfigMap, in OutboxNamespace, that maps
	// owners' usernames to e-mail addresses; empty maps nobody.
	OwnerAddresses string

	// Prometheus answers the policies' traffic queries (spec.traffic);
	// nil when the controller has none, and such policies say so.
	Prometheus promv1.API

	// ActionsURL is the actions server's public address (--actions-url):
	// messages carry links to it, signed with the keyring Secret in
	// OutboxNamespace. Empty: messages carry no links.
	ActionsURL string
}

// Setup adds the policy and object controllers to mgr. The Events they
// emit are sent until ctx is done.
func Setup(ctx context.Context, mgr manager.Manager, opts Options) error {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Workers <= 0 {
		opts.Workers = 1
	}
	if opts.StatusInterval <= 0 {
		opts.StatusInterval = 30 * time.Second
	}
	switch opts.ClusterEventNamespace {
	case "":
		opts.ClusterEventNamespace = metav1.NamespaceDefault
	case metav1.NamespaceDefault, metav1.NamespaceSystem:
	default:
		return fmt.Errorf("cluster event namespace %q: the API server accepts Events about cluster-scoped objects only in %q or %q",
			opts.ClusterEventNamespace, metav1.NamespaceDefault, metav1.NamespaceSystem)
	}

	recorder, err := newRecorder(ctx, mgr, opts.ClusterEventNamespace)
	if err != nil {
		return err
	}
	reviews, err := authorizationv1client.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("create the access review client: %w", err)
	}
	// What runs on the leader is added to held, which holds it back until
	// the API server serves the controller's own CRDs (the gate below).
	held := &policy.HeldManager{Manager: mgr}

	if opts.OutboxNamespace == "" {
		return errors.New("no outbox namespace: the expired and deleted messages need a namespace to be kept in until they are out")
	}

	secrets := channelset.SecretReader{Reader: mgr.GetAPIReader(), Namespace: opts.SecretNamespace}
	channels := &channelset.Channels{Reader: mgr.GetClient(), Secrets: secrets, Clock: opts.Clock, Limiter: notify.NewLimiter(opts.MaxSendsPerChannel),
		Grants: &channelset.Grants{Reviews: reviews.SubjectAccessReviews()}}
	owners := &delivery.Owners{Reader: mgr.GetAPIReader(), Namespace: opts.OutboxNamespace, Name: opts.OwnerAddresses, Clock: opts.Clock}
	var links *delivery.Links
	if opts.ActionsURL != "" {
		if links, err = delivery.NewLinks(opts.ActionsURL, mgr.GetAPIReader(), mgr.GetClient(), opts.OutboxNamespace, opts.Clock); err != nil {
			return fmt.Errorf("--actions-url: %w", err)
		}
	}
	objects := &object.Reconciler{
		Client:                mgr.GetClient(),
		APIReader:             mgr.GetAPIReader(),
		Recorder:              recorder,
		Clock:                 opts.Clock,
		Channels:              channels,
		Audit:                 opts.Audit,
		MaxDeletionsPerMinute: opts.MaxDeletionsPerMinute,
		SleepsPerSecond:       opts.SleepsPerSecond,
		DryRun:                opts.DryRun,
		Archive:               opts.Archive,

		ClusterEventNamespace: opts.ClusterEventNamespace,
		Owners:                owners,
		Links:                 links,
	}
	objects.Outbox = objects.NewOutbox(mgr.GetClient(), mgr.GetAPIReader(), opts.OutboxNamespace,
		opts.NotificationGiveUpAfter, mgr.GetLogger().WithValues("controller", "outbox"))
	if err := held.Add(objects.Outbox); err != nil {
		return fmt.Errorf("add the outbox: %w", err)
	}
	if err := objects.SetupWithManager(ctx, held, opts.Workers); err != nil {
		return err
	}
	policies := &policy.PolicyReconciler{
		Client:         mgr.GetClient(),
		RESTMapper:     mgr.GetRESTMapper(),
		Recorder:       recorder,
		Clock:          opts.Clock,
		StatusInterval: opts.StatusInterval,
		Channels:       channels,
		Archive:        opts.Archive,
		DryRun:         opts.DryRun,
		Access:         policy.NewAccess(reviews.SelfSubjectAccessReviews(), clock.RealClock{}),
		Watches:        objects.Watches,
		Workloads:      objects.Workloads(),
		Owners:         owners,
	}
	policies.Traffic = &usage.Traffic{Prometheus: opts.Prometheus, Client: mgr.GetClient(), Clock: opts.Clock,
		Governing: objects.Governing, Validate: policy.Validate, Watches: objects.Watches, Changed: make(chan event.GenericEvent, 64)}
	if opts.Prometheus != nil {
		if err := held.Add(policies.Traffic); err != nil {
			return fmt.Errorf("add the traffic queries: %w", err)
		}
	}
	if err := policies.SetupWithManager(held); err != nil {
		return fmt.Errorf("create policy controller: %w", err)
	}
	if err := (&policy.ChannelReconciler{Client: mgr.GetClient(), Secrets: secrets}).SetupWithManager(held); err != nil {
		return fmt.Errorf("create channel controller: %w", err)
	}
	if opts.Archive != nil && opts.ArchiveRetention > 0 {
		if err := mgr.Add(pruneArchive(opts.Archive, opts.ArchiveRetention, opts.Clock, mgr.GetLogger())); err != nil {
			return err
		}
	}

	// Runs where the controllers run: on the leader, once elected and the
	// CRDs are served.
	var leading atomic.Bool
	if err := held.Add(manager.RunnableFunc(func(ctx context.Context) error {
		leading.Store(true)
		<-ctx.Done()
		return nil
	})); err != nil {
		return err
	}
	gate := &policy.CRDGate{Mgr: mgr, Mapper: mgr.GetRESTMapper(), Held: held.Held, Log: mgr.GetLogger().WithValues("controller", "crds")}
	if err := mgr.Add(gate); err != nil {
		return fmt.Errorf("add the CRD gate: %w", err)
	}
	// Three checks, so that /readyz names the one that fails (its reason
	// is at /readyz/<name>): the controller's own CRDs, the controllers,
	// and the CRDs of the kinds the policies target.
	for name, check := range map[string]healthz.Checker{
		"crds":        policy.CRDsReadiness(mgr.GetRESTMapper()),
		"controllers": policy.Readiness(mgr, objects.Watches, &leading),
		"targets":     policy.TargetsReadiness(mgr.GetClient(), mgr.GetRESTMapper(), &leading),
	} {
		if err := mgr.AddReadyzCheck(name, check); err != nil {
			return err
		}
	}
	return nil
}

// pruneArchive removes archived manifests older than retention, at start
// and every hour, on the leader (the one replica that writes them).
func pruneArchive(store archive.Store, retention time.Duration, clk clock.PassiveClock, log logr.Logger) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		log = log.WithValues("archive", store.String())
		tick := time.NewTicker(time.Hour)
		defer tick.Stop()
		for {
			removed, err := store.Prune(ctx, clk.Now().Add(-retention))
			if err != nil {
				log.Error(err, "prune the archive")
			} else if removed > 0 {
				log.Info("pruned the archive", "removed", removed, "retention", retention)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
	})
}

// newRecorder returns an events.k8s.io/v1 recorder whose Events about
// cluster-scoped objects go to clusterNamespace.
func newRecorder(ctx context.Context, mgr manager.Manager, clusterNamespace string) (events.EventRecorder, error) {
	// The events/v1 client alone: kubernetes.NewForConfigAndClient would
	// build a REST client for every API group, running code in each.
	cs, err := eventsv1client.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("create events client: %w", err)
	}
	b := events.NewBroadcaster(kube.ClusterScopedSink{
		EventSink: &events.EventSinkImpl{Interface: cs},
		Namespace: clusterNamespace,
	})
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, fmt.Errorf("start events: %w", err)
	}
	go func() {
		<-ctx.Done()
		b.Shutdown()
	}()
	return kube.NoteCutter{EventRecorder: b.NewRecorder(mgr.GetScheme(), kube.Name)}, nil
}
