// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/archive"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/channelset"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

var configMaps = schema.GroupResource{Resource: "configmaps"}

// harness is an Reconciler over the fake client, with a fake clock
// and recorder, that records the delete calls it makes.
type harness struct {
	t      *testing.T
	client client.WithWatch
	clock  *clocktesting.FakeClock
	rec    *events.FakeRecorder
	r      *Reconciler
	// scripted is the harness's own channel, built for the
	// NotificationChannel named scriptedChannel.
	scripted *scripted

	mu sync.Mutex
	// cacheView, when set, changes what the cache returns: a cache that
	// lags behind the API server.
	cacheView func(*metav1.PartialObjectMetadata) error
	// patchErr, when set, is returned by Patch instead of patching.
	patchErr error
	// deleteErr, when set, is returned by Delete instead of deleting.
	deleteErr error
	deletes   []client.DeleteOptions
	// freshView, when set, changes what APIReader returns: the API server
	// as it is after a write the cache has not seen yet.
	freshView func(*metav1.PartialObjectMetadata) error
	// beforeCreate, when set, runs before the outbox creates an entry: a
	// slow API server.
	beforeCreate func()
}

func newHarness(t *testing.T, now time.Time, objs ...client.Object) *harness {
	t.Helper()
	h := &harness{t: t, clock: clocktesting.NewFakeClock(now), rec: events.NewFakeRecorder(100), scripted: &scripted{}}
	objs = append(objs, &v1alpha1.NotificationChannel{ObjectMeta: metav1.ObjectMeta{Name: scriptedChannel}})
	// Namespaces are found by their owners, as the cache's index finds them.
	h.client = fake.NewClientBuilder().WithScheme(fixture.Scheme(t)).WithObjects(objs...).
		WithIndex(&corev1.Namespace{}, kube.OwnerIndex, kube.IndexOwners).Build()
	cached := interceptor.NewClient(h.client, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			h.mu.Lock()
			view := h.cacheView
			h.mu.Unlock()
			if pom, ok := obj.(*metav1.PartialObjectMetadata); ok && view != nil {
				return view(pom)
			}
			return nil
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			h.mu.Lock()
			err := h.patchErr
			h.mu.Unlock()
			if err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourceGet: func(ctx context.Context, c client.Client, subResource string, obj, sub client.Object, opts ...client.SubResourceGetOption) error {
			if subResource == "scale" && obj.GetObjectKind().GroupVersionKind() == fixture.ConfigMapGVK {
				// As the API server answers: a ConfigMap has no scale.
				return apierrors.NewNotFound(configMaps, obj.GetName())
			}
			return c.SubResource(subResource).Get(ctx, obj, sub, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := c.Create(ctx, obj, opts...); err != nil {
				return err
			}
			// An Event stored through the API (a message where no channel
			// carries its type) is read with the recorder's.
			if e, ok := obj.(*eventsv1.Event); ok {
				h.rec.Events <- e.Type + " " + e.Reason + " " + e.Note
			}
			return nil
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			var o client.DeleteOptions
			o.ApplyOptions(opts)
			h.mu.Lock()
			h.deletes = append(h.deletes, o)
			err := h.deleteErr
			h.mu.Unlock()
			if err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		},
	})
	fresh := interceptor.NewClient(h.client, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			h.mu.Lock()
			view := h.freshView
			h.mu.Unlock()
			if view == nil {
				return nil
			}
			switch o := obj.(type) {
			case *metav1.PartialObjectMetadata:
				return view(o)
			case *unstructured.Unstructured:
				// The whole object: the view changes its metadata.
				pom := &metav1.PartialObjectMetadata{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, pom); err != nil {
					t.Fatal(err)
				}
				if err := view(pom); err != nil {
					return err
				}
				o.SetAnnotations(pom.Annotations)
				o.SetLabels(pom.Labels)
				o.SetDeletionTimestamp(pom.DeletionTimestamp)
				o.SetResourceVersion(pom.ResourceVersion)
				o.SetGeneration(pom.Generation)
				return nil
			default:
				t.Fatalf("APIReader.Get into %T", obj)
				return nil
			}
		},
	})
	h.r = &Reconciler{
		Client: cached, APIReader: fresh, Recorder: h.rec, Clock: h.clock,
		Channels: h.channels(),
	}
	// The outbox writes its entries straight to the API server.
	entries := interceptor.NewClient(h.client, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			h.mu.Lock()
			before := h.beforeCreate
			h.mu.Unlock()
			if before != nil {
				before()
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	h.r.Outbox = h.r.NewOutbox(entries, fresh, "timeout-system", 0, logr.Discard())
	// One-off messages go out in the background; none may outlive the test.
	return h
}

// channels are a new process's Channels, which build only the harness's
// scripted channel.
func (h *harness) channels() *channelset.Channels {
	return &channelset.Channels{Reader: h.client, Clock: h.clock, Build: h.scripted.kinds().Build}
}

func keyOf(cm *corev1.ConfigMap) wakeup.Key {
	return wakeup.Key{GVK: fixture.ConfigMapGVK, NamespacedName: types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}}
}

func (h *harness) reconcile(cm *corev1.ConfigMap) (ctrl.Result, error) {
	h.t.Helper()
	return h.r.Reconcile(context.Background(), keyOf(cm))
}

// stored returns the ConfigMap as the fake API server holds it, or nil
// when it is gone.
func (h *harness) stored(cm *corev1.ConfigMap) *corev1.ConfigMap {
	h.t.Helper()
	got := &corev1.ConfigMap{}
	err := h.client.Get(context.Background(), client.ObjectKeyFromObject(cm), got)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		h.t.Fatalf("get %s: %v", cm.Name, err)
	}
	return got
}

