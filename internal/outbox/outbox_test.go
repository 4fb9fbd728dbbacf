// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

var t0 = time.Date(2026, time.March, 1, 9, 0, 0, 0, time.UTC)

const namespace = "timeout-system"

// scripted is a Deliverer whose channels answer from a script: each
// channel's next answers, then success.
type scripted struct {
	mu      sync.Mutex
	answers map[string][]error
	// always, when set, is every answer of these channels.
	always map[string]error
	calls  []call
}

type call struct {
	channel string
	typ     v1alpha1.EventType
	id      string
	// digest is what a digest listed.
	digest *notify.Digest
	to     []string
}

func (s *scripted) Deliver(_ context.Context, _ string, msg notify.Message, channels []string) (map[string]error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]error{}
	for _, c := range channels {
		s.calls = append(s.calls, call{c, msg.Type, msg.ID, msg.Digest, msg.Recipients.Emails})
		switch {
		case s.always[c] != nil:
			out[c] = s.always[c]
		case len(s.answers[c]) > 0:
			out[c] = s.answers[c][0]
			s.answers[c] = s.answers[c][1:]
		default:
			out[c] = nil
		}
	}
	return out, nil
}

func (s *scripted) count(channel string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c.channel == channel {
			n++
		}
	}
	return n
}

type fixture struct {
	t       *testing.T
	client  client.Client
	clock   *clocktesting.FakeClock
	rec     *events.FakeRecorder
	deliver *scripted
	o       *Outbox
}

func newFixture(t *testing.T, objs ...client.Object) *fixture {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, clock: clocktesting.NewFakeClock(t0), rec: events.NewFakeRecorder(100), deliver: &scripted{}}
	f.client = fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	f.o = f.restart()
	return f
}

// restart returns a new Outbox over the same API server: a new leader.
func (f *fixture) restart() *Outbox {
	return &Outbox{
		Store:     &Store{Client: f.client, Reader: f.client, Namespace: namespace},
		Deliverer: f.deliver, Objects: f.client, Recorder: f.rec, Clock: f.clock,
		GiveUpAfter: DefaultGiveUpAfter, Log: logr.Discard(),
	}
}

func (f *fixture) pass() {
	f.t.Helper()
	f.o.Pass(context.Background())
	f.o.Wait()
}

// stored returns the entry as the API server holds it, nil when gone.
func (f *fixture) stored(uid types.UID) *Entry {
	f.t.Helper()
	entries, errs, err := f.o.Store.List(context.Background())
	if err != nil || len(errs) > 0 {
		f.t.Fatal(err, errs)
	}
	for _, e := range entries {
		if e.Object.UID == uid {
			return e
		}
	}
	return nil
}

// governed is the deleted object the entries are about: any kind will do.
func governed(uid types.UID) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "scratch", UID: uid}}
}

func entry(uid types.UID, channels ...string) *Entry {
	obj := notify.Object{APIVersion: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "scratch", UID: uid}
	e := &Entry{Created: t0, Policy: "scratch", Object: obj}
	for _, t := range []v1alpha1.EventType{v1alpha1.EventExpired, v1alpha1.EventDeleted} {
		m := Message{Message: notify.Message{ID: string(t) + "-" + string(uid), Type: t, Object: obj}, Channels: map[string]*Delivery{}}
		for _, c := range channels {
			m.Channels[c] = &Delivery{}
		}
		e.Messages = append(e.Messages, m)
	}
	return e
}

func (f *fixture) prepare(e *Entry) {
	f.t.Helper()
	if err := f.o.Prepare(context.Background(), e); err != nil {
		f.t.Fatal(err)
	}
}

