// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
)

// The scene of sleep: a Playbook idle for sleepAfter goes to sleep (its
// Deployments scaled to zero), is woken by `kubectl timeout wake`, sleeps
// again, is woken by an exec into its Pod, sleeps a third time and is
// deleted sleepDeleteAfter later.
const (
	sleepPolicy = "demo-sleep"
	sleepTitle  = "sleepy"
	sleepAfter  = 3 * time.Second
	// sleepDeleteAfter is the time asleep before the deletion; the wakes
	// come well within it.
	sleepDeleteAfter = 6 * time.Second
	// shellPod is a Pod of the Playbook's own, as `kubectl run` leaves
	// one: no sleep scales it, so there is something to exec into.
	shellPod = "shell"
	// execUser is who execs into it.
	execUser = "alice"
	// sleeps is how often the Playbook goes to sleep: once before each
	// wake, and once before its deletion.
	sleeps = 3
)

// sleep plays the scene of sleep.
func (s *story) sleep(ctx context.Context, set *set) error {
	cl := set.cl
	f := &sleepFacts{}
	s.facts.sleep = f
	policy := &v1alpha1.TimeoutPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: sleepPolicy},
		Spec: v1alpha1.TimeoutPolicySpec{
			Target:        v1alpha1.Target{APIVersion: playbookGVK.GroupVersion().String(), Kind: playbookGVK.Kind},
			Selector:      &metav1.LabelSelector{MatchLabels: map[string]string{sceneLabel: "sleep"}},
			Priority:      10,
			DefaultTTL:    v1alpha1.Duration(expiry.FormatDuration(sleepAfter)),
			Sleep:         &v1alpha1.Sleep{AfterIdle: v1alpha1.Duration(expiry.FormatDuration(sleepAfter)), DeleteAfter: v1alpha1.Duration(expiry.FormatDuration(sleepDeleteAfter))},
			Reminders:     []v1alpha1.Duration{},
			MinimumNotice: "0s",
			Notifications: v1alpha1.Notifications{Channels: []v1alpha1.ChannelReference{{Name: webhookName}}},
		},
	}
	if err := cl.Create(ctx, policy); err != nil {
		return fmt.Errorf("create TimeoutPolicy %s: %w", sleepPolicy, err)
	}
	s.n.say("TimeoutPolicy %s (priority 10) governs the Playbooks labelled %s=sleep: asleep after %s idle, deleted after %s asleep; every message to webhook %s",
		sleepPolicy, sceneLabel, policy.Spec.Sleep.AfterIdle, policy.Spec.Sleep.DeleteAfter, webhookName)
	if err := awaitReady(ctx, cl, set.c, sleepPolicy); err != nil {
		return err
	}

	w, err := cl.Watch(ctx, playbookList(), client.MatchingLabels{sceneLabel: "sleep"})
	if err != nil {
		return fmt.Errorf("watch Playbooks: %w", err)
	}
	defer w.Stop()
	seen := stamp(ctx, w)
	msgs := make(chan message, 64)
	obj := newPlaybook(sleepTitle, nil, "")
	obj.SetLabels(map[string]string{sceneLabel: "sleep"})
	set.rc.route(msgs, obj.GetName())
	if err := testenv.Deploy(ctx, cl, obj, testenv.DefaultActors); err != nil {
		return fmt.Errorf("create Playbook %s: %w", sleepTitle, err)
	}
	f.obj = obj
	ns := testenv.Namespace(obj.GetName())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: shellPod},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "shell", Image: "registry.k8s.io/pause:3.10"}}},
	}
	if err := cl.Create(ctx, pod); err != nil {
		return fmt.Errorf("create Pod %s/%s: %w", ns, shellPod, err)
	}
	if f.replicas, err = replicasIn(ctx, cl, ns); err != nil {
		return err
	}
	s.n.say("created Playbook %s: Deployments %s in %s, and Pod %s there, as `kubectl run` leaves one, which no sleep scales",
		sleepTitle, formatReplicas(f.replicas), ns, shellPod)
	if err := awaitConnectWebhook(ctx, set.cfg, set.hook); err != nil {
		return err
	}

	for f.deletedAt.IsZero() || f.count(v1alpha1.EventDeleted) == 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; %s has slept %d times and woken %d", context.Cause(ctx), sleepTitle, len(f.sleeps), len(f.wakes))
		case <-set.c.done:
			return fmt.Errorf("the controller exited (%v) during the scene of sleep", set.c.err)
		case m := <-msgs:
			f.messages = append(f.messages, m)
			s.n.say("webhook %s: %s %s", webhookName, notify.CloudEventType(m.event), sleepTitle)
			if err := s.wakeWhenTold(ctx, set, f); err != nil {
				return err
			}
		case ev, ok := <-seen:
			if err := watchEnded(ctx, "Playbook", ev.Event, ok); err != nil {
				return err
			}
			if err := s.onSleeper(ctx, set, f, ev); err != nil {
				return err
			}
		}
	}
	// The messages the deletion brings, and Events, take a moment more.
	deadline := time.After(eventGrace)
	for f.count(v1alpha1.EventExpired) == 0 {
		select {
		case m := <-msgs:
			f.messages = append(f.messages, m)
			s.n.say("webhook %s: %s %s", webhookName, notify.CloudEventType(m.event), sleepTitle)
		case <-deadline:
			s.problem("no expired message about %s within %s of its deletion", sleepTitle, eventGrace)
			f.messages = append(f.messages, set.rc.unroute(msgs, obj.GetName())...)
			return s.judgeSleep(ctx, cl, f)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	f.messages = append(f.messages, set.rc.unroute(msgs, obj.GetName())...)
	return s.judgeSleep(ctx, cl, f)
}

// onSleeper follows the Playbook through its sleeps and wakes, and wakes
// it: by the plugin after its first sleep, by an exec after its second.
func (s *story) onSleeper(ctx context.Context, set *set, f *sleepFacts, ev stamped) error {
	u, ok := ev.Object.(*unstructured.Unstructured)
	if !ok || u.GetUID() != f.obj.GetUID() {
		return nil
	}
	if ev.Type == watch.Deleted {
		f.deletedAt = ev.at
		due := f.lastSleep().Add(sleepDeleteAfter)
		s.n.say("deleted %s %s after its last sleep (due %s after it): %s", sleepTitle,
			ev.at.Sub(f.lastSleep()).Round(100*time.Millisecond), expiry.FormatDuration(sleepDeleteAfter), verdictOf(ev.at, due, due))
		return nil
	}
	st, err := expiry.ParseSleep(u.GetAnnotations()[expiry.AnnotationSleep])
	if err != nil {
		s.problem("%s: %v", sleepTitle, err)
		return nil
	}
	ns := testenv.Namespace(f.obj.GetName())
	switch {
	case st.Phase == expiry.PhaseAsleep && (len(f.sleeps) == 0 || st.Since.After(f.lastSleep())):
		from, what := f.obj.GetCreationTimestamp().Time, "its creation"
		if len(f.wakes) > 0 {
			from, what = f.wakes[len(f.wakes)-1].at, "its wake"
		}
		replicas, err := replicasIn(ctx, set.cl, ns)
		if err != nil {
			return err
		}
		f.sleeps = append(f.sleeps, sleepStep{at: st.Since, seen: ev.at, from: from, replicas: replicas, freed: st.Freed})
		s.n.say("%s went to sleep, %s after %s (due %s after it): %s; Deployments %s, %d replicas freed",
			sleepTitle, st.Since.Sub(from).Round(100*time.Millisecond), what, expiry.FormatDuration(sleepAfter),
			verdictOf(st.Since, from.Add(sleepAfter), from.Add(sleepAfter)), formatReplicas(replicas), st.Freed)
		return s.wakeWhenTold(ctx, set, f)
	case st.Phase == expiry.PhaseAwake && !st.Woke.IsZero() && (len(f.wakes) == 0 || st.Woke.After(f.wakes[len(f.wakes)-1].at)):
		replicas, err := replicasIn(ctx, set.cl, ns)
		if err != nil {
			return err
		}
		f.wakes = append(f.wakes, sleepStep{at: st.Woke, seen: ev.at, from: f.wokenAt, replicas: replicas, by: st.WokeBy})
		s.n.say("%s woke %s after it was used, by %s: Deployments %s", sleepTitle,
			ev.at.Sub(f.wokenAt).Round(100*time.Millisecond), st.WokeBy, formatReplicas(replicas))
	}
	return nil
}

// wakeWhenTold wakes the Playbook after its first sleep (by the plugin)
// and its second (by an exec), once its slept message has come, as its
// owner would: a slept message still owed when the Playbook wakes is no
// longer sent, and the scene counts one for each sleep.
func (s *story) wakeWhenTold(ctx context.Context, set *set, f *sleepFacts) error {
	n := len(f.sleeps)
	if n == 0 || n > 2 || f.wakeAsked >= n || f.count(v1alpha1.EventSlept) < n {
		return nil
	}
	f.wakeAsked = n
	ns := testenv.Namespace(f.obj.GetName())
	f.wokenAt = time.Now()
	if n == 1 {
		s.n.more("its owner is told, and needs it again:")
		return set.k.run(ctx, "wake", sleepTitle)
	}
	f.execErr = execAs(ctx, set.cfg, execUser, ns, shellPod)
	s.n.say("%s runs kubectl exec into Pod %s/%s: the API server asks the controller's webhook, which writes last-active and last-use;", execUser, ns, shellPod)
	s.n.more("the exec itself fails, as there is no kubelet here: %s", f.execErr)
	return nil
}

// execAs sends an exec into the Pod as user (a cluster administrator),
// as kubectl exec does, and returns how it failed.
func execAs(ctx context.Context, cfg *rest.Config, user, namespace, pod string) string {
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = cs.CoreV1().RESTClient().Post().Namespace(namespace).Resource("pods").Name(pod).SubResource("exec").
		Param("command", "sh").Param("stdin", "true").Param("stdout", "true").Do(ctx).Error()
	if err == nil {
		return "it succeeded"
	}
	return err.Error()
}

// replicasIn returns the replicas of each Deployment in namespace.
func replicasIn(ctx context.Context, cl client.Client, namespace string) (map[string]int32, error) {
	var list appsv1.DeploymentList
	if err := cl.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list Deployments in %s: %w", namespace, err)
	}
	out := map[string]int32{}
	for _, d := range list.Items {
		if d.Spec.Replicas != nil {
			out[d.Name] = *d.Spec.Replicas
		}
	}
	return out, nil
}

func formatReplicas(r map[string]int32) string {
	var parts []string
	for _, name := range []string{"web", "db"} {
		parts = append(parts, fmt.Sprintf("%s %d", name, r[name]))
	}
	return strings.Join(parts, ", ")
}

// verdictOf says whether something that happened at at, due at due,
// came early (before notBefore) or late (over lateAfter after due).
func verdictOf(at, notBefore, due time.Time) string {
	switch {
	case at.Before(notBefore):
		return "EARLY"
	case at.Sub(due) > lateAfter:
		return "LATE"
	}
	return "on time"
}
