// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewConnections(nil, nil, nil, clocktesting.NewFakeClock(t0))
			if resp := c.Handle(context.Background(), tc.req); !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			select {
			case conn := <-c.queue:
				if tc.via == "" {
					t.Fatalf("queued %+v", conn)
				}
				want := expiry.Use{At: t0, Via: tc.via, By: "alice"}
				if conn.use != want || conn.pod != (types.NamespacedName{Namespace: "team-a", Name: "web-1"}) {
					t.Errorf("queued %+v, want %+v of team-a/web-1", conn, want)
				}
			default:
				if tc.via != "" {
					t.Fatal("nothing queued")
				}
			}
		})
	}

	t.Run("allows at once when the queue is full, dropping the use", func(t *testing.T) {
		c := NewConnections(nil, nil, nil, clocktesting.NewFakeClock(t0))
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

func idle(d v1alpha1.Duration) func(*v1alpha1.TimeoutPolicy) {
	return func(p *v1alpha1.TimeoutPolicy) { p.Spec.IdleTTL = d }
}

func TestConnectionsResolveTheGovernedOwner(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policies []client.Object
		want     string
		window   time.Duration
	}{
		{"finds the Deployment above the ReplicaSet", []client.Object{fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"), idle("20m"))}, "Deployment", time.Minute},
		{"prefers the Pod's chain to its namespace", []client.Object{
			fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"), idle("20m")),
			fixture.Policy("namespaces", fixture.Target("v1", "Namespace"), idle("1h")),
		}, "Deployment", time.Minute},
		{"falls back to the namespace", []client.Object{fixture.Policy("namespaces", fixture.Target("v1", "Namespace"), idle("1h"))}, "Namespace", 3 * time.Minute},
		{"skips an owner its policy does not select", []client.Object{
			fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"), fixture.Selecting(map[string]string{"app": "db"}), idle("20m")),
			fixture.Policy("namespaces", fixture.Target("v1", "Namespace"), fixture.InNamespaces(map[string]string{"env": "dev"}), idle("1h")),
		}, "Namespace", 3 * time.Minute},
		{"records nothing under a policy without an idle clock", []client.Object{fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"))}, "Deployment", 0},
		{"finds nothing without a policy", nil, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(append(chain(), tc.policies...)...).Build()
			conns := NewConnections(c, c, c, clocktesting.NewFakeClock(t0))
			g, err := conns.resolve(context.Background(), types.NamespacedName{Namespace: "team-a", Name: "web-1"})
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
		policy := fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"), idle("20m"))
		c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs[0], objs[2], objs[3], policy).Build()
		g, err := NewConnections(c, c, c, clocktesting.NewFakeClock(t0)).resolve(context.Background(), types.NamespacedName{Namespace: "team-a", Name: "web-1"})
		if err != nil || g.uid != "" {
			t.Errorf("resolved %+v, %v; want nothing", g, err)
		}
	})
}

func TestConnectionsRecordUseOncePerWindow(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	policy := fixture.Policy("deploys", fixture.Target("apps/v1", "Deployment"), idle("20m"))
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(append(chain(), policy)...).Build()
	conns := NewConnections(c, c, c, clk)
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
		out, err := conns.record(ctx, connection{pod: pod, use: expiry.Use{At: clk.Now(), Via: expiry.ViaExec, By: by}})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	if got := use("alice"); got != "recorded" {
		t.Fatalf("first use: %s", got)
	}
	u, ok := expiry.LastUse(deploy().Annotations)
	if !ok || u.By != "alice" || !u.At.Equal(t0) {
		t.Fatalf("last use %+v (%t), want alice's at %s", u, ok, t0)
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

func TestTheAuditOfAnIdleExpiryNamesTheLastUse(t *testing.T) {
	used := expiry.Use{At: t0.Add(5 * time.Minute), Via: expiry.ViaExec, By: "alice"}
	var kv []string
	for k, v := range used.Annotations() {
		kv = append(kv, k, v)
	}
	cm := newConfigMap("used", annotated(kv...))
	h := newHarness(t, t0.Add(65*time.Minute), fixture.Policy("idle", fixture.DefaultTTL("10m"), idle("1h")), cm)
	var trail bytes.Buffer
	h.r.DryRun, h.r.Audit = true, audit.New(&trail)
	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	var rec audit.Record
	dec := json.NewDecoder(&trail)
	for rec.Type != audit.WouldDelete {
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("audit trail without a would-delete record: %v", err)
		}
	}
	if rec.LastUse == nil || rec.LastUse.Via != expiry.ViaExec || rec.LastUse.By != "alice" || !rec.LastUse.At.Equal(used.At) {
		t.Errorf("the record of an idle expiry names the last use %+v, want %+v", rec.LastUse, used)
	}
}