func TestSendsAConfirmedEntryAndRemovesItOnceEveryChannelAccepted(t *testing.T) {
	f := newFixture(t)
	f.prepare(entry("u1", "email", "webhook/audit"))
	f.o.Confirm("u1")
	f.pass()

	for _, c := range []string{"email", "webhook/audit"} {
		if n := f.deliver.count(c); n != 2 {
			t.Errorf("%s got %d messages, want expired and deleted", c, n)
		}
	}
	if f.stored("u1") != nil {
		t.Error("entry still stored after every channel accepted")
	}
}

func TestBacksOffPerChannelAndKeepsTheAttemptsInTheAPI(t *testing.T) {
	f := newFixture(t)
	down := errors.New("503 Service Unavailable")
	f.deliver.answers = map[string][]error{"webhook/audit": {down, down, down, down, down, down}}
	f.prepare(entry("u1", "email", "webhook/audit"))
	f.o.Confirm("u1")

	steps := []struct {
		name      string
		advance   time.Duration
		wantCalls int
		wantNext  time.Duration // after t0, of the webhook's next attempt
	}{
		{"tries at once, and again a second later", 0, 2, time.Second},
		{"does not try before the backoff ends", 999 * time.Millisecond, 2, time.Second},
		{"tries at the end of the first backoff, then waits two seconds", time.Millisecond, 4, 3 * time.Second},
		{"waits four seconds after the third failure", 2 * time.Second, 6, 7 * time.Second},
	}
	for _, s := range steps {
		f.clock.Step(s.advance)
		f.pass()
		if n := f.deliver.count("webhook/audit"); n != s.wantCalls {
			t.Fatalf("%s: %d attempts on the webhook, want %d", s.name, n, s.wantCalls)
		}
		if n := f.deliver.count("email"); n != 2 {
			t.Fatalf("%s: email tried %d times, want once per message: a failing channel must not repeat the others", s.name, n)
		}
		stored := f.stored("u1")
		if stored == nil {
			t.Fatalf("%s: entry gone while the webhook still refuses", s.name)
		}
		d := stored.Messages[1].Channels["webhook/audit"]
		if want := t0.Add(s.wantNext); !d.NextAttempt.Equal(want) || d.Accepted || d.LastError != down.Error() {
			t.Fatalf("%s: stored delivery %+v, want next attempt %s", s.name, d, want)
		}
		if !stored.Messages[1].Channels["email"].Accepted || stored.State != Deleted {
			t.Fatalf("%s: stored entry %+v does not show email accepted and the object deleted", s.name, stored)
		}
	}

	// A new leader resumes from what is stored: the fourth attempt at
	// t0+7s succeeds, and nothing goes again to email.
	f.o = f.restart()
	if err := f.o.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.clock.SetTime(t0.Add(7 * time.Second))
	f.pass()
	if n := f.deliver.count("webhook/audit"); n != 8 {
		t.Errorf("%d attempts on the webhook after the new leader's pass, want 8", n)
	}
	if n := f.deliver.count("email"); n != 2 {
		t.Errorf("email tried %d times, want 2: the new leader sent again what was accepted", n)
	}
	if f.stored("u1") != nil {
		t.Error("entry still stored after the webhook recovered")
	}
}

func TestGivesUpAfterTheBoundWithAnEventOnThePolicy(t *testing.T) {
	policy := &v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "scratch", UID: "p1"}}
	f := newFixture(t, policy)
	f.deliver.always = map[string]error{"webhook/audit": errors.New("connection refused")}
	f.prepare(entry("u1", "email", "webhook/audit"))
	f.o.Confirm("u1")
	before := givenUpCount(t, "webhook/audit", "deleted")

	for at := t0; at.Before(t0.Add(DefaultGiveUpAfter)); at = at.Add(maxBackoff) {
		f.clock.SetTime(at)
		f.pass()
	}
	if f.stored("u1") == nil {
		t.Fatal("entry removed before the bound ran out")
	}
	f.clock.SetTime(t0.Add(DefaultGiveUpAfter))
	f.pass()

	if f.stored("u1") != nil {
		t.Error("entry still stored after the bound ran out")
	}
	if got := givenUpCount(t, "webhook/audit", "deleted") - before; got != 1 {
		t.Errorf("given-up count for the deleted message rose by %v, want 1", got)
	}
	var warned bool
	for len(f.rec.Events) > 0 {
		ev := <-f.rec.Events
		if strings.Contains(ev, ReasonNotificationGivenUp) {
			warned = true
			if !strings.Contains(ev, "webhook/audit") || !strings.Contains(ev, "connection refused") {
				t.Errorf("Event %q does not say which channel and why", ev)
			}
		}
	}
	if !warned {
		t.Error("no NotificationGivenUp Event")
	}
	attempts := f.deliver.count("webhook/audit")
	f.clock.Step(time.Hour)
	f.pass()
	if f.deliver.count("webhook/audit") != attempts {
		t.Error("tried again after giving up")
	}
}

