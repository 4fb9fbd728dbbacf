// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// scriptedChannel is the NotificationChannel the scripted notifier is
// built for: every harness holds it, with an empty spec that no real kind
// of channel claims.
const scriptedChannel = "scripted"

// withScripted makes a policy send through the scripted channel.
func withScripted(p *v1alpha1.TimeoutPolicy) {
	p.Spec.Notifications.Channels = []v1alpha1.ChannelReference{{Name: scriptedChannel}}
}

// scripted is a channel whose answers a test sets.
type scripted struct {
	mu     sync.Mutex
	events []v1alpha1.EventType
	fail   error
	sent   []notify.Message
	// during, when set, runs inside Send: a slow channel.
	during func()
}

func (c *scripted) Name() string { return "scripted" }
func (c *scripted) Accepts(t v1alpha1.EventType) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return notify.Subscribed(c.events, t)
}
func (c *scripted) Send(_ context.Context, m notify.Message, _ notify.Content) error {
	c.mu.Lock()
	during := c.during
	c.mu.Unlock()
	// Outside the lock: a send that blocks must not block Accepts.
	if during != nil {
		during()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		return c.fail
	}
	c.sent = append(c.sent, m)
	return nil
}

func (c *scripted) set(events []v1alpha1.EventType, fail error) {
	c.mu.Lock()
	c.events, c.fail, c.sent, c.during = events, fail, nil, nil
	c.mu.Unlock()
}

func (c *scripted) count(t v1alpha1.EventType) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.sent {
		if m.Type == t {
			n++
		}
	}
	return n
}

// kinds hold the one kind of channel a harness builds, in the place of
// channelKinds: its own scripted channel. Nothing reads a Secret, and
// tests that script their channel can run in parallel.
func (c *scripted) kinds() notify.Kinds {
	return notify.Kinds{{Name: "scripted", Build: func(_ context.Context, ch notify.Channel, _ notify.Secrets) (notify.Notifier, error) {
		if ch.Name != scriptedChannel {
			return nil, nil
		}
		return c, nil
	}}}
}

// remindingPolicy reminds 30 minutes before a one-hour default TTL through
// the scripted channel.
func remindingPolicy(notice v1alpha1.Duration) *v1alpha1.TimeoutPolicy {
	return fixture.Policy("reminding", fixture.Reminders("30m"), func(p *v1alpha1.TimeoutPolicy) {
		p.Spec.MinimumNotice = notice
		withScripted(p)
	})
}

func TestRetriesBackOffWhenTheNoticeIsStillOwedAfterExpiry(t *testing.T) {
	cm := fixture.NewConfigMap("late")
	h := newHarness(t, fixture.T0.Add(2*time.Hour), remindingPolicy("1h"), cm)
	h.scripted.set(nil, errors.New("mail server down"))

	res, err := h.reconcile(cm)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter < time.Second {
		t.Fatalf("RequeueAfter = %v after a failed reminder past expiry; want the backoff, at least 1s", res.RequeueAfter)
	}
	// Looked at again before the backoff is over: nothing is sent.
	h.scripted.set(nil, nil)
	res, err = h.reconcile(cm)
	if err != nil || res.RequeueAfter < 500*time.Millisecond || h.scripted.count(v1alpha1.EventReminder) != 0 {
		t.Fatalf("second look: %v, %v, %d sends; want a wait and no send", res, err, h.scripted.count(v1alpha1.EventReminder))
	}
	if h.stored(cm) == nil {
		t.Fatal("deleted without the notice it was owed")
	}
}

