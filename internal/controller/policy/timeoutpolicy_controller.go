// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/archive"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/channelset"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/delivery"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/metrics"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/objectstore"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/sleep"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/usage"
	"github.com/amphitheatre-app/timeout-controller/internal/decide"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// targetRetry is how often a policy whose target kind is not served yet
// (its CRD not installed, say) looks again.
const targetRetry = 15 * time.Second

// +kubebuilder:rbac:groups=timeout.amphitheatre.app,resources=timeoutpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=timeout.amphitheatre.app,resources=timeoutpolicies/status,verbs=get;patch;update

// PolicyReconciler validates TimeoutPolicies, starts the watch on each
// target kind, and reports what each policy governs in its status.
type PolicyReconciler struct {
	Client     client.Client
	RESTMapper meta.RESTMapper
	Recorder   events.EventRecorder
	Clock      clock.PassiveClock
	// StatusInterval is how often status counts are refreshed from the
	// cache; they change with time as well as with objects.
	StatusInterval time.Duration
	// Channels builds the policy's notification channels, to check them.
	Channels *channelset.Channels
	// Archive is the controller's archive; nil when it has none.
	Archive archive.Store
	// DryRun is the controller's --dry-run: nothing is deleted, so
	// nothing is archived either.
	DryRun bool
	// Access says what the controller may do with each target kind; nil
	// checks nothing.
	Access *Access
	// Owners gives the addresses of objects' owners, for policies that
	// tell them; nil maps nobody.
	Owners *delivery.Owners

	// Traffic gives the Traffic condition of a policy with spec.traffic.
	Traffic *usage.Traffic

	Watches *objectstore.Watches
	// Workloads is the watch of the workloads a sleep scaled down, started
	// when a policy first puts objects to sleep; nil starts none.
	Workloads *sleep.MarkedWatch
	// said holds, per policy, the Ready reason and message this process
	// last logged as not ready, so that each is logged once, including
	// one the status already showed when the process started.
	said sync.Map
}

// SetupWithManager adds the policy controller to mgr.
func (r *PolicyReconciler) SetupWithManager(mgr manager.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("policy")
	if r.Traffic != nil && r.Traffic.Changed != nil {
		// A traffic query's outcome changed: write it in the status.
		b = b.WatchesRawSource(source.Channel(r.Traffic.Changed, &handler.EnqueueRequestForObject{}))
	}
	return b.
		// Labels and the author stamp (an annotation) decide which
		// channels a policy may use.
		For(&v1alpha1.TimeoutPolicy{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{},
			predicate.AnnotationChangedPredicate{}))).
		Watches(&v1alpha1.NotificationChannel{}, handler.EnqueueRequestsFromMapFunc(policiesUsing(mgr.GetClient()))).
		// Another policy's edit can change which objects this one governs.
		Watches(&v1alpha1.TimeoutPolicy{}, handler.EnqueueRequestsFromMapFunc(allPolicies(mgr.GetClient())),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// policiesUsing maps a NotificationChannel to the policies that name it.
func policiesUsing(c client.Reader) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var list v1alpha1.TimeoutPolicyList
		if err := c.List(ctx, &list); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for _, p := range list.Items {
			if slices.ContainsFunc(p.Spec.Notifications.Channels, func(r v1alpha1.ChannelReference) bool { return r.Name == o.GetName() }) {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
			}
		}
		return reqs
	}
}

// allPolicies maps an object to every policy.
func allPolicies(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list v1alpha1.TimeoutPolicyList
		if err := c.List(ctx, &list); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, p := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
		}
		return reqs
	}
}