func TestRecoversAnEntryLeftPendingDelete(t *testing.T) {
	gone := time.Now()
	cases := []struct {
		name     string
		objects  []client.Object
		wantSent bool
	}{
		{"sends when the object is gone", nil, true},
		{"sends when another object took its name", []client.Object{governed("u2")}, true},
		{"sends when the object is being deleted", []client.Object{func() client.Object {
			o := governed("u1")
			o.Finalizers = []string{"example.com/hold"}
			o.DeletionTimestamp = &metav1.Time{Time: gone}
			return o
		}()}, true},
		{"drops the entry when the object is still there", []client.Object{governed("u1")}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.objects...)
			// The leader that wrote it stopped before the delete's outcome.
			f.prepare(entry("u1", "email"))
			f.o = f.restart()
			if err := f.o.Load(context.Background()); err != nil {
				t.Fatal(err)
			}

			f.clock.SetTime(t0.Add(pendingGrace - time.Millisecond))
			f.pass()
			if f.deliver.count("email") != 0 || f.stored("u1") == nil {
				t.Fatal("acted on a pending entry within the grace: its delete may still be under way")
			}
			f.clock.SetTime(t0.Add(pendingGrace))
			f.pass()

			if sent := f.deliver.count("email") == 2; sent != c.wantSent {
				t.Errorf("sent = %v, want %v", sent, c.wantSent)
			}
			if f.stored("u1") != nil {
				t.Error("entry still stored")
			}
		})
	}
}

func TestWritingTheSameEntryAgainIsHarmless(t *testing.T) {
	f := newFixture(t)
	f.prepare(entry("u1", "email"))
	f.prepare(entry("u1", "email", "slack"))

	var list corev1.ConfigMapList
	if err := f.client.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d entries after writing the same one twice, want 1", len(list.Items))
	}
	cm := list.Items[0]
	if cm.Labels[LabelManagedBy] != ManagedBy || cm.Labels[LabelEntry] != "true" {
		t.Errorf("labels = %v", cm.Labels)
	}
	if got := slices.Sorted(func(yield func(string) bool) {
		for c := range f.stored("u1").Messages[0].Channels {
			if !yield(c) {
				return
			}
		}
	}); !slices.Equal(got, []string{"email", "slack"}) {
		t.Errorf("channels = %v, want those of the last write", got)
	}

	// An entry whose object is known deleted is kept as it is.
	f.o.Confirm("u1")
	f.deliver.always = map[string]error{"slack": errors.New("down")}
	f.pass()
	f.prepare(entry("u1", "webhook/x"))
	if e := f.stored("u1"); e.State != Deleted || e.Messages[0].Channels["webhook/x"] != nil {
		t.Errorf("entry of a deleted object replaced: %+v", e)
	}
}

func TestCancelRemovesTheEntryOfAnObjectNotDeleted(t *testing.T) {
	f := newFixture(t)
	f.prepare(entry("u1", "email"))
	f.o.Cancel(context.Background(), "u1")
	f.clock.Step(time.Hour)
	f.pass()
	if f.stored("u1") != nil || f.deliver.count("email") != 0 {
		t.Error("a cancelled entry was kept or sent")
	}
}

