// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/channelset"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// receiver is a channel's far end, shared by the old leader and the new
// one. Its first Send holds the sender until release is closed: when
// acceptFirst is set the receiver has taken the message and only its
// answer is late, otherwise it has not taken it, and the send fails.
type receiver struct {
	acceptFirst bool
	entered     chan struct{}
	release     chan struct{}

	mu   sync.Mutex
	got  []notify.Message
	sent int
}

func (r *receiver) Name() string                      { return scriptedChannel }
func (r *receiver) Accepts(t v1alpha1.EventType) bool { return t == v1alpha1.EventReminder }
func (r *receiver) Send(_ context.Context, m notify.Message, _ notify.Content) error {
	r.mu.Lock()
	r.sent++
	first := r.sent == 1
	if !first || r.acceptFirst {
		r.got = append(r.got, m)
	}
	r.mu.Unlock()
	if !first {
		return nil
	}
	close(r.entered)
	// The context is not heeded: its deadline comes from the fake clock,
	// and the old leader's send is what is being held open.
	<-r.release
	if !r.acceptFirst {
		return errors.New("connection reset by peer")
	}
	return nil
}

func (r *receiver) received() map[string][]notify.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	byObject := map[string][]notify.Message{}
	for _, m := range r.got {
		byObject[m.Object.Name] = append(byObject[m.Object.Name], m)
	}
	return byObject
}

// A leader that loses its Lease stops without a graceful shutdown, maybe
// in the middle of a send, with its channel's one slot
// (--max-sends-per-channel 1) taken and the next reminder turned away as
// busy. The new leader starts with empty memory and its own limits: it
// sends every reminder the old one had not recorded, once, and the one
// under way again only if the receiver had taken it (with the same id,
// as docs/operations.md#high-availability says); and nothing is deleted before its expiry.
func TestANewLeaderSendsWhatTheOldOneLeftMidSend(t *testing.T) {
	tests := []struct {
		name string
		// accepted says the receiver took the message under way when the
		// old leader stopped.
		accepted bool
		// lateWrite lets the old leader write its record after the new
		// leader took over (it had not exited yet); otherwise its write
		// fails, as the process is gone.
		lateWrite bool
		// wantFirst is how many times the first object's reminder reaches
		// the receiver.
		wantFirst int
	}{
		{name: "repeats once, with the same id, a reminder the receiver took but the old leader never recorded", accepted: true, wantFirst: 2},
		{name: "repeats once a reminder the old leader recorded after the new one sent it", accepted: true, lateWrite: true, wantFirst: 2},
		{name: "sends once a reminder the old leader could not get through", accepted: false, wantFirst: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first, second := fixture.NewConfigMap("first"), fixture.NewConfigMap("second")
			h := newHarness(t, fixture.T0.Add(31*time.Minute), remindingPolicy("0s"), first, second)
			rcv := &receiver{acceptFirst: tt.accepted, entered: make(chan struct{}), release: make(chan struct{})}
			releaseOld := sync.OnceFunc(func() { close(rcv.release) })
			t.Cleanup(releaseOld)
			leader := func() *Reconciler {
				r := &Reconciler{Client: h.r.Client, APIReader: h.r.APIReader, Recorder: h.rec, Clock: h.clock,
					Channels: &channelset.Channels{Reader: h.client, Clock: h.clock, Limiter: notify.NewLimiter(1),
						Build: func(context.Context, []notify.Channel, notify.Secrets) ([]notify.Notifier, error) {
							return []notify.Notifier{rcv}, nil
						}}}
				r.Outbox = r.NewOutbox(h.client, h.r.APIReader, "timeout-system", 0, logr.Discard())
				return r
			}

			old := leader()
			oldDone := make(chan error, 1)
			go func() {
				_, err := old.Reconcile(context.Background(), keyOf(first))
				oldDone <- err
			}()
			select {
			case <-rcv.entered:
			case err := <-oldDone:
				t.Fatalf("the old leader's reconcile returned (%v) without sending", err)
			case <-time.After(10 * time.Second):
				t.Fatal("the old leader did not start the send in 10s")
			}
			res, err := old.Reconcile(context.Background(), keyOf(second))
			if err != nil || res.RequeueAfter <= 0 || len(rcv.received()["second"]) != 0 {
				t.Fatalf("the second reminder with the channel's one slot taken: %v, %v, %d sent; want a busy retry",
					res, err, len(rcv.received()["second"]))
			}

			// The Lease is lost; a new leader takes over while the old
			// one's send is still open.
			h.r = leader()
			for range 3 {
				mustReconcile(t, h, first)
				mustReconcile(t, h, second)
			}

			if !tt.lateWrite {
				h.mu.Lock()
				h.patchErr = errors.New("the old leader's process is gone")
				h.mu.Unlock()
			}
			releaseOld()
			select {
			case err := <-oldDone:
				if tt.lateWrite && err != nil {
					t.Errorf("the old leader's late write: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the old leader's send did not return in 10s after its release")
			}
			h.mu.Lock()
			h.patchErr = nil
			h.mu.Unlock()

			// The new leader goes on to the expiry.
			for _, at := range []time.Duration{32 * time.Minute, 45 * time.Minute, 59 * time.Minute} {
				h.clock.SetTime(fixture.T0.Add(at))
				for range 2 {
					mustReconcile(t, h, first)
					mustReconcile(t, h, second)
				}
				if h.stored(first) == nil || h.stored(second) == nil {
					t.Fatalf("deleted at %s, before the expiry at t0+1h", at)
				}
			}

			got := rcv.received()
			if n := len(got["first"]); n != tt.wantFirst {
				t.Errorf("the first object's reminder reached the receiver %d times; want %d", n, tt.wantFirst)
			}
			for _, m := range got["first"] {
				if m.ID != got["first"][0].ID || m.Stage != "30m" {
					t.Errorf("the first object's reminders %+v; want one stage, one id", got["first"])
					break
				}
			}
			if n := len(got["second"]); n != 1 {
				t.Errorf("the second object's reminder reached the receiver %d times; want exactly 1", n)
			}
			for _, cm := range []string{"first", "second"} {
				obj := first
				if cm == "second" {
					obj = second
				}
				rec := storedRecord(t, h, obj)
				if rec == nil {
					t.Errorf("the %s object has no record", cm)
					continue
				}
				if _, ok := rec.Sent[expiry.StageKey(30*time.Minute)]; !ok || rec.NoticeAt.IsZero() {
					t.Errorf("the %s object's record %+v does not show its reminder", cm, rec)
				}
			}
		})
	}
}

