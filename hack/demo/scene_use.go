// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/plugin"
)

// The scene of lifetimes that follow use, a maximum, and a keep that
// is refused. Its policy outranks the first scene's and selects its own
// Playbooks by label.
const (
	usePolicy = "demo-use"
	useIdle   = 3 * time.Second
	useMax    = 9 * time.Second
	// touchEvery is how often the used Playbook is used: well within
	// idleTTL, well past idleTTL/20.
	touchEvery = time.Second
)

// useRole is a Playbook of the scenes on use and on links and when it may go.
type useRole struct {
	title       string
	annotations map[string]string
	obj         *unstructured.Unstructured
	// notBefore is the earliest it may be deleted; at most lateAfter
	// past its expected deletion counts as on time.
	notBefore, expected time.Time
	deletedAt           time.Time
}

// useAct shows a Playbook in use outliving its idle twin until the
// policy's maximum, an extension past the maximum refused by the plugin and
// clamped by the controller, and a keep refused by the policy.
func (s *story) useAct(ctx context.Context, set *set) error {
	cl := set.cl
	policy := &v1alpha1.TimeoutPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: usePolicy},
		Spec: v1alpha1.TimeoutPolicySpec{
			Target:        v1alpha1.Target{APIVersion: playbookGVK.GroupVersion().String(), Kind: playbookGVK.Kind},
			Selector:      &metav1.LabelSelector{MatchLabels: map[string]string{sceneLabel: "use"}},
			Priority:      10,
			DefaultTTL:    v1alpha1.Duration(expiry.FormatDuration(useIdle)),
			IdleTTL:       v1alpha1.Duration(expiry.FormatDuration(useIdle)),
			MaxTTL:        v1alpha1.Duration(expiry.FormatDuration(useMax)),
			Keep:          v1alpha1.KeepForbidden,
			Reminders:     []v1alpha1.Duration{},
			MinimumNotice: "0s",
		},
	}
	if err := cl.Create(ctx, policy); err != nil {
		return fmt.Errorf("create TimeoutPolicy %s: %w", usePolicy, err)
	}
	s.n.say("TimeoutPolicy %s (priority 10) governs the Playbooks labelled %s=use", usePolicy, sceneLabel)
	s.n.more("idleTTL %s: each lives until %s after its last use; maxTTL %s: never past %s from creation; keep: Forbidden",
		policy.Spec.IdleTTL, policy.Spec.IdleTTL, policy.Spec.MaxTTL, policy.Spec.MaxTTL)
	if err := awaitReady(ctx, cl, set.c, usePolicy); err != nil {
		return err
	}

	cast := []*useRole{
		{title: "used"},
		{title: "idle-twin"},
		{title: "extended-past-max"},
		{title: "keep-refused", annotations: map[string]string{expiry.AnnotationKeep: "true"}},
	}
	s.useCast = cast
	list := playbookList()
	w, err := cl.Watch(ctx, list, client.MatchingLabels{sceneLabel: "use"})
	if err != nil {
		return fmt.Errorf("watch Playbooks: %w", err)
	}
	defer w.Stop()
	gone := stamp(ctx, w)
	for _, r := range cast {
		r.obj = newPlaybook(r.title, r.annotations, "")
		r.obj.SetLabels(map[string]string{sceneLabel: "use"})
		if err := cl.Create(ctx, r.obj); err != nil {
			return fmt.Errorf("create Playbook %s: %w", r.title, err)
		}
		created := r.obj.GetCreationTimestamp().Time
		r.notBefore, r.expected = created.Add(useIdle), created.Add(useIdle)
		if r.title == "used" || r.title == "extended-past-max" {
			r.notBefore, r.expected = created.Add(useMax), created.Add(useMax)
		}
	}
	s.n.say("created Playbooks used, idle-twin, extended-past-max and keep-refused (keep=true); used is used every %s", touchEvery)

	// The plugin refuses what the policy forbids, each with its own exit
	// code; what is written by hand, the controller clamps or ignores.
	if err := s.kubectl.expect(ctx, plugin.ExitPastMaximum, "extend", "extended-past-max", "1m"); err != nil {
		return fmt.Errorf("extend past maxTTL: %w", err)
	}
	if err := s.kubectl.expect(ctx, plugin.ExitKeepForbidden, "keep", "keep-refused"); err != nil {
		return fmt.Errorf("keep under keep: Forbidden: %w", err)
	}
	extended := cast[2]
	past := extended.obj.GetCreationTimestamp().Add(time.Minute).UTC().Format(time.RFC3339)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, expiry.AnnotationExpiresAt, past)
	if err := cl.Patch(ctx, extended.obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("annotate extended-past-max: %w", err)
	}
	s.n.say("annotated extended-past-max by hand with expires-at %s, past its maximum: the controller clamps it, with a Warning Event", past)

	touch := time.NewTicker(touchEvery)
	defer touch.Stop()
	explained := false
	for remaining := len(cast); remaining > 0; {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w during the scene on use", context.Cause(ctx))
		case <-touch.C:
			used := cast[0]
			if !used.deletedAt.IsZero() {
				continue
			}
			// As Amphitheatre's API server would on use.
			now := time.Now().UTC().Truncate(time.Second).Add(time.Second).Format(time.RFC3339)
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, expiry.AnnotationLastActive, now)
			if err := cl.Patch(ctx, used.obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil && !strings.Contains(err.Error(), "not found") {
				return fmt.Errorf("touch used: %w", err)
			}
			if !explained && !cast[1].deletedAt.IsZero() {
				explained = true
				s.n.say("idle-twin is gone; used is still in use:")
				if err := s.kubectl.run(ctx, "explain", "used"); err != nil {
					return err
				}
			}
		case ev, ok := <-gone:
			if !ok {
				return fmt.Errorf("the watch of the scene on use's Playbooks ended")
			}
			u, isObj := ev.Object.(*unstructured.Unstructured)
			if !isObj || ev.Type != watch.Deleted {
				continue
			}
			for _, r := range cast {
				if r.obj.GetUID() != u.GetUID() || !r.deletedAt.IsZero() {
					continue
				}
				r.deletedAt = ev.at
				remaining--
				lag := ev.at.Sub(r.expected)
				verdict := "on time"
				switch {
				case ev.at.Before(r.notBefore):
					verdict = "EARLY"
					s.early++
					s.problem("%s deleted %s before %s", r.title, r.notBefore.Sub(ev.at).Round(time.Millisecond), formatUTC(r.notBefore))
				case lag > lateAfter:
					verdict = "LATE"
					s.problem("%s deleted %s after %s", r.title, lag.Round(time.Millisecond), formatUTC(r.expected))
				}
				s.n.say("%s deleted %s after creation (%s after it was due): %s", r.title,
					ev.at.Sub(r.obj.GetCreationTimestamp().Time).Round(100*time.Millisecond), lag.Round(time.Millisecond), verdict)
			}
		}
	}
	for _, r := range []*useRole{cast[2], cast[3]} {
		if !s.warned(ctx, cl, r.obj) {
			s.problem("no InvalidTimeout Warning Event about %s", r.title)
		}
	}
	s.n.say("used outlived its idle twin by %s and went at its maximum; the keep and the extension past the maximum were refused",
		cast[0].deletedAt.Sub(cast[1].deletedAt).Round(100*time.Millisecond))
	return nil
}

// warned reports whether an InvalidTimeout Warning Event was recorded
// about obj.
func (s *story) warned(ctx context.Context, cl client.Client, obj *unstructured.Unstructured) bool {
	var events eventsv1.EventList
	if err := cl.List(ctx, &events, client.InNamespace(eventNamespace)); err != nil {
		return false
	}
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning && e.Reason == kube.ReasonInvalidTimeout && e.Regarding.UID == obj.GetUID() {
			return true
		}
	}
	return false
}
