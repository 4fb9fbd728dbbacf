// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package usage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// connectHarness is a fake API server behind the connection webhook's
// reader and writer, which counts the reads it answers (by "Kind
// namespace/name") and fails the requests its hooks say.
type connectHarness struct {
	t      *testing.T
	client client.Client
	clock  *clocktesting.FakeClock
	rbac   *connectRBAC

	mu sync.Mutex
	// onGet sees the n-th read (from 1) of an object, as read, and may
	// change it or fail it.
	onGet     func(kind string, key types.NamespacedName, n int, obj *metav1.PartialObjectMetadata) error
	listErr   error
	patchErrs []error // the next patches' answers, one each
	reads     map[string]int
	patches   int
}

func newConnectHarness(t *testing.T, objs ...client.Object) *connectHarness {
	t.Helper()
	h := &connectHarness{t: t, clock: clocktesting.NewFakeClock(fixture.T0), rbac: &connectRBAC{}, reads: map[string]int{}}
	h.client = interceptor.NewClient(fake.NewClientBuilder().WithScheme(fixture.Scheme(t)).WithObjects(objs...).Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			kind := obj.GetObjectKind().GroupVersionKind().Kind
			h.mu.Lock()
			name := fmt.Sprintf("%s %s", kind, key)
			h.reads[name]++
			n, hook := h.reads[name], h.onGet
			h.mu.Unlock()
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if pom, ok := obj.(*metav1.PartialObjectMetadata); ok && hook != nil {
				return hook(kind, key, n, pom)
			}
			return nil
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			h.mu.Lock()
			err := h.listErr
			h.mu.Unlock()
			if err != nil {
				return err
			}
			return c.List(ctx, list, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			h.mu.Lock()
			h.patches++
			var err error
			if len(h.patchErrs) > 0 {
				err, h.patchErrs = h.patchErrs[0], h.patchErrs[1:]
			}
			h.mu.Unlock()
			if err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	return h
}

func (h *connectHarness) connections() *Connections {
	return NewConnections(h.client, h.client, h.client, h.rbac.reviews(), h.clock)
}

// readCount is how many reads the fake API server answered.
func (h *connectHarness) readCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.reads {
		n += c
	}
	return n
}

// record records an exec by alice into team-a/web-1 now.
func (h *connectHarness) record(conns *Connections) (string, error) {
	return conns.record(context.Background(), connectionBy(authenticationv1.UserInfo{Username: "alice"}, "web-1", "exec", h.clock.Now()))
}

// lastUse is the use the object of kind (apps/v1 or v1) shows, if any.
func (h *connectHarness) lastUse(obj client.Object) (expiry.Use, bool) {
	h.t.Helper()
	if err := h.client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		h.t.Fatal(err)
	}
	if _, ok := obj.GetAnnotations()[expiry.AnnotationLastActive]; !ok {
		return expiry.Use{}, false
	}
	u, _ := expiry.LastUse(obj.GetAnnotations())
	return u, true
}

func deploymentWeb() *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
}

func namespaceTeamA() *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
}

// deploysIdle governs Deployments with an idle clock of 20 minutes (a
// window of one minute), and namespacesIdle namespaces with one of an hour.
func deploysIdle() *v1alpha1.TimeoutPolicy {
	return fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"), fixture.Idle("20m"))
}

func namespacesIdle() *v1alpha1.TimeoutPolicy {
	return fixture.Policy("namespaces", fixture.Target("v1", "Namespace"), fixture.Idle("1h"))
}

var serverDown = apierrors.NewInternalError(errors.New("etcd is down"))

