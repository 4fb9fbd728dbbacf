// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// maxRetryDelay caps the backoff between deliveries of a message that some
// channel refused.
const maxRetryDelay = 5 * time.Minute

// notify sends the message plan says is due to the channels that have not
// accepted it yet, and records on the object which ones did.
func (r *ObjectReconciler) notify(ctx context.Context, key Key, obj *metav1.PartialObjectMetadata, ev *evaluation, plan expiry.Plan) (res ctrl.Result, err error) {
	log := logf.FromContext(ctx)

	// Each channel backs off on its own: one that keeps failing must not
	// slow down the retries of another.
	retryKeyOf := func(channel string) retryKey {
		return newRetryKey(key, obj.UID, ev.record.ExpiresAt, plan.Key, channel)
	}
	var due []string
	for _, name := range plan.Channels {
		if r.retries.due(retryKeyOf(name), ev.now) {
			due = append(due, name)
		}
	}
	if len(due) == 0 {
		return ctrl.Result{RequeueAfter: r.retryDelay(plan, retryKeyOf, ev.now)}, nil
	}
	if ev.channels != nil {
		held, reserved, busy, release := ev.channels.reserve(due)
		defer release()
		if len(reserved) == 0 {
			return busyResult(), nil
		}
		// Sent over the reserved slots; the busy channels wait their turn.
		shared := ev.channels
		ev.channels, due = held, reserved
		defer func() { ev.channels = shared }()
		defer func() { res = orBusy(res, busy) }()
	}

	if ev.needsTitle(key) {
		ev.record.Title = r.title(ctx, key)
	}
	msg := r.message(key, obj, ev, plan.Event, plan.At, plan.Key)
	if plan.Event == v1alpha1.EventReminder {
		msg.Stage = plan.Key
	}
	switch {
	case plan.Key == expiry.KeyLive:
		msg.Detail = fmt.Sprintf("its deletion was only rehearsed until now (dry run), and policy %s promises %s of notice before deletion",
			ev.policy.Name, expiry.FormatDuration(ev.schedule.MinimumNotice))
	case plan.Event == v1alpha1.EventPostponed:
		// The postponement is to the first reminder plus the notice.
		msg.Detail = fmt.Sprintf("the first reminder reached people at %s and policy %s promises %s of notice before deletion",
			plan.At.Add(-ev.schedule.MinimumNotice).UTC().Format(time.RFC3339), ev.policy.Name, expiry.FormatDuration(ev.schedule.MinimumNotice))
	case plan.Event == v1alpha1.EventWouldDelete:
		msg.Detail = "not deleted because " + r.whyRehearsed()
	}
	ref := reference(key.GVK, obj)

	// A send still under way when the next thing falls due is abandoned:
	// a slow receiver must not make the deletion late.
	// A shutdown does not cut it short: the Lease is held until the
	// workers return, and a message a channel accepted must be recorded
	// before the next leader plans, or it is sent again.
	sendCtx, cancelSend := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancelSend()
	if plan.Deadline.After(ev.now) {
		var cancel context.CancelFunc
		sendCtx, cancel = context.WithDeadline(sendCtx, plan.Deadline)
		defer cancel()
	}
	_, alreadySent := ev.record.Sent[plan.Key]
	var sent, skipped, busy []string
	failed := failures{}
	if slices.Equal(due, []string{notify.EventsChannel}) {
		// No channel carries this type of message: the Kubernetes Event is
		// the message, and it counts once the API server stored it.
		start := time.Now()
		err := r.storeEvent(sendCtx, key, obj, ev, plan, msg)
		notificationSeconds.WithLabelValues(notify.EventsChannel).Observe(time.Since(start).Seconds())
		result := "sent"
		if err != nil {
			failed[notify.EventsChannel], result = err.Error(), "failed"
		} else {
			sent = due
		}
		notifications.WithLabelValues(notify.EventsChannel, string(msg.Type), result).Inc()
	} else {
		sent, skipped, failed, busy = r.deliver(sendCtx, ev, due, msg)
	}
	// The time is taken after the sends: the notice starts when the message
	// was accepted, and backoff counts from then.
	now := r.Clock.Now()
	reminder := plan.Event == v1alpha1.EventReminder && len(sent) > 0
	if reminder && !alreadySent {
		reminderLag.Observe(now.Sub(reminderDue(ev.record, plan.Key)).Seconds())
	}
	r.audit(ctx, key, obj, ev, deliveryRecords(plan.Event, msg.Stage, sent, failed)...)
	if len(sent) > 0 {
		log.Info("notified", "event", plan.Event, "key", plan.Key, "channels", sent, "expiresAt", ev.life.ExpiresAt)
		if !slices.Equal(sent, []string{notify.EventsChannel}) {
			r.Recorder.Eventf(ref, nil, corev1.EventTypeNormal, reasonSent(plan), actionNotify, "%s", sentNote(ev, plan, msg, sent))
		}
	}
	if done := append(slices.Clone(sent), skipped...); len(done) > 0 {
		// Remembered before the record is written: until the cache shows
		// the record, or if writing it fails, this process must not send
		// the same message again.
		d := pendingDelivery{uid: obj.UID, expiresAt: ev.record.ExpiresAt, key: plan.Key, reminder: reminder, channels: done, at: now}
		if plan.Event == v1alpha1.EventPostponed {
			d.postponedTo = plan.At
		}
		if plan.Event != v1alpha1.EventWouldDelete {
			// A rehearsal's message announces no deletion.
			d.announced = plan.At
		}
		r.pending.add(key, d)
		for _, name := range done {
			r.retries.reset(retryKeyOf(name))
		}
		recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		defer cancel()
		if err := r.recordDelivery(recordCtx, key, obj, ev, d.applyTo); err != nil {
			return ctrl.Result{}, r.writeFailed(key, obj, err)
		}
		if !alreadySent && len(sent) > 0 {
			// Said once per message, when the record first shows it: a
			// restart reads the record and does not say it again.
			r.reportFirstDelivery(ctx, key, obj, ev, plan, msg)
		}
	}
	if len(failed) == 0 && len(busy) > 0 {
		return busyResult(), nil
	}
	if len(failed) == 0 {
		// The record patch brings the next reconcile through the watch.
		return ctrl.Result{}, nil
	}

	var reports []string
	for _, name := range failed.names() {
		attempt := r.retries.failed(retryKeyOf(name), now)
		reports = append(reports, expiry.FailedReport(plan.Key, name))
		log.Error(errors.New(failed[name]), "notification failed", "event", plan.Event, "key", plan.Key, "channel", name, "attempt", attempt)
	}
	noticeNotGiven := plan.Event == v1alpha1.EventReminder && len(sent) == 0 && ev.record.NoticeAt.IsZero() &&
		!ev.now.Before(ev.life.ExpiresAt)
	if noticeNotGiven {
		reports = append(reports, expiry.ReportNoticeNotGiven)
	}
	said := r.reportOnce(ctx, key, obj, ev, reports...)
	var firstFailures []string
	for _, name := range failed.names() {
		if said[expiry.FailedReport(plan.Key, name)] {
			firstFailures = append(firstFailures, fmt.Sprintf("via %s: %s", name, failed[name]))
		}
	}
	if len(firstFailures) > 0 {
		r.Recorder.Eventf(ref, nil, corev1.EventTypeWarning, ReasonReminderFailed, actionNotify,
			"Sending %s failed %s; retrying with backoff", describeMessage(plan), strings.Join(firstFailures, "; "))
	}
	if noticeNotGiven && said[expiry.ReportNoticeNotGiven] {
		r.Recorder.Eventf(ref, nil, corev1.EventTypeWarning, ReasonNoticeNotGiven, actionDelete,
			"Expired at %s but no reminder has reached anyone yet: deletion waits until one has and the minimum notice of policy %s (%s) has passed",
			ev.life.ExpiresAt.UTC().Format(time.RFC3339), ev.policy.Name, expiry.FormatDuration(ev.schedule.MinimumNotice))
	}
	if plan.Deadline.After(ev.now) && !plan.Deadline.After(now) {
		// The next thing (a deletion, a later stage) fell due during the
		// sends: plan again at once. That pass finds these channels backing
		// off, so it cannot loop.
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	return orBusy(ctrl.Result{RequeueAfter: r.retryDelay(plan, retryKeyOf, now)}, busy), nil
}

// retryDelay is how long until the first of plan's channels may be tried
// again, and never past the plan's deadline while that is ahead: a
// deadline already behind (a notice still owed after expiry) must not
// turn the backoff into a tight loop.
func (r *ObjectReconciler) retryDelay(plan expiry.Plan, retryKeyOf func(string) retryKey, now time.Time) time.Duration {
	var next time.Time
	for _, name := range plan.Channels {
		if at := r.retries.nextAttempt(retryKeyOf(name)); !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	if next.IsZero() {
		next = now.Add(maxRetryDelay)
	}
	if plan.Deadline.After(now) && plan.Deadline.Before(next) {
		next = plan.Deadline
	}
	return expiry.After(next, now)
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

// deliver sends msg over the named channels at once, so that a slow
// channel does not hold up the others. It returns the channels that took
// it, those that do not carry this type of message (nothing to send), what
// went wrong with the others, and those that were busy (nothing sent,
// nothing wrong: see notify.ErrBusy).
func (r *ObjectReconciler) deliver(ctx context.Context, ev *evaluation, names []string, msg notify.Message) (sent, skipped []string, failed failures, busy []string) {
	failed = failures{}
	content, err := ev.channels.templates.Render(msg)
	if err != nil {
		for _, n := range names {
			failed[n] = err.Error()
		}
		return nil, nil, failed, nil
	}
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		if n, ok := ev.channels.notifiers[name]; ok && n.Accepts(msg.Type) {
			wg.Go(func() {
				start := time.Now()
				errs[i] = n.Send(ctx, msg, content)
				notificationSeconds.WithLabelValues(name).Observe(time.Since(start).Seconds())
			})
		}
	}
	wg.Wait()
	defer func() {
		for _, name := range sent {
			notifications.WithLabelValues(name, string(msg.Type), "sent").Inc()
		}
		for name := range failed {
			notifications.WithLabelValues(name, string(msg.Type), "failed").Inc()
		}
	}()
	for i, name := range names {
		n, ok := ev.channels.notifiers[name]
		switch {
		case !ok:
			// The Kubernetes Event is the reminder: ReminderSent.
			sent = append(sent, name)
		case !n.Accepts(msg.Type):
			skipped = append(skipped, name)
		case errors.Is(errs[i], notify.ErrBusy):
			busy = append(busy, name)
		case errs[i] != nil:
			failed[name] = errs[i].Error()
		default:
			sent = append(sent, name)
		}
	}
	return sent, skipped, failed, busy
}

// announce tells people something that happens once, at the time it
// happens (expired, deleted, deletion failed, would delete): there is no
// record to keep and no retry, since the object may be gone.
func (r *ObjectReconciler) announce(ctx context.Context, key Key, obj *metav1.PartialObjectMetadata, ev *evaluation, t v1alpha1.EventType, detail string) {
	names := slices.Sorted(maps.Keys(ev.channels.notifiers))
	if len(names) == 0 {
		return
	}
	// No InvalidRecipient warnings from here: the object may be gone, and
	// its reconciles warned already.
	msg := r.message(key, obj, ev, t, ev.life.ExpiresAt, "")
	msg.Detail = detail
	// Sent in the background (or at shutdown, bounded): it may wait for a
	// busy channel.
	sent, _, failed, _ := r.deliver(notify.WaitForSlot(ctx), ev, names, msg)
	r.audit(ctx, key, obj, ev, deliveryRecords(t, "", sent, failed)...)
	log := logf.FromContext(ctx)
	var problems []string
	for _, name := range failed.names() {
		log.Error(errors.New(failed[name]), "notification failed", "event", t, "channel", name)
		problems = append(problems, fmt.Sprintf("via %s: %s", name, failed[name]))
	}
	if len(problems) > 0 {
		r.Recorder.Eventf(reference(key.GVK, obj), nil, corev1.EventTypeWarning, ReasonReminderFailed, actionNotify,
			"Sending the %s message failed %s", t, strings.Join(problems, "; "))
	}
	if len(sent) > 0 {
		log.Info("notified", "event", t, "channels", sent)
	}
}

// sendTimeout bounds a recorded message's sends when no deadline does;
// writeTimeout bounds writing its record, or a delete, shutdown or not.
// Together they stay under the default --graceful-shutdown-timeout (30 s),
// so that a recorded message under way at SIGTERM is finished and recorded
// before the Lease is released. One-off messages (expired, deleted) get
// announceTimeout each: those still sending when the shutdown timeout runs
// out are lost, never repeated.
const (
	sendTimeout  = 20 * time.Second
	writeTimeout = 5 * time.Second
)

// announceTimeout bounds the sending of a one-off message, waiting for a
// free slot included.
const announceTimeout = 30 * time.Second

// maxAnnouncing is how many one-off messages are sent at once.
const maxAnnouncing = 16

func (r *ObjectReconciler) slots() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.announceSlots == nil {
		r.announceSlots = make(chan struct{}, maxAnnouncing)
	}
	return r.announceSlots
}

// announceLater sends a one-off message without holding up the worker: a
// slow receiver must not delay the next deletion.
func (r *ObjectReconciler) announceLater(ctx context.Context, key Key, obj *metav1.PartialObjectMetadata, ev *evaluation, t v1alpha1.EventType, detail string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), announceTimeout)
	r.mu.Lock()
	if r.draining {
		// Shutting down: sent before the worker returns, which the
		// manager waits for.
		r.mu.Unlock()
		defer cancel()
		r.announce(ctx, key, obj, ev, t, detail)
		return
	}
	r.announcing.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.announcing.Done()
		defer cancel()
		// A burst of deletions must not open a connection per message.
		slots := r.slots()
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		case <-ctx.Done():
			return
		}
		r.announce(ctx, key, obj, ev, t, detail)
	}()
}

