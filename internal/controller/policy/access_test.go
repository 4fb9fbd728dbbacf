// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/metrics"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// rbac answers SelfSubjectAccessReviews as an authorizer holding the
// grants it is given would: "verb resource" cluster-wide, "verb resource
// namespace" in one namespace. It counts the reviews.
type rbac struct {
	authorizationv1client.SelfSubjectAccessReviewInterface

	mu      sync.Mutex
	grants  map[string]bool
	reviews int
	err     error
}

func newRBAC(grants ...string) *rbac {
	r := &rbac{grants: map[string]bool{}}
	r.grant(grants...)
	return r
}

func (r *rbac) grant(grants ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range grants {
		r.grants[g] = true
	}
}

func (r *rbac) revoke(grants ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range grants {
		delete(r.grants, g)
	}
}

func (r *rbac) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reviews
}

func (r *rbac) Create(_ context.Context, review *authorizationv1.SelfSubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SelfSubjectAccessReview, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reviews++
	if r.err != nil {
		return nil, r.err
	}
	a := review.Spec.ResourceAttributes
	gr := schema.GroupResource{Group: a.Group, Resource: a.Resource}.String()
	out := review.DeepCopy()
	out.Status.Allowed = r.grants[a.Verb+" "+gr] || (a.Namespace != "" && r.grants[a.Verb+" "+gr+" "+a.Namespace])
	return out, nil
}

func everyVerb(resource string) []string {
	var g []string
	for _, v := range targetVerbs {
		g = append(g, v+" "+resource)
	}
	return g
}

