// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// The controller's metrics, served with controller-runtime's on
// --metrics-bind-address. No label holds an object's name: their number
// stays that of policies, channels and outcomes. docs/reference/metrics.md
// documents them.
var (
	ObjectsTracked = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "timeout_controller_objects_tracked",
		Help: "Objects a policy governs that will expire (not kept), as of its last status refresh.",
	}, []string{"policy"})
	ObjectsKept = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "timeout_controller_objects_kept",
		Help: "Objects a policy governs that are kept for good.",
	}, []string{"policy"})
	ObjectsExpiringSoon = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "timeout_controller_objects_expiring_soon",
		Help: "Objects a policy governs that expire within its longest reminder lead.",
	}, []string{"policy"})
	ObjectsExpiring = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "timeout_controller_objects_expiring",
		Help: "Objects a policy governs (not kept) that expire within the horizon: 1h, 1d or 1w; cumulative, as histogram buckets are, and counting those already due.",
	}, []string{"policy", "within"})

	Notifications = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "timeout_controller_notifications_total",
		Help: "Messages handed to a channel, by channel, message type (reminder, extended, postponed, expired, ...) and result (sent, failed).",
	}, []string{"channel", "type", "result"})
	NotificationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "timeout_controller_notification_send_duration_seconds",
		Help:    "Time a channel took to accept or refuse a message.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, []string{"channel"})
	ReminderLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "timeout_controller_reminder_lag_seconds",
		Help:    "Seconds between a reminder falling due and the first channel accepting it.",
		Buckets: lagBuckets,
	})

	Deletions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "timeout_controller_deletions_total",
		Help: "Deletions of expired objects by result: deleted, failed, conflict (the object changed first), would_delete (dry run).",
	}, []string{"result"})
	DeletionLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "timeout_controller_deletion_lag_seconds",
		Help:    "Seconds between an object's expiry (or its postponed deletion time) and the successful delete.",
		Buckets: lagBuckets,
	})
	DeletionsThrottled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "timeout_controller_deletions_throttled_total",
		Help: "Deletions made to wait by a deletion cap, by the cap that held them: policy or global.",
	}, []string{"cap"})
	Archives = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "timeout_controller_archives_total",
		Help: "Manifests written to the archive before deletion, by result: ok, error.",
	}, []string{"result"})

	InvalidAnnotations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "timeout_controller_invalid_annotations_total",
		Help: "Invalid annotation values found, counted once per value, by annotation.",
	}, []string{"annotation"})
	AuditFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "timeout_controller_audit_write_failures_total",
		Help: "Audit records that could not be written.",
	})

	ObjectsTerminating = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "timeout_controller_objects_terminating",
		Help: "Governed objects in Terminating: deleted, and held by finalizers.",
	})
	OldestTerminating = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "timeout_controller_oldest_terminating_timestamp_seconds",
		Help: "When the governed object longest in Terminating was deleted, in Unix seconds; 0 when none is.",
	})
	GoneLag = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "timeout_controller_gone_lag_seconds",
		Help:    "Seconds between a deletion falling due and, for what=object, the object gone from the API server (its finalizers run), or, for what=owned, the last namespace it owned gone.",
		Buckets: lagBuckets,
	}, []string{"what"})
	ReclaimedPods = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "timeout_controller_reclaimed_pods_total",
		Help: "Pods in the namespaces that deleted objects owned, counted just before each delete.",
	})
	ReclaimedObjects = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "timeout_controller_reclaimed_objects_total",
		Help: "Pods and objects of the counted kinds in the namespaces that deleted objects owned, counted just before each delete.",
	})
	ReclaimedCPU = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "timeout_controller_reclaimed_cpu_cores_total",
		Help: "CPU requested by the Pods in the namespaces that deleted objects owned, in cores, read just before each delete.",
	})
	ReclaimedMemory = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "timeout_controller_reclaimed_memory_bytes_total",
		Help: "Memory requested by the Pods in the namespaces that deleted objects owned, in bytes, read just before each delete.",
	})
)

// Horizons are the windows of timeout_controller_objects_expiring: what
// an operator plans for, the next hour, day and week.
var Horizons = []struct {
	Label string
	D     time.Duration
}{{"1h", time.Hour}, {"1d", 24 * time.Hour}, {"1w", 7 * 24 * time.Hour}}

// lagBuckets span on-time (milliseconds) to badly late (an hour).
var lagBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