// drainAnnouncements waits, at shutdown, for the one-off messages sent in
// the background; those announced from now on are sent before their
// reconcile returns.
func (r *ObjectReconciler) drainAnnouncements() {
	r.mu.Lock()
	r.draining = true
	r.mu.Unlock()
	r.announcing.Wait()
}

// message builds the message of type t about the object. Its ID is the
// same for the same object, expiry, type and stage (and, for a
// postponement, new date), so that receivers can drop repeats.
func (r *ObjectReconciler) message(key Key, obj *metav1.PartialObjectMetadata, ev *evaluation, t v1alpha1.EventType, at time.Time, stage string) notify.Message {
	recipients, problems := notify.ParseRecipients(obj.Annotations[notify.AnnotationNotify], ev.channels.allowedEmailDomains())
	if !oneOff(t) {
		r.warnRecipients(key, obj, problems)
	}
	apiVersion, kind := key.GVK.ToAPIVersionAndKind()
	o := notify.Object{APIVersion: apiVersion, Kind: kind, Name: obj.Name, Namespace: obj.Namespace, UID: obj.UID}
	var expiresAt time.Time
	if ev.record != nil {
		o.Title, expiresAt = ev.record.Title, ev.record.ExpiresAt
	}
	return notify.Message{
		ID:         notify.NewID(obj.UID, expiresAt, t, idStage(t, stage, at)),
		Type:       t,
		Time:       ev.now,
		Object:     o,
		ExpiresAt:  at,
		Policy:     ev.policy.Name,
		Recipients: recipients,
		Extend:     extendHint(key, obj, at),
	}
}

