// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
)

// The first scene: Playbooks with lifetimes of every kind, reminded by
// mail and webhook and deleted on time, under the policy every Playbook
// falls under unless another outranks it.
const (
	policyName = "demo"
	// minimumNotice is longer than the shortest reminder lead (6s), so
	// that a Playbook whose only reminder is the 6s one is kept a little
	// past its expiry. Every other Playbook has its 12s reminder and is
	// deleted on time.
	minimumNotice = "8s"
	// The recipients of the notify annotation.
	notifyWhom = "alice@demo.local, #team-amp"
)

// role is one Playbook of the story.
type role struct {
	title string
	// annotations set the lifetime: one at most.
	annotations map[string]string
	// notify is the notify annotation's value, when it has one.
	notify string
	obj    *unstructured.Unstructured
	life   expiry.Lifetime
	// stages are the reminder leads that apply to the current expiry;
	// due counts the reminders owed on each channel over every expiry
	// the Playbook has had.
	stages []time.Duration
	due    int

	deleted   bool
	deletedAt time.Time
	// The Expired and Deleted Events seen; the recorder sends them
	// independently, so either may come first.
	expiredNote, deletedNote bool
	// noticeAt is when its first reminder reached the demo; postponedTo
	// is the deletion time a postponed message announced.
	noticeAt    time.Time
	postponedTo time.Time
	// extendedAt and wasExpiring are when it was extended and its expiry
	// before that: a reminder falls due against the expiry it was sent for.
	extendedAt, wasExpiring time.Time
	// got are the messages about it, duplicates left out.
	got []message
}

// count returns how many messages about r came via a channel about an
// event type, only those before t when t is set.
func (r *role) count(via string, event v1alpha1.EventType, before time.Time) int {
	n := 0
	for _, m := range r.got {
		if m.via == via && m.event == event && (before.IsZero() || m.arrived.Before(before)) {
			n++
		}
	}
	return n
}

// remind is the first scene: the policy, the cast, what the plugin
// makes of them, then the reminders and the deletions as they come, with
// the second scene, the extension, on the way.
func (s *story) remind(ctx context.Context, set *set) error {
	cl, c, rc := set.cl, set.c, set.rc
	// Watch before creating anything, so nothing is missed.
	w, err := cl.Watch(ctx, playbookList())
	if err != nil {
		return fmt.Errorf("watch Playbooks: %w", err)
	}
	defer w.Stop()
	playbooks := stamp(ctx, w)
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
			Reminders:     []v1alpha1.Duration{"12s", "6s"},
			MinimumNotice: minimumNotice,
			Notifications: v1alpha1.Notifications{Channels: []v1alpha1.ChannelReference{
				{Name: mailChannel, To: []string{mailTo}},
				{Name: webhookName},
			}},
			Deletion: v1alpha1.Deletion{Archive: true},
		},
	}
	if err := cl.Create(ctx, policy); err != nil {
		return fmt.Errorf("create TimeoutPolicy %s: %w", policyName, err)
	}
	if s.schedule, err = expiry.NewSchedule(policy.Spec); err != nil {
		return err
	}
	s.n.say("created TimeoutPolicy %s: Playbooks live %s unless their annotations say otherwise", policyName, policy.Spec.DefaultTTL)
	s.n.more("stamped with its author %s, who may use both channels (a cluster administrator holds every verb, use included)",
		policy.Annotations[v1alpha1.AnnotationAuthor])
	s.n.more("reminders %s before expiry, by mail to %s (SMTP %s) and as signed CloudEvents to webhook %s",
		joinDurations(s.schedule.Reminders, " and "), mailTo, rc.mailAddr(), webhookName)
	s.n.more("minimumNotice %s: nothing is deleted sooner than %s after its first reminder reached someone", minimumNotice, minimumNotice)
	s.n.more("deletion.archive: each Playbook's manifest goes to the archive before it is deleted")
	if err := awaitReady(ctx, cl, c, policyName); err != nil {
		return err
	}
	s.n.say("the controller has taken the policy up: TimeoutPolicy %s is Ready", policyName)

	s.cast = []*role{
		{title: "default-ttl"},
		{title: "ttl-15s", annotations: map[string]string{expiry.AnnotationTTL: "15s"}, notify: notifyWhom},
		{title: "expires-at", annotations: map[string]string{expiry.AnnotationExpiresAt: time.Now().Add(25 * time.Second).UTC().Format(time.RFC3339)}},
		{title: "legacy-ttl-20", annotations: map[string]string{expiry.AnnotationLegacyTTL: "20"}},
		{title: "keep-me", annotations: map[string]string{expiry.AnnotationKeep: "true"}},
		{title: "invalid-ttl", annotations: map[string]string{expiry.AnnotationTTL: "two weeks"}},
		{title: "short-notice", annotations: map[string]string{expiry.AnnotationTTL: "8s"}},
		{title: "too-short", annotations: map[string]string{expiry.AnnotationTTL: "4s"}},
		// Last, so that the extension comes extendAfter after its creation
		// however slowly the API server takes the others.
		{title: "extend-me", annotations: map[string]string{expiry.AnnotationTTL: "10s"}, notify: notifyWhom},
	}
	extended := s.cast[len(s.cast)-1]
	for _, r := range s.cast {
		r.obj = newPlaybook(r.title, r.annotations, r.notify)
		// As Amphitheatre would: its namespace, Actors, Deployments and
		// Services, which kube-controller-manager turns into Pods.
		if err := testenv.Deploy(ctx, cl, r.obj, testenv.DefaultActors); err != nil {
			return fmt.Errorf("create Playbook %s: %w", r.title, err)
		}
		r.life = s.lifetime(r.obj)
		r.stages = s.stagesOf(r.life, r.obj.GetCreationTimestamp().Time)
		r.due = len(r.stages)
	}
	extendAt := time.Now().Add(extendAfter)
	extend := time.After(time.Until(extendAt))
	s.table(extended, extendAt)
	s.n.say("what the plugin makes of them, from the same code the controller decides with:")
	if err := s.kubectl.run(ctx, "list"); err != nil {
		return err
	}
	if err := s.kubectl.decode(ctx, &s.facts.listed, "list"); err != nil {
		return err
	}
	s.n.say("why short-notice will outlive its expiry:")
	if err := s.kubectl.run(ctx, "explain", "short-notice"); err != nil {
		return err
	}
	if err := s.kubectl.decode(ctx, &s.facts.explained, "explain", "short-notice"); err != nil {
		return err
	}

	// The cast is listed: the scenes played alongside may make theirs.
	s.cue()

	var grace <-chan time.Time
	graceOver := false
	for len(s.pending()) > 0 || (!s.settled() && !graceOver) {
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
			if err := s.extension(ctx, cl, extended); err != nil {
				return err
			}
		case m := <-rc.messages:
			s.onMessage(m)
		case ev, ok := <-playbooks:
			if err := s.onPlaybook(ctx, ev, ok); err != nil {
				return err
			}
		case ev, ok := <-events.ResultChan():
			if err := s.onEvent(ctx, ev, ok); err != nil {
				return err
			}
		}
	}
	s.n.say("every Playbook that expires is gone")
	s.reached()
	return nil
}