func TestAccessAsksOnceWhatItMayAndAgainWhatItMayNot(t *testing.T) {
	clock := clocktesting.NewFakeClock(fixture.T0)
	reviews := newRBAC("list configmaps", "watch configmaps")
	a := NewAccess(reviews, clock)
	cms := schema.GroupResource{Resource: "configmaps"}
	ctx := context.Background()

	missing := func() []string {
		t.Helper()
		m, err := a.missing(ctx, cms, "", targetVerbs...)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if got := missing(); !slices.Equal(got, []string{"get", "patch", "delete"}) {
		t.Fatalf("missing %q, want get, patch, delete", got)
	}
	if n := reviews.count(); n != 5 {
		t.Fatalf("%d reviews, want one per verb", n)
	}

	t.Run("asks nothing again while a policy it holds waits to look again", func(t *testing.T) {
		if got := missing(); !slices.Equal(got, []string{"get", "patch", "delete"}) {
			t.Fatalf("missing %q, want get, patch, delete", got)
		}
		if n := reviews.count(); n != 5 {
			t.Fatalf("%d reviews, want none more", n)
		}
	})
	t.Run("asks again only about the verbs it was refused, and sees a grant then", func(t *testing.T) {
		reviews.grant(everyVerb("configmaps")...)
		clock.Step(targetRetry)
		if got := missing(); len(got) != 0 {
			t.Fatalf("missing %q after the grant", got)
		}
		if n := reviews.count(); n != 5+3 {
			t.Fatalf("%d reviews, want 3 more", n)
		}
	})
	t.Run("sees a revocation once its answer has expired", func(t *testing.T) {
		reviews.revoke("watch configmaps")
		if got := missing(); len(got) != 0 {
			t.Fatalf("missing %q within the allowed answer's lifetime", got)
		}
		clock.Step(metrics.AccessAllowTTL)
		if got := missing(); !slices.Equal(got, []string{"watch"}) {
			t.Fatalf("missing %q, want watch", got)
		}
	})
	t.Run("returns the error of a review that fails", func(t *testing.T) {
		reviews.err = errors.New("connection refused")
		_, err := NewAccess(reviews, clock).missing(ctx, cms, "", "get")
		if err == nil || !strings.Contains(err.Error(), "may get configmaps") {
			t.Fatalf("err = %v, want one naming the verb and resource", err)
		}
		reviews.err = nil
	})
}

func TestObjectsAccessLooksInTheNamespacesOfANamespacedKind(t *testing.T) {
	cms := schema.GroupResource{Resource: "configmaps"}
	playbooks := schema.GroupResource{Group: "amphitheatre.app", Resource: "playbooks"}
	for _, tt := range []struct {
		name           string
		grants         []string
		resource       schema.GroupResource
		namespaced     bool
		namespaces     []string
		wantEverywhere []string
		wantIn         map[string][]string
	}{
		{name: "finds nothing missing with the verbs granted cluster-wide", grants: everyVerb("configmaps"),
			resource: cms, namespaced: true, namespaces: []string{"a"}},
		{name: "accepts verbs granted in each namespace that holds objects",
			grants:   []string{"get configmaps a", "patch configmaps a", "delete configmaps a", "get configmaps b", "patch configmaps b", "delete configmaps b"},
			resource: cms, namespaced: true, namespaces: []string{"a", "b"}},
		{name: "names the namespaces where a verb is missing",
			grants:   []string{"get configmaps", "patch configmaps", "delete configmaps a"},
			resource: cms, namespaced: true, namespaces: []string{"a", "b", "c"},
			wantIn: map[string][]string{"delete": {"b", "c"}}},
		{name: "names every namespace when a verb is missing in all",
			grants:   []string{"get configmaps", "patch configmaps"},
			resource: cms, namespaced: true, namespaces: []string{"a", "b"}, wantIn: map[string][]string{"delete": {"a", "b"}}},
		{name: "finds nothing missing for a namespaced kind without objects", resource: cms, namespaced: true},
		{name: "reports the verbs missing on a cluster-scoped kind", grants: []string{"get playbooks.amphitheatre.app"},
			resource: playbooks, wantEverywhere: []string{"patch", "delete"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := NewAccess(newRBAC(tt.grants...), clocktesting.NewFakePassiveClock(fixture.T0))
			f, err := a.objectsAccess(context.Background(), tt.resource, tt.namespaced, tt.namespaces)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(f.everywhere, tt.wantEverywhere) || len(f.in) != len(tt.wantIn) {
				t.Fatalf("everywhere %q, in %q; want %q, %q", f.everywhere, f.in, tt.wantEverywhere, tt.wantIn)
			}
			for v, ns := range tt.wantIn {
				if !slices.Equal(f.in[v], ns) {
					t.Errorf("%s missing in %q, want %q", v, f.in[v], ns)
				}
			}
		})
	}
}

func TestForbiddenSaysWhatIsMissingAndWhereToReadHowToGrantIt(t *testing.T) {
	f := forbidden{
		resource:   schema.GroupResource{Resource: "configmaps"},
		everywhere: []string{"patch"},
		in:         map[string][]string{"get": {"x"}, "delete": {"a", "b", "c", "d", "e"}},
	}
	want := "The API server does not let the controller patch configmaps, nor get configmaps in namespace x, nor delete configmaps in namespace a, b, c and 2 more, " +
		"so nothing happens: grant its ServiceAccount get, list, watch, patch, delete on configmaps (see docs/reference/rbac.md); checked again every 15s"
	if got := f.message("nothing happens"); got != want {
		t.Errorf("message\n%q, want\n%q", got, want)
	}
}

// A policy for a kind the controller may not list or watch is not Ready,
// starts no watch (which would be refused, and logged, for as long as the
// process runs), and turns Ready once the permission is granted, without
// a restart.
func TestAPolicyForAKindTheControllerMayNotUseIsForbiddenUntilGranted(t *testing.T) {
	for _, tt := range []struct {
		name        string
		grants      []string
		objects     []client.Object
		wantMessage []string
		wantWatched int
	}{
		{
			name:        "may not list or watch: nothing is watched",
			grants:      []string{"get configmaps", "patch configmaps", "delete configmaps"},
			wantMessage: []string{"does not let the controller list, watch configmaps, so this policy governs nothing", "docs/reference/rbac.md"},
		},
		{
			name:        "may not patch or delete where its objects are",
			grants:      []string{"get configmaps", "list configmaps", "watch configmaps", "patch configmaps other", "delete configmaps other"},
			objects:     []client.Object{fixture.NewConfigMap("a", fixture.TTL("10m"))},
			wantMessage: []string{"does not let the controller patch, delete configmaps in namespace team-a, so this policy's objects are not reminded and deleted"},
			// Watched, to find the namespaces its objects are in.
			wantWatched: 2,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newPolicyHarness(t, fixture.T0.Add(time.Minute), append(tt.objects, fixture.Policy("configmaps"))...)
			reviews := newRBAC(tt.grants...)
			h.r.Access = NewAccess(reviews, h.r.Clock)

			got, p := h.reconcile(t, "configmaps")
			if got.RequeueAfter != targetRetry {
				t.Errorf("Result = %+v, want a look again in %s", got, targetRetry)
			}
			ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != v1alpha1.ReasonForbidden {
				t.Fatalf("Ready = %+v, want False/Forbidden", ready)
			}
			for _, m := range tt.wantMessage {
				if !strings.Contains(ready.Message, m) {
					t.Errorf("Ready message %q does not contain %q", ready.Message, m)
				}
			}
			if n := h.ctrl.watched(); n != tt.wantWatched {
				t.Errorf("%d watches started, want %d", n, tt.wantWatched)
			}
			if evs := fixture.Kinds(fixture.Drain(h.rec)); !slices.Equal(evs, []string{"Warning Forbidden"}) {
				t.Errorf("Events = %q, want one Warning Forbidden", evs)
			}

			reviews.grant(everyVerb("configmaps")...)
			h.r.Clock.(*clocktesting.FakePassiveClock).SetTime(h.r.Clock.Now().Add(targetRetry))
			_, p = h.reconcile(t, "configmaps")
			if !meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady) {
				t.Fatalf("after the grant, conditions %+v; want Ready", p.Status.Conditions)
			}
		})
	}
}