func (h *harness) annotate(cm *corev1.ConfigMap, kv ...string) {
	h.t.Helper()
	cur := h.stored(cm)
	if cur == nil {
		h.t.Fatalf("annotate %s: it is gone", cm.Name)
	}
	fixture.Annotated(kv...)(cur)
	if err := h.client.Update(context.Background(), cur); err != nil {
		h.t.Fatalf("annotate %s: %v", cm.Name, err)
	}
}

func (h *harness) deleteCalls() []client.DeleteOptions {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.deletes)
}

// warned returns the warnings about its annotations that the record on
// the stored object says were given; none when the object is gone.
func (h *harness) warned(cm *corev1.ConfigMap) map[string]string {
	h.t.Helper()
	got := h.stored(cm)
	if got == nil {
		return nil
	}
	rec, err := expiry.ParseRecord(got.Annotations[expiry.AnnotationReminders])
	if err != nil || rec == nil {
		return nil
	}
	return rec.Warned
}

func TestFakeClientServesConfigMapsAsMetadata(t *testing.T) {
	// The reconciler reads governed objects as PartialObjectMetadata; the
	// fake client must turn the typed ConfigMaps it stores into that, or
	// every other test here tests nothing.
	cm := fixture.NewConfigMap("scratch", fixture.Labelled(map[string]string{"app": "scratch"}), fixture.TTL("10m"))
	h := newHarness(t, fixture.T0, cm)
	got := kube.NewMetadata(fixture.ConfigMapGVK)
	if err := h.r.Client.Get(context.Background(), client.ObjectKeyFromObject(cm), got); err != nil {
		t.Fatalf("get as metadata: %v", err)
	}
	if got.UID != cm.UID || !got.CreationTimestamp.Time.Equal(fixture.T0) || got.Labels["app"] != "scratch" ||
		got.Annotations[expiry.AnnotationTTL] != "10m" || got.ResourceVersion == "" {
		t.Fatalf("metadata = %+v, want the ConfigMap's", got.ObjectMeta)
	}
	list := kube.NewMetadataList(fixture.ConfigMapGVK)
	if err := h.r.Client.List(context.Background(), list); err != nil {
		t.Fatalf("list as metadata: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "scratch" {
		t.Fatalf("list = %+v, want scratch", list.Items)
	}
}

func TestObjectReconcilerReconcile(t *testing.T) {
	forbidden := apierrors.NewForbidden(configMaps, "scratch", errors.New("no delete for you"))
	deletingSince := func(cm *corev1.ConfigMap) {
		ts := metav1.NewTime(fixture.T0.Add(time.Minute))
		cm.DeletionTimestamp = &ts
		cm.Finalizers = []string{"example.com/hold"}
	}
	dev := map[string]string{"env": "dev"}

	tests := []struct {
		name       string
		objects    []client.Object
		object     *corev1.ConfigMap
		now        time.Time
		deleteErr  error
		wantResult ctrl.Result
		wantErr    func(error) bool
		// wantDeleted says whether the object is gone afterwards.
		wantDeleted bool
		// wantDelete says whether a delete was attempted, and with what
		// propagation.
		wantDelete      bool
		wantPropagation metav1.DeletionPropagation
		wantEvents      []string
	}{
		{
			name:       "waits exactly the time left before a ttl annotation expires",
			objects:    []client.Object{fixture.Policy("configmaps")},
			object:     fixture.NewConfigMap("scratch", fixture.TTL("10m")),
			now:        fixture.T0.Add(4*time.Minute + 30*time.Second),
			wantResult: ctrl.Result{RequeueAfter: 5*time.Minute + 30*time.Second},
		},
		{
			name:       "waits for the policy's default TTL when the object has no annotation",
			objects:    []client.Object{fixture.Policy("configmaps", fixture.DefaultTTL("2h"))},
			object:     fixture.NewConfigMap("scratch"),
			now:        fixture.T0.Add(time.Hour),
			wantResult: ctrl.Result{RequeueAfter: time.Hour},
		},
		{
			name:            "deletes an object the moment its ttl expires",
			objects:         []client.Object{fixture.Policy("configmaps", fixture.Propagation(metav1.DeletePropagationForeground))},
			object:          fixture.NewConfigMap("scratch", fixture.TTL("10m")),
			now:             fixture.T0.Add(10 * time.Minute),
			wantDeleted:     true,
			wantDelete:      true,
			wantPropagation: metav1.DeletePropagationForeground,
			// In the foreground the object stays until its dependents are gone.
			wantEvents: []string{"Normal Expired", "Normal Deleted", "Normal DeletionPending"},
		},
		{
			name:            "deletes an object one second after expiry, in the background when the policy names no propagation",
			objects:         []client.Object{fixture.Policy("configmaps")},
			object:          fixture.NewConfigMap("scratch", fixture.TTL("10m")),
			now:             fixture.T0.Add(10*time.Minute + time.Second),
			wantDeleted:     true,
			wantDelete:      true,
			wantPropagation: metav1.DeletePropagationBackground,
			wantEvents:      []string{"Normal Expired", "Normal Deleted"},
		},
		{
			name:            "deletes at an expires-at annotation, which wins over ttl",
			objects:         []client.Object{fixture.Policy("configmaps", fixture.Propagation(metav1.DeletePropagationOrphan))},
			object:          fixture.NewConfigMap("scratch", fixture.TTL("10m"), fixture.ExpiresAt(fixture.T0.Add(5*time.Minute))),
			now:             fixture.T0.Add(5 * time.Minute),
			wantDeleted:     true,
			wantDelete:      true,
			wantPropagation: metav1.DeletePropagationOrphan,
			wantEvents:      []string{"Normal Expired", "Normal Deleted"},
		},
		{
			name:    "keeps an object annotated keep=true",
			objects: []client.Object{fixture.Policy("configmaps")},
			object:  fixture.NewConfigMap("scratch", fixture.TTL("10m"), fixture.Annotated(expiry.AnnotationKeep, "true")),
			now:     fixture.T0.Add(1000 * time.Hour),
		},
		{
			name:    "leaves alone an object no policy selects",
			objects: []client.Object{fixture.Policy("scratch", fixture.Selecting(map[string]string{"app": "scratch"}))},
			object:  fixture.NewConfigMap("db", fixture.Labelled(map[string]string{"app": "db"}), fixture.TTL("1s")),
			now:     fixture.T0.Add(1000 * time.Hour),
		},
		{
			name:    "leaves alone an object when no policy exists",
			object:  fixture.NewConfigMap("scratch", fixture.TTL("1s")),
			now:     fixture.T0.Add(1000 * time.Hour),
			objects: []client.Object{fixture.Policy("secrets", fixture.Target("v1", "Secret"))},
		},
		{
			name:    "leaves alone an object that is being deleted, until it would be stuck",
			objects: []client.Object{fixture.Policy("configmaps")},
			object:  fixture.NewConfigMap("scratch", fixture.TTL("1s"), deletingSince),
			now:     fixture.T0.Add(time.Minute + stuckAfter - time.Second),
			// Looked at again when it would be stuck.
			wantResult: ctrl.Result{RequeueAfter: time.Second},
		},
		{
			name:    "says nothing about an object no policy governs that is stuck in Terminating",
			objects: []client.Object{fixture.Policy("dev", fixture.InNamespaces(dev)), fixture.NewNamespace("team-a", map[string]string{"env": "prod"})},
			object:  fixture.NewConfigMap("scratch", fixture.TTL("1s"), deletingSince),
			now:     fixture.T0.Add(1000 * time.Hour),
		},
		{
			name:       "warns that an object in Terminating for longer than stuckAfter is stuck, and deletes nothing",
			objects:    []client.Object{fixture.Policy("configmaps")},
			object:     fixture.NewConfigMap("scratch", fixture.TTL("1s"), deletingSince),
			now:        fixture.T0.Add(1000 * time.Hour),
			wantEvents: []string{"Warning DeletionStuck"},
		},
		{
			name:            "deletes an object in a namespace the namespace selector selects",
			objects:         []client.Object{fixture.Policy("dev", fixture.InNamespaces(dev)), fixture.NewNamespace("team-a", dev)},
			object:          fixture.NewConfigMap("scratch", fixture.TTL("10m")),
			now:             fixture.T0.Add(time.Hour),
			wantDeleted:     true,
			wantDelete:      true,
			wantPropagation: metav1.DeletePropagationBackground,
			wantEvents:      []string{"Normal Expired", "Normal Deleted"},
		},
		{
			name:    "leaves alone an object in a namespace the namespace selector does not select",
			objects: []client.Object{fixture.Policy("dev", fixture.InNamespaces(dev)), fixture.NewNamespace("team-a", map[string]string{"env": "prod"})},
			object:  fixture.NewConfigMap("scratch", fixture.TTL("10m")),
			now:     fixture.T0.Add(time.Hour),
		},
		{
			name:    "returns an error when the namespace of a namespace selector cannot be read",
			objects: []client.Object{fixture.Policy("dev", fixture.InNamespaces(dev))},
			object:  fixture.NewConfigMap("scratch", fixture.TTL("10m")),
			now:     fixture.T0.Add(time.Hour),
			wantErr: apierrors.IsNotFound,
		},
		{
			name: "lets a policy with an invalid schedule govern and do nothing, even against a valid lower-priority policy",
			objects: []client.Object{
				fixture.Policy("broken", fixture.DefaultTTL("0s"), fixture.Priority(10)),
				fixture.Policy("short", fixture.DefaultTTL("1m")),
			},
			object: fixture.NewConfigMap("scratch"),
			now:    fixture.T0.Add(30 * expiry.Day),
		},
		{
			name: "keeps objects of a policy whose selector is invalid, even against a valid lower-priority policy",
			objects: []client.Object{
				fixture.Policy("broken", fixture.BogusSelector, fixture.Priority(10)),
				fixture.Policy("short", fixture.DefaultTTL("1m")),
			},
			object: fixture.NewConfigMap("scratch"),
			now:    fixture.T0.Add(30 * expiry.Day),
		},
		{
			name: "keeps objects of a policy whose namespace selector is invalid, even against a valid lower-priority policy",
			objects: []client.Object{
				fixture.Policy("broken", fixture.BogusNamespaceSelector, fixture.Priority(10)),
				fixture.Policy("short", fixture.DefaultTTL("1m")),
			},
			object: fixture.NewConfigMap("scratch"),
			now:    fixture.T0.Add(30 * expiry.Day),
		},
		{
			// The control for the case above: without the broken policy,
			// the short one deletes.
			name:            "deletes by a valid policy's short TTL when nothing outranks it",
			objects:         []client.Object{fixture.Policy("short", fixture.DefaultTTL("1m"))},
			object:          fixture.NewConfigMap("scratch"),
			now:             fixture.T0.Add(30 * expiry.Day),
			wantDeleted:     true,
			wantDelete:      true,
			wantPropagation: metav1.DeletePropagationBackground,
			wantEvents:      []string{"Normal Expired", "Normal Deleted"},
		},
		{
			name:            "uses the higher-priority policy's TTL when two policies match",
			objects:         []client.Object{fixture.Policy("long", fixture.DefaultTTL("2h"), fixture.Priority(5)), fixture.Policy("short", fixture.DefaultTTL("1m"))},
			object:          fixture.NewConfigMap("scratch"),
			now:             fixture.T0.Add(time.Hour),
			wantResult:      ctrl.Result{RequeueAfter: time.Hour},
			wantPropagation: metav1.DeletePropagationBackground,
		},
		{
			name:            "returns the error and warns DeletionFailed when the delete is forbidden",
			objects:         []client.Object{fixture.Policy("configmaps")},
			object:          fixture.NewConfigMap("scratch", fixture.TTL("10m")),
			now:             fixture.T0.Add(time.Hour),
			deleteErr:       forbidden,
			wantErr:         apierrors.IsForbidden,
			wantDelete:      true,
			wantPropagation: metav1.DeletePropagationBackground,
			wantEvents:      []string{"Warning DeletionFailed"},
		},
		{
			name:            "does nothing more when the object is already gone at delete",
			objects:         []client.Object{fixture.Policy("configmaps")},
			object:          fixture.NewConfigMap("scratch", fixture.TTL("10m")),
			now:             fixture.T0.Add(time.Hour),
			deleteErr:       apierrors.NewNotFound(configMaps, "scratch"),
			wantDelete:      true,
			wantPropagation: metav1.DeletePropagationBackground,
			wantEvents:      nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.now, append(tt.objects, tt.object)...)
			h.deleteErr = tt.deleteErr
			before := h.stored(tt.object)

			got, err := h.reconcile(tt.object)

			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("Reconcile: %v", err)
			case tt.wantErr != nil && !tt.wantErr(err):
				t.Fatalf("Reconcile error = %v, not the one expected", err)
			}
			if got != tt.wantResult {
				t.Errorf("Result = %+v, want %+v", got, tt.wantResult)
			}
			if gone := h.stored(tt.object) == nil; gone != tt.wantDeleted {
				t.Errorf("deleted = %t, want %t", gone, tt.wantDeleted)
			}
			calls := h.deleteCalls()
			if !tt.wantDelete {
				if len(calls) != 0 {
					t.Errorf("%d delete calls, want none", len(calls))
				}
			} else {
				if len(calls) != 1 {
					t.Fatalf("%d delete calls, want 1", len(calls))
				}
				checkDeleteOptions(t, calls[0], before, tt.wantPropagation)
			}
			if evs := fixture.Kinds(fixture.Drain(h.rec)); !slices.Equal(evs, append([]string{}, tt.wantEvents...)) {
				t.Errorf("Events = %q, want %q", evs, tt.wantEvents)
			}
		})
	}
}

