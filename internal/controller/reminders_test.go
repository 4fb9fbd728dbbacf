// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"github.com/go-logr/logr"

	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
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
	defer c.mu.Unlock()
	if c.during != nil {
		c.during()
	}
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

var theScripted = &scripted{}

func init() {
	notify.Register("zz-scripted", func(_ context.Context, ch notify.Channel, _ notify.Secrets) (notify.Notifier, error) {
		if ch.Name == scriptedChannel {
			return theScripted, nil
		}
		return nil, nil
	})
}

// remindingPolicy reminds 30 minutes before a one-hour default TTL through
// the scripted channel.
func remindingPolicy(notice v1alpha1.Duration) *v1alpha1.TimeoutPolicy {
	return newPolicy("reminding", reminders("30m"), func(p *v1alpha1.TimeoutPolicy) {
		p.Spec.MinimumNotice = notice
		withScripted(p)
	})
}

// The scripted channel is shared: these tests do not run in parallel.

func TestRetriesBackOffWhenTheNoticeIsStillOwedAfterExpiry(t *testing.T) {
	theScripted.set(nil, errors.New("mail server down"))
	cm := newConfigMap("late")
	h := newHarness(t, t0.Add(2*time.Hour), remindingPolicy("1h"), cm)

	res, err := h.reconcile(cm)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter < time.Second {
		t.Fatalf("RequeueAfter = %v after a failed reminder past expiry; want the backoff, at least 1s", res.RequeueAfter)
	}
	// Looked at again before the backoff is over: nothing is sent.
	theScripted.set(nil, nil)
	res, err = h.reconcile(cm)
	if err != nil || res.RequeueAfter < 500*time.Millisecond || theScripted.count(v1alpha1.EventReminder) != 0 {
		t.Fatalf("second look: %v, %v, %d sends; want a wait and no send", res, err, theScripted.count(v1alpha1.EventReminder))
	}
	if h.stored(cm) == nil {
		t.Fatal("deleted without the notice it was owed")
	}
}

