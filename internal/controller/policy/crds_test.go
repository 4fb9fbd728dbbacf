// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

var (
	policyGVK  = v1alpha1.GroupVersion.WithKind("TimeoutPolicy")
	channelGVK = v1alpha1.GroupVersion.WithKind("NotificationChannel")
)

// servedKinds is a RESTMapper of the kinds it is told the API server
// serves, which a test may add to while it is read, as a CRD is installed.
type servedKinds struct {
	mu      sync.Mutex
	m       *meta.DefaultRESTMapper
	lookups int
}

func newServedKinds(kinds ...schema.GroupVersionKind) *servedKinds {
	s := &servedKinds{m: meta.NewDefaultRESTMapper(nil)}
	s.serve(kinds...)
	return s
}

func (s *servedKinds) serve(kinds ...schema.GroupVersionKind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range kinds {
		s.m.Add(k, meta.RESTScopeRoot)
	}
}

func (s *servedKinds) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lookups++
	return s.m.RESTMapping(gk, versions...)
}

func (s *servedKinds) looked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookups
}

// The rest of meta.RESTMapper, which nothing here calls.
func (s *servedKinds) KindFor(schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	panic("not used")
}
func (s *servedKinds) KindsFor(schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	panic("not used")
}
func (s *servedKinds) ResourceFor(schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	panic("not used")
}
func (s *servedKinds) ResourcesFor(schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	panic("not used")
}
func (s *servedKinds) RESTMappings(schema.GroupKind, ...string) ([]*meta.RESTMapping, error) {
	panic("not used")
}
func (s *servedKinds) ResourceSingularizer(string) (string, error) { panic("not used") }

func TestReadinessNamesTheCRDsThatAreNotInstalled(t *testing.T) {
	probe := httptest.NewRequest("GET", "/readyz/crds", nil)
	for _, tt := range []struct {
		name    string
		served  []schema.GroupVersionKind
		want    []string
		wantNot []string
	}{
		{name: "names both CRDs when neither is installed",
			want: []string{"timeoutpolicies.timeout.amphitheatre.app", "notificationchannels.timeout.amphitheatre.app", "timeout.amphitheatre.app/v1alpha1 NotificationChannel"}},
		{name: "names the NotificationChannel CRD alone when only it is missing", served: []schema.GroupVersionKind{policyGVK},
			want: []string{"install the CRD notificationchannels.timeout.amphitheatre.app"}, wantNot: []string{"timeoutpolicies"}},
		{name: "is ready with both CRDs", served: []schema.GroupVersionKind{policyGVK, channelGVK}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CRDsReadiness(newServedKinds(tt.served...))(probe)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("not ready: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("ready, want not ready")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not name %q", err, w)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(err.Error(), w) {
					t.Errorf("%q names %q", err, w)
				}
			}
		})
	}
}

func TestReadinessNamesTheTargetKindsThatAreNotServed(t *testing.T) {
	probe := httptest.NewRequest("GET", "/readyz/targets", nil)
	reader := fake.NewClientBuilder().WithScheme(fixture.Scheme(t)).WithObjects(
		fixture.Policy("playbooks", fixture.Target("amphitheatre.app/v1", "Playbook")),
		fixture.Policy("more-playbooks", fixture.Target("amphitheatre.app/v1", "Playbook")),
		fixture.Policy("configmaps"),
	).Build()
	served := newServedKinds(fixture.ConfigMapGVK)
	var leading atomic.Bool
	check := TargetsReadiness(reader, served, &leading)

	if err := check(probe); err != nil {
		t.Fatalf("a standby knows no policies, yet it is not ready: %v", err)
	}
	leading.Store(true)
	err := check(probe)
	if err == nil {
		t.Fatal("ready while the Playbook CRD is not installed")
	}
	for _, w := range []string{"does not serve amphitheatre.app/v1 Playbook", "TimeoutPolicy more-playbooks, playbooks", "playbooks.amphitheatre.app"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not say %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "ConfigMap") {
		t.Errorf("%q names a kind that is served", err)
	}
	served.serve(schema.GroupVersionKind{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook"})
	if err := check(probe); err != nil {
		t.Fatalf("not ready once the CRD is installed: %v", err)
	}
}

// addRecorder is a manager that records what is added to it.
type addRecorder struct {
	manager.Manager
	mu    sync.Mutex
	added []manager.Runnable
}

func (a *addRecorder) Add(r manager.Runnable) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.added = append(a.added, r)
	return nil
}

func (a *addRecorder) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.added)
}

// The controllers wait for the controller's own CRDs, which the log names
// once, and start when they are installed, without a restart.
func TestTheControllersWaitForTheCRDsAndStartWhenTheyAreInstalled(t *testing.T) {
	served := newServedKinds(policyGVK)
	mgr := &addRecorder{}
	var (
		mu    sync.Mutex
		lines []string
	)
	log := funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	logged := func(what string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, l := range lines {
			if strings.Contains(l, what) {
				n++
			}
		}
		return n
	}
	held := &HeldManager{Manager: mgr}
	for range 3 {
		if err := held.Add(manager.RunnableFunc(func(context.Context) error { return nil })); err != nil {
			t.Fatal(err)
		}
	}
	gate := &CRDGate{Mgr: mgr, Mapper: served, Held: held.Held, Log: log, interval: time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- gate.Start(ctx) }()

	// Some fifty looks, each at both kinds.
	deadline := time.Now().Add(5 * time.Second)
	for served.looked() < 100 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := served.looked(); n < 100 {
		t.Fatalf("the gate looked %d times in 5s", n)
	}
	if n := mgr.count(); n != 0 {
		t.Fatalf("%d runnables started without the NotificationChannel CRD", n)
	}
	if n := logged(`"waiting for CRDs"`); n != 1 {
		t.Fatalf("logged %d times that it waits, want once:\n%s", n, strings.Join(lines, "\n"))
	}
	if logged("notificationchannels.timeout.amphitheatre.app") == 0 || logged(`"timeoutpolicies.timeout.amphitheatre.app"`) != 0 {
		t.Errorf("the log does not name the missing CRD alone:\n%s", strings.Join(lines, "\n"))
	}

	served.serve(channelGVK)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the gate did not open once the CRD was served")
	}
	if n := mgr.count(); n != 3 {
		t.Errorf("%d runnables started, want the 3 held", n)
	}
	if logged(`"CRDs installed; starting the controllers"`) != 1 {
		t.Errorf("the log does not say the controllers start:\n%s", strings.Join(lines, "\n"))
	}
}

// With the CRDs there, the controllers start at once, and nothing is said.
func TestTheGateSaysNothingWhenTheCRDsAreThere(t *testing.T) {
	mgr := &addRecorder{}
	var lines int
	log := funcr.New(func(string, string) { lines++ }, funcr.Options{})
	gate := &CRDGate{Mgr: mgr, Mapper: newServedKinds(policyGVK, channelGVK), Log: log,
		Held: []manager.Runnable{manager.RunnableFunc(func(context.Context) error { return nil })}}
	if err := gate.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if mgr.count() != 1 || lines != 0 {
		t.Fatalf("%d started, %d lines logged; want 1 and none", mgr.count(), lines)
	}
}