func TestARecordedConnectionIsWrittenOnTheObjectItsPolicyGoverns(t *testing.T) {
	podKey := types.NamespacedName{Namespace: "team-a", Name: "web-1"}
	for _, tc := range []struct {
		name     string
		policies []client.Object
		listErr  error
		onGet    func(kind string, key types.NamespacedName, n int, obj *metav1.PartialObjectMetadata) error
		patch    []error
		want     string
		wantErr  string
		written  client.Object // the object that shows the use, if any
	}{
		{name: "records an exec on the Deployment its policy governs", policies: []client.Object{deploysIdle()}, want: "recorded", written: deploymentWeb()},
		{name: "records under the shortest idle clock a policy can have", policies: []client.Object{fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"), fixture.Idle("20ns"))},
			want: "recorded", written: deploymentWeb()},
		{name: "counts an exec under a policy without an idle clock ungoverned", policies: []client.Object{fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"))}, want: "ungoverned"},
		{name: "counts an exec under no policy ungoverned", want: "ungoverned"},
		{name: "records on a Deployment whose namespace its policy selects", policies: []client.Object{
			fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"), fixture.InNamespaces(map[string]string{"env": "dev"}), fixture.Idle("20m")),
		}, want: "recorded", written: deploymentWeb()},
		{name: "skips a Deployment whose namespace its policy does not select", policies: []client.Object{
			fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"), fixture.InNamespaces(map[string]string{"env": "prod"}), fixture.Idle("20m")),
		}, want: "ungoverned"},
		{name: "fails when the policies cannot be listed", policies: []client.Object{deploysIdle()}, listErr: serverDown, want: "failed", wantErr: "list policies"},
		{name: "fails, rather than look elsewhere, when the Pod cannot be read", policies: []client.Object{namespacesIdle()},
			onGet: func(kind string, key types.NamespacedName, _ int, _ *metav1.PartialObjectMetadata) error {
				if kind == "Pod" {
					return serverDown
				}
				return nil
			}, want: "failed", wantErr: "get Pod team-a/web-1"},
		{name: "ends the Pod's chain at an owner it may not read, and records on the namespace", policies: []client.Object{deploysIdle(), namespacesIdle()},
			onGet: func(kind string, key types.NamespacedName, _ int, _ *metav1.PartialObjectMetadata) error {
				if kind == "ReplicaSet" {
					return apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "replicasets"}, key.Name, errors.New("no"))
				}
				return nil
			}, want: "recorded", written: namespaceTeamA()},
		{name: "fails when the labels of the namespace a policy selects cannot be read", policies: []client.Object{
			fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"), fixture.InNamespaces(map[string]string{"env": "dev"}), fixture.Idle("20m")),
		}, onGet: func(kind string, _ types.NamespacedName, n int, _ *metav1.PartialObjectMetadata) error {
			if kind == "Namespace" && n == 1 {
				return serverDown
			}
			return nil
		}, want: "failed", wantErr: "etcd is down"},
		{name: "writes nothing on a governed object deleted since a write lost to another change", policies: []client.Object{deploysIdle()},
			patch: []error{apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", nil)},
			onGet: func(kind string, key types.NamespacedName, n int, _ *metav1.PartialObjectMetadata) error {
				if kind == "Deployment" && n == 2 {
					return apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, key.Name)
				}
				return nil
			}, want: "throttled"},
		{name: "writes nothing on an object recreated under the name of the one found, read again after a conflict", policies: []client.Object{deploysIdle()},
			patch: []error{apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", nil)},
			onGet: func(kind string, key types.NamespacedName, n int, obj *metav1.PartialObjectMetadata) error {
				if kind == "Deployment" && n == 2 {
					obj.UID = "uid-recreated"
				}
				return nil
			}, want: "throttled"},
		{name: "fails when the governed object cannot be read again for the write", policies: []client.Object{deploysIdle()},
			patch: []error{apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", nil)},
			onGet: func(kind string, key types.NamespacedName, n int, _ *metav1.PartialObjectMetadata) error {
				if kind == "Deployment" && n == 2 {
					return serverDown
				}
				return nil
			}, want: "failed", wantErr: "get Deployment team-a/web"},
		{name: "fails when the write is refused", policies: []client.Object{deploysIdle()}, patch: []error{serverDown},
			want: "failed", wantErr: "record use of Deployment team-a/web"},
		{name: "writes nothing on a governed object deleted as it was written", policies: []client.Object{deploysIdle()},
			patch: []error{apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web")}, want: "throttled"},
		{name: "reads again and records after a write that lost to another change", policies: []client.Object{deploysIdle()},
			patch: []error{apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", nil)}, want: "recorded", written: deploymentWeb()},
		{name: "gives up on an object that keeps changing", policies: []client.Object{deploysIdle()}, patch: []error{
			apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", nil),
			apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", nil),
			apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", nil),
		}, want: "failed", wantErr: "it kept changing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newConnectHarness(t, append(chain(), tc.policies...)...)
			h.listErr, h.onGet, h.patchErrs = tc.listErr, tc.onGet, tc.patch
			got, err := h.record(h.connections())
			if got != tc.want || (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("outcome %s, error %v; want %s, error %q", got, err, tc.want, tc.wantErr)
			}
			for _, obj := range []client.Object{deploymentWeb(), namespaceTeamA(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: podKey.Namespace, Name: podKey.Name}}} {
				u, ok := h.lastUse(obj)
				want := tc.written != nil && client.ObjectKeyFromObject(obj) == client.ObjectKeyFromObject(tc.written) &&
					fmt.Sprintf("%T", obj) == fmt.Sprintf("%T", tc.written)
				if ok != want || (ok && (u.By != "alice" || u.Via != expiry.ViaExec || !u.At.Equal(fixture.T0))) {
					t.Errorf("%T %s: last use %+v written: %t, want %t", obj, client.ObjectKeyFromObject(obj), u, ok, want)
				}
			}
		})
	}
}

// The first connection to a Pod is written on the governed object as
// resolving the Pod's owners just read it; one whose Pod was resolved
// before reads the object again for its write.
func TestAConnectionWritesFromTheReadThatResolvedIt(t *testing.T) {
	// An activity window of 15 s, within resolveTTL.
	h := newConnectHarness(t, append(chain(), fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"), fixture.Idle("5m")))...)
	conns := h.connections()
	if got, err := h.record(conns); got != "recorded" || err != nil {
		t.Fatalf("outcome %s, error %v; want recorded", got, err)
	}
	if n := h.reads["Deployment team-a/web"]; n != 1 {
		t.Errorf("the Deployment read %d times for the first connection, want once", n)
	}
	// Past the window, with the Pod still resolved: read for the write.
	h.clock.Step(20 * time.Second)
	if got, err := h.record(conns); got != "recorded" || err != nil {
		t.Fatalf("outcome %s, error %v; want recorded", got, err)
	}
	if n := h.reads["Deployment team-a/web"]; n != 2 {
		t.Errorf("the Deployment read %d times in all, want twice", n)
	}
	if u, ok := h.lastUse(deploymentWeb()); !ok || !u.At.Equal(fixture.T0.Add(20*time.Second)) {
		t.Errorf("last use %+v, want the second connection's", u)
	}
}

// The connections to one Pod are resolved once per resolveTTL and
// written once per activity window: a burst of them costs the API server
// nothing more.
func TestABurstOfConnectionsReadsNothingMore(t *testing.T) {
	t.Run("under a policy", func(t *testing.T) {
		h := newConnectHarness(t, append(chain(), deploysIdle())...)
		conns := h.connections()
		if got, err := h.record(conns); got != "recorded" || err != nil {
			t.Fatalf("first exec: %s, %v", got, err)
		}
		reads := h.readCount()
		h.clock.Step(10 * time.Second)
		for range 10 {
			if got, err := h.record(conns); got != "throttled" || err != nil {
				t.Fatalf("an exec in the burst: %s, %v; want throttled", got, err)
			}
		}
		if n := h.readCount() - reads; n != 0 {
			t.Errorf("%d reads for a burst within the window, want none", n)
		}
	})
	t.Run("under no policy", func(t *testing.T) {
		h := newConnectHarness(t, chain()...)
		if got, err := h.record(h.connections()); got != "ungoverned" || err != nil {
			t.Fatalf("exec: %s, %v", got, err)
		}
		if n := h.readCount(); n != 0 {
			t.Errorf("%d reads of Pods and owners with no policy at all, want none", n)
		}
	})
}

// A Pod whose owners could not be read is left alone for resolveRetry,
// and one resolved for resolveTTL: a new policy counts within that time.
func TestAConnectionsPodIsResolvedAgainInTime(t *testing.T) {
	h := newConnectHarness(t, append(chain(), deploysIdle())...)
	conns := h.connections()
	h.listErr = serverDown
	if got, err := h.record(conns); got != "failed" || err == nil {
		t.Fatalf("policies unreadable: %s, %v; want failed", got, err)
	}
	h.listErr = nil
	h.clock.Step(resolveRetry - time.Second)
	if got, err := h.record(conns); got != "ungoverned" || err != nil {
		t.Fatalf("within %s of the failure: %s, %v; want the Pod left alone (ungoverned)", resolveRetry, got, err)
	}
	h.clock.Step(time.Second)
	if got, err := h.record(conns); got != "recorded" || err != nil {
		t.Fatalf("%s after the failure: %s, %v; want recorded", resolveRetry, got, err)
	}
}

// A policy whose idle clock was shortened counts a connection once the
// Pod is resolved again, though the last write is within the old window.
func TestAShorterWindowCountsOnceThePodIsResolvedAgain(t *testing.T) {
	h := newConnectHarness(t, append(chain(), deploysIdle())...)
	conns := h.connections()
	if got, err := h.record(conns); got != "recorded" || err != nil {
		t.Fatalf("first exec: %s, %v", got, err)
	}
	p := &v1alpha1.TimeoutPolicy{}
	if err := h.client.Get(context.Background(), types.NamespacedName{Name: "deploys"}, p); err != nil {
		t.Fatal(err)
	}
	p.Spec.IdleTTL = "2m" // a window of 6s
	if err := h.client.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	h.clock.Step(resolveTTL + 10*time.Second)
	if got, err := h.record(conns); got != "recorded" || err != nil {
		t.Fatalf("an exec %s later, under a window of 6s: %s, %v; want recorded", resolveTTL+10*time.Second, got, err)
	}
	if u, _ := h.lastUse(deploymentWeb()); !u.At.Equal(h.clock.Now()) {
		t.Errorf("last use at %s, want %s", u.At, h.clock.Now())
	}
}

// ownedChain is a Pod under depth ReplicaSets, each owned by the next,
// the last owned by the Deployment web.
func ownedChain(depth int) []client.Object {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", UID: "uid-ns"}}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: "uid-deploy"}}
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "uid-deploy", Controller: ptr.To(true)}
	objs := []client.Object{ns, deploy}
	for i := depth; i >= 1; i-- {
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("rs-%d", i), UID: types.UID(fmt.Sprintf("uid-rs-%d", i)),
			OwnerReferences: []metav1.OwnerReference{owner}}}
		objs = append(objs, rs)
		owner = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}
	}
	return append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web-1", UID: "uid-pod", OwnerReferences: []metav1.OwnerReference{owner}}})
}

func TestAPodsOwnerChainIsFollowedSoFarAndByItsController(t *testing.T) {
	rsRef := func(controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d9", UID: "uid-rs", Controller: ptr.To(controller)}
	}
	dbRef := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "db", UID: "uid-db"}
	db := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "db", UID: "uid-db"}}
	withPodOwners := func(refs ...metav1.OwnerReference) []client.Object {
		objs := chain()
		objs[3].SetOwnerReferences(refs)
		return append(objs, db)
	}
	for _, tc := range []struct {
		name string
		objs []client.Object
		want string // the governed object found, "" for none
	}{
		{name: "finds the governed owner five owners up", objs: ownedChain(4), want: "Deployment team-a/web"},
		{name: "looks no further than five owners up", objs: ownedChain(5), want: "Namespace /team-a"},
		{name: "follows the owner that controls the Pod, not its first", objs: withPodOwners(dbRef, rsRef(true)), want: "Deployment team-a/web"},
		{name: "follows the first owner of a Pod none controls", objs: withPodOwners(rsRef(false), dbRef), want: "Deployment team-a/web"},
		{name: "follows the only owner of a Pod it does not control", objs: withPodOwners(rsRef(false)), want: "Deployment team-a/web"},
		{name: "ends the chain at an owner whose apiVersion does not parse", objs: withPodOwners(metav1.OwnerReference{APIVersion: "apps/v1/x", Kind: "ReplicaSet", Name: "web-5d9", UID: "uid-rs"}),
			want: "Namespace /team-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newConnectHarness(t, append(tc.objs, deploysIdle(), namespacesIdle())...)
			g, _, err := h.connections().resolve(context.Background(), types.NamespacedName{Namespace: "team-a", Name: "web-1"})
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%s %s", g.gvk.Kind, g.key); got != tc.want {
				t.Errorf("resolved %s, want %s", got, tc.want)
			}
		})
	}
}
