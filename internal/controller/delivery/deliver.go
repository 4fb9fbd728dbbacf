// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/channelset"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/eval"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/metrics"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/outbox"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// Deliverer sends the messages about governed objects and records on each
// object what went out, for the object reconciler that holds it. What it
// keeps in memory is what a restart may lose without a message going out
// twice or late: the backoff of the channels that failed, the deliveries
// the cache does not show yet, and the objects waiting for a slot of a
// busy channel.
type Deliverer struct {
	// Client writes the records, and the Events that are messages; reader
	// reads an object from the API server: its title, or its record again
	// after a conflict.
	Client   client.Client
	Reader   client.Reader
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// Audit adds records about the object of an evaluation to the
	// reconciler's audit trail.
	Audit func(ctx context.Context, ev *eval.Evaluation, recs ...audit.Record)
	// DryRun is the controller's --dry-run, which the messages of a
	// rehearsal name.
	DryRun bool
	// ClusterEventNamespace is where the Events about cluster-scoped
	// objects go.
	ClusterEventNamespace string
	// Owners gives the address of an object's owner.
	Owners *Owners
	// Outbox sends the owners' digests; candidates picks the members of a
	// new one (see digestCandidates).
	Outbox     *outbox.Outbox
	Candidates func(ctx context.Context, ev *eval.Evaluation, stage string) ([]outbox.Member, error)
	// Wake, when set, asks for an object to be looked at at once: for a
	// message that found its channel busy, when a slot frees.
	Wake func(wakeup.Key)
	// Links signs the links messages carry; nil without --actions-url.
	Links *Links

	retries     retries
	Pending     pendingDeliveries
	slotWaiters slotWaiters
	mu          sync.Mutex
	// recordWriteFailed holds the objects whose failure to write their
	// record was reported (see writeFailed), by the UID it was about.
	recordWriteFailed map[wakeup.Key]types.UID
}

// Forget drops what the deliverer remembers about key.
func (d *Deliverer) Forget(key wakeup.Key) {
	d.mu.Lock()
	delete(d.recordWriteFailed, key)
	d.mu.Unlock()
	d.retries.forget(key)
	d.Pending.forget(key)
}

// Notify sends the message plan says is due to the channels that have not
// accepted it yet, and records on the object which ones did; a reminder
// due to the owner goes to the owner's digest.
func (d *Deliverer) Notify(ctx context.Context, ev *eval.Evaluation, plan expiry.Plan) (ctrl.Result, error) {
	if !slices.Contains(plan.Channels, OwnerChannel) {
		return d.notifyChannels(ctx, ev, plan)
	}
	wait, err := d.digest(ctx, ev, plan)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("owner's digest: %w", err)
	}
	plan.Channels = slices.DeleteFunc(slices.Clone(plan.Channels), func(c string) bool { return c == OwnerChannel })
	if len(plan.Channels) == 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	res, err := d.notifyChannels(ctx, ev, plan)
	if err == nil && (res.RequeueAfter == 0 || wait < res.RequeueAfter) {
		res.RequeueAfter = wait
	}
	return res, err
}

