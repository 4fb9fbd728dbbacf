// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

func record(t *testing.T, h *harness, cm *corev1.ConfigMap) *expiry.Record {
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

// with no channels, the Kubernetes Event IS the reminder. If the record
// write fails, notify returns before emitting MessageSent, but the pending
// delivery is flushed later and counts as notice.
func TestTheEventThatIsTheReminderIsRecordedEvenIfTheRecordWriteFails(t *testing.T) {
	cm := newConfigMap("evrem")
	p := newPolicy("plain", reminders("30m"), func(p *v1alpha1.TimeoutPolicy) { p.Spec.MinimumNotice = "1h" })
	h := newHarness(t, t0.Add(31*time.Minute), p, cm)
	h.mu.Lock()
	h.patchErr = apierrors.NewServiceUnavailable("etcd leader change")
	h.mu.Unlock()
	if _, err := h.reconcile(cm); err == nil {
		t.Fatal("want error")
	}
	h.mu.Lock()
	h.patchErr = nil
	h.mu.Unlock()
	var all []string
	all = append(all, drain(h.rec)...)
	// flush
	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	all = append(all, drain(h.rec)...)
	rec := record(t, h, cm)
	t.Logf("record after flush: %s", rec)
	// plan now
	res, err := h.reconcile(cm)
	t.Logf("res=%v err=%v", res, err)
	all = append(all, drain(h.rec)...)
	h.clock.SetTime(t0.Add(91*time.Minute + time.Second))
	res, err = h.reconcile(cm)
	t.Logf("res=%v err=%v", res, err)
	all = append(all, drain(h.rec)...)
	t.Logf("events: %q", kinds(all))
	if h.stored(cm) == nil && !slices.Contains(kinds(all), "Normal MessageSent") {
		t.Errorf("deleted after notice counted from an events-channel reminder that was never emitted")
	}
}

// a receiver (or a person) extends the object while the first reminder
// is being sent. The record write conflicts, sees a new expiry, and drops
// the delivery: no extended message, notice forgotten.
func TestAnExtensionDuringTheFirstReminderKeepsItsDeliveryAndOwesAnExtensionMessage(t *testing.T) {
	theScripted.set(nil, nil)
	cm := newConfigMap("extdur")
	h := newHarness(t, t0.Add(31*time.Minute), remindingPolicy("1h"), cm)
	theScripted.mu.Lock()
	theScripted.during = func() { h.annotate(cm, expiry.AnnotationExpiresAt, t0.Add(48*time.Hour).Format(time.RFC3339)) }
	theScripted.mu.Unlock()
	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	theScripted.mu.Lock()
	theScripted.during = nil
	theScripted.mu.Unlock()
	if n := theScripted.count(v1alpha1.EventReminder); n != 1 {
		t.Fatalf("%d reminders", n)
	}
	t.Logf("record after send: %s", record(t, h, cm))
	for i := 0; i < 3; i++ {
		res, err := h.reconcile(cm)
		t.Logf("pass %d: %v %v record=%s", i, res, err, record(t, h, cm))
	}
	if n := theScripted.count(v1alpha1.EventExtended); n != 1 {
		t.Errorf("%d extended messages after people were sent a reminder for the old date; want 1", n)
	}
	if rec := record(t, h, cm); rec == nil || rec.NoticeAt.IsZero() {
		t.Errorf("record %s forgot the notice given by the delivered reminder", rec)
	}
}

// the object is deleted and recreated under the same name, with the same
// expires-at, while a reminder about the old one is being sent. The conflict
// loop writes the old object's delivery onto the new one.
func TestARecreatedObjectDoesNotInheritTheOldObjectsDelivery(t *testing.T) {
	theScripted.set(nil, nil)
	at := t0.Add(time.Hour)
	cm := newConfigMap("recreated", expiresAt(at))
	h := newHarness(t, t0.Add(31*time.Minute), remindingPolicy("10m"), cm)
	theScripted.mu.Lock()
	theScripted.during = func() {
		if err := h.client.Delete(context.Background(), cm); err != nil {
			t.Error(err)
		}
		again := newConfigMap("recreated", expiresAt(at), func(c *corev1.ConfigMap) {
			c.UID = "uid-recreated-2"
			c.CreationTimestamp = metav1.NewTime(t0.Add(31 * time.Minute))
		})
		if err := h.client.Create(context.Background(), again); err != nil {
			t.Error(err)
		}
	}
	theScripted.mu.Unlock()
	if _, err := h.reconcile(cm); err != nil {
		t.Fatal(err)
	}
	theScripted.set(nil, nil)
	s := h.stored(cm)
	t.Logf("new object uid=%s record=%s", s.UID, s.Annotations[expiry.AnnotationReminders])
	if s.UID == "uid-recreated-2" && s.Annotations[expiry.AnnotationReminders] != "" {
		t.Errorf("the new object carries a delivery made about the old one")
	}
	h.clock.SetTime(t0.Add(55 * time.Minute))
	for i := 0; i < 3; i++ {
		h.reconcile(cm)
	}
	t.Logf("reminders to the new object: %d", theScripted.count(v1alpha1.EventReminder))
}

// retries are keyed by stage key without the expiry.
func TestBackoffDoesNotCarryOverToANewExpiry(t *testing.T) {
	theScripted.set(nil, errors.New("down"))
	cm := newConfigMap("backoff")
	h := newHarness(t, t0.Add(31*time.Minute), remindingPolicy("1h"), cm)
	for i := 0; i < 9; i++ {
		res, _ := h.reconcile(cm)
		if i < 8 {
			h.clock.Step(res.RequeueAfter)
		}
	}
	last := h.clock.Now()
	t.Logf("last failure at %s, next attempt %s", last.Sub(t0), h.r.retries.nextAttempt(newRetryKey(keyOf(cm), cm.UID, t0.Add(time.Hour), "30m", "scripted")).Sub(t0))
	theScripted.set(nil, nil)
	// extended so that the new date's 30m stage falls due in one minute
	h.annotate(cm, expiry.AnnotationExpiresAt, last.Add(31*time.Minute).Truncate(time.Second).Add(time.Second).Format(time.RFC3339))
	h.reconcile(cm)
	t.Logf("record: %s", record(t, h, cm))
	h.clock.Step(90 * time.Second)
	res, err := h.reconcile(cm)
	t.Logf("stage due 30s ago: %v %v, reminders sent: %d", res, err, theScripted.count(v1alpha1.EventReminder))
	if theScripted.count(v1alpha1.EventReminder) == 0 {
		t.Errorf("the new date's stage waits %v for the old date's backoff", res.RequeueAfter)
	}
}

// two extensions before the extended message for the first got through.
func TestASecondExtensionKeepsTheOwedExtensionMessage(t *testing.T) {
	theScripted.set(nil, nil)
	cm := newConfigMap("twice")
	h := newHarness(t, t0.Add(31*time.Minute), remindingPolicy("0s"), cm)
	h.reconcile(cm)
	h.reconcile(cm)
	theScripted.set(nil, errors.New("down"))
	h.annotate(cm, expiry.AnnotationExpiresAt, t0.Add(3*time.Hour).Format(time.RFC3339))
	h.reconcile(cm) // reset written
	h.reconcile(cm) // extended fails
	theScripted.set(nil, nil)
	h.annotate(cm, expiry.AnnotationExpiresAt, t0.Add(5*time.Hour).Format(time.RFC3339))
	h.clock.Step(time.Minute)
	h.reconcile(cm) // reset written
	res, _ := h.reconcile(cm)
	t.Logf("record %s; %v", record(t, h, cm), res)
	if theScripted.count(v1alpha1.EventExtended) == 0 {
		t.Errorf("people told of 10:00 are never told of the extension")
	}
}

var _ = schema.GroupResource{}
var _ = strings.Join

// NoticeNotGiven is only emitted when a channel's FIRST failure happens
// after the expiry; a channel that has been failing since the stage fell due
// never produces it.
func TestNoticeNotGivenIsRecordedWhenTheChannelFailedBeforeExpiry(t *testing.T) {
	theScripted.set(nil, errors.New("mail server down"))
	cm := newConfigMap("nng")
	h := newHarness(t, t0.Add(30*time.Minute), remindingPolicy("1h"), cm)
	var all []string
	for i := 0; i < 40 && h.clock.Now().Before(t0.Add(3*time.Hour)); i++ {
		res, err := h.reconcile(cm)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, kinds(drain(h.rec))...)
		h.clock.Step(res.RequeueAfter)
	}
	t.Logf("at %s: events %q", h.clock.Now().Sub(t0), all)
	if h.stored(cm) == nil {
		t.Fatal("deleted")
	}
	if !slices.Contains(all, "Warning NoticeNotGiven") {
		t.Errorf("held past expiry for want of notice, but no NoticeNotGiven Event")
	}
}

