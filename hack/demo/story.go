// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// eventNamespace receives the Events of cluster-scoped objects such as
// Playbooks; the demo passes it to the controller and watches it.
const eventNamespace = metav1.NamespaceDefault

const (
	policyName = "demo"
	// extendAfter leaves the 10s Playbook half its life before the
	// extension, so the patch always lands before the controller acts.
	extendAfter = 5 * time.Second
	// lateAfter is how far past its expiry a deletion still counts as on
	// time; the controller normally deletes within milliseconds.
	lateAfter = 5 * time.Second
	// eventGrace bounds the wait for the last Deleted Events, which are
	// sent just after the deletions they report.
	eventGrace = 5 * time.Second
)

var playbookGVK = schema.GroupVersionKind{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook"}

// role is one Playbook of the story.
type role struct {
	title       string
	annotations map[string]string
	obj         *unstructured.Unstructured
	life        expiry.Lifetime
	deleted     bool
	deletedNote bool
}

// story is the demo's cast and what became of it.
type story struct {
	n          *narrator
	cast       []*role
	defaultTTL time.Duration

	onTime, late, early, lost int
}

func (s *story) play(ctx context.Context, cfg *rest.Config, c *proc) error {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}

	// Watch before creating anything, so nothing is missed.
	playbooks, err := cl.Watch(ctx, playbookList())
	if err != nil {
		return fmt.Errorf("watch Playbooks: %w", err)
	}
	defer playbooks.Stop()
	events, err := cl.Watch(ctx, &eventsv1.EventList{}, client.InNamespace(eventNamespace))
	if err != nil {
		return fmt.Errorf("watch Events: %w", err)
	}
	defer events.Stop()

	policy := &v1alpha1.TimeoutPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: v1alpha1.TimeoutPolicySpec{
			Target:        v1alpha1.Target{APIVersion: playbookGVK.GroupVersion().String(), Kind: playbookGVK.Kind},
			DefaultTTL:    "40s",
			Reminders:     []v1alpha1.Duration{},
			MinimumNotice: "0s",
		},
	}
	if err := cl.Create(ctx, policy); err != nil {
		return fmt.Errorf("create TimeoutPolicy %s: %w", policyName, err)
	}
	sched, err := expiry.NewSchedule(policy.Spec)
	if err != nil {
		return err
	}
	s.defaultTTL = sched.DefaultTTL
	s.n.say("created TimeoutPolicy %s: Playbooks live %s unless their annotations say otherwise", policyName, policy.Spec.DefaultTTL)
	if err := waitReady(ctx, cl, c); err != nil {
		return err
	}
	s.n.say("the controller has taken the policy up: TimeoutPolicy %s is Ready", policyName)

	s.cast = []*role{
		{title: "default-ttl"},
		{title: "ttl-15s", annotations: map[string]string{expiry.AnnotationTTL: "15s"}},
		{title: "expires-at", annotations: map[string]string{expiry.AnnotationExpiresAt: time.Now().Add(25 * time.Second).UTC().Format(time.RFC3339)}},
		{title: "legacy-ttl-20", annotations: map[string]string{expiry.AnnotationLegacyTTL: "20"}},
		{title: "keep-me", annotations: map[string]string{expiry.AnnotationKeep: "true"}},
		{title: "invalid-ttl", annotations: map[string]string{expiry.AnnotationTTL: "two weeks"}},
		// Last, so that the extension comes extendAfter after its creation
		// however slowly the API server takes the others.
		{title: "extend-me", annotations: map[string]string{expiry.AnnotationTTL: "10s"}},
	}
	extended := s.cast[len(s.cast)-1]
	for _, r := range s.cast {
		r.obj = newPlaybook(r.title, r.annotations)
		if err := cl.Create(ctx, r.obj); err != nil {
			return fmt.Errorf("create Playbook %s: %w", r.title, err)
		}
		r.life = s.lifetime(r.obj)
	}
	extendAt := time.Now().Add(extendAfter)
	s.table(extended, extendAt)

	extend := time.After(time.Until(extendAt))
	var grace <-chan time.Time
	graceOver := false
	for len(s.pending()) > 0 || (!s.allNoted() && !graceOver) {
		if len(s.pending()) == 0 && grace == nil {
			grace = time.After(eventGrace)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; still waiting for %s", context.Cause(ctx), s.waiting())
		case <-c.done:
			return fmt.Errorf("the controller exited (%v); still waiting for %s", c.err, s.waiting())
		case <-grace:
			graceOver = true
		case <-extend:
			if err := s.extend(ctx, cl, extended); err != nil {
				return err
			}
		case ev, ok := <-playbooks.ResultChan():
			if err := s.onPlaybook(ctx, ev, ok); err != nil {
				return err
			}
		case ev, ok := <-events.ResultChan():
			if err := s.onEvent(ctx, ev, ok); err != nil {
				return err
			}
		}
	}
	return s.finale(ctx, cl)
}