// Reconcile brings one policy's watch and status up to date.
func (r *PolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	policy := &v1alpha1.TimeoutPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, policy); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.ForgetPolicyMetrics(req.Name)
			r.said.Delete(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if policy.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	orig := policy.DeepCopy()

	if err := Validate(policy); err != nil {
		r.setReady(policy, metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec, err.Error())
		return ctrl.Result{}, r.patchStatus(ctx, orig, policy, kube.ReasonInvalidPolicy)
	}
	setUnbounded(policy)
	r.setTraffic(policy)

	gvk := match.TargetGVK(policy)
	mapping, err := r.RESTMapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		if !meta.IsNoMatchError(err) {
			return ctrl.Result{}, fmt.Errorf("resolve %s: %w", gvk, err)
		}
		r.setReady(policy, metav1.ConditionFalse, v1alpha1.ReasonTargetNotFound,
			fmt.Sprintf("The API server does not serve %s %s; looking again every %s", gvk.GroupVersion(), gvk.Kind, targetRetry))
		return ctrl.Result{RequeueAfter: targetRetry}, r.patchStatus(ctx, orig, policy, kube.ReasonTargetNotFound)
	}
	resource := mapping.Resource.GroupResource()
	// Not watched before it may be: a watch the API server refuses is
	// retried, and logged, for as long as the process runs.
	lacking, err := r.Access.missing(ctx, resource, "", watchVerbs...)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(lacking) > 0 {
		r.setReady(policy, metav1.ConditionFalse, v1alpha1.ReasonForbidden,
			forbidden{resource: resource, everywhere: lacking}.message("this policy governs nothing"))
		return ctrl.Result{RequeueAfter: targetRetry}, r.patchStatus(ctx, orig, policy, kube.ReasonTargetForbidden)
	}
	channels, err := r.Channels.Get(ctx, policy)
	if err != nil {
		// Without its channels the policy cannot give the notice it
		// promises, so its objects wait (none is deleted) until this is fixed.
		r.setReady(policy, metav1.ConditionFalse, channelset.ChannelReason(err),
			"Notification channels cannot be used, so nothing is deleted under this policy: "+err.Error())
		return ctrl.Result{RequeueAfter: channelset.ChannelsTTL}, r.patchStatus(ctx, orig, policy, kube.ReasonInvalidPolicy)
	}
	if policy.Spec.Deletion.Archive && !policy.Spec.Deletion.DryRun && !r.DryRun && r.Archive == nil {
		r.setReady(policy, metav1.ConditionFalse, v1alpha1.ReasonArchiveUnavailable,
			"deletion.archive is set but the controller runs without --archive, so nothing is deleted under this policy")
		return ctrl.Result{}, r.patchStatus(ctx, orig, policy, kube.ReasonInvalidPolicy)
	}
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	// Objects are watched, and counted, at the version the kind was first
	// watched at: one informer per kind.
	watchedGVK, err := r.Watches.Ensure(gvk, mapping.Resource, namespaced)
	if err != nil {
		return ctrl.Result{}, err
	}
	if policy.Spec.Sleep != nil {
		if err := r.Workloads.EnsureWorkloads(); err != nil {
			return ctrl.Result{}, err
		}
	}

	found, err := r.count(ctx, policy, watchedGVK, namespaced, channels)
	if err != nil {
		return ctrl.Result{}, err
	}
	denied, err := r.Access.objectsAccess(ctx, resource, namespaced, found.namespaces)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !denied.none() {
		r.setReady(policy, metav1.ConditionFalse, v1alpha1.ReasonForbidden,
			denied.message("this policy's objects are not reminded and deleted as it says"))
		return ctrl.Result{RequeueAfter: targetRetry}, r.patchStatus(ctx, orig, policy, kube.ReasonTargetForbidden)
	}
	if found.unreminded > 0 {
		r.setReady(policy, metav1.ConditionFalse, v1alpha1.ReasonNoRecipients, noRecipients(mapping.Resource.Resource, channels))
		return ctrl.Result{RequeueAfter: r.StatusInterval}, r.patchStatus(ctx, orig, policy, kube.ReasonNoRecipients)
	}
	msg := fmt.Sprintf("Governing %d %s", policy.Status.Tracked+policy.Status.Kept, mapping.Resource.Resource)
	if !namespaced && policy.Spec.NamespaceSelector != nil {
		msg += "; namespaceSelector is ignored because " + mapping.Resource.Resource + " are cluster-scoped"
	}
	r.setReady(policy, metav1.ConditionTrue, v1alpha1.ReasonActive, msg)
	return ctrl.Result{RequeueAfter: r.StatusInterval}, r.patchStatus(ctx, orig, policy, "")
}