func givenUpCount(t *testing.T, channel, typ string) float64 {
	t.Helper()
	var m dto.Metric
	if err := givenUp.WithLabelValues(channel, typ).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func TestAnAPIErrorHoldsTheEntryOffInsteadOfLooping(t *testing.T) {
	f := newFixture(t)
	f.prepare(entry("u1", "email"))
	f.o = f.restart()
	if err := f.o.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	var reads int
	f.o.Objects = interceptor.NewClient(f.client.(client.WithWatch), interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			reads++
			return apierrors.NewServiceUnavailable("etcd leader changed")
		},
	})

	f.clock.SetTime(t0.Add(pendingGrace))
	for range 3 {
		f.pass()
	}
	if reads != 1 {
		t.Fatalf("the object was read %d times at one moment after an error, want once", reads)
	}
	if wait := f.o.Pass(context.Background()); wait != 10*time.Second {
		t.Errorf("next look in %v, want 10s", wait)
	}
	f.clock.Step(10 * time.Second)
	f.pass()
	if reads != 2 {
		t.Errorf("the object was read %d times, want again after 10s", reads)
	}
	if f.stored("u1") == nil || f.deliver.count("email") != 0 {
		t.Error("an entry whose object could not be checked was dropped or sent")
	}
}

// The alert on timeout_controller_notifications_given_up_total uses
// increase(), which cannot see a series born at 1.
func TestExportsTheGivenUpCountOfEachChannelAtZeroBeforeAnythingIsLost(t *testing.T) {
	for _, tt := range []struct {
		name    string
		channel string
		leader  func(f *fixture)
	}{
		{"when the entry is written", "webhook/written", func(*fixture) {}},
		{"when a new leader loads the entry", "webhook/loaded", func(f *fixture) {
			givenUp.Reset()
			f.o = f.restart()
			if err := f.o.Load(context.Background()); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.prepare(entry("u1", tt.channel))
			tt.leader(f)
			families, err := ctrlmetrics.Registry.Gather()
			if err != nil {
				t.Fatal(err)
			}
			found := map[string]bool{}
			for _, fam := range families {
				if fam.GetName() != "timeout_controller_notifications_given_up_total" {
					continue
				}
				for _, m := range fam.GetMetric() {
					var channel, typ string
					for _, l := range m.GetLabel() {
						switch l.GetName() {
						case "channel":
							channel = l.GetValue()
						case "type":
							typ = l.GetValue()
						}
					}
					if channel == tt.channel {
						found[typ] = true
					}
				}
			}
			for _, typ := range []string{"expired", "deleted"} {
				if !found[typ] {
					t.Errorf("no given-up series for %s %s messages", tt.channel, typ)
				}
			}
		})
	}
}

// A leader that takes over reads the deleted message as it was written,
// with what the deleted object's namespaces held.
func TestAnEntryReadBackKeepsWhatTheDeletionFreed(t *testing.T) {
	f := newFixture(t)
	e := entry("u1", "email")
	freed := &notify.Reclaimed{Namespaces: []string{"amp-u1"}, Objects: 11, Pods: 3, CPUMillis: 1000, MemoryBytes: 1 << 30}
	e.Messages[1].Message.Reclaimed = freed
	f.prepare(e)

	entries, errs, err := f.o.Store.List(context.Background())
	if err != nil || len(errs) > 0 || len(entries) != 1 {
		t.Fatalf("List = %d entries, %v, %v; want the one written", len(entries), errs, err)
	}
	got := entries[0].Messages[1].Message
	if got.Type != v1alpha1.EventDeleted || got.Reclaimed == nil || !reflect.DeepEqual(*got.Reclaimed, *freed) {
		t.Errorf("deleted message read back with %+v, want %+v", got.Reclaimed, freed)
	}
}