// notifyChannels sends the message plan says is due over the policy's
// channels.
func (d *Deliverer) notifyChannels(ctx context.Context, ev *eval.Evaluation, plan expiry.Plan) (res ctrl.Result, err error) {
	// Each channel backs off on its own: one that keeps failing must not
	// slow down the retries of another.
	retryKeyOf := func(channel string) retryKey {
		return newRetryKey(ev.Key, ev.Obj.UID, ev.Record.ExpiresAt, plan.Key, channel)
	}
	var due []string
	for _, name := range plan.Channels {
		if d.retries.due(retryKeyOf(name), ev.Now) {
			due = append(due, name)
		}
	}
	if len(due) == 0 {
		return ctrl.Result{RequeueAfter: d.retryDelay(plan, retryKeyOf, ev.Now)}, nil
	}
	if current, err := d.current(ctx, ev); !current || err != nil {
		return ctrl.Result{RequeueAfter: cacheBehindRetry}, err
	}
	if ev.Channels != nil {
		held, reserved, busy, release := ev.Channels.Reserve(due)
		defer release()
		if len(reserved) == 0 {
			return d.busyResult(ev.Key, busy), nil
		}
		// Sent over the reserved slots; the busy channels wait their turn.
		shared := ev.Channels
		ev.Channels, due = held, reserved
		defer func() { ev.Channels = shared }()
		defer func() { res = d.orBusy(res, ev.Key, busy) }()
	}

	msg := d.compose(ctx, ev, plan)
	_, alreadySent := ev.Record.Sent[plan.Key]
	out := d.send(ctx, ev, plan, due, msg)
	// The time is taken after the sends: the notice starts when the message
	// was accepted, and backoff counts from then.
	now := d.Clock.Now()
	d.reportSent(ctx, ev, plan, msg, out, now, alreadySent)
	if err := d.recordDone(ctx, ev, plan, msg, out, now, alreadySent, retryKeyOf); err != nil {
		return ctrl.Result{}, err
	}
	if len(out.failed) == 0 && len(out.busy) > 0 {
		return d.busyResult(ev.Key, out.busy), nil
	}
	if len(out.failed) == 0 {
		// The record patch brings the next reconcile through the watch.
		return ctrl.Result{}, nil
	}
	d.reportFailed(ctx, ev, plan, out, now, retryKeyOf)
	if plan.Deadline.After(ev.Now) && !plan.Deadline.After(now) {
		// The next thing (a deletion, a later stage) fell due during the
		// sends: plan again at once. That pass finds these channels backing
		// off, so it cannot loop.
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	return d.orBusy(ctrl.Result{RequeueAfter: d.retryDelay(plan, retryKeyOf, now)}, ev.Key, out.busy), nil
}

// cacheBehindRetry is when a message held back because the cache was
// behind the object is planned again, should the watch not bring the
// newer object first.
const cacheBehindRetry = time.Second

// current reports whether the API server shows the object at the version
// ev was made from. A message goes out only then: the cache may be behind
// the object's record, as a new leader's may be behind what its
// predecessor delivered a moment before handing over, and the message
// would go out again. When it is behind, the watch brings the newer
// object, and the plan is made again from it. The read also gives the
// title a message needs, so that a Playbook's first message reads the
// object once.
func (d *Deliverer) current(ctx context.Context, ev *eval.Evaluation) (bool, error) {
	fresh, u, err := kube.FreshRead(ctx, d.Reader, ev.Key)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("get %s from the API server: %w", ev.Key, err)
	case fresh.UID != ev.Obj.UID || fresh.ResourceVersion != ev.Obj.ResourceVersion:
		logf.FromContext(ctx).V(1).Info("the cache is behind the object: no message until it shows the newer one",
			"cached", ev.Obj.ResourceVersion, "current", fresh.ResourceVersion)
		return false, nil
	}
	if ev.NeedsTitle(ev.Key) {
		ev.Record.Title = TitleOf(u)
	}
	return true, nil
}

// compose writes the message plan says is due, with the why of the
// messages that need one. The record carries the title by then (see
// current).
func (d *Deliverer) compose(ctx context.Context, ev *eval.Evaluation, plan expiry.Plan) notify.Message {
	msg := d.message(ctx, ev, plan.Event, plan.At, plan.Key)
	if plan.Event == v1alpha1.EventReminder {
		msg.Stage = plan.Key
	}
	switch {
	case plan.Key == expiry.KeyLive:
		msg.Detail = fmt.Sprintf("its deletion was only rehearsed until now (dry run), and policy %s promises %s of notice before deletion",
			ev.Policy.Name, expiry.FormatDuration(ev.Schedule.MinimumNotice))
	case plan.Event == v1alpha1.EventPostponed:
		msg.Detail = whyPostponed(ev, plan.At)
	case plan.Event == v1alpha1.EventWouldDelete:
		msg.Detail = "not deleted because " + d.whyRehearsed()
	}
	return msg
}

// whyPostponed says why the deletion of an expired object waits until
// at: a deletion time a message already gave people (a reminder, an
// extension, a sleep) that a later change of the lifetime cannot take
// back, or else the notice owed after the first reminder.
func whyPostponed(ev *eval.Evaluation, at time.Time) string {
	if at.Equal(ev.Record.Announced) || at.Equal(ev.Record.PostponedTo) {
		return fmt.Sprintf("a message already told people it would be deleted at %s", at.UTC().Format(time.RFC3339))
	}
	notice := ev.Schedule.MinimumNotice
	return fmt.Sprintf("the first reminder reached people at %s and policy %s promises %s of notice before deletion",
		at.Add(-notice).UTC().Format(time.RFC3339), ev.Policy.Name, expiry.FormatDuration(notice))
}

