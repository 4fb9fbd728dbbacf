// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package usage

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/amphitheatre-app/timeout-controller/internal/controller/eval"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/decide"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

var configMapsResource = schema.GroupResource{Resource: "configmaps"}

// activityHarness is a ConfigMap "cm" in a fake API server, evaluated as
// the object reconciler evaluates it; its patches fail with patchErr
// while it is set.
type activityHarness struct {
	t      *testing.T
	client client.Client

	mu       sync.Mutex
	patchErr error
	patches  int
}

// newActivityHarness holds the ConfigMap created at created, at
// generation, with annotations (name and value pairs).
func newActivityHarness(t *testing.T, created time.Time, generation int64, annotations ...string) *activityHarness {
	t.Helper()
	cm := fixture.NewConfigMap("cm", fixture.InNamespace("ns"), fixture.Annotated(annotations...))
	cm.UID, cm.Generation, cm.CreationTimestamp = "uid-cm", generation, metav1.NewTime(created)
	h := &activityHarness{t: t}
	h.client = interceptor.NewClient(fake.NewClientBuilder().WithScheme(fixture.Scheme(t)).WithObjects(cm).Build(), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			h.mu.Lock()
			err := h.patchErr
			h.patches++
			h.mu.Unlock()
			if err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	return h
}

func (h *activityHarness) failPatches(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.patchErr = err
}

func (h *activityHarness) patchCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.patches
}

// stored is the ConfigMap's metadata as the API server holds it.
func (h *activityHarness) stored() *metav1.PartialObjectMetadata {
	h.t.Helper()
	obj := kube.NewMetadata(fixture.ConfigMapGVK)
	if err := h.client.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "cm"}, obj); err != nil {
		h.t.Fatal(err)
	}
	return obj
}

// bump changes the ConfigMap's generation, as a spec edit does.
func (h *activityHarness) bump(generation int64) {
	h.t.Helper()
	obj := h.stored()
	obj.Generation = generation
	if err := h.client.Update(context.Background(), obj); err != nil {
		h.t.Fatal(err)
	}
}

// evaluation is the ConfigMap, read now, under schedule with life.
func (h *activityHarness) evaluation(now time.Time, schedule expiry.Schedule, life expiry.Lifetime) *eval.Evaluation {
	return &eval.Evaluation{
		Key:      wakeup.Key{GVK: fixture.ConfigMapGVK, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cm"}},
		Obj:      h.stored(),
		Decision: decide.Decision{Schedule: schedule, Life: life},
		Policy:   fixture.Policy("idle"),
		Now:      now,
	}
}

// activity is the activity annotation the ConfigMap holds, and whether
// it holds one.
func (h *activityHarness) activity() (expiry.Activity, bool) {
	h.t.Helper()
	v, ok := h.stored().Annotations[expiry.AnnotationActivity]
	if !ok {
		return expiry.Activity{}, false
	}
	a, err := expiry.ParseActivity(v)
	if err != nil {
		h.t.Fatal(err)
	}
	return a, true
}

// idle20m is a schedule with an idle clock of 20 minutes: an activity
// window of one minute.
var idle20m = expiry.Schedule{IdleTTL: 20 * time.Minute}

func TestRecordActivityRecordsASpecEditOnlyUnderAnIdleClock(t *testing.T) {
	t0 := fixture.T0
	asleep := func(s expiry.SleepState) expiry.Lifetime {
		s.Phase = expiry.PhaseAsleep
		return expiry.Lifetime{Asleep: true, Sleep: s}
	}
	for _, tc := range []struct {
		name       string
		schedule   expiry.Schedule
		life       expiry.Lifetime
		annotation string
		want       bool
	}{
		{name: "records a spec edit under an idle clock", schedule: idle20m, want: true},
		{name: "records a spec edit under the shortest idle clock a policy can have", schedule: expiry.Schedule{IdleTTL: 20 * time.Nanosecond}, want: true},
		{name: "records nothing under a policy without an idle clock", schedule: expiry.Schedule{}},
		{name: "records nothing for a kept object", schedule: idle20m, life: expiry.Lifetime{Keep: true}},
		{name: "records nothing for an object scaled asleep, whose generation the sleep changed", schedule: idle20m, life: asleep(expiry.SleepState{Replicas: ptr.To[int32](2)})},
		{name: "records nothing for an object patched asleep, whose generation the sleep changed", schedule: idle20m,
			life: asleep(expiry.SleepState{Patch: json.RawMessage(`{"spec":{"suspend":true}}`), WakePatch: json.RawMessage(`{"spec":{"suspend":false}}`)})},
		{name: "records a spec edit of an object asleep through the workloads it owns", schedule: idle20m, life: asleep(expiry.SleepState{}), want: true},
		{name: "records a spec edit of an awake object that was scaled asleep before", schedule: idle20m,
			life: expiry.Lifetime{Sleep: expiry.SleepState{Phase: expiry.PhaseAwake, Replicas: ptr.To[int32](2)}}, want: true},
		{name: "records nothing for a generation already recorded", schedule: idle20m,
			annotation: expiry.Activity{Generation: 2, At: t0.Add(-time.Hour)}.String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var annotations []string
			if tc.annotation != "" {
				annotations = []string{expiry.AnnotationActivity, tc.annotation}
			}
			h := newActivityHarness(t, t0.Add(-2*time.Hour), 2, annotations...)
			var a Activity
			wake, wrote, err := a.RecordActivity(context.Background(), h.client, h.evaluation(t0, tc.schedule, tc.life), expiry.Plan{Action: expiry.Wait})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := h.activity()
			if wrote != tc.want || !wake.IsZero() {
				t.Fatalf("wrote %t (wake %s), want %t; activity %+v", wrote, wake, tc.want, got)
			}
			if tc.want && (got.Generation != 2 || !got.At.Equal(t0)) {
				t.Errorf("activity %+v, want generation 2 seen at %s", got, t0)
			}
			if !tc.want && h.patchCount() != 0 {
				t.Errorf("%d writes, want none", h.patchCount())
			}
		})
	}
}