func TestAStageIsNotSentAgainWhileTheCacheLags(t *testing.T) {
	cm := fixture.NewConfigMap("lagging")
	h := newHarness(t, fixture.T0.Add(31*time.Minute), remindingPolicy("0s"), cm)

	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	if h.scripted.count(v1alpha1.EventReminder) != 1 {
		t.Fatalf("%d reminders, want 1", h.scripted.count(v1alpha1.EventReminder))
	}
	// The cache has not seen the record yet.
	h.mu.Lock()
	h.cacheView = func(o *metav1.PartialObjectMetadata) error {
		delete(o.Annotations, expiry.AnnotationReminders)
		return nil
	}
	h.mu.Unlock()
	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	if n := h.scripted.count(v1alpha1.EventReminder); n != 1 {
		t.Errorf("%d reminders after a reconcile from a lagging cache, want still 1", n)
	}
	h.mu.Lock()
	h.cacheView = nil
	h.mu.Unlock()
	rec, _ := expiry.ParseRecord(h.stored(cm).Annotations[expiry.AnnotationReminders])
	if rec == nil || len(rec.Sent["30m"].Channels) != 1 {
		t.Errorf("record = %+v, want the 30m stage", rec)
	}
	res, err := h.reconcile(cm)
	if err != nil || res.RequeueAfter != 29*time.Minute-farewellLead || h.scripted.count(v1alpha1.EventReminder) != 1 {
		t.Errorf("once the cache caught up: %+v, %v; want a wait for the expiry, 29m away (less the farewell's lead), and no send", res, err)
	}
}

func TestAFailedRecordWriteDoesNotResend(t *testing.T) {
	cm := fixture.NewConfigMap("unwritable")
	h := newHarness(t, fixture.T0.Add(31*time.Minute), remindingPolicy("0s"), cm)
	h.mu.Lock()
	h.patchErr = apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, cm.Name, errors.New("no patch"))
	h.mu.Unlock()

	if _, err := h.reconcile(cm); err == nil {
		t.Fatal("a failed record write was not reported")
	}
	// Planning goes on from what is remembered: nothing is sent again,
	// and the object is not held up.
	for range 2 {
		res, err := h.reconcile(cm)
		if err != nil || res.RequeueAfter != 29*time.Minute-farewellLead {
			t.Fatalf("reconcile after a failed write: %+v, %v; want a wait for the expiry (less the farewell's lead)", res, err)
		}
	}
	if n := h.scripted.count(v1alpha1.EventReminder); n != 1 {
		t.Errorf("%d reminders, want 1 however often the record write fails", n)
	}
	var warnings int
	for _, e := range fixture.Drain(h.rec) {
		if strings.Contains(e, "Warning RecordFailed") {
			warnings++
		}
	}
	if warnings != 1 {
		t.Errorf("%d RecordFailed warnings, want one", warnings)
	}
	// Once writing works again, the delivery reaches the object.
	h.mu.Lock()
	h.patchErr = nil
	h.mu.Unlock()
	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	rec, _ := expiry.ParseRecord(h.stored(cm).Annotations[expiry.AnnotationReminders])
	if rec == nil || len(rec.Sent["30m"].Channels) != 1 {
		t.Errorf("record after the write recovered = %+v", rec)
	}
}

func TestAChannelThatDoesNotCarryRemindersGivesNoNotice(t *testing.T) {
	cm := fixture.NewConfigMap("unsubscribed")
	h := newHarness(t, fixture.T0.Add(31*time.Minute), remindingPolicy("1h"), cm)
	h.scripted.set([]v1alpha1.EventType{v1alpha1.EventDeleted}, nil)

	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	if h.scripted.count(v1alpha1.EventReminder) != 0 {
		t.Fatal("a channel that does not carry reminders was sent one")
	}
	stored := h.stored(cm)
	rec, err := expiry.ParseRecord(stored.Annotations[expiry.AnnotationReminders])
	if err != nil || rec == nil {
		t.Fatalf("record = %v, %v", rec, err)
	}
	// The Kubernetes Event is the reminder, and says so.
	if got := rec.Sent["30m"].Channels; !slices.Equal(got, []string{notify.EventsChannel}) {
		t.Errorf("30m reminder delivered via %v, want only %q", got, notify.EventsChannel)
	}
}

func TestADeletionThatFallsDueDuringAFailedSendIsNotDelayed(t *testing.T) {
	cm := fixture.NewConfigMap("slow")
	h := newHarness(t, fixture.T0.Add(59*time.Minute), remindingPolicy("0s"), cm)
	h.scripted.set(nil, errors.New("timed out"))
	// The send takes until past the expiry, then fails.
	h.scripted.mu.Lock()
	h.scripted.during = func() { h.clock.SetTime(fixture.T0.Add(time.Hour + time.Millisecond)) }
	h.scripted.mu.Unlock()

	res, err := h.reconcile(cm)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter > 10*time.Millisecond {
		t.Fatalf("RequeueAfter = %v after the expiry passed during the send; want to plan again at once", res.RequeueAfter)
	}
	h.scripted.set(nil, nil)
	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	if h.stored(cm) != nil {
		t.Error("not deleted on the pass after the expiry")
	}
}