// send hands msg to the due channels at once or, where no channel carries
// its type, stores the Kubernetes Event that is the message.
func (d *Deliverer) send(ctx context.Context, ev *eval.Evaluation, plan expiry.Plan, due []string, msg notify.Message) outcome {
	// A send still under way when the next thing falls due is abandoned:
	// a slow receiver must not make the deletion late.
	// A shutdown does not cut it short: the Lease is held until the
	// workers return, and a message a channel accepted must be recorded
	// before the next leader plans, or it is sent again.
	sendCtx, cancelSend := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancelSend()
	if plan.Deadline.After(ev.Now) {
		var cancel context.CancelFunc
		sendCtx, cancel = context.WithDeadline(sendCtx, plan.Deadline)
		defer cancel()
	}
	if !slices.Equal(due, []string{notify.EventsChannel}) {
		return deliver(sendCtx, ev.Channels, due, msg)
	}
	// No channel carries this type of message: the Kubernetes Event is
	// the message, and it counts once the API server stored it.
	out := outcome{failed: failures{}}
	start := time.Now()
	err := d.storeEvent(sendCtx, ev, plan, msg)
	metrics.NotificationSeconds.WithLabelValues(notify.EventsChannel).Observe(time.Since(start).Seconds())
	result := "sent"
	if err != nil {
		out.failed[notify.EventsChannel], result = err.Error(), "failed"
	} else {
		out.sent = due
	}
	metrics.Notifications.WithLabelValues(notify.EventsChannel, string(msg.Type), result).Inc()
	return out
}

// reportSent says what out delivered: in the audit trail, the log and, unless
// the Kubernetes Event was the message itself, an Event.
func (d *Deliverer) reportSent(ctx context.Context, ev *eval.Evaluation, plan expiry.Plan, msg notify.Message, out outcome, now time.Time, alreadySent bool) {
	if plan.Event == v1alpha1.EventReminder && len(out.sent) > 0 && !alreadySent {
		metrics.ReminderLag.Observe(now.Sub(reminderDue(ev.Record, plan.Key)).Seconds())
	}
	d.Audit(ctx, ev, deliveryRecords(plan.Event, msg.Stage, out.sent, out.failed)...)
	if len(out.sent) == 0 {
		return
	}
	logf.FromContext(ctx).Info("notified", "event", plan.Event, "key", plan.Key, "channels", out.sent, "expiresAt", ev.Life.ExpiresAt)
	if !slices.Equal(out.sent, []string{notify.EventsChannel}) {
		d.Recorder.Eventf(kube.Reference(ev.Key.GVK, ev.Obj), nil, corev1.EventTypeNormal, reasonSent(plan), kube.ActionNotify, "%s", sentNote(ev, plan, msg, out.sent))
	}
}

// recordDone writes on the object the channels that are done with the
// message (they took it, or do not carry its type) and, the first time,
// says what the delivery means for the object.
func (d *Deliverer) recordDone(ctx context.Context, ev *eval.Evaluation, plan expiry.Plan, msg notify.Message, out outcome, now time.Time,
	alreadySent bool, retryKeyOf func(string) retryKey) error {
	done := append(slices.Clone(out.sent), out.skipped...)
	if len(done) == 0 {
		return nil
	}
	// Remembered before the record is written: until the cache shows
	// the record, or if writing it fails, this process must not send
	// the same message again.
	p := pendingDelivery{uid: ev.Obj.UID, expiresAt: ev.Record.ExpiresAt, key: plan.Key,
		reminder: plan.Event == v1alpha1.EventReminder && len(out.sent) > 0, channels: done, at: now}
	if plan.Event == v1alpha1.EventPostponed {
		p.postponedTo = plan.At
		if plan.Key == expiry.KeyLive {
			// Going live, the notice runs from when the message was
			// taken: plan.At was reckoned before a send that may have
			// been slow. Later than announced, never sooner.
			if t := now.Add(ev.Schedule.MinimumNotice); t.After(p.postponedTo) {
				p.postponedTo = t
			}
		}
	}
	if plan.Event != v1alpha1.EventWouldDelete && plan.Event != v1alpha1.EventSleeping {
		// A rehearsal's message announces no deletion, nor does the one
		// before a sleep (its time is the sleep's).
		p.announced = plan.At
	}
	d.Pending.add(ev.Key, p)
	for _, name := range done {
		d.retries.reset(retryKeyOf(name))
	}
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kube.WriteTimeout)
	defer cancel()
	if err := d.Record(recordCtx, ev, p.applyTo); err != nil {
		return d.WriteFailed(ev, err)
	}
	if !alreadySent && len(out.sent) > 0 {
		// Said once per message, when the record first shows it: a
		// restart reads the record and does not say it again.
		d.reportFirstDelivery(ctx, ev, plan, msg)
	}
	return nil
}

