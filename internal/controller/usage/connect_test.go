// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package usage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

func connectRequest(op admissionv1.Operation, group, resource, sub string) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op, Resource: metav1.GroupVersionResource{Group: group, Version: "v1", Resource: resource}, SubResource: sub,
		Namespace: "team-a", Name: "web-1", UserInfo: authenticationv1.UserInfo{Username: "alice"},
	}}
}

func TestConnectionsAllowEverythingAndQueueOnlyConnections(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  admission.Request
		via  string
	}{
		{"queues an exec", connectRequest(admissionv1.Connect, "", "pods", "exec"), expiry.ViaExec},
		{"queues an attach", connectRequest(admissionv1.Connect, "", "pods", "attach"), expiry.ViaAttach},
		{"queues a port-forward", connectRequest(admissionv1.Connect, "", "pods", "portforward"), expiry.ViaPortForward},
		{"ignores a proxy to a Pod", connectRequest(admissionv1.Connect, "", "pods", "proxy"), ""},
		{"ignores a Pod's creation", connectRequest(admissionv1.Create, "", "pods", ""), ""},
		{"ignores another group's pods", connectRequest(admissionv1.Connect, "metrics.k8s.io", "pods", "exec"), ""},
		{"ignores a dry run", func() admission.Request {
			r := connectRequest(admissionv1.Connect, "", "pods", "exec")
			r.DryRun = ptr.To(true)
			return r
		}(), ""},
		{"queues an exec that says it is no dry run", func() admission.Request {
			r := connectRequest(admissionv1.Connect, "", "pods", "exec")
			r.DryRun = ptr.To(false)
			return r
		}(), expiry.ViaExec},
		{"ignores a request on pods/exec that is no connection", connectRequest(admissionv1.Create, "", "pods", "exec"), ""},
		{"ignores an exec into anything but a Pod", connectRequest(admissionv1.Connect, "", "nodes", "exec"), ""},
		{"ignores an exec that names no Pod", func() admission.Request {
			r := connectRequest(admissionv1.Connect, "", "pods", "exec")
			r.Name = ""
			return r
		}(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewConnections(nil, nil, nil, nil, clocktesting.NewFakeClock(fixture.T0))
			if resp := c.Handle(context.Background(), tc.req); !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			select {
			case conn := <-c.queue:
				if tc.via == "" {
					t.Fatalf("queued %+v", conn)
				}
				want := expiry.Use{At: fixture.T0, Via: tc.via, By: "alice"}
				if conn.use != want || conn.pod != (types.NamespacedName{Namespace: "team-a", Name: "web-1"}) ||
					conn.subresource != tc.req.SubResource || conn.user.Username != "alice" {
					t.Errorf("queued %+v, want %+v of team-a/web-1 (%s) by alice", conn, want, tc.req.SubResource)
				}
			default:
				if tc.via != "" {
					t.Fatal("nothing queued")
				}
			}
		})
	}

	t.Run("allows at once when the queue is full, dropping the use", func(t *testing.T) {
		c := NewConnections(nil, nil, nil, nil, clocktesting.NewFakeClock(fixture.T0))
		req := connectRequest(admissionv1.Connect, "", "pods", "exec")
		for range connectQueue + 10 {
			if resp := c.Handle(context.Background(), req); !resp.Allowed {
				t.Fatal("denied")
			}
		}
		if len(c.queue) != connectQueue {
			t.Errorf("%d queued, want %d", len(c.queue), connectQueue)
		}
	})
}

// chain is a Pod owned by a ReplicaSet owned by a Deployment, in a
// namespace labelled env=dev.
func chain() []client.Object {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", UID: "uid-ns", Labels: map[string]string{"env": "dev"}}}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: "uid-deploy", Labels: map[string]string{"app": "web"}}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web-5d9", UID: "uid-rs", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "uid-deploy", Controller: ptr.To(true)}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web-1", UID: "uid-pod", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d9", UID: "uid-rs", Controller: ptr.To(true)}}}}
	return []client.Object{ns, deploy, rs, pod}
}