// a record write that is refused for good (no patch RBAC on a kind)
// blocks the object forever, silently.
func TestAForbiddenRecordWriteNeitherBlocksTheObjectNorGoesUnreported(t *testing.T) {
	theScripted.set(nil, nil)
	cm := newConfigMap("forbidden")
	h := newHarness(t, t0.Add(31*time.Minute), remindingPolicy("0s"), cm)
	h.mu.Lock()
	h.patchErr = apierrors.NewForbidden(configMaps, cm.Name, errors.New("no patch"))
	h.mu.Unlock()
	var all []string
	for _, at := range []time.Duration{31 * time.Minute, 2 * time.Hour, 48 * time.Hour} {
		h.clock.SetTime(t0.Add(at))
		_, err := h.reconcile(cm)
		all = append(all, kinds(drain(h.rec))...)
		t.Logf("at %s: err=%v", at, err)
	}
	t.Logf("events %q; stored=%v", all, h.stored(cm) != nil)
	// A restart loses pendingDeliveries: the reminder goes out again.
	h.clock.SetTime(t0.Add(45 * time.Minute))
	h.r = &ObjectReconciler{Client: h.r.Client, APIReader: h.r.APIReader, Recorder: h.rec, Clock: h.clock, Channels: &Channels{Reader: h.client, Clock: h.clock}}
	h.reconcile(cm)
	t.Logf("reminders after a restart: %d", theScripted.count(v1alpha1.EventReminder))
	if theScripted.count(v1alpha1.EventReminder) > 1 {
		t.Errorf("the 30m stage went out again after a restart")
	}
}