func checkDeleteOptions(t *testing.T, o client.DeleteOptions, obj *corev1.ConfigMap, want metav1.DeletionPropagation) {
	t.Helper()
	if o.Preconditions == nil || o.Preconditions.UID == nil || o.Preconditions.ResourceVersion == nil {
		t.Fatalf("delete preconditions = %+v, want UID and ResourceVersion", o.Preconditions)
	}
	if *o.Preconditions.UID != obj.UID {
		t.Errorf("UID precondition = %q, want %q", *o.Preconditions.UID, obj.UID)
	}
	if *o.Preconditions.ResourceVersion != obj.ResourceVersion {
		t.Errorf("ResourceVersion precondition = %q, want %q", *o.Preconditions.ResourceVersion, obj.ResourceVersion)
	}
	if o.PropagationPolicy == nil || *o.PropagationPolicy != want {
		t.Errorf("propagation = %v, want %s", o.PropagationPolicy, want)
	}
}

func TestObjectReconcilerEventMessages(t *testing.T) {
	cm := fixture.NewConfigMap("scratch", fixture.TTL("10m"))
	h := newHarness(t, fixture.T0.Add(10*time.Minute+1500*time.Millisecond), fixture.Policy("configmaps"), cm)
	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	evs := fixture.Drain(h.rec)
	want := []string{
		"Normal Expired Expired at 2026-03-01T09:10:00Z (timeout.amphitheatre.app/ttl, policy configmaps)",
		"Normal Deleted Deleted 1.5s after expiry (policy configmaps, propagation Background)",
	}
	if !slices.Equal(evs, want) {
		t.Fatalf("Events =\n%q\nwant\n%q", evs, want)
	}
}

