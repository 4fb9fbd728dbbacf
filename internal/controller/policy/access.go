// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/utils/clock"

	"github.com/amphitheatre-app/timeout-controller/internal/controller/channelset"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/metrics"
)

// The verbs the controller uses on a target kind: list and watch follow
// the objects (cluster-wide, for the cache), get reads one before it is
// archived or named in a message, patch writes the reminders record and
// delete deletes it.
var (
	watchVerbs  = []string{"list", "watch"}
	objectVerbs = []string{"get", "patch", "delete"}
	targetVerbs = []string{"get", "list", "watch", "patch", "delete"}
)

// maxAccessReviews bounds the answers kept: a few verbs on a few kinds, in
// the namespaces that hold governed objects.
const maxAccessReviews = 4096

// Access asks the API server what the controller may do, with
// SelfSubjectAccessReviews: every authenticated user may create them (the
// system:basic-user ClusterRole grants it to system:authenticated), so
// they need no role of their own. An answer that allows is kept for
// accessAllowTTL, so that a revoked permission is noticed within that
// time; one that refuses only until targetRetry, when a policy it holds
// looks again, so that a permission granted later is seen then, without a
// restart, and policies of the same kind reconciled meanwhile ask once.
type Access struct {
	Reviews authorizationv1client.SelfSubjectAccessReviewInterface
	Clock   clock.PassiveClock

	answers *kube.TTLCache[accessKey, bool]
}

type accessKey struct {
	resource  schema.GroupResource
	namespace string
	verb      string
}

// NewAccess returns an Access that sends its reviews through reviews.
func NewAccess(reviews authorizationv1client.SelfSubjectAccessReviewInterface, c clock.PassiveClock) *Access {
	return &Access{Reviews: reviews, Clock: c, answers: kube.NewTTLCache[accessKey, bool](c, maxAccessReviews)}
}

// missing returns those of verbs the controller may not use on resource in
// namespace ("" is every namespace), in the order given. A nil Access
// checks nothing and finds nothing missing.
func (a *Access) missing(ctx context.Context, resource schema.GroupResource, namespace string, verbs ...string) ([]string, error) {
	if a == nil {
		return nil, nil
	}
	var out []string
	for _, verb := range verbs {
		key := accessKey{resource: resource, namespace: namespace, verb: verb}
		if allowed, ok := a.answers.Get(key); ok {
			if !allowed {
				out = append(out, verb)
			}
			continue
		}
		asked := a.Clock.Now()
		ctx, cancel := context.WithTimeout(ctx, kube.ReviewTimeout)
		review, err := a.Reviews.Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: resource.Group, Resource: resource.Resource, Namespace: namespace, Verb: verb,
			},
		}}, metav1.CreateOptions{})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("ask whether the controller may %s %s: %w", verb, resource, err)
		}
		if review.Status.Allowed && !review.Status.Denied {
			a.answers.Put(key, true, asked.Add(metrics.AccessAllowTTL))
			continue
		}
		a.answers.Put(key, false, asked.Add(targetRetry))
		out = append(out, verb)
	}
	return out, nil
}

// forbidden is what the controller lacks on a target kind: verbs missing
// everywhere, and verbs missing in some of the namespaces that hold
// governed objects.
type forbidden struct {
	resource schema.GroupResource
	// everywhere are the verbs refused across the cluster.
	everywhere []string
	// in are, per verb refused in namespaces that hold governed objects of
	// a namespaced kind, those namespaces.
	in map[string][]string
}

func (f forbidden) none() bool { return len(f.everywhere) == 0 && len(f.in) == 0 }

// objectsAccess finds which of objectVerbs the controller lacks on
// resource. A namespaced kind may be granted them with a RoleBinding in
// each namespace that holds its objects rather than cluster-wide
// (docs/reference/rbac.md), so a verb refused cluster-wide is asked again
// in each of namespaces, the ones holding objects the policy governs.
func (a *Access) objectsAccess(ctx context.Context, resource schema.GroupResource, namespaced bool, namespaces []string) (forbidden, error) {
	f := forbidden{resource: resource}
	refused, err := a.missing(ctx, resource, "", objectVerbs...)
	if err != nil || len(refused) == 0 {
		return f, err
	}
	if !namespaced {
		f.everywhere = refused
		return f, nil
	}
	byVerb := map[string][]string{}
	for _, ns := range namespaces {
		lacking, err := a.missing(ctx, resource, ns, refused...)
		if err != nil {
			return f, err
		}
		for _, v := range lacking {
			byVerb[v] = append(byVerb[v], ns)
		}
	}
	for _, v := range refused {
		if got := byVerb[v]; len(got) > 0 {
			if f.in == nil {
				f.in = map[string][]string{}
			}
			f.in[v] = got
		}
	}
	return f, nil
}

// message says what the controller may not do and how to grant it; the
// consequence comes first, the fix last.
func (f forbidden) message(consequence string) string {
	var parts []string
	if len(f.everywhere) > 0 {
		parts = append(parts, strings.Join(f.everywhere, ", ")+" "+f.resource.String())
	}
	// Verbs refused in the same namespaces are said together.
	var verbs []string
	where := map[string][]string{}
	for _, v := range objectVerbs {
		if ns, ok := f.in[v]; ok {
			k := strings.Join(ns, ",")
			if _, seen := where[k]; !seen {
				verbs = append(verbs, k)
			}
			where[k] = append(where[k], v)
		}
	}
	for _, k := range verbs {
		parts = append(parts, fmt.Sprintf("%s %s in namespace %s", strings.Join(where[k], ", "), f.resource, listSome(f.in[where[k][0]], 3)))
	}
	return fmt.Sprintf("The API server does not let the controller %s, so %s: grant its ServiceAccount %s on %s (see %s); checked again every %s",
		strings.Join(parts, ", nor "), consequence, strings.Join(targetVerbs, ", "), f.resource, channelset.RBACDocs, targetRetry)
}

// listSome joins the first n of names and says how many more there are.
func listSome(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