// With --dry-run the object was reminded, postponed and reported as
// would-delete; the controller then runs without the flag. Whatever people
// were told led to no deletion: they get the minimum notice from then.
func TestLeavingTheGlobalDryRunGivesTheMinimumNoticeAgain(t *testing.T) {
	cm := fixture.NewConfigMap("rehearsed")
	policy := fixture.Policy("plain", fixture.Reminders("30m"), func(p *v1alpha1.TimeoutPolicy) { p.Spec.MinimumNotice = "45m" })
	h := newHarness(t, fixture.T0, policy, cm)
	h.r.DryRun = true
	for _, at := range []time.Duration{30 * time.Minute, time.Hour, 75 * time.Minute, 80 * time.Minute} {
		h.clock.SetTime(fixture.T0.Add(at))
		// A reconcile for the delivery, one more for the watch it brings.
		for range 2 {
			if _, err := h.reconcile(cm); err != nil {
				t.Fatal(err)
			}
		}
	}
	rec, _ := expiry.ParseRecord(h.stored(cm).Annotations[expiry.AnnotationReminders])
	if _, ok := rec.Sent[expiry.KeyWouldDelete]; !ok {
		t.Fatalf("record %+v does not show the rehearsal", rec)
	}
	fixture.Drain(h.rec)

	live := fixture.T0.Add(90 * time.Minute)
	h.clock.SetTime(live)
	h.r = &Reconciler{Client: h.r.Client, APIReader: h.r.APIReader, Recorder: h.rec, Clock: h.clock, Channels: h.channels()}
	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	if h.stored(cm) == nil {
		t.Fatal("deleted at once when the dry run ended, on notice given during the rehearsal")
	}
	deleteAt := live.Add(45 * time.Minute).UTC().Format(time.RFC3339)
	evs := fixture.Drain(h.rec)
	if !slices.ContainsFunc(evs, func(e string) bool {
		return strings.HasPrefix(e, "Normal DeletionPostponed") && strings.Contains(e, "postponed to "+deleteAt)
	}) {
		t.Errorf("Events %q; want a DeletionPostponed that names %s", evs, deleteAt)
	}
	for _, at := range []time.Duration{time.Second, 44 * time.Minute} {
		h.clock.SetTime(live.Add(at))
		if _, err := h.reconcile(cm); err != nil {
			t.Fatal(err)
		}
		if h.stored(cm) == nil {
			t.Fatalf("deleted %s after the dry run ended, before the %s announced", at, deleteAt)
		}
	}
	h.clock.SetTime(live.Add(45 * time.Minute))
	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	if h.stored(cm) != nil {
		t.Errorf("not deleted at %s, the time announced", deleteAt)
	}
}

