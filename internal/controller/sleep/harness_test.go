// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package sleep

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/eval"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/decide"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// The kinds the tests put to sleep: a ConfigMap has no scale subresource
// and owns the namespaces its workloads run in; a Deployment is scaled
// itself and keeps its replicas at spec.replicas; a ReplicationController
// is scaled itself, through its scale subresource alone, as a custom
// resource with one is.
var (
	deploymentGVK = appsv1.SchemeGroupVersion.WithKind("Deployment")
	rcGVK         = corev1.SchemeGroupVersion.WithKind("ReplicationController")
)

// since is when the tests' objects went to sleep, and now when they are
// looked at.
var (
	since = fixture.T0.Add(time.Hour + time.Second)
	now   = since.Add(time.Hour)
)

// harness is a Sleeper over the fake client, with a recorder and a log
// that the tests read, that records the requests it makes and fails
// those the test says.
type harness struct {
	t      *testing.T
	client client.WithWatch
	rec    *events.FakeRecorder
	s      *Sleeper
	logs   *fixture.Logs

	mu sync.Mutex
	// requests are the requests made, as "verb kind name" ("patch
	// Deployment amp-a/web", "get scale team-a/app").
	requests []string
	// fail, when set, is asked about every request before it is made:
	// a non-nil error is returned instead.
	fail func(req string) error
	// bump gives an object whose spec a write changes a new generation,
	// as the API server does.
	bump bool
}

func newHarness(t *testing.T, objs ...client.Object) *harness {
	t.Helper()
	h := &harness{t: t, rec: events.NewFakeRecorder(100), logs: &fixture.Logs{}}
	scheme := fixture.Scheme(t)
	h.client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithIndex(&corev1.Namespace{}, kube.OwnerIndex, kube.IndexOwners).Build()
	name := func(obj client.Object) string {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			t.Fatal(err)
		}
		kind := strings.TrimSuffix(gvk.Kind, "List")
		if n := obj.GetName(); n != "" {
			return kind + " " + client.ObjectKeyFromObject(obj).String()
		}
		return kind
	}
	listName := func(list client.ObjectList, opts []client.ListOption) string {
		gvk, err := apiutil.GVKForObject(list, scheme)
		if err != nil {
			t.Fatal(err)
		}
		var o client.ListOptions
		o.ApplyOptions(opts)
		return strings.TrimSuffix(gvk.Kind, "List") + " " + o.Namespace
	}
	cached := interceptor.NewClient(h.client, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := h.request("list " + listName(list, opts)); err != nil {
				return err
			}
			return c.List(ctx, list, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := h.request("patch " + name(obj)); err != nil {
				return err
			}
			patch, err := h.bumpGeneration(ctx, obj, patch)
			if err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourceGet: func(ctx context.Context, c client.Client, sub string, obj, body client.Object, opts ...client.SubResourceGetOption) error {
			if err := h.request("get " + sub + " " + name(obj)); err != nil {
				return err
			}
			// As the API server answers: the replicas of a kind with a
			// scale subresource, NotFound for one without.
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), u); err != nil {
				return err
			}
			n, ok, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
			if !ok {
				return apierrors.NewNotFound(schema.GroupResource{Resource: strings.ToLower(u.GetKind()) + "s"}, obj.GetName())
			}
			return unstructured.SetNestedField(body.(*unstructured.Unstructured).Object, n, "spec", "replicas")
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			b, err := patch.Data(obj)
			if err != nil {
				return err
			}
			if err := h.request("patch " + sub + " " + name(obj) + " " + string(b)); err != nil {
				return err
			}
			// The scale's spec.replicas is the object's.
			if patch, err = h.bumpGeneration(ctx, obj, patch); err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch)
		},
	})
	fresh := interceptor.NewClient(h.client, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := h.request("read " + name(obj) + " " + key.String()); err != nil {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := h.request("read " + listName(list, opts)); err != nil {
				return err
			}
			return c.List(ctx, list, opts...)
		},
	})
	h.s = &Sleeper{Client: cached, APIReader: fresh, Recorder: h.rec}
	return h
}

// request notes a request and returns the error the test wants it to
// fail with, if any.
func (h *harness) request(req string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests = append(h.requests, req)
	if h.fail != nil {
		return h.fail(req)
	}
	return nil
}

// failing fails the requests that begin with prefix with err.
func (h *harness) failing(prefix string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fail = func(req string) error {
		if strings.HasPrefix(req, prefix) {
			return err
		}
		return nil
	}
}

