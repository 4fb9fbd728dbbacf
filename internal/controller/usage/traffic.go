// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package usage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/transport"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
)

var (
	trafficQueries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "timeout_controller_traffic_queries_total",
		Help: "Traffic queries sent to Prometheus, by policy and result: ok, error (failed or timed out; counted as neither use nor its lack).",
	}, []string{"policy", "result"})
	trafficUses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "timeout_controller_traffic_uses_total",
		Help: "Uses written from a policy's traffic query (last-active and last-use via traffic), at most one per object per activity window.",
	}, []string{"policy"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(trafficQueries, trafficUses)
}

const (
	// MinTrafficInterval is the shortest spec.traffic.interval: a
	// Prometheus query is not worth more, and rates need a few scrapes.
	MinTrafficInterval = 15 * time.Second
	// defaultTrafficInterval is spec.traffic.interval when absent.
	defaultTrafficInterval = time.Minute
	// maxTrafficQueryTimeout bounds a query, whatever its interval.
	maxTrafficQueryTimeout = 10 * time.Second
	// trafficTick is how often the runner looks for a query that is due.
	trafficTick = time.Second
)

// TrafficQuery is a policy's spec.traffic, parsed.
type TrafficQuery struct {
	Query     string
	threshold float64
	Interval  time.Duration
	nameLabel string
}

// ParseTraffic reads spec.traffic; the error names the field that is
// wrong. The CRD's schema checks most of it: this is for what it cannot
// (the duration's value) and for a policy written before it did.
func ParseTraffic(spec v1alpha1.TimeoutPolicySpec) (TrafficQuery, error) {
	t := spec.Traffic
	var errs []error
	q := TrafficQuery{Query: strings.TrimSpace(t.Query), Interval: defaultTrafficInterval, nameLabel: t.NameLabel}
	if q.Query == "" {
		errs = append(errs, errors.New("spec.traffic.query: a PromQL query is required"))
	}
	if t.Threshold != "" {
		v, err := strconv.ParseFloat(t.Threshold, 64)
		if err != nil || v != v || v > 1e300 || v < -1e300 {
			errs = append(errs, fmt.Errorf("spec.traffic.threshold: %q is not a decimal number such as 0, 0.5 or 1e3", t.Threshold))
		}
		q.threshold = v
	}
	if t.Interval != "" {
		d, err := expiry.ParseDuration(string(t.Interval))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("spec.traffic.interval: %w", err))
		case d < MinTrafficInterval:
			errs = append(errs, fmt.Errorf("spec.traffic.interval: %q is shorter than the minimum, %s", t.Interval, MinTrafficInterval))
		default:
			q.Interval = d
		}
	}
	if t.NameLabel != "" && !model.LegacyValidation.IsValidLabelName(t.NameLabel) {
		errs = append(errs, fmt.Errorf("spec.traffic.nameLabel: %q is not a Prometheus label name", t.NameLabel))
	}
	if spec.IdleTTL == "" && spec.Sleep == nil {
		errs = append(errs, errors.New("spec.traffic: traffic counts as use, which only spec.idleTTL or spec.sleep read: set one of them"))
	}
	return q, errors.Join(errs...)
}

// timeout is how long one evaluation of the query may take: well within
// its interval, so that a slow Prometheus never piles queries up. Whole
// seconds: Prometheus refuses a timeout parameter of "7.5s".
func (q TrafficQuery) timeout() time.Duration {
	return min(q.Interval/2, maxTrafficQueryTimeout).Truncate(time.Second)
}

// trafficTargets are what a query's samples name as used: per namespace,
// the object names ("" for any object there).
type trafficTargets map[string]map[string]bool

// targetsOf returns what the samples above threshold name: a sample names
// its namespace label's namespace and, with nameLabel, only the object
// its value names. A sample without a namespace (or, with nameLabel,
// without a name) names nothing.
func targetsOf(v model.Vector, threshold float64, nameLabel string) trafficTargets {
	t := trafficTargets{}
	for _, s := range v {
		if s == nil || !(float64(s.Value) > threshold) {
			continue
		}
		ns := string(s.Metric[model.LabelName("namespace")])
		if ns == "" {
			continue
		}
		name := ""
		if nameLabel != "" {
			if name = string(s.Metric[model.LabelName(nameLabel)]); name == "" {
				continue
			}
		}
		if t[ns] == nil {
			t[ns] = map[string]bool{}
		}
		t[ns][name] = true
	}
	return t
}