// What the controller says once (a failure, a notice not given, a
// postponement) is decided from the record on the object: a restart before
// any step (a new reconciler on the same API server) neither repeats nor
// loses a message or a report.
func TestARestartAtAnyStepRepeatsAndLosesNothing(t *testing.T) {
	cm := fixture.NewConfigMap("restarted")
	h := newHarness(t, fixture.T0, remindingPolicy("1h"), cm)
	h.scripted.set(nil, errors.New("mail server down"))
	var all []string
	step := func(at time.Duration, times int) {
		t.Helper()
		h.clock.SetTime(fixture.T0.Add(at))
		for range times {
			// Everything in memory is dropped.
			h.r = &Reconciler{Client: h.r.Client, APIReader: h.r.APIReader, Recorder: h.rec, Clock: h.clock, Channels: h.channels()}
			h.r.Outbox = h.r.NewOutbox(h.client, h.r.APIReader, "timeout-system", 0, logr.Discard())
			if _, err := h.reconcile(cm); err != nil && !strings.Contains(err.Error(), "conflict") {
				t.Fatal(err)
			}
			all = append(all, fixture.Kinds(fixture.Drain(h.rec))...)
		}
	}
	step(30*time.Minute, 3) // the reminder fails
	step(time.Hour, 3)      // expired, no notice given
	h.scripted.set(nil, nil)
	step(62*time.Minute, 3) // the reminder goes out, then the postponement
	step(90*time.Minute, 2)
	step(122*time.Minute, 1) // deleted
	if h.stored(cm) != nil {
		t.Fatal("not deleted at the postponed time")
	}
	count := func(kind string) int {
		n := 0
		for _, k := range all {
			if k == kind {
				n++
			}
		}
		return n
	}
	for kind, want := range map[string]int{
		"Warning MessageFailed":    1,
		"Warning NoticeNotGiven":   1,
		"Normal DeletionPostponed": 1,
		"Normal MessageSent":       2, // the reminder, the postponement
	} {
		if got := count(kind); got != want {
			t.Errorf("%d %s Events, want %d: %q", got, kind, want, all)
		}
	}
	if r, p := h.scripted.count(v1alpha1.EventReminder), h.scripted.count(v1alpha1.EventPostponed); r != 1 || p != 1 {
		t.Errorf("%d reminders and %d postponements sent, want one of each", r, p)
	}
}