func (s *story) lifetime(u *unstructured.Unstructured) expiry.Lifetime {
	return s.schedule.Lifetime(u.GetCreationTimestamp().Time, u.GetAnnotations(), time.Now())
}

// stagesOf returns the reminder leads that apply to a lifetime that took
// effect at since (the creation, or an extension), as the controller reads
// them: those that fall due at or after it. A Playbook that lives less than
// a lead gets no reminder for it.
func (s *story) stagesOf(l expiry.Lifetime, since time.Time) []time.Duration {
	if l.Keep {
		return nil
	}
	return expiry.NoticeOf(expiry.Input{Life: l, Schedule: s.schedule, Record: &expiry.Record{ExpiresAt: l.ExpiresAt, Since: since}}).Stages
}

func (s *story) table(extended *role, extendAt time.Time) {
	s.n.say("created %d Playbooks; the controller should remind people and delete them as follows:", len(s.cast))
	rows := []string{"TITLE\tANNOTATION\tEXPIRES\tREMINDERS\tWHY"}
	for _, r := range s.cast {
		ann := "-"
		for k, v := range r.annotations { // one at most
			ann = k + ": " + v
		}
		when, reminders, why := "never", "-", "kept"
		if !r.life.Keep {
			when = s.n.at(r.life.ExpiresAt)
			reminders = s.dueTimes(r)
			why = fmt.Sprintf("%s after creation, set by %s", r.life.ExpiresAt.Sub(r.obj.GetCreationTimestamp().Time), source(r.life))
		}
		switch {
		case r.life.Keep:
		case len(r.life.Invalid) > 0:
			why += ", as the annotation is invalid: expect a Warning"
		case r == extended:
			why += fmt.Sprintf(", until it is extended by %s at %s", extendBy, s.n.at(extendAt))
		case len(r.stages) == 0:
			why += fmt.Sprintf("; shorter than the shortest lead (%s): no reminder applies, so no notice is owed", expiry.FormatDuration(s.shortestLead()))
		case r.stages[0] < s.schedule.MinimumNotice:
			why += fmt.Sprintf("; its first reminder leaves less than %s of notice: expect a postponement to about %s",
				minimumNotice, s.n.at(r.life.ExpiresAt.Add(-r.stages[0]).Add(s.schedule.MinimumNotice)))
		}
		rows = append(rows, r.title+"\t"+ann+"\t"+when+"\t"+reminders+"\t"+why)
	}
	s.n.table(rows)

	var told []string
	for _, r := range s.cast {
		if r.notify != "" {
			told = append(told, r.title)
		}
	}
	s.n.say("%s also carry %s: %q", strings.Join(told, " and "), notify.AnnotationNotify, notifyWhom)
	s.n.more("alice@demo.local gets their mail too, as a blind copy; webhooks never carry addresses;")
	s.n.more("#team-amp names a Slack channel, and the policy configures no Slack: nothing is posted")
}

// dueTimes lists when r's reminders fall due: "12s at +9.6s, 6s at +15.6s".
func (s *story) dueTimes(r *role) string {
	if len(r.stages) == 0 {
		return "none"
	}
	var parts []string
	for _, lead := range r.stages {
		parts = append(parts, expiry.FormatDuration(lead)+" at "+s.n.at(r.life.ExpiresAt.Add(-lead)))
	}
	return strings.Join(parts, ", ")
}

func (s *story) shortestLead() time.Duration {
	return s.schedule.Reminders[len(s.schedule.Reminders)-1]
}

func joinDurations(ds []time.Duration, sep string) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, expiry.FormatDuration(d))
	}
	return strings.Join(parts, sep)
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