// An object the cache says has expired is deleted on the condition that
// it has not changed since: a write the cache has not seen makes the
// delete fail, and the object is looked at again once the cache shows it.
func TestObjectReconcilerLosesToWritesTheCacheHasNotSeen(t *testing.T) {
	tests := []struct {
		name  string
		write func(h *harness, cm *corev1.ConfigMap)
		// wantAfter is the result once the cache has caught up.
		wantAfter ctrl.Result
	}{
		{
			name: "an extension",
			write: func(h *harness, cm *corev1.ConfigMap) {
				h.annotate(cm, expiry.AnnotationExpiresAt, fixture.T0.Add(time.Hour).Format(time.RFC3339))
			},
			wantAfter: ctrl.Result{RequeueAfter: 45 * time.Minute},
		},
		{
			name:  "keep=true",
			write: func(h *harness, cm *corev1.ConfigMap) { h.annotate(cm, expiry.AnnotationKeep, "true") },
		},
		{
			name: "a label no policy selects",
			write: func(h *harness, cm *corev1.ConfigMap) {
				cur := h.stored(cm)
				cur.Labels = map[string]string{"app": "keeper"}
				if err := h.client.Update(context.Background(), cur); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm := fixture.NewConfigMap("scratch", fixture.TTL("10m"), fixture.Labelled(map[string]string{"app": "scratch"}))
			h := newHarness(t, fixture.T0.Add(15*time.Minute), fixture.Policy("scratch", fixture.Selecting(map[string]string{"app": "scratch"})), cm)
			cached := h.stored(cm)
			tt.write(h, cm)
			// The cache still shows the object as it was before the write.
			h.cacheView = func(o *metav1.PartialObjectMetadata) error {
				o.Annotations, o.Labels, o.ResourceVersion = cached.Annotations, cached.Labels, cached.ResourceVersion
				return nil
			}

			got, err := h.reconcile(cm)
			if err != nil || got != (ctrl.Result{RequeueAfter: kube.ConflictRetry}) {
				t.Fatalf("Reconcile = %+v, %v; want a look again in %s", got, err, kube.ConflictRetry)
			}
			if h.stored(cm) == nil {
				t.Fatal("object deleted")
			}
			if evs := fixture.Drain(h.rec); len(evs) != 0 {
				t.Errorf("Events = %q, want none", evs)
			}

			h.cacheView = nil
			if got, err := h.reconcile(cm); err != nil || got != tt.wantAfter {
				t.Errorf("once the cache caught up: %+v, %v; want %+v", got, err, tt.wantAfter)
			}
			if h.stored(cm) == nil || len(h.deleteCalls()) != 1 {
				t.Errorf("object deleted, or %d delete calls, want the one that failed", len(h.deleteCalls()))
			}
		})
	}
}