// storedRecord is the reminder record on the stored object, nil when the
// object or its record is gone.
func storedRecord(t *testing.T, h *harness, cm *corev1.ConfigMap) *expiry.Record {
	t.Helper()
	s := h.stored(cm)
	if s == nil {
		return nil
	}
	r, err := expiry.ParseRecord(s.Annotations[expiry.AnnotationReminders])
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// mustReconcile reconciles and fails the test on an error.
func mustReconcile(t *testing.T, h *harness, cm *corev1.ConfigMap) ctrl.Result {
	t.Helper()
	res, err := h.reconcile(cm)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// extendDuringTheFirstReminder extends cm by two days while its first
// reminder is being sent, and checks that one reminder went out, that the
// looks after it send one extension message, and that the record keeps
// the notice the reminder gave.
func extendDuringTheFirstReminder(t *testing.T, h *harness, cm *corev1.ConfigMap) {
	t.Helper()
	h.scripted.mu.Lock()
	h.scripted.during = func() { h.annotate(cm, expiry.AnnotationExpiresAt, fixture.T0.Add(48*time.Hour).Format(time.RFC3339)) }
	h.scripted.mu.Unlock()
	mustReconcile(t, h, cm)
	h.scripted.mu.Lock()
	h.scripted.during = nil
	h.scripted.mu.Unlock()
	if n := h.scripted.count(v1alpha1.EventReminder); n != 1 {
		t.Fatalf("%d reminders, want 1", n)
	}
	for range 3 {
		mustReconcile(t, h, cm)
	}
	if n := h.scripted.count(v1alpha1.EventExtended); n != 1 {
		t.Errorf("%d extended messages after people were sent a reminder for the old date; want 1", n)
	}
	if rec := storedRecord(t, h, cm); rec == nil || rec.NoticeAt.IsZero() {
		t.Errorf("record %s forgot the notice given by the delivered reminder", rec)
	}
}

// TestRemindersWhenTheObjectChangesDuringASend covers what happens to a
// delivery when the object is extended, extended again or recreated while
// a message about it is on its way.
func TestRemindersWhenTheObjectChangesDuringASend(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"keeps the delivery of a first reminder the object was extended during, and owes an extension message", func(t *testing.T) {
			cm := fixture.NewConfigMap("extdur")
			h := newHarness(t, fixture.T0.Add(31*time.Minute), remindingPolicy("1h"), cm)
			extendDuringTheFirstReminder(t, h, cm)
		}},
		{"keeps that delivery while the extension's count is written first, under extension limits", func(t *testing.T) {
			// The policy counts extensions: the first look at the new
			// expiry writes the count and stops there. The delivery the
			// record did not get must outlive that look.
			cm := fixture.NewConfigMap("extcount")
			policy := remindingPolicy("1h")
			policy.Spec.Extensions = &v1alpha1.Extensions{MaxCount: new(int32(3))}
			h := newHarness(t, fixture.T0.Add(31*time.Minute), policy, cm)
			mustReconcile(t, h, cm) // the count of none
			if got := h.stored(cm).Annotations[expiry.AnnotationExtensions]; got == "" {
				t.Fatalf("no %s annotation: the case is not the one under test", expiry.AnnotationExtensions)
			}
			extendDuringTheFirstReminder(t, h, cm)
		}},
		{"keeps an extension message owed when a second extension comes before it got through", func(t *testing.T) {
			cm := fixture.NewConfigMap("twice")
			h := newHarness(t, fixture.T0.Add(31*time.Minute), remindingPolicy("0s"), cm)
			mustReconcile(t, h, cm) // the 30m reminder
			mustReconcile(t, h, cm)
			h.scripted.set(nil, errors.New("down"))
			h.annotate(cm, expiry.AnnotationExpiresAt, fixture.T0.Add(3*time.Hour).Format(time.RFC3339))
			mustReconcile(t, h, cm) // the record follows the new expiry
			mustReconcile(t, h, cm) // the extended message fails
			if n := h.scripted.count(v1alpha1.EventExtended); n != 0 {
				t.Fatalf("%d extended messages through a failing channel", n)
			}
			h.scripted.set(nil, nil)
			h.annotate(cm, expiry.AnnotationExpiresAt, fixture.T0.Add(5*time.Hour).Format(time.RFC3339))
			h.clock.Step(time.Minute)
			mustReconcile(t, h, cm)
			mustReconcile(t, h, cm)
			if n := h.scripted.count(v1alpha1.EventExtended); n != 1 {
				t.Errorf("%d extended messages: people told of 10:00 must hear of the extension once", n)
			}
		}},
		{"does not carry the backoff of a failing stage over to the stage of a new expiry", func(t *testing.T) {
			cm := fixture.NewConfigMap("backoff")
			h := newHarness(t, fixture.T0.Add(31*time.Minute), remindingPolicy("1h"), cm)
			h.scripted.set(nil, errors.New("down"))
			for range 8 {
				h.clock.Step(mustReconcile(t, h, cm).RequeueAfter)
			}
			mustReconcile(t, h, cm)
			last := h.clock.Now()
			old := h.r.delivery().NextAttempt(keyOf(cm), cm.UID, fixture.T0.Add(time.Hour), "30m", scriptedChannel)
			h.scripted.set(nil, nil)
			// Extended so that the new date's 30m stage falls due in a
			// minute, before the old stage's next attempt.
			h.annotate(cm, expiry.AnnotationExpiresAt, last.Add(31*time.Minute).Truncate(time.Second).Add(time.Second).Format(time.RFC3339))
			mustReconcile(t, h, cm)
			h.clock.Step(90 * time.Second)
			if !old.After(h.clock.Now()) {
				t.Fatalf("the old stage's backoff ended at %s, before the new stage fell due: the case tests nothing", old)
			}
			res := mustReconcile(t, h, cm)
			if n := h.scripted.count(v1alpha1.EventReminder); n != 1 {
				t.Errorf("%d reminders 30s after the new date's stage fell due (requeue %v); want 1, not a wait for the old date's backoff", n, res.RequeueAfter)
			}
		}},
		{"does not write a delivery about an object onto the object recreated under its name", func(t *testing.T) {
			// Recreated a minute after its stage fell due: owed no reminder.
			h, cm := recreatedDuringASend(t, fixture.T0.Add(31*time.Minute))
			mustReconcile(t, h, cm)
			s := h.stored(cm)
			if s == nil || s.UID != recreatedUID {
				t.Fatalf("stored %v, want the recreated object", s)
			}
			if r := s.Annotations[expiry.AnnotationReminders]; r != "" {
				t.Errorf("the new object carries a record %s of a delivery made about the old one", r)
			}
		}},
		{"reminds an object recreated under the name of one reminded, before deleting it", func(t *testing.T) {
			// Recreated when its stage falls due: one created later lives
			// less than the lead and is owed no reminder
			// (docs/concepts.md#stages-and-notice).
			h, cm := recreatedDuringASend(t, fixture.T0.Add(30*time.Minute))
			mustReconcile(t, h, cm)
			h.scripted.set(nil, nil)
			var remindedAt time.Time
			for _, m := range []time.Duration{30, 31, 35, 55, 60, 61, 70, 71} {
				h.clock.SetTime(fixture.T0.Add(m * time.Minute))
				mustReconcile(t, h, cm)
				h.scripted.mu.Lock()
				for _, msg := range h.scripted.sent {
					if msg.Type == v1alpha1.EventReminder && msg.Object.UID == recreatedUID && remindedAt.IsZero() {
						remindedAt = h.clock.Now()
					}
				}
				h.scripted.mu.Unlock()
				if h.stored(cm) != nil {
					continue
				}
				if remindedAt.IsZero() {
					t.Fatalf("the recreated object was deleted at +%dm with no reminder of its own", m)
				}
				if notice := h.clock.Now().Sub(remindedAt); notice < 10*time.Minute {
					t.Fatalf("the recreated object was deleted at +%dm, %s after its reminder; the policy promises 10m", m, notice)
				}
				return
			}
			t.Fatalf("the recreated object was not deleted by +71m (reminded at %s)", remindedAt)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// recreatedUID is the UID of the object recreatedDuringASend creates.
const recreatedUID = "uid-recreated-2"

// recreatedDuringASend returns a harness at now, whose policy reminds 30
// minutes ahead with 10 minutes of notice, and an object expiring at
// t0+1h. The first send about it deletes it and creates another under its
// name, created at now, with the same expiry: anything remembered by name
// and expiry (a delivery not written yet, a backoff) would pass for the
// new object's.
func recreatedDuringASend(t *testing.T, now time.Time) (*harness, *corev1.ConfigMap) {
	t.Helper()
	at := fixture.T0.Add(time.Hour)
	cm := fixture.NewConfigMap("recreated", fixture.ExpiresAt(at))
	h := newHarness(t, now, remindingPolicy("10m"), cm)
	h.scripted.mu.Lock()
	defer h.scripted.mu.Unlock()
	h.scripted.during = func() {
		if err := h.client.Delete(context.Background(), cm); err != nil {
			t.Error(err)
		}
		again := fixture.NewConfigMap("recreated", fixture.ExpiresAt(at), func(c *corev1.ConfigMap) {
			c.UID = recreatedUID
			c.CreationTimestamp = metav1.NewTime(now)
		})
		if err := h.client.Create(context.Background(), again); err != nil {
			t.Error(err)
		}
	}
	return h, cm
}

// TestRemindersWhenDeliveryOrItsRecordFails covers a channel that keeps
// failing and a record write that fails, for a while or for good.
func TestRemindersWhenDeliveryOrItsRecordFails(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"reports NoticeNotGiven for an object held past expiry by a channel that failed since before it", func(t *testing.T) {
			cm := fixture.NewConfigMap("nng")
			h := newHarness(t, fixture.T0.Add(30*time.Minute), remindingPolicy("1h"), cm)
			h.scripted.set(nil, errors.New("mail server down"))
			var all []string
			for i := 0; i < 40 && h.clock.Now().Before(fixture.T0.Add(3*time.Hour)); i++ {
				h.clock.Step(mustReconcile(t, h, cm).RequeueAfter)
				all = append(all, fixture.Kinds(fixture.Drain(h.rec))...)
			}
			if h.stored(cm) == nil {
				t.Fatal("deleted although no reminder got through")
			}
			if !slices.Contains(all, "Warning NoticeNotGiven") {
				t.Errorf("held past expiry for want of notice, but Events %q have no NoticeNotGiven", all)
			}
		}},
		{"counts the Event that is the reminder as notice when its record write failed once", func(t *testing.T) {
			cm := fixture.NewConfigMap("evrem")
			p := fixture.Policy("plain", fixture.Reminders("30m"), func(p *v1alpha1.TimeoutPolicy) { p.Spec.MinimumNotice = "1h" })
			h := newHarness(t, fixture.T0.Add(31*time.Minute), p, cm)
			h.mu.Lock()
			h.patchErr = apierrors.NewServiceUnavailable("etcd leader change")
			h.mu.Unlock()
			if _, err := h.reconcile(cm); err == nil {
				t.Fatal("a failed record write was not reported")
			}
			h.mu.Lock()
			h.patchErr = nil
			h.mu.Unlock()
			all := fixture.Kinds(fixture.Drain(h.rec))
			mustReconcile(t, h, cm) // the pending delivery is written
			if rec := storedRecord(t, h, cm); rec == nil || !slices.Equal(rec.Sent["30m"].Channels, []string{notify.EventsChannel}) {
				t.Fatalf("record %s, want the 30m stage delivered as an Event", rec)
			}
			// One hour of notice from 09:31.
			h.clock.SetTime(fixture.T0.Add(91*time.Minute + time.Second))
			mustReconcile(t, h, cm)
			all = append(all, fixture.Kinds(fixture.Drain(h.rec))...)
			if h.stored(cm) != nil {
				t.Fatalf("not deleted a minimum notice after the reminder; Events %q", all)
			}
			if i, j := slices.Index(all, "Normal MessageSent"), slices.Index(all, "Normal Deleted"); i < 0 || i > j {
				t.Errorf("Events %q: want the MessageSent Event, the notice counted, before Deleted", all)
			}
		}},
		{"neither blocks an object whose record can never be written nor keeps quiet about it", func(t *testing.T) {
			cm := fixture.NewConfigMap("forbidden")
			h := newHarness(t, fixture.T0.Add(31*time.Minute), remindingPolicy("0s"), cm)
			h.mu.Lock()
			h.patchErr = apierrors.NewForbidden(configMaps, cm.Name, errors.New("no patch"))
			h.mu.Unlock()
			var all []string
			for _, at := range []time.Duration{31 * time.Minute, 2 * time.Hour} {
				h.clock.SetTime(fixture.T0.Add(at))
				_, _ = h.reconcile(cm) // the first write is refused
				all = append(all, fixture.Kinds(fixture.Drain(h.rec))...)
			}
			if h.stored(cm) != nil {
				t.Errorf("still there an hour after expiry; Events %q", all)
			}
			if !slices.Contains(all, "Warning RecordFailed") {
				t.Errorf("Events %q: want a RecordFailed warning", all)
			}
			if n := h.scripted.count(v1alpha1.EventReminder); n != 1 {
				t.Errorf("%d reminders, want 1", n)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// The warnings about an object's annotations are given once while the
// values stay wrong, however often the controller restarts: the record on
// the object says they were given.
func TestARestartBeforeEveryPassRepeatsNoWarningAboutTheAnnotations(t *testing.T) {
	cm := fixture.NewConfigMap("restarted", fixture.TTL("3 days"), fixture.Annotated(notify.AnnotationNotify, "not-an-address"))
	h := newHarness(t, fixture.T0, remindingPolicy("1h"), cm)
	var all []string
	for _, at := range []time.Duration{time.Minute, 2 * time.Minute, 31 * time.Minute, 32 * time.Minute, 40 * time.Minute} {
		h.clock.SetTime(fixture.T0.Add(at))
		// Everything in memory is dropped.
		h.r = &Reconciler{Client: h.r.Client, APIReader: h.r.APIReader, Recorder: h.rec, Clock: h.clock, Channels: h.channels()}
		h.r.Outbox = h.r.NewOutbox(h.client, h.r.APIReader, "timeout-system", 0, logr.Discard())
		if _, err := h.reconcile(cm); err != nil && !strings.Contains(err.Error(), "conflict") {
			t.Fatal(err)
		}
		all = append(all, fixture.Kinds(fixture.Drain(h.rec))...)
	}
	for _, kind := range []string{"Warning InvalidTimeout", "Warning InvalidRecipient"} {
		if got := slices.Index(all, kind); got < 0 || slices.Index(all[got+1:], kind) >= 0 {
			t.Errorf("Events %q; want exactly one %s", all, kind)
		}
	}
	if h.scripted.count(v1alpha1.EventReminder) != 1 {
		t.Errorf("%d reminders sent, want one", h.scripted.count(v1alpha1.EventReminder))
	}
}
