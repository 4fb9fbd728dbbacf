// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
)

// What every scene does with the API server: wait for its policy, make
// Playbooks, watch them.

// awaitReady waits for the named policy's Ready condition, and fails
// when the controller exits first.
func awaitReady(ctx context.Context, cl client.Client, c *proc, name string) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := "no Ready condition yet"
	for {
		var p v1alpha1.TimeoutPolicy
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, &p); err == nil {
			for _, cond := range p.Status.Conditions {
				if cond.Type != v1alpha1.ConditionReady {
					continue
				}
				if cond.Status == metav1.ConditionTrue {
					return nil
				}
				last = fmt.Sprintf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w while waiting for TimeoutPolicy %s to be Ready (%s)", context.Cause(ctx), name, last)
		case <-c.done:
			return fmt.Errorf("the controller exited (%v) before TimeoutPolicy %s was Ready", c.err, name)
		case <-tick.C:
		}
	}
}

// newPlaybook is a Playbook as Amphitheatre makes one (metadata.name =
// spec.id = a UUID, its controller's finalizer) with annotations.
func newPlaybook(title string, annotations map[string]string, notifyWhom string) *unstructured.Unstructured {
	all := map[string]string{}
	for k, v := range annotations {
		all[k] = v
	}
	if notifyWhom != "" {
		all[notify.AnnotationNotify] = notifyWhom
	}
	return testenv.NewPlaybook(string(uuid.NewUUID()), title, all)
}

func playbookList() *unstructured.UnstructuredList {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(playbookGVK.GroupVersion().WithKind(playbookGVK.Kind + "List"))
	return list
}

// stamped is a watch event and the time it reached the demo.
type stamped struct {
	watch.Event
	at time.Time
}

// stamp forwards w's events with the time each arrived, so that the
// deletion times the story reports stay true while the narration is busy
// with something else, such as a plugin command. The channel is closed
// when w's is.
func stamp(ctx context.Context, w watch.Interface) <-chan stamped {
	out := make(chan stamped, 256)
	go func() {
		defer close(out)
		for ev := range w.ResultChan() {
			select {
			case out <- stamped{Event: ev, at: time.Now()}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// watchEnded turns the end of a watch into an error: the demo's watches
// must outlive the scene.
func watchEnded(ctx context.Context, kind string, ev watch.Event, ok bool) error {
	switch {
	case !ok && ctx.Err() != nil:
		return context.Cause(ctx)
	case !ok:
		return fmt.Errorf("the %s watch ended", kind)
	case ev.Type == watch.Error:
		return fmt.Errorf("the %s watch failed: %w", kind, apierrors.FromObject(ev.Object))
	}
	return nil
}

func formatUTC(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