// idStage tells apart the messages of one type about one expiry: a
// reminder by its stage, a postponement by its new date. A retry of the
// same message keeps its ID, whatever else changed.
func idStage(t v1alpha1.EventType, stage string, at time.Time) string {
	if t == v1alpha1.EventPostponed {
		return at.UTC().Format(time.RFC3339)
	}
	return stage
}

// oneOff reports whether messages of type t go out once, when the thing
// happens, with no record kept on the object.
func oneOff(t v1alpha1.EventType) bool {
	switch t {
	case v1alpha1.EventReminder, v1alpha1.EventExtended, v1alpha1.EventPostponed, v1alpha1.EventWouldDelete:
		return false
	}
	return true
}

func extendHint(key Key, obj *metav1.PartialObjectMetadata, at time.Time) string {
	resource := strings.ToLower(key.GVK.Kind)
	if key.GVK.Group != "" {
		resource += "." + key.GVK.Group
	}
	ns := ""
	if obj.Namespace != "" {
		ns = " -n " + obj.Namespace
	}
	return fmt.Sprintf("kubectl annotate %s %s%s --overwrite %s=%s (any later time), or %s=true to keep it",
		resource, obj.Name, ns, expiry.AnnotationExpiresAt, at.Add(7*expiry.Day).UTC().Format(time.RFC3339), expiry.AnnotationKeep)
}

