// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
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
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
)

// eventNamespace receives the Events of cluster-scoped objects such as
// Playbooks; the demo passes it to the controller and watches it.
const eventNamespace = metav1.NamespaceDefault

const (
	policyName = "demo"
	// minimumNotice is longer than the shortest reminder lead (6s), so
	// that a Playbook whose only reminder is the 6s one is kept a little
	// past its expiry. Every other Playbook has its 12s reminder and is
	// deleted on time.
	minimumNotice = "8s"
	// The webhook receiver and the Secret with its signing key.
	webhookName     = "demo-receiver"
	mailChannel     = "demo-mail"
	secretNamespace = "timeout-system"
	secretName      = "demo-webhook"
	secretKey       = "key"
	// The policy's recipients, and those of the notify annotation.
	mailFrom   = "timeout-controller@demo.local"
	mailTo     = "platform@demo.local"
	notifyWhom = "alice@demo.local, #team-amp"
	// extendAfter comes 2s after the 10s Playbook's 6s reminder and 4s
	// before its expiry, so the controller reminds it of the old date and
	// the plugin's patch always lands before it would delete it.
	extendAfter = 6 * time.Second
	// extendBy is how much later `kubectl timeout extend` moves its expiry.
	extendBy = "20s"
	// lateAfter is how far past its expiry (or postponed deletion time) a
	// deletion still counts as on time; the controller normally deletes
	// within milliseconds.
	lateAfter = 5 * time.Second
	// eventGrace bounds the wait for the last Expired and Deleted Events and
	// messages, which are sent just after the deletions they report.
	eventGrace = 5 * time.Second
)