func TestConnectionsResolveTheGovernedOwner(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policies []client.Object
		want     string
		window   time.Duration
	}{
		{"finds the Deployment above the ReplicaSet", []client.Object{fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"), fixture.Idle("20m"))}, "Deployment", time.Minute},
		{"prefers the Pod's chain to its namespace", []client.Object{
			fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"), fixture.Idle("20m")),
			fixture.Policy("namespaces", fixture.Target("v1", "Namespace"), fixture.Idle("1h")),
		}, "Deployment", time.Minute},
		{"falls back to the namespace", []client.Object{fixture.Policy("namespaces", fixture.Target("v1", "Namespace"), fixture.Idle("1h"))}, "Namespace", 3 * time.Minute},
		{"skips an owner its policy does not select", []client.Object{
			fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"), fixture.Selecting(map[string]string{"app": "db"}), fixture.Idle("20m")),
			fixture.Policy("namespaces", fixture.Target("v1", "Namespace"), fixture.InNamespaces(map[string]string{"env": "dev"}), fixture.Idle("1h")),
		}, "Namespace", 3 * time.Minute},
		{"records nothing under a policy without an idle clock", []client.Object{fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"))}, "Deployment", 0},
		{"finds nothing without a policy", nil, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(fixture.Scheme(t)).WithObjects(append(chain(), tc.policies...)...).Build()
			conns := NewConnections(c, c, c, nil, clocktesting.NewFakeClock(fixture.T0))
			g, _, err := conns.resolve(context.Background(), types.NamespacedName{Namespace: "team-a", Name: "web-1"})
			if err != nil {
				t.Fatal(err)
			}
			if g.gvk.Kind != tc.want || g.window != tc.window || (tc.want == "") != (g.uid == "") {
				t.Errorf("resolved %s %s (uid %q) with window %s, want %s with %s", g.gvk.Kind, g.key, g.uid, g.window, tc.want, tc.window)
			}
		})
	}

	t.Run("stops at an owner that is gone", func(t *testing.T) {
		objs := chain()
		policy := fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"), fixture.Idle("20m"))
		c := fake.NewClientBuilder().WithScheme(fixture.Scheme(t)).WithObjects(objs[0], objs[2], objs[3], policy).Build()
		g, _, err := NewConnections(c, c, c, nil, clocktesting.NewFakeClock(fixture.T0)).resolve(context.Background(), types.NamespacedName{Namespace: "team-a", Name: "web-1"})
		if err != nil || g.uid != "" {
			t.Errorf("resolved %+v, %v; want nothing", g, err)
		}
	})
}

func TestConnectionsRecordUseOncePerWindow(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(fixture.T0)
	policy := fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"), fixture.Idle("20m"))
	c := fake.NewClientBuilder().WithScheme(fixture.Scheme(t)).WithObjects(append(chain(), policy)...).Build()
	conns := NewConnections(c, c, c, (&connectRBAC{}).reviews(), clk)
	pod := types.NamespacedName{Namespace: "team-a", Name: "web-1"}
	deploy := func() *appsv1.Deployment {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "web"}, d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	use := func(by string) string {
		t.Helper()
		out, err := conns.record(ctx, connection{pod: pod, subresource: "exec", user: authenticationv1.UserInfo{Username: by},
			use: expiry.Use{At: clk.Now(), Via: expiry.ViaExec, By: by}})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	if got := use("alice"); got != "recorded" {
		t.Fatalf("first use: %s", got)
	}
	u, ok := expiry.LastUse(deploy().Annotations)
	if !ok || u.By != "alice" || !u.At.Equal(fixture.T0) {
		t.Fatalf("last use %+v (%t), want alice's at %s", u, ok, fixture.T0)
	}
	clk.Step(59 * time.Second)
	if got := use("bob"); got != "throttled" {
		t.Errorf("a use within the window: %s", got)
	}
	clk.Step(time.Second)
	if got := use("bob"); got != "recorded" {
		t.Errorf("a use a window later: %s", got)
	}

	t.Run("never moves a later last-active back", func(t *testing.T) {
		d := deploy()
		later := clk.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)
		d.Annotations[expiry.AnnotationLastActive] = later
		if err := c.Update(ctx, d); err != nil {
			t.Fatal(err)
		}
		clk.Step(2 * time.Minute)
		if got := use("carol"); got != "throttled" {
			t.Errorf("a use before the object's last-active: %s", got)
		}
		if got := deploy().Annotations[expiry.AnnotationLastActive]; got != later {
			t.Errorf("last-active %s, want %s kept", got, later)
		}
	})
}

// connectRBAC answers the SubjectAccessReviews of connections as the API
// server would: allowed when grants lists "<user or group> <verb>
// <subresource> <namespace>/<pod>"; every one when grants is nil; fail
// instead when err is set. It keeps the reviews it was asked.
type connectRBAC struct {
	grants map[string]bool
	err    error

	mu    sync.Mutex
	asked []authorizationv1.SubjectAccessReviewSpec
}

func (r *connectRBAC) reviews() authorizationv1client.SubjectAccessReviewInterface {
	cs := kubefake.NewClientset()
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.asked = append(r.asked, sar.Spec)
		if r.err != nil {
			return true, nil, r.err
		}
		ra := sar.Spec.ResourceAttributes
		if r.grants == nil {
			sar.Status.Allowed = true
			return true, sar, nil
		}
		for _, who := range append([]string{sar.Spec.User}, sar.Spec.Groups...) {
			if ra.Group == "" && ra.Resource == "pods" &&
				r.grants[fmt.Sprintf("%s %s %s %s/%s", who, ra.Verb, ra.Subresource, ra.Namespace, ra.Name)] {
				sar.Status.Allowed = true
			}
		}
		return true, sar, nil
	})
	return cs.AuthorizationV1().SubjectAccessReviews()
}