// When the whole object is read before the delete (here for the archive),
// the decision is made again from what the API server shows.
func TestObjectReconcilerRechecksWithTheAPIServer(t *testing.T) {
	tests := []struct {
		name       string
		freshView  func(*metav1.PartialObjectMetadata) error
		wantResult ctrl.Result
		wantDelete bool
		// idleTTL is the policy's, when it has one.
		idleTTL v1alpha1.Duration
	}{
		{
			name: "waits for the new expiry when the API server shows an extension the cache has not seen",
			freshView: func(o *metav1.PartialObjectMetadata) error {
				o.Annotations[expiry.AnnotationExpiresAt] = fixture.T0.Add(time.Hour).Format(time.RFC3339)
				return nil
			},
			wantResult: ctrl.Result{RequeueAfter: 45 * time.Minute},
		},
		{
			name: "keeps an object the API server shows was just annotated keep=true",
			freshView: func(o *metav1.PartialObjectMetadata) error {
				o.Annotations[expiry.AnnotationKeep] = "true"
				return nil
			},
		},
		{
			name: "leaves alone an object the API server shows is being deleted",
			freshView: func(o *metav1.PartialObjectMetadata) error {
				ts := metav1.NewTime(fixture.T0)
				o.DeletionTimestamp = &ts
				return nil
			},
		},
		{
			name: "does nothing when the API server no longer has the object",
			freshView: func(o *metav1.PartialObjectMetadata) error {
				return apierrors.NewNotFound(configMaps, o.Name)
			},
		},
		{
			// The edit is recorded at once, the deletion being due, and
			// its watch event brings the next look, at the new expiry.
			name:    "keeps an object the API server shows was edited under a policy with idleTTL",
			idleTTL: "5m",
			freshView: func(o *metav1.PartialObjectMetadata) error {
				o.Generation = 2
				return nil
			},
		},
		{
			name: "leaves alone an object the API server shows no policy selects any more",
			freshView: func(o *metav1.PartialObjectMetadata) error {
				o.Labels = map[string]string{"app": "keeper"}
				return nil
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm := fixture.NewConfigMap("scratch", fixture.TTL("10m"), fixture.Labelled(map[string]string{"app": "scratch"}))
			idle := func(p *v1alpha1.TimeoutPolicy) { p.Spec.IdleTTL = tt.idleTTL }
			h := newHarness(t, fixture.T0.Add(15*time.Minute), fixture.Policy("scratch", fixture.Selecting(map[string]string{"app": "scratch"}), fixture.Archiving, idle), cm)
			h.r.Archive = archive.Dir(t.TempDir())
			h.freshView = tt.freshView

			got, err := h.reconcile(cm)
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if got != tt.wantResult {
				t.Errorf("Result = %+v, want %+v", got, tt.wantResult)
			}
			if calls := h.deleteCalls(); len(calls) != 0 {
				t.Errorf("%d delete calls, want none", len(calls))
			}
			if h.stored(cm) == nil {
				t.Error("object deleted")
			}
			if evs := fixture.Drain(h.rec); len(evs) != 0 {
				t.Errorf("Events = %q, want none", evs)
			}
		})
	}

	t.Run("returns an error when the API server cannot be read", func(t *testing.T) {
		cm := fixture.NewConfigMap("scratch", fixture.TTL("10m"))
		h := newHarness(t, fixture.T0.Add(15*time.Minute), fixture.Policy("configmaps", fixture.Archiving), cm)
		h.r.Archive = archive.Dir(t.TempDir())
		h.freshView = func(*metav1.PartialObjectMetadata) error {
			return apierrors.NewServiceUnavailable("etcd is sulking")
		}
		if _, err := h.reconcile(cm); !apierrors.IsServiceUnavailable(err) {
			t.Fatalf("Reconcile error = %v, want ServiceUnavailable", err)
		}
		if h.stored(cm) == nil || len(h.deleteCalls()) != 0 {
			t.Fatal("object deleted without a fresh read")
		}
	})
}

