// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// DefaultGiveUpAfter is how long an entry's messages are retried before
// the outbox gives up on the channels that still refuse them.
const DefaultGiveUpAfter = 24 * time.Hour

// ReasonNotificationGivenUp is the Warning Event on the policy whose
// channel refused a one-off message until the bound ran out.
const ReasonNotificationGivenUp = "NotificationGivenUp"

const (
	// pendingGrace is how long after it was written an entry left
	// pending-delete is looked at: writing it and the delete that follows
	// take 5 s each at most (the controller's write timeout), and until
	// the delete is done the object is still there.
	pendingGrace = 15 * time.Second
	// maxBackoff caps the wait between attempts on one channel.
	maxBackoff = 5 * time.Minute
	// sendTimeout bounds one attempt on one entry.
	sendTimeout = 30 * time.Second
	// writeTimeout bounds one write of an entry.
	writeTimeout = 5 * time.Second
	// maxSending is how many entries are sent at once.
	maxSending = 16
	// idle is the longest the sender sleeps with nothing due.
	idle = time.Minute
	// apiRetry is how soon an entry is looked at again after the API
	// server failed a read or write of it.
	apiRetry = 10 * time.Second
)

// ErrNotCarried is what Deliverer reports for a channel the policy no
// longer has, or that no longer carries the message's type: there is
// nothing left to send there.
var ErrNotCarried = errors.New("the policy's channel no longer carries this message")

// Deliverer sends a message over the named channels of a policy, built
// from the policy as it is now. It returns each channel's result (nil
// when it accepted), or an error when none could be tried (the policy is
// gone, its channels cannot be built).
type Deliverer interface {
	Deliver(ctx context.Context, policy string, msg notify.Message, channels []string) (map[string]error, error)
}

var givenUp = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "timeout_controller_notifications_given_up_total",
	Help: "One-off messages (expired, deleted) a channel still refused when the outbox bound (--notification-give-up-after) ran out, by channel and type.",
}, []string{"channel", "type"})

var pendingEntries = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "timeout_controller_outbox_entries",
	Help: "Deleted objects whose one-off messages some channel has not accepted yet.",
})

func init() {
	ctrlmetrics.Registry.MustRegister(givenUp, pendingEntries)
}

// Outbox holds the one-off messages about deleted objects and sends them.
// As a manager Runnable it runs on the leader only; at start it reads the
// entries earlier leaders left.
type Outbox struct {
	Store     *Store
	Deliverer Deliverer
	// Objects reads governed objects and policies from the API server.
	Objects  client.Reader
	Recorder events.EventRecorder
	Audit    *audit.Log
	Clock    clock.PassiveClock
	// GiveUpAfter bounds how long after the delete a message is retried.
	GiveUpAfter time.Duration
	Log         logr.Logger
	// Marker writes the records of the owners' digests' members; nil
	// leaves digests alone.
	Marker Marker

	mu      sync.Mutex
	entries map[string]*tracked
	digests map[string]*trackedDigest
	wake    chan struct{}
	slots   chan struct{}
	sending sync.WaitGroup
}

type tracked struct {
	entry *Entry
	// busy while a goroutine sends it.
	busy bool
	// confirmed when this process saw the delete succeed.
	confirmed bool
	// notBefore holds off the next look after an API error, which no
	// backoff in the entry covers.
	notBefore time.Time
}

// NeedLeaderElection: only the leader sends, and it is the only writer of
// entries once they are handed over.
func (o *Outbox) NeedLeaderElection() bool { return true }

// Prepare writes the entry about an object before the object is deleted.
func (o *Outbox) Prepare(ctx context.Context, e *Entry) error {
	e.State = PendingDelete
	stored, err := o.Store.Create(ctx, e)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.init()
	o.entries[stored.Name()] = &tracked{entry: stored, confirmed: stored.State == Deleted}
	pendingEntries.Set(float64(len(o.entries)))
	exportGivenUp(stored)
	return nil
}

// exportGivenUp starts the given-up series of e's channels and types at 0:
// a series born at 1 is invisible to increase(), and the alert on it
// would miss a channel's first lost message.
func exportGivenUp(e *Entry) {
	for _, m := range e.Messages {
		for name := range m.Channels {
			givenUp.WithLabelValues(name, string(m.Message.Type))
		}
	}
}

// Send writes an entry whose messages are due now, whatever becomes of
// the object (a deletion that failed is told while the object stays), and
// hands it to the sender. An entry about the same thing already due is
// kept as it is, with its attempts.
func (o *Outbox) Send(ctx context.Context, e *Entry) error {
	e.State = Deleted
	stored, err := o.Store.Create(ctx, e)
	if err != nil {
		return err
	}
	o.mu.Lock()
	o.init()
	if _, ok := o.entries[stored.Name()]; !ok {
		o.entries[stored.Name()] = &tracked{entry: stored, confirmed: true}
	}
	pendingEntries.Set(float64(len(o.entries)))
	o.mu.Unlock()
	exportGivenUp(stored)
	o.poke()
	return nil
}

// Confirm hands over the entry about an object whose delete succeeded:
// its messages are sent at once.
func (o *Outbox) Confirm(uid types.UID) {
	o.mu.Lock()
	if t, ok := o.entries[Name(uid)]; ok {
		t.confirmed = true
	}
	o.mu.Unlock()
	o.poke()
}