// title reads a Playbook's spec.title, which the metadata-only cache does
// not hold, for its first message; the record keeps it from then on. A
// Playbook without a title (or whose read failed) is read again for its
// next message.
func (r *ObjectReconciler) title(ctx context.Context, key Key) string {
	_, u, err := r.freshRead(ctx, key)
	if err != nil {
		return ""
	}
	return titleOf(u)
}

// titleOf returns a Playbook's spec.title, cut to what the record keeps.
func titleOf(u *unstructured.Unstructured) string {
	t, _, _ := unstructured.NestedString(u.Object, "spec", "title")
	// The title goes into the record annotation: keep it small, and whole
	// characters only.
	return cutUTF8(t, maxTitle)
}

// playbooks is the kind whose spec.title names its objects.
var playbooks = schema.GroupKind{Group: "amphitheatre.app", Kind: "Playbook"}

// maxTitle caps the bytes of a title kept in the record.
const maxTitle = 200

// recordDelivery applies update to the object's record and writes it with
// a merge patch locked on the resourceVersion. On a conflict it reads the
// object again and applies the update to the fresh record, as long as that
// record is about the same expiry: a delivery is never lost to a race.
func (r *ObjectReconciler) recordDelivery(ctx context.Context, key Key, obj *metav1.PartialObjectMetadata, ev *evaluation, update func(*expiry.Record)) error {
	rec := ev.record
	// Locked on the version the record was read from; patched through a
	// copy so that the caller's object keeps it.
	obj = obj.DeepCopy()
	for attempt := 0; ; attempt++ {
		update(rec)
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": obj.ResourceVersion,
			"annotations":     map[string]string{expiry.AnnotationReminders: rec.String()},
		}})
		if err != nil {
			return fmt.Errorf("encode the record of %s: %w", key, err)
		}
		err = r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
		if err == nil || !apierrors.IsConflict(err) || attempt == 4 {
			if err != nil {
				return fmt.Errorf("record delivery on %s: %w", key, err)
			}
			return nil
		}
		uid := obj.UID
		obj = newMetadata(key.GVK)
		if err := r.APIReader.Get(ctx, key.NamespacedName, obj); err != nil {
			return fmt.Errorf("get %s: %w", key, err)
		}
		if obj.UID != uid {
			// Another object under the same name: what was sent is not
			// about it.
			return nil
		}
		fresh, _ := expiry.ParseRecord(obj.Annotations[expiry.AnnotationReminders])
		life := expiry.Compute(obj.CreationTimestamp.Time, obj.Annotations, ev.schedule.DefaultTTL)
		if life.Keep || !life.ExpiresAt.Equal(rec.ExpiresAt) {
			// The object changed under us (kept, extended): the new plan
			// supersedes what was just sent.
			return nil
		}
		next := fresh.For(life.ExpiresAt, obj.CreationTimestamp.Time, ev.now)
		next.Title = rec.Title
		rec = next
	}
}