func TestObjectReconcilerDeleteConflicts(t *testing.T) {
	tests := []struct {
		name      string
		deleteErr error
		cacheView func(*metav1.PartialObjectMetadata) error
	}{
		{
			name:      "looks again soon without an error when the delete returns a Conflict",
			deleteErr: apierrors.NewConflict(configMaps, "scratch", errors.New("the object has been modified")),
		},
		{
			// The fake client checks the resourceVersion precondition: a
			// write the cache has not seen makes the delete fail, which is
			// what the precondition is for.
			name: "loses to a write the cache has not seen",
			cacheView: func(o *metav1.PartialObjectMetadata) error {
				o.ResourceVersion = "1"
				return nil
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm := fixture.NewConfigMap("scratch", fixture.TTL("10m"))
			h := newHarness(t, fixture.T0.Add(time.Hour), fixture.Policy("configmaps"), cm)
			h.deleteErr = tt.deleteErr
			h.cacheView = tt.cacheView

			got, err := h.reconcile(cm)
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if want := (ctrl.Result{RequeueAfter: kube.ConflictRetry}); got != want {
				t.Errorf("Result = %+v, want %+v", got, want)
			}
			if h.stored(cm) == nil {
				t.Error("object deleted")
			}
			if len(h.deleteCalls()) != 1 {
				t.Errorf("%d delete calls, want 1", len(h.deleteCalls()))
			}
			for _, e := range fixture.Kinds(fixture.Drain(h.rec)) {
				if e == "Normal Deleted" || e == "Warning DeletionFailed" {
					t.Errorf("Event %q after a conflict", e)
				}
			}
		})
	}
}

// step is one reconcile in a scenario: the clock is set to at, change is
// applied to the stored object, then the object is reconciled.
type step struct {
	name        string
	at          time.Time
	change      func(h *harness, cm *corev1.ConfigMap)
	wantResult  ctrl.Result
	wantDeleted bool
	wantEvents  []string
	// check, when set, looks at the Events' full text.
	check func(t *testing.T, evs []string)
}

func runSteps(t *testing.T, h *harness, cm *corev1.ConfigMap, steps []step) {
	t.Helper()
	for _, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			h.t = t
			h.clock.SetTime(s.at)
			if s.change != nil {
				s.change(h, cm)
			}
			got, err := h.reconcile(cm)
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if got != s.wantResult {
				t.Errorf("Result = %+v, want %+v", got, s.wantResult)
			}
			if gone := h.stored(cm) == nil; gone != s.wantDeleted {
				t.Errorf("deleted = %t, want %t", gone, s.wantDeleted)
			}
			evs := fixture.Drain(h.rec)
			if k := fixture.Kinds(evs); !slices.Equal(k, append([]string{}, s.wantEvents...)) {
				t.Errorf("Events = %q, want %q", evs, s.wantEvents)
			}
			if s.check != nil {
				s.check(t, evs)
			}
		})
		if !ok {
			// Later steps build on this one.
			return
		}
	}
}

func TestObjectReconcilerDryRun(t *testing.T) {
	cm := fixture.NewConfigMap("scratch", fixture.TTL("10m"))
	h := newHarness(t, fixture.T0, fixture.Policy("careful", fixture.DryRun), cm)
	runSteps(t, h, cm, []step{
		{
			name:       "waits before expiry",
			at:         fixture.T0.Add(time.Minute),
			wantResult: ctrl.Result{RequeueAfter: 9 * time.Minute},
		},
		{
			name:       "records one WouldDelete at expiry and deletes nothing",
			at:         fixture.T0.Add(10 * time.Minute),
			wantEvents: []string{"Normal WouldDelete"},
			check: func(t *testing.T, evs []string) {
				if !strings.Contains(evs[0], "dry-run") || !strings.Contains(evs[0], "policy careful") {
					t.Errorf("WouldDelete message %q does not name the policy and dry-run", evs[0])
				}
			},
		},
		{
			name: "records no second WouldDelete for the same expiry later on",
			at:   fixture.T0.Add(time.Hour),
		},
		{
			name: "starts a new record for a new expiry set after the first one passed",
			at:   fixture.T0.Add(time.Hour),
			change: func(h *harness, cm *corev1.ConfigMap) {
				h.annotate(cm, expiry.AnnotationExpiresAt, fixture.T0.Add(2*time.Hour).Format(time.RFC3339))
			},
		},
		{
			// The would-delete message told people of the old date.
			name:       "tells of the new expiry in a MessageSent Event that names the extended message",
			at:         fixture.T0.Add(time.Hour),
			wantEvents: []string{"Normal MessageSent"},
			check: func(t *testing.T, evs []string) {
				if !strings.Contains(evs[0], "the extended message") {
					t.Errorf("MessageSent note %q does not name the message type", evs[0])
				}
			},
		},
		{
			name:       "waits for the new expiry",
			at:         fixture.T0.Add(time.Hour),
			wantResult: ctrl.Result{RequeueAfter: time.Hour},
		},
		{
			name:       "records a new WouldDelete when the new expiry passes",
			at:         fixture.T0.Add(2 * time.Hour),
			wantEvents: []string{"Normal WouldDelete"},
		},
	})
	if n := len(h.deleteCalls()); n != 0 {
		t.Errorf("%d delete calls under a dry-run policy", n)
	}
}