// reportFailed backs off the channels that failed and says so, once per
// channel and message, with the notice not given when a reminder that
// failed everywhere is holding an expired object.
func (d *Deliverer) reportFailed(ctx context.Context, ev *eval.Evaluation, plan expiry.Plan, out outcome, now time.Time, retryKeyOf func(string) retryKey) {
	log := logf.FromContext(ctx)
	var reports []string
	for _, name := range out.failed.names() {
		attempt := d.retries.failed(retryKeyOf(name), now)
		reports = append(reports, expiry.FailedReport(plan.Key, name))
		log.Error(errors.New(out.failed[name]), "notification failed", "event", plan.Event, "key", plan.Key, "channel", name, "attempt", attempt)
	}
	noticeNotGiven := plan.Event == v1alpha1.EventReminder && len(out.sent) == 0 && ev.Record.NoticeAt.IsZero() &&
		!ev.Now.Before(ev.Life.ExpiresAt)
	if noticeNotGiven {
		reports = append(reports, expiry.ReportNoticeNotGiven)
	}
	said := d.ReportOnce(ctx, ev, reports...)
	var firstFailures []string
	for _, name := range out.failed.names() {
		if said[expiry.FailedReport(plan.Key, name)] {
			firstFailures = append(firstFailures, fmt.Sprintf("via %s: %s", name, out.failed[name]))
		}
	}
	ref := kube.Reference(ev.Key.GVK, ev.Obj)
	if len(firstFailures) > 0 {
		d.Recorder.Eventf(ref, nil, corev1.EventTypeWarning, kube.ReasonMessageFailed, kube.ActionNotify,
			"Sending %s failed %s; retrying with backoff", describeMessage(plan), strings.Join(firstFailures, "; "))
	}
	if noticeNotGiven && said[expiry.ReportNoticeNotGiven] {
		d.Recorder.Eventf(ref, nil, corev1.EventTypeWarning, kube.ReasonNoticeNotGiven, kube.ActionDelete,
			"Expired at %s but no reminder has reached anyone yet: deletion waits until one has and the minimum notice of policy %s (%s) has passed",
			ev.Life.ExpiresAt.UTC().Format(time.RFC3339), ev.Policy.Name, expiry.FormatDuration(ev.Schedule.MinimumNotice))
	}
}

// reminderDue is when the reminder stage stage of record fell due: its
// lead before the expiry, or the start of the record if that was later
// (an object created, or extended, inside the lead).
func reminderDue(record *expiry.Record, stage string) time.Time {
	lead, err := expiry.ParseDuration(stage)
	if err != nil {
		return record.Since
	}
	due := record.ExpiresAt.Add(-lead)
	if due.Before(record.Since) {
		return record.Since
	}
	return due
}

// failures maps a channel name to what went wrong with it.
type failures map[string]string