func describeMessage(p expiry.Plan) string {
	switch p.Event {
	case v1alpha1.EventReminder:
		return "the " + p.Key + " reminder"
	default:
		return "the " + string(p.Event) + " message"
	}
}

func whenText(at time.Time) string {
	return "deletion at " + at.UTC().Format(time.RFC3339)
}

// retries remembers failed deliveries per object, message and channel,
// for backoff.
type retries struct {
	mu sync.Mutex
	n  map[retryKey]retryState
}

// retryKey names one message to one channel; a new object under the same
// name, or a new expiry, starts afresh.
type retryKey struct {
	Key
	uid              types.UID
	expiresAt        int64
	message, channel string
}

func newRetryKey(k Key, uid types.UID, expiresAt time.Time, message, channel string) retryKey {
	return retryKey{k, uid, expiresAt.UnixNano(), message, channel}
}

type retryState struct {
	attempts int
	next     time.Time
}

// failed counts a failure at now and returns the number of failures so far.
func (r *retries) failed(rk retryKey, now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[retryKey]retryState{}
	}
	s := r.n[rk]
	s.attempts++
	s.next = now.Add(min(time.Second<<min(s.attempts-1, 16), maxRetryDelay))
	r.n[rk] = s
	return s.attempts
}

// due reports whether the channel may be tried at now.
func (r *retries) due(rk retryKey, now time.Time) bool {
	at := r.nextAttempt(rk)
	return at.IsZero() || !now.Before(at)
}

func (r *retries) nextAttempt(rk retryKey) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[rk].next
}

// forget drops every count about k.
func (r *retries) forget(k Key) {
	r.mu.Lock()
	for rk := range r.n {
		if rk.Key == k {
			delete(r.n, rk)
		}
	}
	r.mu.Unlock()
}

func (r *retries) reset(rk retryKey) {
	r.mu.Lock()
	delete(r.n, rk)
	r.mu.Unlock()
}