func TestRecordActivityWaitsForTheWindowUnlessSomethingIsDue(t *testing.T) {
	t0 := fixture.T0
	for _, tc := range []struct {
		name   string
		action expiry.Action
		wake   time.Time
	}{
		{name: "waits for a window after the creation while nothing is due", action: expiry.Wait, wake: t0.Add(time.Minute)},
		{name: "records at once when a message is due", action: expiry.Notify},
		{name: "records at once when the deletion is due", action: expiry.Delete},
		{name: "records at once when the sleep is due", action: expiry.Sleep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newActivityHarness(t, t0, 2)
			var a Activity
			now := t0.Add(10 * time.Second)
			wake, wrote, err := a.RecordActivity(context.Background(), h.client, h.evaluation(now, idle20m, expiry.Lifetime{}), expiry.Plan{Action: tc.action})
			if err != nil {
				t.Fatal(err)
			}
			got, written := h.activity()
			if !wake.Equal(tc.wake) || wrote != tc.wake.IsZero() || written != tc.wake.IsZero() {
				t.Fatalf("wake %s, wrote %t (activity %+v); want wake %s", wake, wrote, got, tc.wake)
			}
			if written && (got.Generation != 2 || !got.At.Equal(now)) {
				t.Errorf("activity %+v, want generation 2 seen at %s", got, now)
			}
		})
	}
}

// A change seen in a window is written at its end, dated when it was
// seen; the next change waits a window after that write, not after the
// time it recorded.
func TestRecordActivityWritesOncePerWindowFromItsLastWrite(t *testing.T) {
	t0 := fixture.T0
	h := newActivityHarness(t, t0, 2)
	var a Activity
	record := func(now time.Time) (time.Time, bool) {
		t.Helper()
		wake, wrote, err := a.RecordActivity(context.Background(), h.client, h.evaluation(now, idle20m, expiry.Lifetime{}), expiry.Plan{Action: expiry.Wait})
		if err != nil {
			t.Fatal(err)
		}
		return wake, wrote
	}

	if wake, wrote := record(t0.Add(10 * time.Second)); wrote || !wake.Equal(t0.Add(time.Minute)) {
		t.Fatalf("generation 2 seen 10s after the creation: wrote %t, wake %s; want a wait until %s", wrote, wake, t0.Add(time.Minute))
	}
	if _, wrote := record(t0.Add(time.Minute)); !wrote {
		t.Fatal("generation 2 a window after the creation: not written")
	}
	if got, _ := h.activity(); got.Generation != 2 || !got.At.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("activity %+v, want generation 2 dated when it was first seen, %s", got, t0.Add(10*time.Second))
	}
	h.bump(3)
	if wake, wrote := record(t0.Add(90 * time.Second)); wrote || !wake.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("generation 3 half a window after the write: wrote %t, wake %s; want a wait until %s", wrote, wake, t0.Add(2*time.Minute))
	}
	if _, wrote := record(t0.Add(2 * time.Minute)); !wrote {
		t.Fatal("generation 3 a window after the write: not written")
	}
	if got, _ := h.activity(); got.Generation != 3 || !got.At.Equal(t0.Add(90*time.Second)) {
		t.Fatalf("activity %+v, want generation 3 dated %s", got, t0.Add(90*time.Second))
	}
}

