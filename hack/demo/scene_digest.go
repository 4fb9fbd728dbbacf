// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/outbox"
)

// The scene of the owner's digest: three Playbooks of one owner whose
// reminder falls due within the stage's window, and one of nobody's,
// under a policy that tells owners.
const (
	digestPolicy = "demo-digest"
	digestOwner  = "dana@demo.local"
	// digestLife and digestLead: each reminder falls due 2s after its
	// Playbook's creation; the window is a quarter of the lead, 1.5s, and
	// takes the three created one after the other.
	digestLife = 8 * time.Second
	digestLead = 6 * time.Second
	// unownedTitle is the Playbook nobody owns: never in a digest.
	unownedTitle = "team-wiki"
)

// digestTitles are the owner's Playbooks.
var digestTitles = []string{"dana-api", "dana-web", "dana-docs"}

// digest plays the scene of the owner's digest.
func (s *story) digest(ctx context.Context, set *set) error {
	cl := set.cl
	f := &digestFacts{}
	s.facts.digest = f
	policy := &v1alpha1.TimeoutPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: digestPolicy},
		Spec: v1alpha1.TimeoutPolicySpec{
			Target:        v1alpha1.Target{APIVersion: playbookGVK.GroupVersion().String(), Kind: playbookGVK.Kind},
			Selector:      &metav1.LabelSelector{MatchLabels: map[string]string{sceneLabel: "digest"}},
			Priority:      10,
			DefaultTTL:    v1alpha1.Duration(expiry.FormatDuration(digestLife)),
			Reminders:     []v1alpha1.Duration{v1alpha1.Duration(expiry.FormatDuration(digestLead))},
			MinimumNotice: "0s",
			Notifications: v1alpha1.Notifications{Owner: true, Channels: []v1alpha1.ChannelReference{{Name: mailChannel, To: []string{mailTo}}}},
		},
	}
	if err := cl.Create(ctx, policy); err != nil {
		return fmt.Errorf("create TimeoutPolicy %s: %w", digestPolicy, err)
	}
	s.n.say("TimeoutPolicy %s (priority 10) governs the Playbooks labelled %s=digest: %s to live, a reminder %s ahead by mail to %s;",
		digestPolicy, sceneLabel, policy.Spec.DefaultTTL, digestLead, mailTo)
	s.n.more("notifications.owner: the owner each Playbook's %s annotation names is told too, their reminders of one stage in one digest", notify.AnnotationOwner)
	s.n.more("whose window is a quarter of the lead: %s", outbox.Window(digestLead))
	if err := awaitReady(ctx, cl, set.c, digestPolicy); err != nil {
		return err
	}

	w, err := cl.Watch(ctx, playbookList(), client.MatchingLabels{sceneLabel: "digest"})
	if err != nil {
		return fmt.Errorf("watch Playbooks: %w", err)
	}
	defer w.Stop()
	gone := stamp(ctx, w)
	msgs := make(chan message, 64)
	for _, title := range append(slices.Clone(digestTitles), unownedTitle) {
		var ann map[string]string
		if title != unownedTitle {
			ann = map[string]string{notify.AnnotationOwner: digestOwner}
		}
		obj := newPlaybook(title, ann, "")
		obj.SetLabels(map[string]string{sceneLabel: "digest"})
		set.rc.route(msgs, obj.GetName())
		if err := cl.Create(ctx, obj); err != nil {
			return fmt.Errorf("create Playbook %s: %w", title, err)
		}
		f.cast = append(f.cast, &digestRole{title: title, owned: title != unownedTitle, obj: obj})
	}
	s.n.say("created Playbooks %s, owned by %s, and %s, owned by nobody; each reminder falls due %s after its creation",
		strings.Join(digestTitles, ", "), digestOwner, unownedTitle, digestLife-digestLead)

	var grace <-chan time.Time
	for graceOver := false; f.pending() > 0 || (!f.settled() && !graceOver); {
		if f.pending() == 0 && grace == nil {
			grace = time.After(eventGrace)
		}
		select {
		case <-grace:
			graceOver = true
		case <-ctx.Done():
			return fmt.Errorf("%w during the scene of the owner's digest", context.Cause(ctx))
		case <-set.c.done:
			return fmt.Errorf("the controller exited (%v) during the scene of the owner's digest", set.c.err)
		case m := <-msgs:
			s.onDigestMail(f, m)
		case ev, ok := <-gone:
			if err := watchEnded(ctx, "Playbook", ev.Event, ok); err != nil {
				return err
			}
			u, isObj := ev.Object.(*unstructured.Unstructured)
			if r := f.role(u); isObj && ev.Type == watch.Deleted && r != nil && r.deletedAt.IsZero() {
				r.deletedAt = ev.at
				due := r.obj.GetCreationTimestamp().Add(digestLife)
				s.n.say("deleted %s, %s after its expiry: %s", r.title, ev.at.Sub(due).Round(time.Millisecond), verdictOf(ev.at, due, due))
			}
		}
	}
	// Anything more would come within a moment: a digest twice, say.
	for more := time.After(time.Second); more != nil; {
		select {
		case m := <-msgs:
			s.onDigestMail(f, m)
		case <-more:
			more = nil
		}
	}
	var names []string
	for _, r := range f.cast {
		names = append(names, r.obj.GetName())
	}
	f.mails = append(f.mails, set.rc.unroute(msgs, names...)...)
	s.judgeDigest(f)
	return nil
}

// onDigestMail tells of a mail about the scene's Playbooks.
func (s *story) onDigestMail(f *digestFacts, m message) {
	f.mails = append(f.mails, m)
	s.n.say("mail to %s: %s", strings.Join(m.to, ", "), m.subject)
	if isDigest(m) {
		for _, l := range digestItems(m) {
			title := "?"
			for _, r := range f.cast {
				if strings.Contains(l, r.obj.GetName()) {
					title = r.title
				}
			}
			s.n.more("  %s   <- %s", l, title)
		}
	}
}

// isDigest reports whether m is an owner's digest: a reminder to the
// owner alone.
func isDigest(m message) bool {
	return m.via == viaMail && m.event == v1alpha1.EventReminder && slices.Equal(m.to, []string{digestOwner})
}

// digestItems are the lines of a digest that each list a Playbook.
func digestItems(m message) []string {
	var items []string
	for _, l := range strings.Split(m.text, "\n") {
		if strings.HasPrefix(l, "- "+playbookGVK.Kind+" ") {
			items = append(items, l)
		}
	}
	return items
}
