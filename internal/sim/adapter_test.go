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
	"time"

	"github.com/go-logr/logr"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/archive"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/channelset"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/object"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// simChannel names the NotificationChannel that is the world's channel i.
func simChannel(i int) string { return fmt.Sprintf("sim-%d", i) }

// simChannels are the NotificationChannels every simulated policy names:
// the world's channels, created with it.
func simChannels() []client.Object {
	out := make([]client.Object, numChannels)
	for i := range out {
		out[i] = &v1alpha1.NotificationChannel{ObjectMeta: metav1.ObjectMeta{Name: simChannel(i)}}
	}
	return out
}

// simReferences are the references a simulated policy makes to them.
func simReferences() []v1alpha1.ChannelReference {
	out := make([]v1alpha1.ChannelReference, numChannels)
	for i := range out {
		out[i] = v1alpha1.ChannelReference{Name: simChannel(i)}
	}
	return out
}

// buildNotifiers builds the notifiers of the world's channels, in the
// place of notify.Build.
func (w *world) buildNotifiers(_ context.Context, chans []notify.Channel, _ notify.Secrets) ([]notify.Notifier, error) {
	out := make([]notify.Notifier, 0, len(chans))
	for _, ch := range chans {
		i := slices.IndexFunc(simChannels(), func(o client.Object) bool { return o.GetName() == ch.Name })
		if i < 0 {
			return nil, fmt.Errorf("channel %s is not one of the simulation's", ch.Name)
		}
		out = append(out, simNotifier{w: w, i: i})
	}
	return out, nil
}

// simNotifier hands messages to the world's channel i.
type simNotifier struct {
	w *world
	i int
}

func (n simNotifier) Name() string                    { return simChannel(n.i) }
func (n simNotifier) Accepts(v1alpha1.EventType) bool { return true }
func (n simNotifier) Send(ctx context.Context, m notify.Message, _ notify.Content) error {
	return n.w.send(ctx, n.i, m)
}

// instance is one controller process: all its in-memory state.
type instance struct {
	r *object.Reconciler
	// loaded is when the outbox last read the store, as its Runnable does
	// at start and every minute.
	loaded time.Time
}

// outboxNamespace holds the outbox's ConfigMaps, apart from the objects.
const outboxNamespace = "timeout-system"

// outboxKey is the queue entry that wakes the outbox's sender.
const outboxKey = "~outbox"

// start builds a controller process on the world's API server, as
// controller.Setup does, with nothing in memory. As a new leader, its
// outbox reads the entries earlier processes left.
func start(w *world) *instance {
	r := &object.Reconciler{
		Client:    w.cached,
		APIReader: w.live,
		Recorder:  w.recorder,
		Clock:     w.clock,
		Channels:  &channelset.Channels{Reader: w.live, Secrets: noSecrets{}, Clock: w.clock, Build: w.buildNotifiers},
		Audit:     audit.New(w.trail),
		// A policy that archives makes the controller read the object
		// fresh before deleting it, and decide again from that read.
		Archive: simArchive{},
	}
	r.Outbox = r.NewOutbox(w.live, w.live, outboxNamespace, 0, logr.Discard())
	return &instance{r: r}
}

// reconcile is one pass of the object controller over the object name,
// or of the outbox's sender.
func (c *instance) reconcile(ctx context.Context, name string) (ctrl.Result, error) {
	if name == outboxKey {
		return ctrl.Result{RequeueAfter: c.tick(ctx)}, nil
	}
	return c.r.Reconcile(ctx, wakeup.Key{GVK: configMapGVK, NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}})
}

// tick runs the outbox's sender at the simulated time now, as its
// Runnable would, and returns how long until it has something due.
func (c *instance) tick(ctx context.Context) time.Duration {
	if now := c.r.Clock.Now(); c.loaded.IsZero() || now.Sub(c.loaded) >= time.Minute {
		if err := c.r.Outbox.Load(ctx); err == nil {
			c.loaded = now
		}
	}
	for range 10 {
		wait := c.r.Outbox.Pass(ctx)
		c.r.Outbox.Wait()
		if wait > 0 {
			return min(wait, time.Minute)
		}
	}
	return time.Millisecond
}

// simArchive takes every manifest at once and keeps none: what the
// simulation wants of archiving is the fresh read before the delete.
// The controller calls nothing else of it.
type simArchive struct{ archive.Store }

func (simArchive) Write(_ context.Context, obj *unstructured.Unstructured, _ archive.Header) (string, error) {
	return "sim/" + string(obj.GetUID()), nil
}

func (simArchive) String() string { return "the simulation's archive" }

type noSecrets struct{}

func (noSecrets) Get(_ context.Context, namespace, name, key string) ([]byte, error) {
	return nil, fmt.Errorf("secret %s/%s has no key %q in the simulation", namespace, name, key)
}