func TestActivityWritesReportWhatTheAPIServerSaid(t *testing.T) {
	t0 := fixture.T0
	ahead := t0.Add(48 * time.Hour).Format(time.RFC3339)
	for _, tc := range []struct {
		name    string
		err     error
		wantErr bool
	}{
		{name: "reports a write the API server refused", err: apierrors.NewInternalError(context.DeadlineExceeded), wantErr: true},
		{name: "leaves a write that lost to a change for the next look", err: apierrors.NewConflict(configMapsResource, "cm", nil)},
		{name: "leaves a write to an object gone for nothing", err: apierrors.NewNotFound(configMapsResource, "cm")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("of a spec edit", func(t *testing.T) {
				h := newActivityHarness(t, t0.Add(-time.Hour), 2)
				h.failPatches(tc.err)
				var a Activity
				_, wrote, err := a.RecordActivity(context.Background(), h.client, h.evaluation(t0, idle20m, expiry.Lifetime{}), expiry.Plan{Action: expiry.Wait})
				if (err != nil) != tc.wantErr || wrote == tc.wantErr {
					t.Fatalf("wrote %t, error %v; want an error: %t", wrote, err, tc.wantErr)
				}
				// The change is still to be written, a window after the
				// last write this process made, which was none.
				h.failPatches(nil)
				if _, wrote, err := a.RecordActivity(context.Background(), h.client, h.evaluation(t0.Add(time.Second), idle20m, expiry.Lifetime{}), expiry.Plan{Action: expiry.Wait}); err != nil || !wrote {
					t.Fatalf("the next look: wrote %t, error %v; want the change written", wrote, err)
				}
			})
			t.Run("of a last-active ahead of the clock", func(t *testing.T) {
				h := newActivityHarness(t, t0.Add(-time.Hour), 1, expiry.AnnotationLastActive, ahead)
				h.failPatches(tc.err)
				var logs fixture.Logs
				var a Activity
				wrote, err := a.SettleActivity(logs.Context(1), h.client, h.evaluation(t0, idle20m, expiry.Lifetime{}))
				if (err != nil) != tc.wantErr || wrote == tc.wantErr {
					t.Fatalf("wrote %t, error %v; want an error: %t", wrote, err, tc.wantErr)
				}
				if noted := logs.With("last-active ahead of the clock noted"); len(noted) != 0 {
					t.Errorf("logged %q, though nothing was noted", noted)
				}
			})
		})
	}
}

func TestSettleActivityNotesALastActiveAheadOfTheClock(t *testing.T) {
	t0 := fixture.T0
	ahead := t0.Add(48 * time.Hour)
	for _, tc := range []struct {
		name        string
		annotations []string
		life        expiry.Lifetime
		want        *expiry.Ahead // the Ahead noted, when written
		wrote       bool
		logged      bool
	}{
		{name: "notes a last-active ahead of the clock, and logs it", annotations: []string{expiry.AnnotationLastActive, ahead.Format(time.RFC3339)},
			want: &expiry.Ahead{LastActive: ahead, Seen: t0}, wrote: true, logged: true},
		{name: "notes nothing on a kept object", annotations: []string{expiry.AnnotationLastActive, ahead.Format(time.RFC3339)}, life: expiry.Lifetime{Keep: true}},
		{name: "clears the note once last-active no longer names that time, without a log", annotations: []string{
			expiry.AnnotationLastActive, t0.Add(-time.Minute).Format(time.RFC3339),
			expiry.AnnotationActivity, expiry.Activity{Generation: 1, Ahead: &expiry.Ahead{LastActive: ahead, Seen: t0.Add(-time.Hour)}}.String(),
		}, wrote: true},
		{name: "writes nothing for a last-active in the past", annotations: []string{expiry.AnnotationLastActive, t0.Add(-time.Minute).Format(time.RFC3339)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newActivityHarness(t, t0.Add(-time.Hour), 1, tc.annotations...)
			var logs fixture.Logs
			var a Activity
			wrote, err := a.SettleActivity(logs.Context(1), h.client, h.evaluation(t0, idle20m, tc.life))
			if err != nil {
				t.Fatal(err)
			}
			got, written := h.activity()
			if wrote != tc.wrote || (h.patchCount() > 0) != tc.wrote {
				t.Fatalf("wrote %t (%d writes), want %t; activity %+v", wrote, h.patchCount(), tc.wrote, got)
			}
			if tc.wrote && written && ((got.Ahead == nil) != (tc.want == nil) ||
				(tc.want != nil && (!got.Ahead.LastActive.Equal(tc.want.LastActive) || !got.Ahead.Seen.Equal(tc.want.Seen)))) {
				t.Errorf("activity %+v (ahead %+v), want ahead %+v", got, got.Ahead, tc.want)
			}
			if noted := logs.With("last-active ahead of the clock noted"); (len(noted) == 1) != tc.logged {
				t.Errorf("logged %q, want a line: %t", noted, tc.logged)
			}
		})
	}
}