// names reports whether the targets name an object called name in
// namespace ns.
func (t trafficTargets) names(ns, name string) bool {
	return t[ns][""] || t[ns][name]
}

// uses reports whether the targets name obj: in its own namespace, or in
// a namespace it owns (owned maps a namespace to its owners' UIDs).
func (t trafficTargets) uses(obj *metav1.PartialObjectMetadata, owned map[string][]types.UID) bool {
	if obj.Namespace != "" && t.names(obj.Namespace, obj.Name) {
		return true
	}
	for ns, owners := range owned {
		for _, uid := range owners {
			if uid == obj.UID && t.names(ns, obj.Name) {
				return true
			}
		}
	}
	return false
}

// trafficResult is what the last evaluation of a policy's query gave.
type trafficResult struct {
	generation int64
	next       time.Time
	reason     string
	message    string
}

// Traffic evaluates the policies' traffic queries on the leader, each at
// its interval, and writes use of the objects they name. A query that
// fails counts as neither use nor its lack: the idle clock just does not
// move. It runs beside the object controller, so that a slow Prometheus
// never delays a message or a deletion.
type Traffic struct {
	// Prometheus answers the queries; nil when the controller has none
	// (--prometheus-url), and a policy asking for traffic says so.
	Prometheus promv1.API
	Client     client.Client
	Clock      clock.PassiveClock

	// Governing tells which policy governs an object, as the object
	// reconciler decides; validate says what is wrong with a policy, as
	// its Ready condition does.
	Governing func(ctx context.Context, gvk schema.GroupVersionKind, obj *metav1.PartialObjectMetadata) (*match.Candidate, error)
	Validate  func(p *v1alpha1.TimeoutPolicy) error
	Watches   governedObjects
	// Changed receives a policy whose condition changed, for its status.
	Changed chan event.GenericEvent

	mu sync.Mutex
	// results is a cache: lost at a restart, each query is due at once.
	results map[string]trafficResult
}

// governedObjects is what the traffic queries read of the object
// controller's watches: the cached objects of a kind, and the version a
// kind is watched at.
type governedObjects interface {
	EachCached(ctx context.Context, gvk schema.GroupVersionKind, namespace string, fn func(*metav1.PartialObjectMetadata) error) error
	WatchedKind(gk schema.GroupKind) (gvk schema.GroupVersionKind, namespaced, ok bool)
}

// NewPrometheus returns the client of the Prometheus HTTP API at address,
// with the bearer token in tokenFile (read again as it changes) and the
// CA in caFile, each when not empty.
func NewPrometheus(address, tokenFile, caFile string) (promv1.API, error) {
	u, err := url.Parse(address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--prometheus-url: %q is not an http or https URL", redactURL(address))
	}
	rt, err := transport.New(&transport.Config{
		BearerTokenFile: tokenFile,
		TLS:             transport.TLSConfig{CAFile: caFile, ReloadCAFiles: caFile != ""},
	})
	if err != nil {
		return nil, fmt.Errorf("prometheus transport: %w", err)
	}
	c, err := api.NewClient(api.Config{Address: address, RoundTripper: rt})
	if err != nil {
		return nil, fmt.Errorf("prometheus client: %w", err)
	}
	return promv1.NewAPI(c), nil
}

// redactURL hides a password a URL carries.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// Condition is the Traffic condition of p: nil when p asks for no
// traffic.
func (t *Traffic) Condition(p *v1alpha1.TimeoutPolicy) *metav1.Condition {
	if p.Spec.Traffic == nil {
		return nil
	}
	c := &metav1.Condition{Type: v1alpha1.ConditionTraffic, ObservedGeneration: p.Generation}
	if t == nil || t.Prometheus == nil {
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonTrafficNotConfigured
		c.Message = "spec.traffic is not evaluated: the controller runs without --prometheus-url, so traffic does not count as use; nothing else changes"
		return c
	}
	t.mu.Lock()
	r, ok := t.results[p.Name]
	t.mu.Unlock()
	if !ok || r.reason == "" {
		return nil
	}
	c.Status, c.Reason, c.Message = metav1.ConditionTrue, r.reason, r.message
	if r.reason != v1alpha1.ReasonQueried {
		c.Status = metav1.ConditionFalse
	}
	return c
}