var playbookGVK = schema.GroupVersionKind{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook"}

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

// story is the demo's cast and what became of it.
type story struct {
	n        *narrator
	cast     []*role
	schedule expiry.Schedule
	files    *workdir
	kubectl  *kubectl

	onTime, late, early, lost int

	// seen holds the channel and id of every message, to tell duplicates.
	seen       map[string]bool
	reminders  map[string]int
	duplicates int
	refused    int
	// problems are what went wrong with the reminders, the audit trail or
	// the archive, found at the end.
	problems []string

	// useCast are the second act's Playbooks, linkCast the third's.
	useCast  []*useRole
	linkCast []*useRole
	// facts are what the demo gathered for its results, besides what it
	// printed; results completes them.
	facts results
}

func (s *story) play(ctx context.Context, cfg *rest.Config, c *proc, rc *receivers) error {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}

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

	if err := createSecret(ctx, cl, rc.secret); err != nil {
		return err
	}
	s.n.say("created Secret %s/%s with the key the controller signs webhooks with; the receiver knows it too", secretNamespace, secretName)

	// The administrator's part: where messages go, and with which key.
	channels := []*v1alpha1.NotificationChannel{
		{ObjectMeta: metav1.ObjectMeta{Name: mailChannel}, Spec: v1alpha1.NotificationChannelSpec{
			Email: &v1alpha1.EmailChannel{Host: rc.mailHost, Port: rc.mailPort, Security: "None", From: mailFrom},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: webhookName}, Spec: v1alpha1.NotificationChannelSpec{
			Webhook: &v1alpha1.WebhookChannel{URL: rc.webhookURL,
				SecretRef: v1alpha1.SecretKeySelector{Namespace: secretNamespace, Name: secretName, Key: secretKey}},
		}},
	}
	for _, ch := range channels {
		if err := cl.Create(ctx, ch); err != nil {
			return fmt.Errorf("create NotificationChannel %s: %w", ch.Name, err)
		}
	}
	s.n.say("created NotificationChannels %s (SMTP) and %s (webhook): the administrator's, naming servers and Secrets", mailChannel, webhookName)
	if err := installChannelAdmission(ctx, cl); err != nil {
		return err
	}
	s.n.say("installed the admission policies of config/admission that stamp each TimeoutPolicy with its author: the controller sends through a channel only for an author granted the verb use on it")

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
	if err := waitReady(ctx, cl, c); err != nil {
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
			if err := s.extend(ctx, cl, extended); err != nil {
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
	if err := s.finale(ctx, cl); err != nil {
		return err
	}
	if err := s.useAct(ctx, cl); err != nil {
		return err
	}
	if err := s.linksAct(ctx, cl, c, rc); err != nil {
		return err
	}
	return s.gather(ctx, cl, rc)
}

// createSecret puts the webhook signing key where the policy says it is.
func createSecret(ctx context.Context, cl client.Client, value string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secretNamespace}}
	if err := cl.Create(ctx, ns); err != nil {
		return fmt.Errorf("create namespace %s: %w", secretNamespace, err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: secretName},
		Data:       map[string][]byte{secretKey: []byte(value)},
	}
	if err := cl.Create(ctx, secret); err != nil {
		return fmt.Errorf("create Secret %s/%s: %w", secretNamespace, secretName, err)
	}
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

// extend moves r's expiry through the plugin, as its owner would, and
// works out the reminders it is owed from then on.
func (s *story) extend(ctx context.Context, cl client.Client, r *role) error {
	was := r.life.ExpiresAt
	s.n.say("extending %s by %s through the plugin, %.1fs before it would expire:", r.title, extendBy, time.Until(was).Seconds())
	if err := s.kubectl.run(ctx, "extend", r.title, extendBy); err != nil {
		return err
	}
	now := time.Now()
	if err := cl.Get(ctx, client.ObjectKeyFromObject(r.obj), r.obj); err != nil {
		return fmt.Errorf("read Playbook %s after its extension: %w", r.title, err)
	}
	r.extendedAt, r.wasExpiring = now, was
	// The old date's stages that fell due before now were owed; the others
	// never will be. The new date's stages count from now.
	sent := 0
	for _, lead := range r.stages {
		if was.Add(-lead).Before(now) {
			sent++
		}
	}
	r.life = s.lifetime(r.obj)
	r.stages = s.stagesOf(r.life, now)
	r.due = sent + len(r.stages)
	s.n.say("%s now expires at %s instead of %s, set by %s", r.title, s.n.at(r.life.ExpiresAt), s.n.at(was), source(r.life))
	if sent > 0 {
		s.n.more("it was reminded of the old date, so an extended message follows;")
	}
	s.n.more("reminders for the new date: %s", s.dueTimes(r))
	return nil
}

func (s *story) onPlaybook(ctx context.Context, sev stamped, ok bool) error {
	ev := sev.Event
	if err := watchEnded(ctx, "Playbook", ev, ok); err != nil {
		return err
	}
	if ev.Type != watch.Deleted {
		return nil
	}
	now := sev.at
	u, _ := ev.Object.(*unstructured.Unstructured)
	r := s.role(u.GetName())
	if r == nil {
		return nil
	}
	r.deleted, r.deletedAt = true, now
	// The object as deleted, so the verdict counts any late edit to it.
	life := s.lifetime(u)
	// When a postponement was announced, deletion is due then.
	due := life.ExpiresAt
	if r.postponedTo.After(due) {
		due = r.postponedTo
	}
	lag := now.Sub(due)
	switch {
	case life.Keep:
		s.lost++
		s.n.say("deleted %s although it is kept: that is a bug", r.title)
	case now.Before(life.ExpiresAt):
		s.early++
		s.n.say("deleted %s EARLY (expires at %s, deleted %d ms before)", r.title, s.n.at(life.ExpiresAt), life.ExpiresAt.Sub(now).Milliseconds())
	case !r.noticeAt.IsZero() && now.Before(r.noticeAt.Add(s.schedule.MinimumNotice)):
		s.early++
		s.n.say("deleted %s EARLY: %d ms after its first reminder, short of the %s of notice", r.title, now.Sub(r.noticeAt).Milliseconds(), minimumNotice)
	case lag > lateAfter:
		s.late++
		s.n.say("deleted %s LATE (due at %s, deleted %d ms after)", r.title, s.n.at(due), lag.Milliseconds())
	case due.After(life.ExpiresAt):
		s.onTime++
		s.n.say("deleted %s (expired at %s, postponed to %s, deleted %d ms after that)", r.title, s.n.at(life.ExpiresAt), s.n.at(due), lag.Milliseconds())
	default:
		s.onTime++
		s.n.say("deleted %s (expired at %s, deleted %d ms after)", r.title, s.n.at(life.ExpiresAt), lag.Milliseconds())
		if r.due == 0 {
			s.n.more("no reminder before it, as none applied: it lived less than the shortest lead")
		}
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
		switch e.Reason {
		case kube.ReasonExpired:
			r.expiredNote = true
		case kube.ReasonDeleted:
			r.deletedNote = true
		}
	}
	s.n.say("event %-7s %-17s %s: %s", e.Type, e.Reason, who, e.Note)
	return nil
}

// onMessage tells of a message that reached the demo, and keeps it for
// the reckoning at the end.
func (s *story) onMessage(m message) {
	s.facts.messages = append(s.facts.messages, m)
	if m.refused != "" {
		s.refused++
		s.n.say("webhook %s REFUSED a request (webhook-id %s): %s", webhookName, m.id, m.refused)
		return
	}
	r := s.role(m.name)
	what := m.subject
	if m.via == viaWebhook {
		what = s.describeEvent(m, r)
	}
	if s.seen == nil {
		s.seen, s.reminders = map[string]bool{}, map[string]int{}
	}
	key := m.via + " " + m.id
	if s.seen[key] {
		s.duplicates++
		s.n.say("%s DUPLICATE (id %s) of: %s", m.via, m.id, what)
		return
	}
	s.seen[key] = true
	if m.event == v1alpha1.EventReminder {
		s.reminders[m.via]++
	}
	// Every deletion brings an expired and a deleted message; the
	// deleted one is enough to tell.
	if m.event != v1alpha1.EventExpired {
		if m.via == viaMail {
			s.n.say("mail to %s: %s", strings.Join(m.to, ", "), what)
		} else {
			s.n.say("webhook %s: %s (signature ok)", webhookName, what)
		}
	}
	if r == nil {
		return
	}
	r.got = append(r.got, m)
	if m.event == v1alpha1.EventReminder && r.noticeAt.IsZero() {
		r.noticeAt = m.arrived
	}
	if m.event == v1alpha1.EventPostponed && m.via == viaWebhook {
		r.postponedTo = m.expiresAt
	}
}

// describeEvent is the narration of a CloudEvent: its type, the
// Playbook's title, and what its data adds.
func (s *story) describeEvent(m message, r *role) string {
	title := m.title
	if title == "" {
		// Said so rather than filled in: the controller reads the title
		// with the first reminder, so a Playbook that had none may come
		// without it.
		title = m.name + " (no data.title)"
		if r != nil {
			title = r.title + " (no data.title)"
		}
	}
	line := notify.CloudEventType(m.event) + " " + title
	switch m.event {
	case v1alpha1.EventReminder:
		line += " stage " + m.stage
	case v1alpha1.EventExtended:
		line += ", now expires at " + s.n.at(m.expiresAt)
	case v1alpha1.EventPostponed:
		line += ", deletion at " + s.n.at(m.expiresAt)
	}
	return line
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
	s.n.say("every Playbook that expires is gone")
	s.reached()
	if err := s.trail(ctx); err != nil {
		return err
	}
	if err := s.reclaim(ctx); err != nil {
		return err
	}
	if err := s.restore(ctx, cl); err != nil {
		return err
	}
	s.n.say("the final list:")
	if err := s.kubectl.run(ctx, "list"); err != nil {
		return err
	}
	if err := s.kubectl.decode(ctx, &s.facts.finalList, "list"); err != nil {
		return err
	}
	list := playbookList()
	if err := cl.List(ctx, list); err != nil {
		return fmt.Errorf("list Playbooks: %w", err)
	}
	for _, r := range s.cast {
		if r.life.Keep && slices.ContainsFunc(list.Items, func(u unstructured.Unstructured) bool { return u.GetUID() == r.obj.GetUID() }) {
			s.n.say("%s is still there, as %s asks", r.title, expiry.AnnotationKeep)
		}
	}
	return nil
}

// reached tells what reached people about each Playbook, and finds the
// reminders that went wrong: missing before a deletion, more than were
// due, or arriving after the deletion.
func (s *story) reached() {
	s.n.say("what reached people, duplicates left out:")
	rows := []string{"TITLE\tREMINDERS DUE\tBY MAIL\tBY WEBHOOK\tSLOWEST REMINDER\tOTHER MESSAGES (BOTH WAYS)"}
	for _, r := range s.cast {
		others := "-"
		for _, t := range v1alpha1.EventTypes {
			if t != v1alpha1.EventReminder && r.count(viaMail, t, time.Time{})+r.count(viaWebhook, t, time.Time{}) > 0 {
				others = strings.TrimPrefix(others+", "+string(t), "-, ")
			}
		}
		rows = append(rows, fmt.Sprintf("%s\t%d\t%d\t%d\t%s\t%s", r.title, r.due,
			r.count(viaMail, v1alpha1.EventReminder, time.Time{}), r.count(viaWebhook, v1alpha1.EventReminder, time.Time{}),
			s.slowest(r), others))

		for _, via := range []string{viaMail, viaWebhook} {
			all := r.count(via, v1alpha1.EventReminder, time.Time{})
			if all > r.due {
				s.problem("%s got %d reminders by %s where %d were due", r.title, all, via, r.due)
			}
			if !r.deleted {
				continue
			}
			if before := r.count(via, v1alpha1.EventReminder, r.deletedAt); before < r.due {
				s.problem("%s was deleted after %d of its %d reminders by %s", r.title, before, r.due, via)
			}
		}
		for _, m := range r.got {
			if r.deleted && m.arrived.After(r.deletedAt) && !announcedAfter(m.event) {
				s.problem("%s: the %s message by %s arrived %d ms after the deletion", r.title, m.event, m.via, m.arrived.Sub(r.deletedAt).Milliseconds())
			}
		}
	}
	s.n.table(rows)
	for _, p := range s.problems {
		s.n.say("PROBLEM: %s", p)
	}
}

// slowest is the longest a reminder of r took, by webhook, from the time
// its stage fell due to its arrival; a reminder that came before that time
// or over lateAfter after it is a problem.
func (s *story) slowest(r *role) string {
	worst, found := time.Duration(0), false
	for _, m := range r.got {
		if m.via != viaWebhook || m.event != v1alpha1.EventReminder {
			continue
		}
		lead, err := expiry.ParseDuration(m.stage)
		if err != nil {
			s.problem("%s: a reminder came with stage %q", r.title, m.stage)
			continue
		}
		// Due against the object's expiry, not the deletion time the message
		// announces: that is later when the notice is still owed.
		expiresAt := r.life.ExpiresAt
		if !r.extendedAt.IsZero() && m.arrived.Before(r.extendedAt) {
			expiresAt = r.wasExpiring
		}
		d := m.arrived.Sub(expiresAt.Add(-lead))
		if d < 0 || d > lateAfter {
			s.problem("%s: the %s reminder arrived %d ms after it fell due", r.title, m.stage, d.Milliseconds())
		}
		worst, found = max(worst, d), true
	}
	if !found {
		return "-"
	}
	return fmt.Sprintf("%d ms", worst.Milliseconds())
}

// announcedAfter reports whether messages of type t tell of a deletion
// and so come after it.
func announcedAfter(t v1alpha1.EventType) bool {
	return t == v1alpha1.EventExpired || t == v1alpha1.EventDeleted
}

func (s *story) problem(format string, args ...any) {
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

func (s *story) role(name string) *role {
	for _, r := range s.cast {
		if r.obj.GetName() == name {
			return r
		}
	}
	return nil
}

// settled reports whether every deletion has been followed by its Expired
// and Deleted Events and by its expired and deleted messages on both
// channels.
func (s *story) settled() bool {
	for _, r := range s.cast {
		if !r.deleted {
			continue
		}
		if !r.expiredNote || !r.deletedNote {
			return false
		}
		for _, via := range []string{viaMail, viaWebhook} {
			if r.count(via, v1alpha1.EventExpired, time.Time{}) == 0 || r.count(via, v1alpha1.EventDeleted, time.Time{}) == 0 {
				return false
			}
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
	return "the last Expired and Deleted Events and messages"
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
	line += fmt.Sprintf("; %d reminders by mail and %d by webhook, %d duplicates", s.reminders[viaMail], s.reminders[viaWebhook], s.duplicates)
	if s.refused > 0 {
		line += fmt.Sprintf(", %d webhook requests refused", s.refused)
	}
	if len(s.problems) > 0 {
		line += fmt.Sprintf(", %d problems", len(s.problems))
	}
	if s.facts.reclaimed.playbooks > 0 {
		line += "\ndemo: " + s.facts.reclaimed.line()
	}
	return line
}

// verdict fails the demo on what must never happen: a deletion before
// expiry or before the minimum notice, a kept Playbook deleted, a message
// sent twice or badly signed, a reminder missing or after the deletion.
func (s *story) verdict() error {
	var errs []error
	if s.early > 0 || s.lost > 0 {
		errs = append(errs, errors.New("the controller deleted Playbooks it should not have: see above"))
	}
	if s.duplicates > 0 {
		errs = append(errs, fmt.Errorf("the controller sent %d messages twice", s.duplicates))
	}
	if s.refused > 0 {
		errs = append(errs, fmt.Errorf("the webhook receiver refused %d requests", s.refused))
	}
	if len(s.problems) > 0 {
		errs = append(errs, fmt.Errorf("%d problems: see above", len(s.problems)))
	}
	return errors.Join(errs...)
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