func (f failures) names() []string {
	out := make([]string, 0, len(f))
	for n := range f {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// outcome is what became of one message on the channels it was due on.
type outcome struct {
	// sent are the channels that took it; skipped, those that do not
	// carry its type (nothing to send); busy, those that had no slot
	// (nothing sent, nothing wrong: see notify.ErrBusy).
	sent, skipped, busy []string
	// failed says what went wrong with the others.
	failed failures
}

// deliver sends msg over the named channels of set at once, so that a
// slow channel does not hold up the others.
func deliver(ctx context.Context, set *channelset.ChannelSet, names []string, msg notify.Message) (out outcome) {
	out.failed = failures{}
	content, err := set.Templates.Render(msg)
	if err != nil {
		for _, n := range names {
			out.failed[n] = err.Error()
		}
		return out
	}
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		if n, ok := set.Notifiers[name]; ok && n.Accepts(msg.Type) {
			wg.Go(func() {
				start := time.Now()
				errs[i] = n.Send(ctx, msg, content)
				metrics.NotificationSeconds.WithLabelValues(name).Observe(time.Since(start).Seconds())
			})
		}
	}
	wg.Wait()
	for i, name := range names {
		n, ok := set.Notifiers[name]
		switch {
		case !ok:
			// The Kubernetes Event is the reminder: MessageSent.
			out.sent = append(out.sent, name)
		case !n.Accepts(msg.Type):
			out.skipped = append(out.skipped, name)
		case errors.Is(errs[i], notify.ErrBusy):
			out.busy = append(out.busy, name)
		case errs[i] != nil:
			out.failed[name] = errs[i].Error()
		default:
			out.sent = append(out.sent, name)
		}
	}
	for _, name := range out.sent {
		metrics.Notifications.WithLabelValues(name, string(msg.Type), "sent").Inc()
	}
	for name := range out.failed {
		metrics.Notifications.WithLabelValues(name, string(msg.Type), "failed").Inc()
	}
	return out
}

// sendTimeout bounds a recorded message's sends when no deadline does;
// writeTimeout bounds writing its record, or a delete, shutdown or not.
// Together they stay under the default --graceful-shutdown-timeout (30 s),
// so that a recorded message under way at SIGTERM is finished and recorded
// before the Lease is released. One-off messages (expired, deleted,
// deletion-failed) are the outbox's: the next leader sends what is left.
const (
	sendTimeout = 20 * time.Second
)

// reportFirstDelivery records, in the audit trail and an Event, what the
// first delivery of a postponement or a rehearsal means for the object.
func (d *Deliverer) reportFirstDelivery(ctx context.Context, ev *eval.Evaluation, plan expiry.Plan, msg notify.Message) {
	key, obj := ev.Key, ev.Obj
	switch plan.Event {
	case v1alpha1.EventPostponed:
		d.Audit(ctx, ev, audit.Record{Type: audit.Postponed, Result: audit.OK,
			Detail: "deletion postponed to " + plan.At.UTC().Format(time.RFC3339) + ": " + msg.Detail})
		d.Recorder.Eventf(kube.Reference(key.GVK, obj), nil, corev1.EventTypeNormal, kube.ReasonDeletionPostponed, kube.ActionDelete,
			"Expired at %s; deletion postponed to %s because %s", ev.Life.ExpiresAt.UTC().Format(time.RFC3339),
			plan.At.UTC().Format(time.RFC3339), msg.Detail)
	case v1alpha1.EventWouldDelete:
		metrics.Deletions.WithLabelValues("would_delete").Inc()
		d.Audit(ctx, ev, audit.Record{Type: audit.WouldDelete, Result: audit.OK, Detail: d.whyRehearsed()})
		logf.FromContext(ctx).Info("would delete", "expiresAt", ev.Life.ExpiresAt, "policy", ev.Policy.Name)
	}
}

// maxEventName is the longest name the API server takes for an Event.
const maxEventName = 253

// storeEvent creates, through the API, the Kubernetes Event that is plan's
// message where no channel carries its type. Its name is fixed by the
// message (the object's UID, expiry, type and stage), so that a retry
// after a lost answer finds it stored instead of creating a second one.
func (d *Deliverer) storeEvent(ctx context.Context, ev *eval.Evaluation, plan expiry.Plan, msg notify.Message) error {
	key, obj := ev.Key, ev.Obj
	namespace := obj.Namespace
	if namespace == "" {
		// Cluster-scoped: the API server takes their Events only in
		// "default" or "kube-system".
		namespace = d.ClusterEventNamespace
		if namespace == "" {
			namespace = metav1.NamespaceDefault
		}
	}
	prefix := obj.Name
	if n := maxEventName - len(msg.ID) - 1; len(prefix) > n {
		prefix = strings.TrimRight(prefix[:n], ".-")
	}
	e := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: namespace, Name: prefix + "." + msg.ID},
		EventTime:           metav1.NewMicroTime(d.Clock.Now()),
		ReportingController: kube.Name,
		ReportingInstance:   reportingInstance,
		Action:              kube.ActionNotify,
		Reason:              reasonSent(plan),
		Regarding:           *kube.Reference(key.GVK, obj),
		Note:                kube.CutNote(sentNote(ev, plan, msg, []string{notify.EventsChannel})),
		Type:                corev1.EventTypeNormal,
	}
	if err := d.Client.Create(ctx, e); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Event %s/%s: %w", namespace, e.Name, err)
	}
	return nil
}

// reportingInstance names this process in the Events it creates itself,
// as the Event recorder does.
var reportingInstance = func() string {
	host, _ := os.Hostname()
	return kube.Name + "-" + host
}()

// deliveryRecords are the audit records of one message's deliveries: one
// per channel.
func deliveryRecords(t v1alpha1.EventType, stage string, sent []string, failed failures) []audit.Record {
	recs := make([]audit.Record, 0, len(sent)+len(failed))
	for _, name := range sent {
		recs = append(recs, audit.Record{Type: audit.Notified, Message: string(t), Stage: stage, Channel: name, Result: audit.OK})
	}
	for _, name := range failed.names() {
		recs = append(recs, audit.Record{Type: audit.NotifyFailed, Message: string(t), Stage: stage, Channel: name, Result: audit.Error, Error: failed[name]})
	}
	return recs
}