// Validate reports what the CRD's schema cannot check: the durations'
// values and the selectors' semantics.
func Validate(p *v1alpha1.TimeoutPolicy) error {
	_, err := expiry.NewSchedule(p.Spec)
	errs := []error{err}
	if _, err := match.Selector(p.Spec.Selector); err != nil {
		errs = append(errs, fmt.Errorf("spec.selector: %w", err))
	}
	if _, err := match.Selector(p.Spec.NamespaceSelector); err != nil {
		errs = append(errs, fmt.Errorf("spec.namespaceSelector: %w", err))
	}
	if p.Spec.Traffic != nil {
		if _, err := usage.ParseTraffic(p.Spec); err != nil {
			errs = append(errs, err)
		}
	}
	if gv, err := schema.ParseGroupVersion(p.Spec.Target.APIVersion); err != nil || gv.Version == "" {
		errs = append(errs, fmt.Errorf("spec.target.apiVersion: %q is not a group/version", p.Spec.Target.APIVersion))
	}
	return errors.Join(errs...)
}

// setUnbounded sets the Unbounded condition of a policy that forbids keep:
// forbidding keep bounds nothing while an annotation may still ask for an
// expiry in 2999, so it says so until maxTTL caps lifetimes. A policy that
// allows keep has no such condition.
func setUnbounded(p *v1alpha1.TimeoutPolicy) {
	if p.Spec.Keep != v1alpha1.KeepForbidden {
		meta.RemoveStatusCondition(&p.Status.Conditions, v1alpha1.ConditionUnbounded)
		return
	}
	c := metav1.Condition{
		Type: v1alpha1.ConditionUnbounded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonNoMaxTTL,
		Message: "spec.keep is Forbidden but the policy has no spec.maxTTL: an " + expiry.AnnotationExpiresAt + " or " + expiry.AnnotationTTL +
			" annotation still keeps an object as long as it says (expires-at 2999-01-01T00:00:00Z keeps it until 2999). Set spec.maxTTL to cap every lifetime",
		ObservedGeneration: p.Generation,
	}
	if p.Spec.MaxTTL != "" {
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonMaxTTL
		c.Message = fmt.Sprintf("No object lives past spec.maxTTL (%s) from its creation, whatever its annotations say", p.Spec.MaxTTL)
	}
	meta.SetStatusCondition(&p.Status.Conditions, c)
}

// noRecipients is the Ready message of a policy whose objects have nobody
// to remind: the rule is channelSet.remindsNobody's.
func noRecipients(resource string, channels *channelset.ChannelSet) string {
	names := channels.Names[v1alpha1.EventReminder]
	list := strings.Join(names, ", ")
	sends, are, them := "sends", "is the only channel that carries", "it"
	if len(names) > 1 {
		sends, are, them = "send", "are the only channels that carry", "them"
	}
	return fmt.Sprintf("Nobody is reminded of the %s whose %s annotation names no e-mail address that %s %s to (in its allowedEmailDomains, when it has some), "+
		"so they are not deleted: %s %s this policy's reminders and the policy gives %s no \"to\". "+
		"Name recipients under spec.notifications.channels[].to, or in each object's %s annotation, or tell owners (spec.notifications.owner) who have an address",
		resource, notify.AnnotationNotify, list, sends, list, are, them, notify.AnnotationNotify)
}