func TestObjectReconcilerInvalidAnnotation(t *testing.T) {
	cm := fixture.NewConfigMap("scratch", fixture.TTL("3 days"))
	h := newHarness(t, fixture.T0, fixture.Policy("configmaps", fixture.DefaultTTL("1h")), cm)
	runSteps(t, h, cm, []step{
		{
			name:       "warns InvalidTimeout once, naming the annotation, the value and what is expected",
			at:         fixture.T0.Add(time.Minute),
			wantResult: ctrl.Result{RequeueAfter: 59 * time.Minute},
			wantEvents: []string{"Warning InvalidTimeout"},
			check: func(t *testing.T, evs []string) {
				for _, want := range []string{expiry.AnnotationTTL, `"3 days"`, "expected", "2026-03-01T10:00:00Z"} {
					if !strings.Contains(evs[0], want) {
						t.Errorf("message %q does not contain %q", evs[0], want)
					}
				}
			},
		},
		{
			name:       "does not warn again while the value stays the same",
			at:         fixture.T0.Add(2 * time.Minute),
			wantResult: ctrl.Result{RequeueAfter: 58 * time.Minute},
		},
		{
			name: "warns again when the value changes to another invalid one",
			at:   fixture.T0.Add(3 * time.Minute),
			change: func(h *harness, cm *corev1.ConfigMap) {
				h.annotate(cm, expiry.AnnotationTTL, "a fortnight")
			},
			wantResult: ctrl.Result{RequeueAfter: 57 * time.Minute},
			wantEvents: []string{"Warning InvalidTimeout"},
			check: func(t *testing.T, evs []string) {
				if !strings.Contains(evs[0], `"a fortnight"`) {
					t.Errorf("message %q does not name the new value", evs[0])
				}
			},
		},
		{
			name:       "does not delete before creation plus the default TTL",
			at:         fixture.T0.Add(time.Hour - time.Second),
			wantResult: ctrl.Result{RequeueAfter: time.Second},
		},
		{
			name:        "deletes at creation plus the default TTL",
			at:          fixture.T0.Add(time.Hour),
			wantDeleted: true,
			wantEvents:  []string{"Normal Expired", "Normal Deleted"},
		},
	})
}

func TestObjectReconcilerWarnsAboutAMisspeltKeepAndDeletesOnTime(t *testing.T) {
	cm := fixture.NewConfigMap("scratch", fixture.Annotated(expiry.Prefix+"Keep", "true"))
	h := newHarness(t, fixture.T0, fixture.Policy("configmaps", fixture.DefaultTTL("1h")), cm)
	runSteps(t, h, cm, []step{
		{
			name:       "warns InvalidTimeout, naming the key, the known keys and the one meant",
			at:         fixture.T0.Add(time.Minute),
			wantResult: ctrl.Result{RequeueAfter: 59 * time.Minute},
			wantEvents: []string{"Warning InvalidTimeout"},
			check: func(t *testing.T, evs []string) {
				for _, want := range []string{expiry.Prefix + "Keep", "is unknown", "ttl, expires-at, keep, notify", "did you mean keep?"} {
					if !strings.Contains(evs[0], want) {
						t.Errorf("message %q does not contain %q", evs[0], want)
					}
				}
			},
		},
		{
			name:        "deletes at creation plus the default TTL: the unknown key changes nothing",
			at:          fixture.T0.Add(time.Hour),
			wantDeleted: true,
			wantEvents:  []string{"Normal Expired", "Normal Deleted"},
		},
	})
}