// The log says why a policy is not ready once per process, even when its
// status said so before the process started; the Event is only for a
// change of status.
func TestWhyAPolicyIsNotReadyIsLoggedOncePerProcess(t *testing.T) {
	h := newPolicyHarness(t, fixture.T0, fixture.Policy("widgets", fixture.Target("example.com/v1", "Widget")))
	var lines []string
	ctx := logr.NewContext(context.Background(), funcr.New(func(prefix, args string) {
		lines = append(lines, args)
	}, funcr.Options{}))
	reconcile := func(r *PolicyReconciler) {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "widgets"}}); err != nil {
			t.Fatal(err)
		}
	}
	logged := func() int {
		n := 0
		for _, l := range lines {
			if strings.Contains(l, `"policy not ready"`) && strings.Contains(l, "does not serve example.com/v1 Widget") {
				n++
			}
		}
		return n
	}

	reconcile(h.r)
	reconcile(h.r)
	if n := logged(); n != 1 {
		t.Fatalf("logged %d times in one process, want once:\n%s", n, strings.Join(lines, "\n"))
	}
	if evs := fixture.Kinds(fixture.Drain(h.rec)); !slices.Equal(evs, []string{"Warning TargetNotFound"}) {
		t.Fatalf("Events = %q, want one", evs)
	}

	restarted := &PolicyReconciler{Client: h.r.Client, RESTMapper: h.r.RESTMapper, Recorder: h.r.Recorder, Clock: h.r.Clock,
		StatusInterval: h.r.StatusInterval, Channels: h.r.Channels, Watches: h.r.Watches}
	reconcile(restarted)
	if n := logged(); n != 2 {
		t.Errorf("a new process logged %d times in all, want once more", n)
	}
	if evs := fixture.Drain(h.rec); len(evs) != 0 {
		t.Errorf("Events %q for a status that did not change", evs)
	}
}
