// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	testfixture "github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// tracked reports how many entries f's outbox holds.
func (f *fixture) tracked() int {
	f.o.mu.Lock()
	defer f.o.mu.Unlock()
	return len(f.o.entries)
}

// events returns the Events recorded so far.
func (f *fixture) events() []string {
	var out []string
	for len(f.rec.Events) > 0 {
		out = append(out, <-f.rec.Events)
	}
	return out
}

func count(events []string, s string) int {
	n := 0
	for _, ev := range events {
		if strings.Contains(ev, s) {
			n++
		}
	}
	return n
}

// one is an entry with a single message, the deleted one, on the channels.
func one(uid types.UID, channels ...string) *Entry {
	e := entry(uid, channels...)
	e.Messages = e.Messages[1:]
	return e
}

func TestAnEntryThatCannotBeWrittenFailsPrepareAndSend(t *testing.T) {
	for name, write := range map[string]func(o *Outbox, e *Entry) error{
		"Prepare": func(o *Outbox, e *Entry) error { return o.Prepare(context.Background(), e) },
		"Send":    func(o *Outbox, e *Entry) error { return o.Send(context.Background(), e) },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			c := f.intercepted(interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
				return errAPI
			}})
			f.o.Store = &Store{Client: c, Reader: c, Namespace: namespace}
			if err := write(f.o, entry("u1", "email")); !errors.Is(err, errAPI) {
				t.Errorf("%s: %v, want the API server's error: the object must not be deleted", name, err)
			}
			if f.tracked() != 0 {
				t.Errorf("%s: an entry that is not stored is held", name)
			}
		})
	}
}

func TestSendDeliversAtOnceAndKeepsTheAttemptsOfAnEntryAlreadyDue(t *testing.T) {
	f := newFixture(t)
	f.deliver.answers = map[string][]error{"webhook/x": {errors.New("503")}}
	if err := f.o.Send(context.Background(), one("u1", "email", "webhook/x")); err != nil {
		t.Fatal(err)
	}
	f.pass()
	if f.deliver.count("email") != 1 || f.deliver.count("webhook/x") != 1 {
		t.Fatalf("email tried %d times, the webhook %d; want each once at once", f.deliver.count("email"), f.deliver.count("webhook/x"))
	}
	// The same message is due again (a deletion that failed twice): the
	// entry goes on with its attempts.
	if err := f.o.Send(context.Background(), one("u1", "email", "webhook/x")); err != nil {
		t.Fatal(err)
	}
	f.pass()
	if f.deliver.count("webhook/x") != 1 {
		t.Error("the webhook was tried again before its backoff ended")
	}
	if d := f.stored("u1").Messages[0].Channels["webhook/x"]; d.Attempts != 1 {
		t.Errorf("stored attempts %d, want 1", d.Attempts)
	}
}

// A reconcile that writes the entry again after it was handed over finds
// the object deleted: its messages are not held for the grace of a
// delete under way.
func TestAnEntryWrittenAgainAfterTheDeleteIsDueAtOnce(t *testing.T) {
	f := newFixture(t)
	f.deliver.answers = map[string][]error{"webhook/x": {errors.New("503")}}
	if err := f.o.Send(context.Background(), one("u1", "webhook/x")); err != nil {
		t.Fatal(err)
	}
	f.pass()
	f.o = f.restart()
	f.prepare(one("u1", "webhook/x"))
	f.clock.Step(time.Second)
	f.pass()
	if n := f.deliver.count("webhook/x"); n != 2 {
		t.Errorf("webhook tried %d times, want again when its backoff ended", n)
	}
}

func TestCancelOfAnObjectWithoutAnEntryDoesNothing(t *testing.T) {
	f := newFixture(t)
	var logs testfixture.Logs
	f.o.Log = logs.Logger(0)
	f.o.Cancel(context.Background(), "nothing")
	f.prepare(entry("u1", "email"))
	f.o.Cancel(context.Background(), "u1")
	if f.tracked() != 0 || f.stored("u1") != nil {
		t.Error("a cancelled entry is still there")
	}
	if errs := logs.With(`"error"=`); len(errs) != 0 {
		t.Errorf("errors logged: %q", errs)
	}
}