// made returns the requests made so far that begin with prefix, and
// forgets them all.
func (h *harness) made(prefix string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.requests {
		if strings.HasPrefix(r, prefix) {
			out = append(out, r)
		}
	}
	h.requests = nil
	return out
}

// changeAtScale has the object rc changed by change, as someone else
// would, just before the controller's request to its scale subresource.
func (h *harness) changeAtScale(change func(u *unstructured.Unstructured)) {
	h.fail = func(req string) error {
		if !strings.HasPrefix(req, "patch scale") {
			return nil
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(rcGVK)
		if err := h.client.Get(context.Background(), types.NamespacedName{Namespace: "team-a", Name: "rc"}, u); err != nil {
			return err
		}
		change(u)
		return h.client.Update(context.Background(), u)
	}
}

// expectWorkloads checks the workloads named "Kind namespace/name"
// (Deployment or StatefulSet) are as want says.
func (h *harness) expectWorkloads(want map[string]workloadState) {
	h.t.Helper()
	for name, w := range want {
		kind, key, _ := strings.Cut(name, " ")
		ns, n, _ := strings.Cut(key, "/")
		gvk := deployments
		if kind == "StatefulSet" {
			gvk = statefulSets
		}
		if got := h.replicas(gvk, ns, n); got != w {
			h.t.Errorf("%s: %s; want %s", name, got, w)
		}
	}
}

// writes returns, of the requests made since the last call to made, the
// writes of workloads and the reads of the object (a ConfigMap), and
// forgets them all.
func (h *harness) writes() (patched, reads []string) {
	for _, r := range h.made("") {
		switch {
		case strings.HasPrefix(r, "patch ") && !strings.HasPrefix(r, "patch ConfigMap"):
			patched = append(patched, r)
		case strings.HasPrefix(r, "read ConfigMap"):
			reads = append(reads, r)
		}
	}
	return patched, reads
}

// bumpGeneration returns patch, with the new generation the API server
// gives an object whose spec (or data) it changes, when the test asks for
// it (the fake client keeps the generation as it is).
func (h *harness) bumpGeneration(ctx context.Context, obj client.Object, patch client.Patch) (client.Patch, error) {
	h.mu.Lock()
	bump := h.bump
	h.mu.Unlock()
	if !bump {
		return patch, nil
	}
	b, err := patch.Data(obj)
	if err != nil {
		return nil, err
	}
	var p map[string]any
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, err
	}
	if p["spec"] == nil && p["data"] == nil {
		return patch, nil
	}
	u := &unstructured.Unstructured{}
	gvk, err := apiutil.GVKForObject(obj, h.client.Scheme())
	if err != nil {
		return nil, err
	}
	u.SetGroupVersionKind(gvk)
	if err := h.client.Get(ctx, client.ObjectKeyFromObject(obj), u); err != nil {
		return nil, err
	}
	m, _ := p["metadata"].(map[string]any)
	if m == nil {
		m = map[string]any{}
		p["metadata"] = m
	}
	m["generation"] = u.GetGeneration() + 1
	if b, err = json.Marshal(p); err != nil {
		return nil, err
	}
	return client.RawPatch(types.MergePatchType, b), nil
}

// ev is the evaluation of the object key names as the object controller
// makes it for a sleep or a wake: read from the (fake) API server, under
// the sleepy policy, at now.
func (h *harness) ev(gvk schema.GroupVersionKind, name string) *eval.Evaluation {
	h.t.Helper()
	key := wakeup.Key{GVK: gvk, NamespacedName: types.NamespacedName{Namespace: "team-a", Name: name}}
	obj := kube.NewMetadata(gvk)
	if err := h.client.Get(context.Background(), key.NamespacedName, obj); err != nil {
		h.t.Fatal(err)
	}
	sched, err := expiry.NewSchedule(sleepyPolicy().Spec)
	if err != nil {
		h.t.Fatal(err)
	}
	life := sched.Lifetime(obj.CreationTimestamp.Time, obj.Annotations, now)
	return &eval.Evaluation{Key: key, Obj: obj, Decision: decide.Decision{Schedule: sched, Life: life}, Policy: sleepyPolicy(), Now: now}
}

// ctx is a context whose logger writes to the harness's log.
func (h *harness) ctx() context.Context {
	return logf.IntoContext(context.Background(), h.logs.Logger(1))
}