// Cancel removes the entry about an object that was not deleted. An entry
// that cannot be removed is dropped later, when the object is found there.
func (o *Outbox) Cancel(ctx context.Context, uid types.UID) {
	o.mu.Lock()
	t, ok := o.entries[Name(uid)]
	if ok && !t.busy {
		delete(o.entries, Name(uid))
		pendingEntries.Set(float64(len(o.entries)))
	}
	o.mu.Unlock()
	if !ok {
		return
	}
	if err := o.Store.Remove(ctx, t.entry); err != nil {
		o.Log.Error(err, "remove outbox entry of an object not deleted", "entry", t.entry.Name())
	}
}

func (o *Outbox) init() {
	if o.entries == nil {
		o.entries = map[string]*tracked{}
	}
	if o.digests == nil {
		o.digests = map[string]*trackedDigest{}
	}
	if o.wake == nil {
		o.wake = make(chan struct{}, 1)
	}
	if o.slots == nil {
		o.slots = make(chan struct{}, maxSending)
	}
}

func (o *Outbox) poke() {
	o.mu.Lock()
	o.init()
	wake := o.wake
	o.mu.Unlock()
	select {
	case wake <- struct{}{}:
	default:
	}
}

// Start loads the entries left in the API and sends until ctx is done.
// Entries survive a shutdown: the next leader resumes them.
func (o *Outbox) Start(ctx context.Context) error {
	o.mu.Lock()
	o.init()
	wake := o.wake
	o.mu.Unlock()
	defer o.sending.Wait()
	for delay := time.Second; ; delay = min(2*delay, maxBackoff) {
		err := o.Load(ctx)
		if err == nil {
			break
		}
		o.Log.Error(err, "load the outbox; retrying", "in", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
	loaded := o.Clock.Now()
	for {
		// Entries written by a deposed leader's last reconciles, after this
		// one listed the store, are found at the next reading.
		if now := o.Clock.Now(); now.Sub(loaded) >= idle {
			if err := o.Load(ctx); err != nil {
				o.Log.Error(err, "read the outbox again")
			} else {
				loaded = now
			}
		}
		wait := o.Pass(ctx)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// Load adds the stored entries to those this process knows.
func (o *Outbox) Load(ctx context.Context) error {
	if err := o.loadDigests(ctx); err != nil {
		return err
	}
	entries, errs, err := o.Store.List(ctx)
	if err != nil {
		return err
	}
	for _, err := range errs {
		o.Log.Error(err, "skipping an unreadable outbox entry")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.init()
	for _, e := range entries {
		if _, ok := o.entries[e.Name()]; !ok {
			o.entries[e.Name()] = &tracked{entry: e, confirmed: e.State == Deleted}
			exportGivenUp(e)
		}
	}
	pendingEntries.Set(float64(len(o.entries)))
	if len(entries) > 0 {
		o.Log.Info("resuming the outbox", "entries", len(entries))
	}
	return nil
}

// Pass starts sending every entry that is due and returns how long until
// the next one is. Sends go on in the background; Wait waits for them.
func (o *Outbox) Pass(ctx context.Context) time.Duration {
	now := o.Clock.Now()
	next := now.Add(idle)
	o.mu.Lock()
	o.init()
	var due []*tracked
	for _, t := range o.entries {
		if t.busy {
			continue
		}
		at := o.dueAt(t)
		if !at.After(now) {
			t.busy = true
			due = append(due, t)
		} else if at.Before(next) {
			next = at
		}
	}
	slots := o.slots
	o.mu.Unlock()
	for _, t := range due {
		o.sending.Add(1)
		go func() {
			defer o.sending.Done()
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				o.release(t, false)
				return
			}
			defer func() { <-slots }()
			o.release(t, o.process(ctx, t))
		}()
	}
	if at := o.passDigests(ctx, now); at.Before(next) {
		next = at
	}
	if len(due) > 0 {
		// Those just sent are looked at again when they return.
		return 0
	}
	return max(next.Sub(now), time.Millisecond)
}

// Wait waits for the sends Pass started.
func (o *Outbox) Wait() { o.sending.Wait() }

// release ends t's send; gone removes it.
func (o *Outbox) release(t *tracked, gone bool) {
	o.mu.Lock()
	t.busy = false
	if gone {
		delete(o.entries, t.entry.Name())
		pendingEntries.Set(float64(len(o.entries)))
	}
	o.mu.Unlock()
	o.poke()
}

// dueAt is when t needs looking at next. Called with o.mu held.
func (o *Outbox) dueAt(t *tracked) time.Time {
	e := t.entry
	if !t.confirmed {
		return later(e.Created.Add(pendingGrace), t.notBefore)
	}
	at := e.Created.Add(o.giveUpAfter())
	for _, m := range e.Messages {
		for _, d := range m.Channels {
			if !d.Accepted && d.NextAttempt.Before(at) {
				at = d.NextAttempt
			}
		}
	}
	return later(at, t.notBefore)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// retryLater holds t off after an API error.
func (o *Outbox) retryLater(t *tracked) bool {
	o.mu.Lock()
	t.notBefore = o.Clock.Now().Add(apiRetry)
	o.mu.Unlock()
	return false
}

func (o *Outbox) giveUpAfter() time.Duration {
	if o.GiveUpAfter > 0 {
		return o.GiveUpAfter
	}
	return DefaultGiveUpAfter
}