func TestAnEntryBeingSentIsNotStartedTwice(t *testing.T) {
	f := newFixture(t)
	release := make(chan struct{})
	var calls int
	var mu sync.Mutex
	f.o.Deliverer = deliverFunc(func(_ context.Context, _ string, _ notify.Message, channels []string) (map[string]error, error) {
		mu.Lock()
		calls++
		mu.Unlock()
		<-release
		return map[string]error{channels[0]: nil}, nil
	})
	if err := f.o.Send(context.Background(), one("u1", "email")); err != nil {
		t.Fatal(err)
	}
	if wait := f.o.Pass(context.Background()); wait != 0 {
		t.Errorf("Pass that started a send returned %v, want 0: the entry is looked at again when it returns", wait)
	}
	f.o.Pass(context.Background())
	// Give a second send, if one was started, the time to reach the
	// deliverer before the first returns.
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := calls
		mu.Unlock()
		if n > 1 {
			break
		}
	}
	close(release)
	f.o.Wait()
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Errorf("the message was sent %d times, want once", calls)
	}
}

type deliverFunc func(ctx context.Context, policy string, msg notify.Message, channels []string) (map[string]error, error)

func (d deliverFunc) Deliver(ctx context.Context, policy string, msg notify.Message, channels []string) (map[string]error, error) {
	return d(ctx, policy, msg, channels)
}

func TestAChannelThatAcceptedDoesNotMakeTheEntryDue(t *testing.T) {
	f := newFixture(t)
	f.deliver.answers = map[string][]error{"webhook/x": {errors.New("503")}}
	f.prepare(entry("u1", "email", "webhook/x"))
	f.o.Confirm("u1")
	f.pass()
	if wait := f.o.Pass(context.Background()); wait != time.Second {
		t.Errorf("next look in %v, want 1s: only the webhook's backoff is due", wait)
	}
}

func TestTheBoundOnRetriesIsTheOneConfigured(t *testing.T) {
	for _, tt := range []struct {
		name  string
		bound time.Duration
		want  time.Duration
	}{
		{"gives up after the default bound when none is set", 0, DefaultGiveUpAfter},
		{"gives up after the bound that is set", time.Hour, time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.o.GiveUpAfter = tt.bound
			f.deliver.always = map[string]error{"webhook/x": errors.New("down")}
			f.prepare(one("u1", "webhook/x"))
			f.o.Confirm("u1")
			f.clock.SetTime(t0.Add(tt.want - time.Millisecond))
			f.pass()
			if f.stored("u1") == nil {
				t.Fatal("gave up before the bound")
			}
			f.clock.SetTime(t0.Add(tt.want))
			f.pass()
			if f.stored("u1") != nil {
				t.Error("still trying at the bound")
			}
		})
	}
}

// An entry whose removal failed is kept and looked at again, so that
// what it holds is not forgotten until the next reading of the store.
// One whose messages all went out has nothing due: it goes at the bound.
func TestAnEntryWhoseRemovalFailedIsKept(t *testing.T) {
	for _, tt := range []struct {
		name    string
		objects []client.Object
		prepare func(f *fixture)
		retry   time.Duration
	}{
		{"when every channel accepted", nil, func(f *fixture) { f.o.Confirm("u1") }, DefaultGiveUpAfter},
		{"when the object is still there", []client.Object{governed("u1")}, func(f *fixture) {
			f.clock.SetTime(t0.Add(pendingGrace))
		}, apiRetry},
		{"when the bound ran out", nil, func(f *fixture) {
			f.o.Confirm("u1")
			f.clock.SetTime(t0.Add(DefaultGiveUpAfter))
		}, apiRetry},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.objects...)
			f.prepare(one("u1", "email"))
			tt.prepare(f)
			healthy := f.o.Store
			c := f.intercepted(interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
				return errAPI
			}})
			f.o.Store = &Store{Client: c, Reader: c, Namespace: namespace}
			f.pass()
			if f.tracked() != 1 {
				t.Fatal("an entry still stored was forgotten")
			}
			f.o.Store = healthy
			f.clock.Step(tt.retry)
			f.pass()
			if f.tracked() != 0 || f.stored("u1") != nil {
				t.Error("the entry was not removed when the API server came back")
			}
		})
	}
}