// Start evaluates the queries that are due, every trafficTick, until ctx
// is done. The policies are evaluated one after the other, each query
// bounded by its timeout.
func (t *Traffic) Start(ctx context.Context) error {
	tick := time.NewTicker(trafficTick)
	defer tick.Stop()
	for {
		t.pass(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// pass evaluates each policy's query that is due.
func (t *Traffic) pass(ctx context.Context) {
	log := logf.FromContext(ctx).WithValues("controller", "traffic")
	var policies v1alpha1.TimeoutPolicyList
	if err := t.Client.List(ctx, &policies); err != nil {
		log.Error(err, "list policies")
		return
	}
	seen := map[string]bool{}
	for i := range policies.Items {
		p := &policies.Items[i]
		if p.Spec.Traffic == nil || p.DeletionTimestamp != nil {
			continue
		}
		seen[p.Name] = true
		q, err := ParseTraffic(p.Spec)
		if err != nil || t.Validate(p) != nil {
			// Ready says what is wrong.
			continue
		}
		now := t.Clock.Now()
		t.mu.Lock()
		r := t.results[p.Name]
		t.mu.Unlock()
		if r.generation == p.Generation && now.Before(r.next) {
			continue
		}
		r = trafficResult{generation: p.Generation, next: now.Add(q.Interval)}
		r.reason, r.message = t.evaluate(logf.IntoContext(ctx, log.WithValues("policy", p.Name)), p, q, now)
		t.record(p, r)
	}
	t.mu.Lock()
	for name := range t.results {
		if !seen[name] {
			delete(t.results, name)
			trafficQueries.DeletePartialMatch(prometheus.Labels{"policy": name})
			trafficUses.DeleteLabelValues(name)
		}
	}
	t.mu.Unlock()
}

// record keeps r and, when the condition it gives changed, has the
// policy's status written.
func (t *Traffic) record(p *v1alpha1.TimeoutPolicy, r trafficResult) {
	t.mu.Lock()
	if t.results == nil {
		t.results = map[string]trafficResult{}
	}
	was := t.results[p.Name]
	t.results[p.Name] = r
	t.mu.Unlock()
	if was.reason == r.reason && was.message == r.message {
		return
	}
	select {
	case t.Changed <- event.GenericEvent{Object: p}:
	default:
		// The status refresh (--policy-status-interval) catches up.
	}
}

// evaluate runs p's query and writes use of the governed objects it names.
// It returns the condition's reason and message.
func (t *Traffic) evaluate(ctx context.Context, p *v1alpha1.TimeoutPolicy, q TrafficQuery, now time.Time) (reason, message string) {
	log := logf.FromContext(ctx)
	qctx, cancel := context.WithTimeout(ctx, q.timeout())
	defer cancel()
	value, _, err := t.Prometheus.Query(qctx, q.Query, now, promv1.WithTimeout(q.timeout()))
	if err != nil {
		trafficQueries.WithLabelValues(p.Name, "error").Inc()
		log.Info("traffic query failed", "error", err.Error())
		return v1alpha1.ReasonQueryFailed, kube.CutNote(fmt.Sprintf("The traffic query failed at %s, so traffic did not count as use (nor as its lack): %v",
			now.UTC().Format(time.RFC3339), err))
	}
	vector, ok := value.(model.Vector)
	if !ok {
		trafficQueries.WithLabelValues(p.Name, "error").Inc()
		return v1alpha1.ReasonQueryFailed, fmt.Sprintf("The traffic query returned a %s, not an instant vector: no traffic counted as use", value.Type())
	}
	trafficQueries.WithLabelValues(p.Name, "ok").Inc()
	targets := targetsOf(vector, q.threshold, q.nameLabel)
	used, err := t.use(ctx, p, targets, now)
	if err != nil {
		log.Error(err, "record traffic")
	}
	log.V(1).Info("traffic evaluated", "samples", len(vector), "namespaces", len(targets), "written", used)
	// What changes at every evaluation (its time, the writes) stays out of
	// the message: a new message is a status write.
	return v1alpha1.ReasonQueried, fmt.Sprintf("The traffic query gave %d samples; %d namespaces above %s",
		len(vector), len(targets), strconv.FormatFloat(q.threshold, 'g', -1, 64))
}

// use writes use of each object the policy governs that the targets name,
// unless its last activity is within the activity window. It returns how
// many it wrote.
func (t *Traffic) use(ctx context.Context, p *v1alpha1.TimeoutPolicy, targets trafficTargets, now time.Time) (int, error) {
	if len(targets) == 0 {
		return 0, nil
	}
	gvk, ok := t.watchedAs(match.TargetGVK(p).GroupKind())
	if !ok {
		return 0, nil
	}
	owned := map[string][]types.UID{}
	for ns := range targets {
		m := kube.NewMetadata(kube.NamespaceKind)
		if err := t.Client.Get(ctx, types.NamespacedName{Name: ns}, m); err != nil {
			if !apierrors.IsNotFound(err) {
				return 0, fmt.Errorf("get namespace %s: %w", ns, err)
			}
			continue
		}
		for _, ref := range m.OwnerReferences {
			owned[ns] = append(owned[ns], ref.UID)
		}
	}
	var used []*metav1.PartialObjectMetadata
	visit := func(o *metav1.PartialObjectMetadata) error {
		if targets.uses(o, owned) {
			used = append(used, o.DeepCopy())
		}
		return nil
	}
	var err error
	if len(owned) > 0 {
		err = t.Watches.EachCached(ctx, gvk, "", visit)
	} else {
		for ns := range targets {
			if err = t.Watches.EachCached(ctx, gvk, ns, visit); err != nil {
				break
			}
		}
	}
	if err != nil {
		return 0, err
	}
	wrote := 0
	var errs []error
	for _, o := range used {
		ok, err := t.write(ctx, p, gvk, o, now)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			wrote++
		}
	}
	return wrote, errors.Join(errs...)
}

// write writes use of o now, if p governs it, it is not kept, and its last
// activity is older than the activity window (or, under a sleep by age
// only, it is asleep).
func (t *Traffic) write(ctx context.Context, p *v1alpha1.TimeoutPolicy, gvk schema.GroupVersionKind, o *metav1.PartialObjectMetadata, now time.Time) (bool, error) {
	c, err := t.Governing(ctx, gvk, o)
	if err != nil || c == nil || c.Name != p.Name || c.SpecErr != nil {
		return false, err
	}
	l := c.Schedule.Lifetime(o.CreationTimestamp.Time, o.Annotations, now)
	window := c.Schedule.ActivityWindow()
	switch {
	case l.Keep:
		return false, nil
	case window > 0 && now.Before(l.LastActive.Add(window)):
		return false, nil
	case window == 0 && !l.Asleep:
		return false, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		// On this object, not one recreated under its name; last-active
		// and last-use in one write, so that they always agree.
		"uid":         o.UID,
		"annotations": expiry.Use{At: now, Via: expiry.ViaTraffic}.Annotations(),
	}})
	if err != nil {
		return false, err
	}
	obj := kube.NewMetadata(gvk)
	obj.Namespace, obj.Name = o.Namespace, o.Name
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kube.WriteTimeout)
	defer cancel()
	err = t.Client.Patch(writeCtx, obj, client.RawPatch(types.MergePatchType, patch))
	switch {
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("record the traffic of %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(o), err)
	}
	trafficUses.WithLabelValues(p.Name).Inc()
	logf.FromContext(ctx).V(1).Info("traffic recorded as use", "kind", gvk.Kind, "namespace", o.Namespace, "name", o.Name)
	return true, nil
}

// watchedAs returns the version gk is watched at, if it is.
func (t *Traffic) watchedAs(gk schema.GroupKind) (schema.GroupVersionKind, bool) {
	if t.Watches == nil {
		return schema.GroupVersionKind{}, false
	}
	gvk, _, ok := t.Watches.WatchedKind(gk)
	return gvk, ok
}

// Event reasons on TimeoutPolicies with spec.traffic.
const ()