func (r *connectRBAC) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.asked)
}

func connectionBy(user authenticationv1.UserInfo, pod, subresource string, at time.Time) connection {
	via := map[string]string{"exec": expiry.ViaExec, "attach": expiry.ViaAttach, "portforward": expiry.ViaPortForward}[subresource]
	return connection{pod: types.NamespacedName{Namespace: "team-a", Name: pod}, subresource: subresource, user: user,
		use: expiry.Use{At: at, Via: via, By: user.Username}}
}

// governedChain is chain() under a policy on Deployments with an idle
// clock, in a fake API server, and a reader of the Deployment's last use.
func governedChain(t *testing.T) (client.Client, func() (expiry.Use, bool)) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(fixture.Scheme(t)).
		WithObjects(append(chain(), fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"), fixture.Idle("20m")))...).Build()
	return c, func() (expiry.Use, bool) {
		t.Helper()
		d := &appsv1.Deployment{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: "team-a", Name: "web"}, d); err != nil {
			t.Fatal(err)
		}
		if _, ok := d.Annotations[expiry.AnnotationLastActive]; ok {
			u, _ := expiry.LastUse(d.Annotations)
			return u, true
		}
		return expiry.Use{}, false
	}
}

func TestAConnectionIsRecordedOnlyWhenTheAPIServerSaysItsUserMayMakeIt(t *testing.T) {
	grants := map[string]bool{
		"alice create exec team-a/web-1":  true,
		"devs create attach team-a/web-1": true,
		"bob create exec team-a/web-2":    true,
		"dave get exec team-a/web-1":      true,
	}
	alice := authenticationv1.UserInfo{Username: "alice", UID: "u-1", Groups: []string{"system:authenticated"},
		Extra: map[string]authenticationv1.ExtraValue{"scopes": {"exec"}}}
	for _, tc := range []struct {
		name    string
		conn    connection
		err     error
		want    string
		written bool
	}{
		{"records an exec by a user who may exec into the Pod", connectionBy(alice, "web-1", "exec", fixture.T0), nil, "recorded", true},
		{"records an attach by a user whose group may attach", connectionBy(authenticationv1.UserInfo{Username: "carol", Groups: []string{"devs"}}, "web-1", "attach", fixture.T0), nil, "recorded", true},
		{"records a WebSocket exec by a user who may only get pods/exec", connectionBy(authenticationv1.UserInfo{Username: "dave"}, "web-1", "exec", fixture.T0), nil, "recorded", true},
		{"records nothing for a user who may not connect to the Pod", connectionBy(authenticationv1.UserInfo{Username: "mallory"}, "web-1", "exec", fixture.T0), nil, "unverified", false},
		{"records nothing for a user who may exec only into another Pod", connectionBy(authenticationv1.UserInfo{Username: "bob"}, "web-1", "exec", fixture.T0), nil, "unverified", false},
		{"records nothing for a user who may exec but not port-forward", connectionBy(alice, "web-1", "portforward", fixture.T0), nil, "unverified", false},
		{"records nothing when the API server does not answer the review", connectionBy(alice, "web-1", "exec", fixture.T0), errors.New("connection refused"), "failed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, lastUse := governedChain(t)
			rbac := &connectRBAC{grants: grants, err: tc.err}
			conns := NewConnections(c, c, c, rbac.reviews(), clocktesting.NewFakeClock(fixture.T0))
			got, err := conns.record(context.Background(), tc.conn)
			if got != tc.want || (err != nil) != (tc.err != nil) {
				t.Fatalf("outcome %s (%v), want %s", got, err, tc.want)
			}
			if u, ok := lastUse(); ok != tc.written || (ok && u.By != tc.conn.user.Username) {
				t.Errorf("last use %+v written: %t, want %t", u, ok, tc.written)
			}
			// create, then get unless create is allowed or unanswered.
			for i, asked := range rbac.asked {
				want := authorizationv1.SubjectAccessReviewSpec{
					User: tc.conn.user.Username, UID: tc.conn.user.UID, Groups: tc.conn.user.Groups,
					ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "team-a", Name: tc.conn.pod.Name,
						Verb: connectVerbs[min(i, 1)], Version: "v1", Resource: "pods", Subresource: tc.conn.subresource},
				}
				for k, v := range tc.conn.user.Extra {
					if want.Extra == nil {
						want.Extra = map[string]authorizationv1.ExtraValue{}
					}
					want.Extra[k] = authorizationv1.ExtraValue(v)
				}
				if !equality.Semantic.DeepEqual(asked, want) {
					t.Errorf("review %d asked %+v, want %+v", i, asked, want)
				}
			}
			if n := rbac.count(); n < 1 || n > len(connectVerbs) {
				t.Errorf("%d reviews asked, want one for each verb at most", n)
			}
		})
	}
}