func TestAMessageWithNothingDueIsNotHandedToTheDeliverer(t *testing.T) {
	f := newFixture(t)
	e := entry("u1")
	e.Messages[0].Channels["email"] = &Delivery{}
	e.Messages[1].Channels["webhook/x"] = &Delivery{}
	f.deliver.answers = map[string][]error{"webhook/x": {errors.New("503")}}
	var empty int
	f.o.Deliverer = deliverFunc(func(ctx context.Context, policy string, msg notify.Message, channels []string) (map[string]error, error) {
		if len(channels) == 0 {
			empty++
		}
		return f.deliver.Deliver(ctx, policy, msg, channels)
	})
	f.prepare(e)
	f.o.Confirm("u1")
	f.pass()
	f.clock.Step(time.Second)
	f.pass()
	if empty != 0 {
		t.Errorf("Deliver called %d times with no channel", empty)
	}
	if f.deliver.count("webhook/x") != 2 {
		t.Errorf("webhook tried %d times, want 2", f.deliver.count("webhook/x"))
	}
}

// A leader that stops mid-send has not had an answer: the next one tries
// again, and no attempt is counted or backed off.
func TestAnAttemptCutShortByShutdownDoesNotCount(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	f.o.Deliverer = deliverFunc(func(_ context.Context, _ string, _ notify.Message, channels []string) (map[string]error, error) {
		cancel()
		return map[string]error{channels[0]: context.Canceled}, nil
	})
	f.prepare(one("u1", "webhook/x"))
	f.o.Confirm("u1")
	f.o.Pass(ctx)
	f.o.Wait()
	d := f.stored("u1").Messages[0].Channels["webhook/x"]
	if d.Attempts != 0 || d.LastError != "" || !d.NextAttempt.IsZero() {
		t.Errorf("stored delivery %+v, want no attempt counted", d)
	}
}

func TestAFailedMessageIsToldOnceInAnEvent(t *testing.T) {
	f := newFixture(t)
	f.deliver.always = map[string]error{"webhook/x": errors.New("503")}
	f.prepare(one("u1", "webhook/x"))
	f.o.Confirm("u1")
	var failed []int
	for i := range 3 {
		f.pass()
		failed = append(failed, count(f.events(), "MessageFailed"))
		f.clock.Step(time.Duration(1<<i) * time.Second)
	}
	if failed[0] != 1 || failed[1] != 0 || failed[2] != 0 {
		t.Errorf("MessageFailed Events after each of three failures: %v, want one at the first", failed)
	}
}

// An entry someone removed while it was being sent is not kept: there is
// nothing left to update.
func TestAnEntryRemovedMeanwhileIsDropped(t *testing.T) {
	f := newFixture(t)
	f.deliver.always = map[string]error{"webhook/x": errors.New("503")}
	f.prepare(one("u1", "webhook/x"))
	f.o.Confirm("u1")
	c := f.intercepted(interceptor.Funcs{Update: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.UpdateOption) error {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, obj.GetName())
	}})
	f.o.Store = &Store{Client: c, Reader: c, Namespace: namespace}
	f.pass()
	if f.tracked() != 0 {
		t.Error("an entry no longer stored is still held")
	}
}