// A new leader whose cache is behind the record its predecessor wrote
// just before handing over does not send that reminder again: a message
// goes out only when the API server shows the object at the version the
// plan was made from, and the plan is made again once the cache has
// caught up.
func TestANewLeaderWithALaggingCacheDoesNotSendAgain(t *testing.T) {
	cm := fixture.NewConfigMap("handed-over")
	h := newHarness(t, fixture.T0.Add(31*time.Minute), remindingPolicy("0s"), cm)
	before := h.stored(cm)
	mustReconcile(t, h, cm)
	if n := h.scripted.count(v1alpha1.EventReminder); n != 1 {
		t.Fatalf("%d reminders from the old leader, want 1", n)
	}
	after := h.stored(cm)
	if after.ResourceVersion == before.ResourceVersion {
		t.Fatal("the old leader wrote no record: the case is not the one under test")
	}

	// The new leader's cache still shows the object as it was before the
	// record: its annotations and its resourceVersion.
	h.mu.Lock()
	h.cacheView = func(o *metav1.PartialObjectMetadata) error {
		o.Annotations, o.ResourceVersion = before.Annotations, before.ResourceVersion
		return nil
	}
	h.mu.Unlock()
	h.r = &Reconciler{Client: h.r.Client, APIReader: h.r.APIReader, Recorder: h.rec, Clock: h.clock, Channels: h.channels()}
	res, err := h.reconcile(cm)
	if err != nil || res.RequeueAfter <= 0 || h.scripted.count(v1alpha1.EventReminder) != 1 {
		t.Fatalf("new leader, lagging cache: %+v, %v, %d reminders; want a look again soon and still 1", res, err, h.scripted.count(v1alpha1.EventReminder))
	}

	// Caught up: nothing to send until the expiry.
	h.mu.Lock()
	h.cacheView = nil
	h.mu.Unlock()
	mustReconcile(t, h, cm)
	if n := h.scripted.count(v1alpha1.EventReminder); n != 1 {
		t.Errorf("%d reminders once the cache caught up, want 1", n)
	}
}

// A reminder whose read from the API server fails, or finds the object
// gone, is not sent, and nothing is recorded: the look fails and is
// retried, and the reminder goes out once the read succeeds.
func TestAReminderWaitsForItsReadFromTheAPIServer(t *testing.T) {
	cm := fixture.NewConfigMap("unread")
	h := newHarness(t, fixture.T0.Add(31*time.Minute), remindingPolicy("0s"), cm)
	for _, fail := range []error{errors.New("connection refused"), apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, cm.Name)} {
		h.mu.Lock()
		h.freshView = func(*metav1.PartialObjectMetadata) error { return fail }
		h.mu.Unlock()
		res, err := h.reconcile(cm)
		if n := h.scripted.count(v1alpha1.EventReminder); n != 0 || res.RequeueAfter <= 0 && err == nil {
			t.Fatalf("read failing with %v: %+v, %v, %d reminders; want none, and a look again", fail, res, err, n)
		}
		if rec := storedRecord(t, h, cm); rec != nil && len(rec.Sent) > 0 {
			t.Fatalf("read failing with %v: record %s shows a delivery", fail, rec)
		}
	}
	h.mu.Lock()
	h.freshView = nil
	h.mu.Unlock()
	mustReconcile(t, h, cm)
	if n := h.scripted.count(v1alpha1.EventReminder); n != 1 {
		t.Errorf("%d reminders once the read succeeds, want 1", n)
	}
}
