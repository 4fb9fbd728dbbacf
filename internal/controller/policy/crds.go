// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/objectstore"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
)

// ownKinds are the kinds of the controller's own CRDs, which every
// controller it runs watches.
var ownKinds = []schema.GroupVersionKind{
	v1alpha1.GroupVersion.WithKind("TimeoutPolicy"),
	v1alpha1.GroupVersion.WithKind("NotificationChannel"),
}

// crdRetry is how often the controller looks again for its own CRDs while
// the API server does not serve them.
const crdRetry = 5 * time.Second

// unserved returns those of kinds the API server does not serve, asking
// the RESTMapper: from its cache for a kind it found before, from the API
// server's discovery for one it has not.
func unserved(mapper meta.RESTMapper, kinds []schema.GroupVersionKind) ([]schema.GroupVersionKind, error) {
	var out []schema.GroupVersionKind
	for _, gvk := range kinds {
		_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		switch {
		case meta.IsNoMatchError(err):
			out = append(out, gvk)
		case err != nil:
			return nil, fmt.Errorf("look up %s %s: %w", gvk.GroupVersion(), gvk.Kind, err)
		}
	}
	return out, nil
}

// crdName is the name of the CRD that would define gvk: its resource (the
// lower-case plural of its kind) and its group.
func crdName(gvk schema.GroupVersionKind) string {
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return plural.Resource + "." + gvk.Group
}

// errNotServed says which of the controller's own kinds the API server does
// not serve, and which CRDs to install.
func errNotServed(kinds []schema.GroupVersionKind) error {
	var names, crds []string
	for _, gvk := range kinds {
		names = append(names, gvk.GroupVersion().String()+" "+gvk.Kind)
		crds = append(crds, crdName(gvk))
	}
	crd, it := "CRD", "it is"
	if len(crds) > 1 {
		crd, it = "CRDs", "they are"
	}
	return fmt.Errorf("the API server does not serve %s: install the %s %s (config/crd, or the chart's crds/, which helm upgrade does not apply); "+
		"the controllers start once %s served, without a restart", strings.Join(names, ", "), crd, strings.Join(crds, ", "), it)
}

// HeldManager is the manager as Setup hands it to the controllers, the
// outbox and what else runs on the leader: what they add is held back
// until the API server serves the controller's own CRDs. Started without
// them, controller-runtime would retry each watch every 10 s, logging "no
// matches for kind" each time, with nothing deleted and /readyz ready, and
// stop the process after two minutes.
type HeldManager struct {
	manager.Manager
	Held []manager.Runnable
}

// Add holds r back until the gate starts it.
func (m *HeldManager) Add(r manager.Runnable) error {
	m.Held = append(m.Held, r)
	return nil
}

// crdGate adds the held runnables to the manager once the API server
// serves the controller's own CRDs. It runs on every replica: a standby
// says what is missing too, and its held runnables wait for the election.
type CRDGate struct {
	Mgr    manager.Manager
	Mapper meta.RESTMapper
	Held   []manager.Runnable
	Log    logr.Logger
	// interval is how often it looks; crdRetry when zero.
	interval time.Duration
}

// NeedLeaderElection is false: the gate only looks and says.
func (g *CRDGate) NeedLeaderElection() bool { return false }

// Start looks until the CRDs are served, saying once what is missing (and
// again only when that changes), then hands the held runnables over.
func (g *CRDGate) Start(ctx context.Context) error {
	interval := g.interval
	if interval <= 0 {
		interval = crdRetry
	}
	var said string
	for {
		missing, err := unserved(g.Mapper, ownKinds)
		switch {
		case err == nil && len(missing) == 0:
			// A manager that is stopping would start what is added now
			// with a context nobody cancels, and wait its whole grace
			// period for it at the end.
			if ctx.Err() != nil {
				return nil
			}
			if said != "" {
				g.Log.Info("CRDs installed; starting the controllers")
			}
			for _, r := range g.Held {
				if err := g.Mgr.Add(r); err != nil {
					return fmt.Errorf("start the controllers: %w", err)
				}
			}
			return nil
		case err == nil:
			err = errNotServed(missing)
			if msg := err.Error(); msg != said {
				var crds []string
				for _, gvk := range missing {
					crds = append(crds, crdName(gvk))
				}
				g.Log.Error(err, "waiting for CRDs", "missing", crds)
				said = msg
			}
		default:
			if msg := err.Error(); msg != said {
				g.Log.Error(err, "look for the CRDs")
				said = msg
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// Readiness is ready once the caches have synced, the governed objects
// are listed and, on the leader, the controllers' group has started. A standby holds no watch until it leads,
// so it is ready as soon as it runs.
func Readiness(mgr manager.Manager, w *objectstore.Watches, leading *atomic.Bool) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("caches not synced yet")
		}
		if w != nil && !w.Synced() {
			return errors.New("governed objects not listed yet")
		}
		select {
		case <-mgr.Elected():
			if !leading.Load() {
				return errors.New("elected leader, controllers not started yet")
			}
		default:
		}
		return nil
	}
}

// crdsReadiness fails, naming them, while the API server does not serve
// the controller's own CRDs.
func CRDsReadiness(mapper meta.RESTMapper) healthz.Checker {
	return func(*http.Request) error {
		missing, err := unserved(mapper, ownKinds)
		if err != nil {
			return err
		}
		if len(missing) > 0 {
			return errNotServed(missing)
		}
		return nil
	}
}

// TargetsReadiness fails, on the leader, while a TimeoutPolicy targets a
// kind the API server does not serve: the kind's CRD is not installed
// (Amphitheatre's, for the default target amphitheatre.app/v1 Playbook).
// The policy says so too, in its Ready condition (TargetNotFound). A
// standby knows no policies: it holds no watch until it leads.
func TargetsReadiness(reader client.Reader, mapper meta.RESTMapper, leading *atomic.Bool) healthz.Checker {
	return func(req *http.Request) error {
		if !leading.Load() {
			return nil
		}
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		var policies v1alpha1.TimeoutPolicyList
		if err := reader.List(ctx, &policies); err != nil {
			return fmt.Errorf("list TimeoutPolicies: %w", err)
		}
		byKind := map[schema.GroupVersionKind][]string{}
		for _, p := range policies.Items {
			if p.DeletionTimestamp == nil {
				gvk := match.TargetGVK(&p)
				byKind[gvk] = append(byKind[gvk], p.Name)
			}
		}
		kinds := slices.SortedFunc(maps.Keys(byKind), func(a, b schema.GroupVersionKind) int {
			return strings.Compare(a.String(), b.String())
		})
		var missing []schema.GroupVersionKind
		for _, gvk := range kinds {
			// A target that does not resolve for another reason is the
			// policy's to report.
			if gone, err := unserved(mapper, []schema.GroupVersionKind{gvk}); err == nil {
				missing = append(missing, gone...)
			}
		}
		var errs []error
		for _, gvk := range missing {
			names := byKind[gvk]
			errs = append(errs, fmt.Errorf("the API server does not serve %s %s, the target of TimeoutPolicy %s: install the CRD that defines it (%s)",
				gvk.GroupVersion(), gvk.Kind, strings.Join(names, ", "), crdName(gvk)))
		}
		return errors.Join(errs...)
	}
}