func TestAStageIsNotSentAgainWhileTheCacheLags(t *testing.T) {
	theScripted.set(nil, nil)
	cm := newConfigMap("lagging")
	h := newHarness(t, t0.Add(31*time.Minute), remindingPolicy("0s"), cm)

	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	if theScripted.count(v1alpha1.EventReminder) != 1 {
		t.Fatalf("%d reminders, want 1", theScripted.count(v1alpha1.EventReminder))
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
	if n := theScripted.count(v1alpha1.EventReminder); n != 1 {
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
	if err != nil || res.RequeueAfter != 29*time.Minute || theScripted.count(v1alpha1.EventReminder) != 1 {
		t.Errorf("once the cache caught up: %+v, %v; want a wait for the expiry, 29m away, and no send", res, err)
	}
}

func TestAFailedRecordWriteDoesNotResend(t *testing.T) {
	theScripted.set(nil, nil)
	cm := newConfigMap("unwritable")
	h := newHarness(t, t0.Add(31*time.Minute), remindingPolicy("0s"), cm)
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
		if err != nil || res.RequeueAfter != 29*time.Minute {
			t.Fatalf("reconcile after a failed write: %+v, %v; want a wait for the expiry", res, err)
		}
	}
	if n := theScripted.count(v1alpha1.EventReminder); n != 1 {
		t.Errorf("%d reminders, want 1 however often the record write fails", n)
	}
	var warnings int
	for _, e := range drain(h.rec) {
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
	theScripted.set([]v1alpha1.EventType{v1alpha1.EventDeleted}, nil)
	cm := newConfigMap("unsubscribed")
	h := newHarness(t, t0.Add(31*time.Minute), remindingPolicy("1h"), cm)

	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	if theScripted.count(v1alpha1.EventReminder) != 0 {
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
	theScripted.set(nil, errors.New("timed out"))
	cm := newConfigMap("slow")
	h := newHarness(t, t0.Add(59*time.Minute), remindingPolicy("0s"), cm)
	// The send takes until past the expiry, then fails.
	theScripted.mu.Lock()
	theScripted.during = func() { h.clock.SetTime(t0.Add(time.Hour + time.Millisecond)) }
	theScripted.mu.Unlock()

	res, err := h.reconcile(cm)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter > 10*time.Millisecond {
		t.Fatalf("RequeueAfter = %v after the expiry passed during the send; want to plan again at once", res.RequeueAfter)
	}
	theScripted.set(nil, nil)
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
	cm := newConfigMap("rehearsed")
	policy := newPolicy("plain", reminders("30m"), func(p *v1alpha1.TimeoutPolicy) { p.Spec.MinimumNotice = "45m" })
	h := newHarness(t, t0, policy, cm)
	h.r.DryRun = true
	for _, at := range []time.Duration{30 * time.Minute, time.Hour, 75 * time.Minute, 80 * time.Minute} {
		h.clock.SetTime(t0.Add(at))
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
	drain(h.rec)

	live := t0.Add(90 * time.Minute)
	h.clock.SetTime(live)
	h.r = &ObjectReconciler{Client: h.r.Client, APIReader: h.r.APIReader, Recorder: h.rec, Clock: h.clock, Channels: &Channels{Reader: h.client, Clock: h.clock}}
	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	if h.stored(cm) == nil {
		t.Fatal("deleted at once when the dry run ended, on notice given during the rehearsal")
	}
	deleteAt := live.Add(45 * time.Minute).UTC().Format(time.RFC3339)
	evs := drain(h.rec)
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
	theScripted.set(nil, errors.New("mail server down"))
	cm := newConfigMap("restarted")
	h := newHarness(t, t0, remindingPolicy("1h"), cm)
	var all []string
	step := func(at time.Duration, times int) {
		t.Helper()
		h.clock.SetTime(t0.Add(at))
		for range times {
			// Everything in memory is dropped.
			h.r = &ObjectReconciler{Client: h.r.Client, APIReader: h.r.APIReader, Recorder: h.rec, Clock: h.clock, Channels: &Channels{Reader: h.client, Clock: h.clock}}
			h.r.Outbox = h.r.NewOutbox(h.client, h.r.APIReader, "timeout-system", 0, logr.Discard())
			if _, err := h.reconcile(cm); err != nil && !strings.Contains(err.Error(), "conflict") {
				t.Fatal(err)
			}
			all = append(all, kinds(drain(h.rec))...)
		}
	}
	step(30*time.Minute, 3) // the reminder fails
	step(time.Hour, 3)      // expired, no notice given
	theScripted.set(nil, nil)
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
	if r, p := theScripted.count(v1alpha1.EventReminder), theScripted.count(v1alpha1.EventPostponed); r != 1 || p != 1 {
		t.Errorf("%d reminders and %d postponements sent, want one of each", r, p)
	}
}

// The warnings about an object's annotations are given once while the
// values stay wrong, however often the controller restarts: the record on
// the object says they were given.
func TestARestartBeforeEveryPassRepeatsNoWarningAboutTheAnnotations(t *testing.T) {
	theScripted.set(nil, nil)
	cm := newConfigMap("restarted", ttl("3 days"), annotated(notify.AnnotationNotify, "not-an-address"))
	h := newHarness(t, t0, remindingPolicy("1h"), cm)
	var all []string
	for _, at := range []time.Duration{time.Minute, 2 * time.Minute, 31 * time.Minute, 32 * time.Minute, 40 * time.Minute} {
		h.clock.SetTime(t0.Add(at))
		// Everything in memory is dropped.
		h.r = &ObjectReconciler{Client: h.r.Client, APIReader: h.r.APIReader, Recorder: h.rec, Clock: h.clock, Channels: &Channels{Reader: h.client, Clock: h.clock}}
		h.r.Outbox = h.r.NewOutbox(h.client, h.r.APIReader, "timeout-system", 0, logr.Discard())
		if _, err := h.reconcile(cm); err != nil && !strings.Contains(err.Error(), "conflict") {
			t.Fatal(err)
		}
		all = append(all, kinds(drain(h.rec))...)
	}
	for _, kind := range []string{"Warning InvalidTimeout", "Warning InvalidRecipient"} {
		if got := slices.Index(all, kind); got < 0 || slices.Index(all[got+1:], kind) >= 0 {
			t.Errorf("Events %q; want exactly one %s", all, kind)
		}
	}
	if theScripted.count(v1alpha1.EventReminder) != 1 {
		t.Errorf("%d reminders sent, want one", theScripted.count(v1alpha1.EventReminder))
	}
}