// pendingDelivery is a delivery this process made that the cache may not
// show yet.
type pendingDelivery struct {
	uid         types.UID
	expiresAt   time.Time
	key         string
	reminder    bool
	channels    []string
	at          time.Time
	postponedTo time.Time
	// announced is the deletion time the message gave.
	announced time.Time
}

// applyTo records the delivery in rec.
func (d pendingDelivery) applyTo(rec *expiry.Record) {
	rec.Delivered(d.key, d.reminder, d.channels, d.at)
	if !d.postponedTo.IsZero() {
		rec.PostponedTo = d.postponedTo
	}
	rec.Announce(d.announced)
}

// pendingDeliveries keeps each object's recent deliveries until its record,
// as the cache shows it, holds them.
type pendingDeliveries struct {
	mu sync.Mutex
	m  map[Key][]pendingDelivery
}

func (p *pendingDeliveries) add(k Key, d pendingDelivery) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[Key][]pendingDelivery{}
	}
	p.m[k] = append(p.m[k], d)
}

// carry returns rec (the record as the object shows it, nil when it shows
// none) with the deliveries this process made about an expiry other than
// expiresAt and has not written yet: when an extension is about to replace
// the record, they must come along, for the notice and the extension
// message depend on them. rec itself is not changed.
func (p *pendingDeliveries) carry(k Key, uid types.UID, rec *expiry.Record, created, expiresAt time.Time) *expiry.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range p.m[k] {
		if d.uid != uid || d.expiresAt.Equal(expiresAt) {
			continue
		}
		switch {
		case rec == nil || rec.ExpiresAt.IsZero():
			rec = &expiry.Record{ExpiresAt: d.expiresAt, Since: created}
		case !d.expiresAt.Equal(rec.ExpiresAt):
			continue
		default:
			rec = rec.Clone()
		}
		d.applyTo(rec)
	}
	return rec
}

// apply adds to rec, the record planning goes on from, this process's
// deliveries about its expiry that shown (the record as the object shows
// it) lacks, and reports whether there were any: they still have to be
// written. It forgets the deliveries shown holds, those about another
// expiry (carried already) and those about another object under the name.
func (p *pendingDeliveries) apply(k Key, uid types.UID, shown, rec *expiry.Record) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	var keep []pendingDelivery
	for _, d := range p.m[k] {
		if d.uid != uid || !d.expiresAt.Equal(rec.ExpiresAt) || shows(shown, d) {
			continue
		}
		d.applyTo(rec)
		keep = append(keep, d)
	}
	if len(keep) == 0 {
		delete(p.m, k)
	} else {
		p.m[k] = keep
	}
	return len(keep) > 0
}

// shows reports whether rec holds delivery d.
func shows(rec *expiry.Record, d pendingDelivery) bool {
	if rec == nil || !rec.ExpiresAt.Equal(d.expiresAt) {
		return false
	}
	for _, c := range d.channels {
		if !slices.Contains(rec.Sent[d.key].Channels, c) {
			return false
		}
	}
	return true
}

func (p *pendingDeliveries) forget(k Key) {
	p.mu.Lock()
	delete(p.m, k)
	p.mu.Unlock()
}

// writeFailed reports a record that could not be written, once per object:
// the deliveries stay in memory meanwhile, and planning goes on from them.
func (r *ObjectReconciler) writeFailed(key Key, obj *metav1.PartialObjectMetadata, err error) error {
	if r.remember(key, obj.UID, func(s *reported) bool {
		first := !s.writeFailed
		s.writeFailed = true
		return first
	}) {
		r.Recorder.Eventf(reference(key.GVK, obj), nil, corev1.EventTypeWarning, ReasonRecordFailed, actionNotify,
			"Could not record on the object what was sent (%s): a restart of the controller would send it again", apierrors.ReasonForError(err))
	}
	return err
}

// whyRehearsed says why the deletions of the object are only rehearsed.
func (r *ObjectReconciler) whyRehearsed() string {
	if r.DryRun {
		return "the controller runs with --dry-run"
	}
	return "the policy is in dry-run mode"
}

// reasonSent is the reason of the Event that says plan's message went out.
func reasonSent(plan expiry.Plan) string {
	if plan.Event == v1alpha1.EventWouldDelete {
		return ReasonWouldDelete
	}
	return ReasonReminderSent
}

