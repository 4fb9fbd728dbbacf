// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

// The one file that knows how the controller is put together: how its
// reconciler is built, what drives it, and how the simulated channels
// reach it. When the controller's wiring changes (a constructor field, a
// Runnable that sends an outbox), this is the file to adapt.

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/controller"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// simDomain, in a policy's allowedEmailDomains, gives the policy the
// simulated channels.
const simDomain = "sim.test"

// current is the world whose channels the registered factory builds.
// Simulations run one at a time.
var current *world

func init() {
	notify.Register("zz-sim", func(_ context.Context, spec v1alpha1.Notifications, _ notify.Secrets) ([]notify.Notifier, error) {
		if current == nil || !slices.Contains(spec.AllowedEmailDomains, simDomain) {
			return nil, nil
		}
		out := make([]notify.Notifier, numChannels)
		for i := range out {
			out[i] = simNotifier{w: current, i: i}
		}
		return out, nil
	})
}

// simNotifier hands messages to the world's channel i.
type simNotifier struct {
	w *world
	i int
}

func (n simNotifier) Name() string                    { return fmt.Sprintf("sim-%d", n.i) }
func (n simNotifier) Accepts(v1alpha1.EventType) bool { return true }
func (n simNotifier) Send(ctx context.Context, m notify.Message, _ notify.Content) error {
	return n.w.send(ctx, n.i, m)
}

// instance is one controller process: all its in-memory state.
type instance struct {
	r *controller.ObjectReconciler
}

// start builds a controller process on the world's API server, as
// controller.Setup does, with nothing in memory.
func start(w *world) *instance {
	r := &controller.ObjectReconciler{
		Client:    w.cached,
		APIReader: w.live,
		Recorder:  w.recorder,
		Clock:     w.clock,
		Channels:  &controller.Channels{Secrets: noSecrets{}, Clock: w.clock},
		Audit:     audit.New(w.trail),
		Caps:      controller.NewDeletionCaps(0),
	}
	// One-off messages are sent in the background otherwise: the
	// simulation must see each send happen in its turn.
	r.AnnounceInline()
	return &instance{r: r}
}

// reconcile is one pass of the object controller over the object name.
func (c *instance) reconcile(ctx context.Context, name string) (ctrl.Result, error) {
	return c.r.Reconcile(ctx, controller.Key{GVK: configMapGVK, NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}})
}

// tick runs what the controller does outside reconciles at the simulated
// time now. Today nothing; an outbox sender would be run here.
func (c *instance) tick(context.Context) {}

type noSecrets struct{}

func (noSecrets) Get(_ context.Context, namespace, name, key string) ([]byte, error) {
	return nil, fmt.Errorf("secret %s/%s has no key %q in the simulation", namespace, name, key)
}