func (s *story) lifetime(u *unstructured.Unstructured) expiry.Lifetime {
	return expiry.Compute(u.GetCreationTimestamp().Time, u.GetAnnotations(), s.defaultTTL)
}

func (s *story) table(extended *role, extendAt time.Time) {
	s.n.say("created %d Playbooks; the controller should delete them as follows:", len(s.cast))
	rows := []string{"TITLE\tANNOTATION\tEXPIRES\tWHY"}
	for _, r := range s.cast {
		ann := "-"
		for k, v := range r.annotations { // one at most
			ann = k + ": " + v
		}
		when, why := "never", "kept"
		if !r.life.Keep {
			when = s.n.at(r.life.ExpiresAt)
			why = fmt.Sprintf("%s after creation, set by %s", r.life.ExpiresAt.Sub(r.obj.GetCreationTimestamp().Time), source(r.life))
		}
		switch {
		case len(r.life.Invalid) > 0:
			why += ", as the annotation is invalid: expect a Warning"
		case r == extended:
			why += fmt.Sprintf(", until it is extended to 30s at %s", s.n.at(extendAt))
		}
		rows = append(rows, r.title+"\t"+ann+"\t"+when+"\t"+why)
	}
	s.n.table(rows)
}

func source(l expiry.Lifetime) string {
	switch l.Source {
	case expiry.SourceDefault:
		return "the policy's defaultTTL"
	case expiry.AnnotationLegacyTTL:
		return "the legacy bare ttl (seconds)"
	}
	return l.Source
}

func (s *story) extend(ctx context.Context, cl client.Client, r *role) error {
	was := r.life.ExpiresAt
	orig := r.obj.DeepCopy()
	ann := r.obj.GetAnnotations()
	ann[expiry.AnnotationTTL] = "30s"
	r.obj.SetAnnotations(ann)
	if err := cl.Patch(ctx, r.obj, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("extend Playbook %s: %w", r.title, err)
	}
	r.life = s.lifetime(r.obj)
	s.n.say("extending %s: a merge patch sets %s from 10s to 30s; it now expires at %s instead of %s",
		r.title, expiry.AnnotationTTL, s.n.at(r.life.ExpiresAt), s.n.at(was))
	return nil
}

func (s *story) onPlaybook(ctx context.Context, ev watch.Event, ok bool) error {
	if err := watchEnded(ctx, "Playbook", ev, ok); err != nil {
		return err
	}
	if ev.Type != watch.Deleted {
		return nil
	}
	now := time.Now()
	u, _ := ev.Object.(*unstructured.Unstructured)
	r := s.role(u.GetName())
	if r == nil {
		return nil
	}
	r.deleted = true
	// The object as deleted, so the verdict counts any late edit to it.
	life := s.lifetime(u)
	lag := now.Sub(life.ExpiresAt)
	switch {
	case life.Keep:
		s.lost++
		s.n.say("deleted %s although it is kept: that is a bug", r.title)
	case lag < 0:
		s.early++
		s.n.say("deleted %s EARLY (expires at %s, deleted %d ms before)", r.title, s.n.at(life.ExpiresAt), -lag.Milliseconds())
	case lag > lateAfter:
		s.late++
		s.n.say("deleted %s LATE (expired at %s, deleted %d ms after)", r.title, s.n.at(life.ExpiresAt), lag.Milliseconds())
	default:
		s.onTime++
		s.n.say("deleted %s (expired at %s, deleted %d ms after)", r.title, s.n.at(life.ExpiresAt), lag.Milliseconds())
	}
	return nil
}

func (s *story) onEvent(ctx context.Context, ev watch.Event, ok bool) error {
	if err := watchEnded(ctx, "Event", ev, ok); err != nil {
		return err
	}
	e, _ := ev.Object.(*eventsv1.Event)
	if ev.Type != watch.Added || e == nil {
		return nil
	}
	who := e.Regarding.Kind + "/" + e.Regarding.Name
	if r := s.role(e.Regarding.Name); r != nil {
		who = r.title
		if e.Reason == controller.ReasonDeleted {
			r.deletedNote = true
		}
	}
	s.n.say("event %-7s %-14s %s: %s", e.Type, e.Reason, who, e.Note)
	return nil
}