// sentNote is the note of the Event that says plan's message went out via
// channels.
func sentNote(ev *evaluation, plan expiry.Plan, msg notify.Message, channels []string) string {
	if plan.Event == v1alpha1.EventWouldDelete {
		return fmt.Sprintf("Expired at %s (%s, policy %s); %s", ev.life.ExpiresAt.UTC().Format(time.RFC3339), ev.life.Source, ev.policy.Name, msg.Detail)
	}
	return fmt.Sprintf("Sent %s via %s (%s)", describeMessage(plan), strings.Join(channels, ", "), whenText(plan.At))
}

// reportFirstDelivery records, in the audit trail and an Event, what the
// first delivery of a postponement or a rehearsal means for the object.
func (r *ObjectReconciler) reportFirstDelivery(ctx context.Context, key Key, obj *metav1.PartialObjectMetadata, ev *evaluation, plan expiry.Plan, msg notify.Message) {
	switch plan.Event {
	case v1alpha1.EventPostponed:
		r.audit(ctx, key, obj, ev, audit.Record{Type: audit.Postponed, Result: audit.OK,
			Detail: "deletion postponed to " + plan.At.UTC().Format(time.RFC3339) + ": " + msg.Detail})
		r.Recorder.Eventf(reference(key.GVK, obj), nil, corev1.EventTypeNormal, ReasonDeletionPostponed, actionDelete,
			"Expired at %s; deletion postponed to %s because %s", ev.life.ExpiresAt.UTC().Format(time.RFC3339),
			plan.At.UTC().Format(time.RFC3339), msg.Detail)
	case v1alpha1.EventWouldDelete:
		deletions.WithLabelValues("would_delete").Inc()
		r.audit(ctx, key, obj, ev, audit.Record{Type: audit.WouldDelete, Result: audit.OK, Detail: r.whyRehearsed()})
		logf.FromContext(ctx).Info("would delete", "expiresAt", ev.life.ExpiresAt, "policy", ev.policy.Name)
	}
}

// maxEventName is the longest name the API server takes for an Event.
const maxEventName = 253

// storeEvent creates, through the API, the Kubernetes Event that is plan's
// message where no channel carries its type. Its name is fixed by the
// message (the object's UID, expiry, type and stage), so that a retry
// after a lost answer finds it stored instead of creating a second one.
func (r *ObjectReconciler) storeEvent(ctx context.Context, key Key, obj *metav1.PartialObjectMetadata, ev *evaluation, plan expiry.Plan, msg notify.Message) error {
	namespace := obj.Namespace
	if namespace == "" {
		// Cluster-scoped: the API server takes their Events only in
		// "default" or "kube-system".
		namespace = r.ClusterEventNamespace
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
		EventTime:           metav1.NewMicroTime(r.Clock.Now()),
		ReportingController: Name,
		ReportingInstance:   reportingInstance,
		Action:              actionNotify,
		Reason:              reasonSent(plan),
		Regarding:           *reference(key.GVK, obj),
		Note:                cutNote(sentNote(ev, plan, msg, []string{notify.EventsChannel})),
		Type:                corev1.EventTypeNormal,
	}
	if err := r.Client.Create(ctx, e); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Event %s/%s: %w", namespace, e.Name, err)
	}
	return nil
}

// reportingInstance names this process in the Events it creates itself,
// as the Event recorder does.
var reportingInstance = func() string {
	host, _ := os.Hostname()
	return Name + "-" + host
}()

// reportOnce records on the object that the warnings whats are being said
// about its current expiry, and returns those that had not been said
// before: only they are said, and only once the record holds them, so that
// neither a retry nor a restart says them again. When the record cannot be
// written nothing is said now; the next pass tries again.
func (r *ObjectReconciler) reportOnce(ctx context.Context, key Key, obj *metav1.PartialObjectMetadata, ev *evaluation, whats ...string) map[string]bool {
	var fresh []string
	for _, what := range whats {
		if _, ok := ev.record.Reported[what]; !ok {
			fresh = append(fresh, what)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	said := map[string]bool{}
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	err := r.recordDelivery(writeCtx, key, obj, ev, func(rec *expiry.Record) {
		// Applied again to a fresh record after a conflict: what another
		// writer recorded meanwhile is not said twice.
		clear(said)
		for _, what := range fresh {
			if rec.Report(what, ev.now) {
				said[what] = true
			}
		}
	})
	if err != nil {
		logf.FromContext(ctx).Error(err, "record a warning", "warnings", fresh)
		return nil
	}
	return said
}
