// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"os"
	"path/filepath"
	"sigs.k8s.io/yaml"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

var playbooks = schema.GroupVersionResource{Group: "amphitheatre.app", Version: "v1", Resource: "playbooks"}

// playbookKind is the kind the archive files Playbooks under.
var playbookKind = schema.GroupKind{Group: "amphitheatre.app", Kind: "Playbook"}

// testLabel marks the objects of one test, and its policies select them by
// it, so that tests running in parallel never govern each other's objects.
const testLabel = "e2e.timeout.amphitheatre.app/test"

// newPlaybook returns a Playbook as Amphitheatre makes one: name and
// spec.id the same UUID, and the finalizer of Amphitheatre's controller,
// which the suite's stand-in removes once the Playbook is deleted.
func newPlaybook(test, title string, annotations map[string]string) *unstructured.Unstructured {
	pb := testenv.NewPlaybook(string(uuid.NewUUID()), title, annotations)
	pb.SetLabels(map[string]string{testLabel: test})
	return pb
}

// tracked is a created object with a watch that reports when it goes away.
type tracked struct {
	*unstructured.Unstructured
	gone chan time.Time
}

// create creates obj and starts watching for its deletion.
func create(t *testing.T, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) *tracked {
	t.Helper()
	ctx := context.Background()
	res := dyn.Resource(gvr).Namespace(obj.GetNamespace())
	created, err := res.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s: %v", gvr.Resource, obj.GetName(), err)
	}
	w, err := res.Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", created.GetName()).String(),
		ResourceVersion: created.GetResourceVersion(),
	})
	if err != nil {
		t.Fatalf("watch %s: %v", created.GetName(), err)
	}
	tr := &tracked{Unstructured: created, gone: make(chan time.Time, 1)}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				tr.gone <- time.Now()
				w.Stop()
			}
		}
	}()
	t.Cleanup(func() {
		w.Stop()
		_ = res.Delete(context.Background(), created.GetName(), metav1.DeleteOptions{})
	})
	return tr
}

// after is the object's creation time plus d: where a ttl of d puts its
// expiry.
func (tr *tracked) after(d time.Duration) time.Time {
	return tr.GetCreationTimestamp().Add(d)
}

// onTime is how late a deletion may come in these tests: late enough for
// a controller busy with the suite's parallel tests (a deletion that
// archives and fsyncs the audit trail once came 1.9 s late on two cores),
// soon enough to tell a deletion that came from one that was merely
// retried or stuck. The lag itself is measured by the bench, not here.
const onTime = 5 * time.Second

// expectDeletedOnTime waits for the object to be deleted and checks that it
// went no earlier than expiry and at most onTime after it.
func (tr *tracked) expectDeletedOnTime(t *testing.T, expiry time.Time) {
	t.Helper()
	select {
	case at := <-tr.gone:
		lag := at.Sub(expiry)
		t.Logf("%s deleted %s after its expiry", tr.GetName(), lag)
		if lag < 0 {
			t.Fatalf("deleted %s before its expiry at %s", -lag, expiry.Format(time.RFC3339Nano))
		}
		if lag > onTime {
			t.Fatalf("deleted %s after its expiry; want within %s", lag, onTime)
		}
	case <-time.After(time.Until(expiry) + 10*time.Second):
		t.Fatalf("%s not deleted 10s after its expiry at %s", tr.GetName(), expiry.Format(time.RFC3339))
	}
}

// expectKept checks that the object still exists for the whole of d.
func (tr *tracked) expectKept(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case at := <-tr.gone:
		t.Fatalf("%s deleted at %s; want it kept", tr.GetName(), at.Format(time.RFC3339Nano))
	case <-time.After(d):
	}
}

func createPolicy(t *testing.T, name string, spec v1alpha1.TimeoutPolicySpec) *v1alpha1.TimeoutPolicy {
	t.Helper()
	p := &v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	if err := k8s.Create(context.Background(), p); err != nil {
		t.Fatalf("create policy %s: %v", name, err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	return p
}

// playbookPolicy governs the Playbooks labelled for test.
func playbookPolicy(test string, defaultTTL v1alpha1.Duration) v1alpha1.TimeoutPolicySpec {
	return v1alpha1.TimeoutPolicySpec{
		Target:     v1alpha1.Target{APIVersion: "amphitheatre.app/v1", Kind: "Playbook"},
		Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{testLabel: test}},
		DefaultTTL: defaultTTL,
	}
}

// findEvent waits for an Event about the named object with the given reason.
func findEvent(t *testing.T, namespace, name, reason string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	fixture.Eventually(t, 10*time.Second, fmt.Sprintf("event %s about %s in %s", reason, name, namespace), func() (bool, error) {
		list, err := clients.EventsV1().Events(namespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Reason == reason {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// events returns the reasons of the Events about the named object.
func events(t *testing.T, namespace, name string) []string {
	t.Helper()
	list, err := clients.EventsV1().Events(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

// eventNotes returns the notes of the Events about the named object with
// the given reason.
func eventNotes(t *testing.T, namespace, name, reason string) []string {
	t.Helper()
	list, err := clients.EventsV1().Events(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

func mustContain(t *testing.T, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%q does not contain %q", s, p)
		}
	}
}

func mergePatch(t *testing.T, gvr schema.GroupVersionResource, namespace, name, patch string) {
	t.Helper()
	_, err := dyn.Resource(gvr).Namespace(namespace).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch %s: %v", name, err)
	}
}

// awaitPolicy waits until the named policy's status satisfies cond.
func awaitPolicy(t *testing.T, name, what string, cond func(*v1alpha1.TimeoutPolicy) bool) {
	t.Helper()
	fixture.Eventually(t, 10*time.Second, "policy "+name+" "+what, func() (bool, error) {
		p, err := getPolicy(name)
		return err == nil && cond(p), err
	})
}

func getPolicy(name string) (*v1alpha1.TimeoutPolicy, error) {
	p := &v1alpha1.TimeoutPolicy{}
	err := k8s.Get(context.Background(), types.NamespacedName{Name: name}, p)
	return p, err
}

// createChannel creates the NotificationChannel name, as its
// administrator would, and deletes it when the test ends.
func createChannel(t *testing.T, name string, spec v1alpha1.NotificationChannelSpec) *v1alpha1.NotificationChannel {
	t.Helper()
	ch := &v1alpha1.NotificationChannel{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	if err := k8s.Create(context.Background(), ch); err != nil {
		t.Fatalf("create NotificationChannel %s: %v", name, err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ch) })
	return ch
}

// bindShippedClusterRole creates the ClusterRole of config/rbac/file, as
// the install ships it, and binds it under binding to the ServiceAccount
// namespace/name.
func bindShippedClusterRole(t *testing.T, file, binding, namespace, name string) {
	t.Helper()
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", file))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: binding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}
	if err := k8s.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