func TestABurstOfConnectionsCostsOneReview(t *testing.T) {
	alice := authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}}
	mallory := authenticationv1.UserInfo{Username: "mallory"}
	for _, tc := range []struct {
		name  string
		user  authenticationv1.UserInfo
		err   error
		want  string
		again time.Duration // when the same connection is asked about again
	}{
		{"asks once a minute about a user who may connect", alice, nil, "throttled", connectReviewTTL},
		{"asks once a minute about a user who may not", mallory, nil, "unverified", connectReviewTTL},
		{"asks again five seconds after a review failed", alice, errors.New("connection refused"), "failed", resolveRetry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := governedChain(t)
			clk := clocktesting.NewFakeClock(fixture.T0)
			rbac := &connectRBAC{grants: map[string]bool{"alice create exec team-a/web-1": true}, err: tc.err}
			conns := NewConnections(c, c, c, rbac.reviews(), clk)
			record := func() string {
				out, _ := conns.record(context.Background(), connectionBy(tc.user, "web-1", "exec", clk.Now()))
				return out
			}
			record()
			// One review, or two (create, then get) for a user who may not.
			once := rbac.count()
			if once == 0 {
				t.Fatal("no review asked")
			}
			for range 99 {
				if got := record(); got != tc.want {
					t.Fatalf("a connection in the burst: %s, want %s", got, tc.want)
				}
			}
			if rbac.count() != once {
				t.Fatalf("%d reviews for a burst of 100 connections, want %d", rbac.count(), once)
			}
			clk.Step(tc.again - time.Second)
			record()
			if rbac.count() != once {
				t.Errorf("asked again %s after the review, want after %s", tc.again-time.Second, tc.again)
			}
			clk.Step(time.Second)
			record()
			if rbac.count() != 2*once {
				t.Errorf("%d reviews %s after the first, want %d", rbac.count(), tc.again, 2*once)
			}
			// Another Pod, subresource, or user is another review.
			_, _ = conns.record(context.Background(), connectionBy(tc.user, "web-2", "exec", clk.Now()))
			_, _ = conns.record(context.Background(), connectionBy(tc.user, "web-1", "attach", clk.Now()))
			_, _ = conns.record(context.Background(), connectionBy(authenticationv1.UserInfo{Username: tc.user.Username, Groups: []string{"admins"}}, "web-1", "exec", clk.Now()))
			if rbac.count() < 5*once {
				t.Errorf("%d reviews, want %d: as many for each other Pod, subresource and set of groups", rbac.count(), 5*once)
			}
		})
	}
}

// A request that the API server did not send, naming a user who may not
// connect to the Pod, is allowed (the webhook never blocks a connection)
// and writes nothing, counted unverified.
func TestAForgedReviewIsAllowedWritesNothingAndIsCountedUnverified(t *testing.T) {
	c, lastUse := governedChain(t)
	rbac := &connectRBAC{grants: map[string]bool{"alice create exec team-a/web-1": true}}
	conns := NewConnections(c, c, c, rbac.reviews(), clocktesting.NewFakeClock(fixture.T0))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- conns.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	counted := func(result string) float64 {
		var m dto.Metric
		if err := connectUses.WithLabelValues(result).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	unverifiedBefore, recordedBefore := counted("unverified"), counted("recorded")
	forged := connectRequest(admissionv1.Connect, "", "pods", "exec")
	forged.UserInfo = authenticationv1.UserInfo{Username: "mallory"}
	if resp := conns.Handle(ctx, forged); !resp.Allowed {
		t.Fatalf("denied: %+v", resp.Result)
	}
	fixture.Eventually(t, 5*time.Second, "the forged connection counted unverified", func() (bool, error) {
		return counted("unverified") == unverifiedBefore+1, nil
	})
	if u, ok := lastUse(); ok {
		t.Errorf("a forged review wrote last-use %+v", u)
	}

	// The same request by a user who may exec is recorded.
	if resp := conns.Handle(ctx, connectRequest(admissionv1.Connect, "", "pods", "exec")); !resp.Allowed {
		t.Fatalf("denied: %+v", resp.Result)
	}
	fixture.Eventually(t, 5*time.Second, "alice's exec recorded", func() (bool, error) {
		u, ok := lastUse()
		return ok && u.By == "alice" && counted("recorded") == recordedBefore+1, nil
	})
}