func init() {
	ctrlmetrics.Registry.MustRegister(
		ObjectsTracked, ObjectsKept, ObjectsExpiringSoon, ObjectsExpiring,
		Notifications, NotificationSeconds, ReminderLag,
		Deletions, DeletionLag, DeletionsThrottled, Archives,
		InvalidAnnotations, AuditFailures, ObjectLooks,
		ObjectsTerminating, OldestTerminating, GoneLag,
		ReclaimedPods, ReclaimedObjects, ReclaimedCPU, ReclaimedMemory,
		ObjectsAsleep, SleepFreedReplicas, SleepFreedCPU, SleepFreedMemory,
	)
	// Counters of a fixed set of labels start at 0: a series born at 1
	// is invisible to increase() and rate(), so an alert on the first
	// failed deletion or archive would never fire.
	for _, result := range []string{"deleted", "failed", "conflict", "would_delete"} {
		Deletions.WithLabelValues(result)
	}
	for _, by := range []string{"policy", "global"} {
		DeletionsThrottled.WithLabelValues(by)
	}
	for _, result := range []string{audit.OK, audit.Error} {
		Archives.WithLabelValues(result)
	}
	for _, what := range []string{"object", "owned"} {
		GoneLag.WithLabelValues(what)
	}
}

// ForgetPolicyMetrics drops the series of a deleted policy.
func ForgetPolicyMetrics(policy string) {
	ObjectsTracked.DeleteLabelValues(policy)
	ObjectsKept.DeleteLabelValues(policy)
	ObjectsExpiringSoon.DeleteLabelValues(policy)
	ObjectsExpiring.DeletePartialMatch(prometheus.Labels{"policy": policy})
	for _, g := range []*prometheus.GaugeVec{ObjectsAsleep, SleepFreedReplicas, SleepFreedCPU, SleepFreedMemory} {
		g.DeleteLabelValues(policy)
	}
}

// ServerOptions serves metrics on addr, when secure (the default)
// over HTTPS and only to callers with a token the API server accepts and
// allows get on /metrics: the metrics name policies and channels, and
// scraping them costs the controller work. Without a certificate directory
// the server makes a self-signed certificate.
func ServerOptions(addr string, secure bool) metricsserver.Options {
	o := metricsserver.Options{BindAddress: addr, SecureServing: secure}
	if secure {
		o.FilterProvider = authorizeScrapers
	}
	return o
}

// wakeupsCollector reports the looks to come of the object controller
// running in this process (on the leader; none on a standby).
type wakeupsCollector struct {
	Current   atomic.Pointer[wakeup.Queue]
	scheduled *prometheus.Desc
	due       *prometheus.Desc
}

var ObjectLooks = &wakeupsCollector{
	scheduled: prometheus.NewDesc("timeout_controller_objects_scheduled",
		"Governed objects with a look to come (a reminder, an expiry, a retry), on the leader.", nil, nil),
	due: prometheus.NewDesc("timeout_controller_objects_due",
		"Governed objects due for a look and waiting for a worker: the backlog.", nil, nil),
}

func (c *wakeupsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.scheduled
	ch <- c.due
}

func (c *wakeupsCollector) Collect(ch chan<- prometheus.Metric) {
	var scheduled, due int
	if w := c.Current.Load(); w != nil {
		scheduled, due = w.Scheduled(), w.Due()
	}
	ch <- prometheus.MustNewConstMetric(c.scheduled, prometheus.GaugeValue, float64(scheduled))
	ch <- prometheus.MustNewConstMetric(c.due, prometheus.GaugeValue, float64(due))
}

// What the sleeping objects of each policy hold back, as of its last
// status refresh.
var (
	ObjectsAsleep = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "timeout_controller_objects_asleep",
		Help: "Objects a policy governs that sleep, as of its last status refresh.",
	}, []string{"policy"})
	SleepFreedReplicas = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "timeout_controller_sleep_freed_replicas",
		Help: "Replicas that sleeping objects of a policy scaled to zero, as of its last status refresh.",
	}, []string{"policy"})
	SleepFreedCPU = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "timeout_controller_sleep_freed_cpu_cores",
		Help: "CPU requested by the replicas that sleeping objects of a policy scaled to zero (their pod templates' requests), as of its last status refresh.",
	}, []string{"policy"})
	SleepFreedMemory = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "timeout_controller_sleep_freed_memory_bytes",
		Help: "Memory requested by the replicas that sleeping objects of a policy scaled to zero, as of its last status refresh.",
	}, []string{"policy"})
)