func TestObjectReconcilerForgetsWhatItReported(t *testing.T) {
	tests := []struct {
		name   string
		policy *v1alpha1.TimeoutPolicy
		object *corev1.ConfigMap
		// first is when the object is first reconciled, to be remembered.
		first time.Time
		// then changes or deletes the object and reconciles it again.
		then func(h *harness, cm *corev1.ConfigMap)
	}{
		{
			name:   "forgets an invalid value once the controller deletes the object",
			policy: fixture.Policy("configmaps"),
			object: fixture.NewConfigMap("scratch", fixture.TTL("3 days")),
			first:  fixture.T0.Add(time.Minute),
			then: func(h *harness, cm *corev1.ConfigMap) {
				h.clock.SetTime(fixture.T0.Add(2 * time.Hour))
				if _, err := h.reconcile(cm); err != nil {
					h.t.Fatal(err)
				}
				if h.stored(cm) != nil {
					h.t.Fatal("not deleted")
				}
			},
		},
		{
			name:   "forgets an invalid value once it is fixed",
			policy: fixture.Policy("configmaps"),
			object: fixture.NewConfigMap("scratch", fixture.TTL("3 days")),
			first:  fixture.T0.Add(time.Minute),
			then: func(h *harness, cm *corev1.ConfigMap) {
				h.annotate(cm, expiry.AnnotationTTL, "3d")
				if _, err := h.reconcile(cm); err != nil {
					h.t.Fatal(err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.first, tt.policy, tt.object)
			if _, err := h.reconcile(tt.object); err != nil {
				t.Fatal(err)
			}
			if w := h.warned(tt.object); len(w) != 1 {
				t.Fatalf("the record holds warnings %v after the first report, want one", w)
			}
			tt.then(h, tt.object)
			if w := h.warned(tt.object); len(w) != 0 {
				t.Fatalf("the record holds warnings %v, want none", w)
			}
		})
	}

	t.Run("remembers nothing about an object with nothing to report", func(t *testing.T) {
		cm := fixture.NewConfigMap("scratch", fixture.TTL("10m"))
		h := newHarness(t, fixture.T0.Add(time.Minute), fixture.Policy("configmaps"), cm)
		for _, at := range []time.Time{fixture.T0.Add(time.Minute), fixture.T0.Add(10 * time.Minute)} {
			h.clock.SetTime(at)
			if _, err := h.reconcile(cm); err != nil {
				t.Fatal(err)
			}
			if w := h.warned(cm); len(w) != 0 {
				t.Fatalf("the record holds warnings %v at %s, want none", w, at)
			}
		}
	})
}

func TestObjectReconcilerRecreatedObject(t *testing.T) {
	// The watch may fold a delete and a create under the same name into
	// one reconcile: the new object is a new object, warned about afresh.
	cm := fixture.NewConfigMap("scratch", fixture.TTL("3 days"))
	h := newHarness(t, fixture.T0.Add(time.Minute), fixture.Policy("configmaps"), cm)
	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	if evs := fixture.Kinds(fixture.Drain(h.rec)); !slices.Equal(evs, []string{"Warning InvalidTimeout"}) {
		t.Fatalf("first Events = %q", evs)
	}
	if err := h.client.Delete(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	again := fixture.NewConfigMap("scratch", fixture.TTL("3 days"), func(cm *corev1.ConfigMap) { cm.UID = "uid-scratch-2" })
	if err := h.client.Create(context.Background(), again); err != nil {
		t.Fatal(err)
	}
	if _, err := h.reconcile(again); err != nil {
		t.Fatal(err)
	}
	if evs := fixture.Kinds(fixture.Drain(h.rec)); !slices.Equal(evs, []string{"Warning InvalidTimeout"}) {
		t.Fatalf("Events about the recreated object = %q, want one InvalidTimeout", evs)
	}
}

func TestObjectReconcilerClusterScoped(t *testing.T) {
	// Namespaces stand in for a cluster-scoped kind such as Playbook.
	ns := fixture.NewNamespace("sandbox", map[string]string{"env": "prod"})
	ns.UID = "uid-sandbox"
	ns.CreationTimestamp = metav1.NewTime(fixture.T0)
	p := fixture.Policy("sandboxes", fixture.Target("v1", "Namespace"), fixture.DefaultTTL("1h"), fixture.InNamespaces(map[string]string{"env": "dev"}))
	h := newHarness(t, fixture.T0.Add(time.Hour), p, ns)
	key := wakeup.Key{GVK: fixture.NamespaceGVK, NamespacedName: types.NamespacedName{Name: "sandbox"}}

	got, err := h.r.Reconcile(context.Background(), key)
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if got != (ctrl.Result{}) {
		t.Errorf("Result = %+v, want none", got)
	}
	if err := h.client.Get(context.Background(), key.NamespacedName, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace still there (get: %v); the namespace selector must not apply to a cluster-scoped kind", err)
	}
	if evs := fixture.Kinds(fixture.Drain(h.rec)); !slices.Equal(evs, []string{"Normal Expired", "Normal Deleted"}) {
		t.Errorf("Events = %q", evs)
	}
}

func TestObjectReconcilerGlobalDryRun(t *testing.T) {
	cm := fixture.NewConfigMap("scratch", fixture.TTL("10m"))
	h := newHarness(t, fixture.T0, fixture.Policy("plain"), cm)
	var trail bytes.Buffer
	h.r.DryRun, h.r.Audit = true, audit.New(&trail)
	runSteps(t, h, cm, []step{
		{
			name:       "records one WouldDelete at expiry that names the flag, and deletes nothing",
			at:         fixture.T0.Add(10 * time.Minute),
			wantEvents: []string{"Normal WouldDelete"},
			check: func(t *testing.T, evs []string) {
				if !strings.Contains(evs[0], "--dry-run") {
					t.Errorf("WouldDelete message %q does not name --dry-run", evs[0])
				}
			},
		},
	})
	if n := len(h.deleteCalls()); n != 0 {
		t.Errorf("%d delete calls with --dry-run", n)
	}
	var rec audit.Record
	dec := json.NewDecoder(&trail)
	for rec.Type != audit.WouldDelete {
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("audit trail without a would-delete record: %v", err)
		}
	}
	if rec.Type != audit.WouldDelete || rec.Object.UID != cm.UID || rec.Policy != "plain" || rec.ExpiresAt == nil ||
		!rec.ExpiresAt.Equal(fixture.T0.Add(10*time.Minute)) || !rec.Time.Equal(fixture.T0.Add(10*time.Minute)) {
		t.Errorf("audit record %+v", rec)
	}
}

func TestObjectReconcilerWaitsForItsTurnUnderACap(t *testing.T) {
	first := fixture.NewConfigMap("first", fixture.TTL("10m"))
	second := fixture.NewConfigMap("second", fixture.TTL("10m"))
	h := newHarness(t, fixture.T0, fixture.Policy("capped", func(p *v1alpha1.TimeoutPolicy) { p.Spec.Deletion.MaxPerMinute = 2 }), first, second)
	h.clock.SetTime(fixture.T0.Add(10 * time.Minute))

	if _, err := h.reconcile(first); err != nil || h.stored(first) != nil {
		t.Fatalf("the first expiry under the cap was not deleted at once (err %v)", err)
	}
	res, err := h.reconcile(second)
	if err != nil || res.RequeueAfter != 30*time.Second || h.stored(second) == nil {
		t.Fatalf("second: %+v, %v; want it kept and looked at again in 30s, its turn", res, err)
	}
	evs := fixture.Drain(h.rec)
	if got := fixture.Kinds(evs); !slices.Contains(got, "Normal DeletionThrottled") {
		t.Fatalf("events %v, want DeletionThrottled", evs)
	}
	// Looked at again before its turn (another change brought it back): it
	// keeps its turn and says nothing new.
	h.clock.Step(10 * time.Second)
	if res, _ := h.reconcile(second); res.RequeueAfter != 20*time.Second || len(fixture.Drain(h.rec)) != 0 {
		t.Fatalf("before its turn: %+v", res)
	}
	h.clock.Step(20 * time.Second)
	if _, err := h.reconcile(second); err != nil || h.stored(second) != nil {
		t.Fatalf("not deleted at its turn (err %v)", err)
	}
}