// unreminded reports whether o is owed notice that nobody can receive
// (channelSet.remindsNobody): a reminder stage applies to its lifetime,
// the policy has a minimum notice, no reminder has reached anyone yet, and
// none can. Such an object is never deleted until someone is named. The
// notice is reckoned as the object reconciler reckons it (decide, expiry).
func unreminded(c *match.Candidate, channels *channelset.ChannelSet, o *metav1.PartialObjectMetadata, owner string, now time.Time) bool {
	if !channels.RemindsNobody(o.Annotations, owner) {
		return false
	}
	d := decide.Evaluate(c, decide.Object{Created: o.CreationTimestamp.Time, Annotations: o.Annotations}, now, nil)
	if d.Record == nil {
		return false
	}
	n := expiry.NoticeOf(expiry.Input{Life: d.Life, Schedule: d.Schedule, Record: d.Record, Now: now})
	return n.Owed && n.Given.IsZero()
}

// governed is what count found besides the status counts.
type governed struct {
	// namespaces hold the objects the policy governs, sorted; none for a
	// cluster-scoped kind.
	namespaces []string
	// unreminded counts the tracked objects owed notice that nobody can
	// receive: they are never deleted.
	unreminded int
}

// count fills in the status counts from the cache: no API call.
func (r *PolicyReconciler) count(ctx context.Context, policy *v1alpha1.TimeoutPolicy, gvk schema.GroupVersionKind, namespaced bool, channels *channelset.ChannelSet) (governed, error) {
	ctx, cancel := context.WithTimeout(ctx, objectstore.ListTimeout)
	defer cancel()
	var found governed
	var policies v1alpha1.TimeoutPolicyList
	if err := r.Client.List(ctx, &policies); err != nil {
		return found, fmt.Errorf("list policies: %w", err)
	}
	ranked := match.Candidates(policies.Items, gvk)
	var self match.Candidate
	for _, c := range ranked {
		if c.Name == policy.Name {
			self = c
		}
	}

	namespaces := map[string]bool{}
	now := r.Clock.Now()
	var tracked, kept, soon, idle, asleep int32
	var freedReplicas, freedCPU, freedMemory int64
	ahead := make([]int, len(metrics.Horizons))
	var next time.Time
	outranked := map[string]int{}
	nsLabels := map[string]map[string]string{}
	err := r.Watches.EachCached(ctx, gvk, "", func(o *metav1.PartialObjectMetadata) error {
		if o.DeletionTimestamp != nil {
			return nil
		}
		matched, err := match.Matching(ranked, match.Object{
			Labels:     o.Labels,
			Namespaced: namespaced,
			NamespaceLabels: func() (map[string]string, error) {
				if l, ok := nsLabels[o.Namespace]; ok {
					return l, nil
				}
				l, err := kube.NamespaceLabels(ctx, r.Client, o.Namespace)
				nsLabels[o.Namespace] = l
				return l, err
			},
		})
		if err != nil {
			return err
		}
		if len(matched) == 0 {
			return nil
		}
		if matched[0].Name != policy.Name {
			if slices.ContainsFunc(matched, func(c match.Candidate) bool { return c.Name == policy.Name }) {
				outranked[matched[0].Name]++
			}
			return nil
		}
		life := self.Schedule.Lifetime(o.CreationTimestamp.Time, o.Annotations, now)
		if life.Keep {
			kept++
			return nil
		}
		tracked++
		if namespaced {
			namespaces[o.Namespace] = true
		}
		owner := ""
		if policy.Spec.Notifications.Owner && channels.RemindsOnlyWhomObjectsName() {
			// An owner without an address is reached by nobody: the
			// reason was said on the object (OwnerUnreachable).
			owner, _ = r.Owners.Address(ctx, o.Annotations[notify.AnnotationOwner], nil)
		}
		if unreminded(&self, channels, o, owner, now) {
			found.unreminded++
		}
		if life.Idle() {
			idle++
		}
		if life.Asleep {
			asleep++
			freedReplicas += int64(life.Sleep.Freed)
			freedCPU += life.Sleep.FreedCPUMillis
			freedMemory += life.Sleep.FreedMemoryBytes
		}
		if lead := self.Schedule.LongestReminder(); lead > 0 && life.ExpiresAt.Sub(now) <= lead {
			soon++
		}
		for i, h := range metrics.Horizons {
			if life.ExpiresAt.Sub(now) <= h.D {
				ahead[i]++
			}
		}
		if next.IsZero() || life.ExpiresAt.Before(next) {
			next = life.ExpiresAt
		}
		return nil
	})
	if err != nil {
		return found, err
	}
	found.namespaces = slices.Sorted(maps.Keys(namespaces))

	policy.Status.Tracked, policy.Status.Kept, policy.Status.ExpiringSoon, policy.Status.Idle = tracked, kept, soon, idle
	policy.Status.Asleep = asleep
	metrics.ObjectsAsleep.WithLabelValues(policy.Name).Set(float64(asleep))
	metrics.SleepFreedReplicas.WithLabelValues(policy.Name).Set(float64(freedReplicas))
	metrics.SleepFreedCPU.WithLabelValues(policy.Name).Set(float64(freedCPU) / 1000)
	metrics.SleepFreedMemory.WithLabelValues(policy.Name).Set(float64(freedMemory))
	metrics.ObjectsTracked.WithLabelValues(policy.Name).Set(float64(tracked))
	metrics.ObjectsKept.WithLabelValues(policy.Name).Set(float64(kept))
	metrics.ObjectsExpiringSoon.WithLabelValues(policy.Name).Set(float64(soon))
	for i, h := range metrics.Horizons {
		metrics.ObjectsExpiring.WithLabelValues(policy.Name, h.Label).Set(float64(ahead[i]))
	}
	policy.Status.NextExpiry = nil
	if !next.IsZero() {
		policy.Status.NextExpiry = &metav1.Time{Time: next}
	}
	if len(outranked) == 0 {
		meta.SetStatusCondition(&policy.Status.Conditions, metav1.Condition{
			Type: v1alpha1.ConditionOverlapping, Status: metav1.ConditionFalse,
			Reason: v1alpha1.ReasonNoOverlap, Message: "No object this policy selects is governed by another policy",
			ObservedGeneration: policy.Generation,
		})
		return found, nil
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(outranked)) {
		parts = append(parts, fmt.Sprintf("%d by %s", outranked[name], name))
	}
	meta.SetStatusCondition(&policy.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionOverlapping, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonOutranked,
		Message: "Objects this policy selects are governed by a policy that outranks it (higher priority, or same priority and a name that sorts first): " +
			strings.Join(parts, ", "),
		ObservedGeneration: policy.Generation,
	})
	return found, nil
}