func TestGivingUpNamesOnlyWhatWasLost(t *testing.T) {
	policy := &v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "scratch", UID: "p1"}}
	f := newFixture(t, policy)
	f.rec.Verbose = true
	f.deliver.always = map[string]error{"webhook/x": errors.New("down")}
	f.prepare(one("u1", "email", "webhook/x"))
	f.o.Confirm("u1")
	emailBefore, webhookBefore := givenUpCount(t, "email", "deleted"), givenUpCount(t, "webhook/x", "deleted")
	f.pass()
	f.clock.SetTime(t0.Add(DefaultGiveUpAfter))
	f.pass()
	if got := givenUpCount(t, "email", "deleted") - emailBefore; got != 0 {
		t.Errorf("given-up count of email, which accepted, rose by %v", got)
	}
	if got := givenUpCount(t, "webhook/x", "deleted") - webhookBefore; got != 1 {
		t.Errorf("given-up count of the webhook rose by %v, want 1", got)
	}
	var gaveUp []string
	for _, ev := range f.events() {
		if strings.Contains(ev, ReasonNotificationGivenUp) {
			gaveUp = append(gaveUp, ev)
		}
	}
	if len(gaveUp) != 1 {
		t.Fatalf("%d NotificationGivenUp Events, want one for the one message lost", len(gaveUp))
	}
	ev := gaveUp[0]
	if !strings.Contains(ev, "about ConfigMap apps/scratch") || strings.Contains(ev, "via email") {
		t.Errorf("Event %q does not name the object, or names a channel that accepted", ev)
	}
	if !strings.Contains(ev, "kind=TimeoutPolicy") {
		t.Errorf("Event %q is not on the policy", ev)
	}
}

func TestGivingUpOnAClusterScopedObjectNamesItWithoutANamespace(t *testing.T) {
	f := newFixture(t)
	f.deliver.always = map[string]error{"webhook/x": errors.New("down")}
	e := one("u1", "webhook/x")
	e.Object = notify.Object{APIVersion: "v1", Kind: "Namespace", Name: "amp-1", UID: "u1"}
	f.prepare(e)
	f.o.Confirm("u1")
	f.clock.SetTime(t0.Add(DefaultGiveUpAfter))
	f.pass()
	events := f.events()
	if count(events, "about Namespace amp-1") != 1 || count(events, "/amp-1") != 0 {
		t.Errorf("Events %q, want one about Namespace amp-1", events)
	}
}

// A leader that comes back after the bound finds an entry whose messages
// all went out (its removal failed): nothing was lost, nothing is said.
func TestGivingUpWhenNothingIsLeftSaysNothing(t *testing.T) {
	f := newFixture(t)
	e := one("u1", "email")
	e.Messages[0].Channels["email"].Accepted = true
	if err := f.o.Send(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	f.clock.SetTime(t0.Add(DefaultGiveUpAfter))
	f.pass()
	if n := count(f.events(), ReasonNotificationGivenUp); n != 0 {
		t.Errorf("%d NotificationGivenUp Events when nothing was lost", n)
	}
	if f.stored("u1") != nil {
		t.Error("entry still stored")
	}
}

func TestTheAuditTrailHasEachAttemptWithItsResult(t *testing.T) {
	f := newFixture(t)
	var buf bytes.Buffer
	f.o.Audit = audit.New(&buf)
	expires := t0.Add(-time.Minute)
	e := one("u1", "webhook/x")
	e.Messages[0].Message.ExpiresAt = expires
	f.deliver.answers = map[string][]error{"webhook/x": {errors.New("503")}}
	f.prepare(e)
	f.o.Confirm("u1")
	f.pass()
	f.clock.Step(time.Second)
	f.pass()

	var results []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var r audit.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if r.ExpiresAt == nil || !r.ExpiresAt.Equal(expires) {
			t.Errorf("audit record %q does not carry the expiry", line)
		}
		results = append(results, string(r.Type)+"/"+r.Result)
	}
	want := []string{string(audit.NotifyFailed) + "/" + audit.Error, string(audit.Notified) + "/" + audit.OK}
	if strings.Join(results, ",") != strings.Join(want, ",") {
		t.Errorf("audit records %v, want %v", results, want)
	}
}

type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestAnAuditTrailThatCannotBeWrittenIsLogged(t *testing.T) {
	for _, tt := range []struct {
		name   string
		log    *audit.Log
		errors int
	}{
		{"logs nothing when it is written", audit.New(&bytes.Buffer{}), 0},
		{"logs the error when it is not", audit.New(brokenWriter{}), 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			var logs testfixture.Logs
			f.o.Log, f.o.Audit = logs.Logger(0), tt.log
			f.prepare(one("u1", "email"))
			f.o.Confirm("u1")
			f.pass()
			if got := len(logs.With(`"msg"="audit trail"`)); got != tt.errors {
				t.Errorf("%d audit errors logged, want %d", got, tt.errors)
			}
		})
	}
}