// watchEnded turns the end of a watch into an error: the demo's watches
// must outlive the story.
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

func (s *story) finale(ctx context.Context, cl client.Client) error {
	s.n.say("every Playbook that expires is gone; the final list:")
	list := playbookList()
	if err := cl.List(ctx, list); err != nil {
		return fmt.Errorf("list Playbooks: %w", err)
	}
	rows := []string{"NAME\tTITLE\tANNOTATIONS\tAGE"}
	left := map[string]bool{}
	for _, u := range list.Items {
		left[u.GetName()] = true
		title, _, _ := unstructured.NestedString(u.Object, "spec", "title")
		var anns []string
		for k, v := range u.GetAnnotations() {
			anns = append(anns, k+"="+v)
		}
		sort.Strings(anns)
		age := time.Since(u.GetCreationTimestamp().Time).Round(time.Second)
		rows = append(rows, u.GetName()+"\t"+title+"\t"+strings.Join(anns, ",")+"\t"+age.String())
	}
	s.n.table(rows)
	for _, r := range s.cast {
		if r.life.Keep && left[r.obj.GetName()] {
			s.n.say("%s is still there, as %s asks", r.title, expiry.AnnotationKeep)
		}
	}
	return nil
}

func (s *story) role(name string) *role {
	for _, r := range s.cast {
		if r.obj.GetName() == name {
			return r
		}
	}
	return nil
}

// allNoted reports whether every deletion has been followed by its Event.
func (s *story) allNoted() bool {
	for _, r := range s.cast {
		if r.deleted && !r.deletedNote {
			return false
		}
	}
	return true
}

// pending lists the Playbooks that should be deleted and are not yet.
func (s *story) pending() []string {
	var titles []string
	for _, r := range s.cast {
		if !r.life.Keep && !r.deleted {
			titles = append(titles, r.title)
		}
	}
	return titles
}

func (s *story) waiting() string {
	if p := s.pending(); len(p) > 0 {
		return strings.Join(p, ", ")
	}
	return "the last Deleted Events"
}

func (s *story) summary() string {
	kept, pending := 0, len(s.pending())
	for _, r := range s.cast {
		if r.life.Keep && !r.deleted {
			kept++
		}
	}
	line := fmt.Sprintf("demo: %d deleted on time, %d kept, %d early", s.onTime, kept, s.early)
	if s.late > 0 {
		line += fmt.Sprintf(", %d late (over %s after expiry)", s.late, lateAfter)
	}
	if s.lost > 0 {
		line += fmt.Sprintf(", %d kept but deleted", s.lost)
	}
	if pending > 0 {
		line += fmt.Sprintf(", %d not deleted yet", pending)
	}
	return line
}

// verdict fails the demo on what must never happen: a deletion before
// expiry, or a kept Playbook deleted.
func (s *story) verdict() error {
	if s.early > 0 || s.lost > 0 {
		return errors.New("the controller deleted Playbooks it should not have: see above")
	}
	return nil
}

func waitReady(ctx context.Context, cl client.Client, c *proc) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := "no Ready condition yet"
	for {
		var p v1alpha1.TimeoutPolicy
		if err := cl.Get(ctx, client.ObjectKey{Name: policyName}, &p); err == nil {
			cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			if cond != nil && cond.Status == metav1.ConditionTrue {
				return nil
			}
			if cond != nil {
				last = fmt.Sprintf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w while waiting for TimeoutPolicy %s to be Ready (%s)", context.Cause(ctx), policyName, last)
		case <-c.done:
			return fmt.Errorf("the controller exited (%v) before TimeoutPolicy %s was Ready", c.err, policyName)
		case <-tick.C:
		}
	}
}

// newPlaybook is a minimal valid Playbook, named the way Amphitheatre
// names them: metadata.name = spec.id = a UUID.
func newPlaybook(title string, annotations map[string]string) *unstructured.Unstructured {
	id := string(uuid.NewUUID())
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"id":    id,
			"title": title,
			"preface": map[string]any{
				"repository": map[string]any{"repo": "https://github.com/amphitheatre-app/amp-example-go"},
			},
		},
	}}
	u.SetGroupVersionKind(playbookGVK)
	u.SetName(id)
	u.SetAnnotations(annotations)
	return u
}

func playbookList() *unstructured.UnstructuredList {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(playbookGVK.GroupVersion().WithKind(playbookGVK.Kind + "List"))
	return list
}