func (r *PolicyReconciler) setReady(p *v1alpha1.TimeoutPolicy, status metav1.ConditionStatus, reason, msg string) {
	p.Status.ObservedGeneration = p.Generation
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: p.Generation,
	})
}

// patchStatus writes the status when it changed, and emits a Warning with
// warnReason when the Ready condition has just turned False. It logs why a
// policy is not ready once per process and message: after a restart too,
// when the status already said so.
func (r *PolicyReconciler) patchStatus(ctx context.Context, orig, p *v1alpha1.TimeoutPolicy, warnReason string) error {
	now := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	if warnReason == "" {
		r.said.Delete(p.Name)
	} else if said := now.Reason + ": " + now.Message; !r.saidBefore(p.Name, said) {
		logf.FromContext(ctx).Info("policy not ready", "reason", now.Reason, "message", now.Message)
	}
	if equality.Semantic.DeepEqual(orig.Status, p.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, p, client.MergeFrom(orig)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patch status of policy %s: %w", p.Name, err)
	}
	r.warnTraffic(orig, p)
	was := meta.FindStatusCondition(orig.Status.Conditions, v1alpha1.ConditionReady)
	if warnReason != "" && (was == nil || was.Reason != now.Reason || was.Message != now.Message) {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, warnReason, kube.ActionEvaluate, "%s", now.Message)
	}
	return nil
}

// saidBefore reports whether this process logged said about the policy
// last, and remembers that it has now.
func (r *PolicyReconciler) saidBefore(policy, said string) bool {
	prev, _ := r.said.Swap(policy, said)
	return prev == said
}