// stateOf returns the sleep state the stored object shows.
func (h *harness) stateOf(gvk schema.GroupVersionKind, name string) expiry.SleepState {
	h.t.Helper()
	st, err := expiry.ParseSleep(h.meta(gvk, "team-a", name).Annotations[expiry.AnnotationSleep])
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// meta returns the metadata of the stored object.
func (h *harness) meta(gvk schema.GroupVersionKind, ns, name string) *metav1.PartialObjectMetadata {
	h.t.Helper()
	obj := kube.NewMetadata(gvk)
	if err := h.client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
		h.t.Fatal(err)
	}
	return obj
}

// workloadState is a stored workload as a test sees it: its replicas
// (-1 for none), its replicas annotation and the sleep's label.
type workloadState struct {
	replicas int32
	saved    string
	label    string
}

func (w workloadState) String() string {
	return fmt.Sprintf("%d replicas, replicas annotation %q, label %q", w.replicas, w.saved, w.label)
}

// replicas returns the stored replicas of an object with spec.replicas,
// its replicas annotation and the sleep's label.
func (h *harness) replicas(gvk schema.GroupVersionKind, ns, name string) workloadState {
	h.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := h.client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, u); err != nil {
		h.t.Fatal(err)
	}
	n, ok, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if !ok {
		n = -1
	}
	return workloadState{replicas: int32(n), saved: u.GetAnnotations()[expiry.AnnotationReplicas], label: u.GetLabels()[expiry.LabelAsleep]}
}

// events returns the Events recorded so far.
func (h *harness) events() []string { return fixture.Drain(h.rec) }

// sleepyPolicy puts objects to sleep an hour after their last use and
// deletes them a day later.
func sleepyPolicy() *v1alpha1.TimeoutPolicy {
	return fixture.Policy("sleepy", fixture.Reminders(), func(p *v1alpha1.TimeoutPolicy) {
		p.Spec.MinimumNotice = "0s"
		p.Spec.Sleep = &v1alpha1.Sleep{AfterIdle: "1h", DeleteAfter: "1d"}
	})
}

// env is a ConfigMap, as Amphitheatre makes one for a Playbook, that owns
// the namespace amp-a, changed by opts.
func env(opts ...func(*corev1.ConfigMap)) *corev1.ConfigMap {
	cm := fixture.NewConfigMap("env", opts...)
	cm.Generation = 1
	return cm
}

// owned is a namespace that cm owns.
func owned(name string, cm *corev1.ConfigMap) *corev1.Namespace {
	ns := fixture.NewNamespace(name, nil)
	ns.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}}
	return ns
}

// podSpec is a pod template whose container requests 100 millicores and
// 64 MiB.
func podSpec() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		}}}},
	}
}

// deployment is a Deployment at replicas (nil: unset), with annotations
// and labels as kv pairs (an expiry annotation or label key).
func deployment(ns, name string, replicas *int32, kv ...string) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name), Generation: 1, CreationTimestamp: metav1.NewTime(fixture.T0)},
		Spec: appsv1.DeploymentSpec{
			Replicas: replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: podSpec(),
		},
	}
	meta(&d.ObjectMeta, kv...)
	return d
}

// statefulSet is as deployment, for a StatefulSet.
func statefulSet(ns, name string, replicas *int32, kv ...string) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name), Generation: 1},
		Spec: appsv1.StatefulSetSpec{
			Replicas: replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: podSpec(),
		},
	}
	meta(&s.ObjectMeta, kv...)
	return s
}

// meta sets the annotations and labels kv names: the sleep's label is a
// label, any other key an annotation.
func meta(m *metav1.ObjectMeta, kv ...string) {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == expiry.LabelAsleep {
			if m.Labels == nil {
				m.Labels = map[string]string{}
			}
			m.Labels[kv[i]] = kv[i+1]
			continue
		}
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[kv[i]] = kv[i+1]
	}
}

// replicationController is a ReplicationController in team-a at replicas,
// with the annotations kv names.
func replicationController(name string, replicas int32, kv ...string) *corev1.ReplicationController {
	rc := &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name), Generation: 1, CreationTimestamp: metav1.NewTime(fixture.T0)},
		Spec:       corev1.ReplicationControllerSpec{Replicas: ptr.To(replicas)},
	}
	meta(&rc.ObjectMeta, kv...)
	return rc
}

// state is the annotation value of st.
func state(st expiry.SleepState) string { return st.String() }
