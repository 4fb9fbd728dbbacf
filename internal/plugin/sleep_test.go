// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// sleepy puts objects to sleep 3h after their last use and deletes them
// 14d after they went to sleep.
func sleepy(s *v1alpha1.TimeoutPolicySpec) {
	s.DefaultTTL = "1d"
	s.Sleep = &v1alpha1.Sleep{AfterIdle: "3h", DeleteAfter: "14d"}
}

// asleep is the sleep annotation the controller writes once it has put an
// object to sleep at since, scaling down 5 replicas.
func asleep(since time.Time) map[string]string {
	st := expiry.SleepState{Phase: expiry.PhaseAsleep, Since: since, Generation: 1, Freed: 5, FreedCPUMillis: 1500, FreedMemoryBytes: 2 << 30}
	return map[string]string{expiry.AnnotationSleep: st.String()}
}

func TestEvaluateSleep(t *testing.T) {
	day := expiry.Day
	policies := []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks", sleepy)}

	t.Run("puts an awake object to sleep after it is idle, then deletes it deleteAfter later", func(t *testing.T) {
		ev := evaluateAt(t, playbook(nil), policies, t0.Add(time.Hour))
		want := []step{
			{3 * time.Hour, ActionSleep, ""},
			// At the first whole second after 14d asleep: the sleep is
			// written a little after it is due.
			{3*time.Hour + 11*day + time.Second, "reminder", "3d"},
			{3*time.Hour + 12*day + time.Second, "reminder", "2d"},
			{3*time.Hour + 14*day + time.Second, ActionDelete, ""},
		}
		got := steps(ev)
		// The slept message comes between: only its place is checked.
		got = slicesDeleteAction(got, string(v1alpha1.EventSlept))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("steps %+v, want %+v", got, want)
		}
		if s := ev.SleepState(); s != SleepAwake {
			t.Errorf("sleep state %q, want awake", s)
		}
		if si := sleepOf(ev); si == nil || si.SleepsAt == nil || !time.Time(*si.SleepsAt).Equal(t0.Add(3*time.Hour)) {
			t.Errorf("sleep %+v, want it to sleep at %s", si, t0.Add(3*time.Hour))
		}
	})

	t.Run("says an object asleep sleeps since it went to sleep, and is deleted deleteAfter later", func(t *testing.T) {
		since := t0.Add(3 * time.Hour)
		ev := evaluateAt(t, playbook(asleep(since)), policies, t0.Add(6*time.Hour))
		if s := ev.SleepState(); s != SleepAsleep {
			t.Fatalf("sleep state %q, want asleep", s)
		}
		if !slices.Contains(ev.Flags(), "asleep") {
			t.Errorf("flags %v, want asleep", ev.Flags())
		}
		if d := ev.DeleteAt(); !d.Equal(since.Add(14*day + time.Second)) {
			t.Errorf("deleted at %s, want %s", d, since.Add(14*day+time.Second))
		}
		if got := sleepColumn(sleepOf(ev), ev.Now); got != "asleep since 3h ago" {
			t.Errorf("SLEEP %q, want %q", got, "asleep since 3h ago")
		}
	})

	t.Run("says an object used after it went to sleep is waking", func(t *testing.T) {
		since := t0.Add(3 * time.Hour)
		a := asleep(since)
		a[expiry.AnnotationLastActive] = t0.Add(5 * time.Hour).Format(time.RFC3339)
		ev := evaluateAt(t, playbook(a), policies, t0.Add(6*time.Hour))
		if s := ev.SleepState(); s != SleepWaking {
			t.Fatalf("sleep state %q, want waking", s)
		}
		if len(ev.Steps) == 0 || ev.Steps[0].Action != ActionWake || !ev.Steps[0].At.Equal(ev.Now) {
			t.Errorf("steps %+v, want a wake now first", ev.Steps)
		}
		if !slices.Contains(ev.Flags(), "waking") {
			t.Errorf("flags %v, want waking", ev.Flags())
		}
	})

	t.Run("has no sleep under a policy without spec.sleep", func(t *testing.T) {
		ev := evaluateAt(t, playbook(nil), []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks")}, t0)
		if s := ev.SleepState(); s != "" || sleepOf(ev) != nil {
			t.Errorf("sleep state %q, want none", s)
		}
	})
}

func slicesDeleteAction(steps []step, action string) []step {
	var out []step
	for _, s := range steps {
		if s.action != action {
			out = append(out, s)
		}
	}
	return out
}

func TestListShowsWhatSleeps(t *testing.T) {
	now := t0.Add(6 * time.Hour)
	policies := []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks", sleepy)}
	used := map[string]string{expiry.AnnotationLastActive: t0.Add(5 * time.Hour).Format(time.RFC3339)}
	s, out := fakeSession(t, now, policies,
		renamed(playbook(asleep(t0.Add(3*time.Hour))), "2b1e7c9e", "Weekend demo"),
		renamed(playbook(used), "5c0d6a1f", "hello-go"),
	)
	evs, err := s.governed(context.Background(), listOptions{output: "table"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := writeList(s.o, "table", evs); err != nil {
		t.Fatal(err)
	}
	want := `NAME                TITLE          CREATED   EXPIRES (UTC)      LEFT      SLEEP                 REMINDERS   POLICY      FLAGS
playbook/2b1e7c9e   Weekend demo   6h ago    2026-03-15 12:00   13d 21h   asleep since 3h ago   -           playbooks   asleep
playbook/5c0d6a1f   hello-go       6h ago    2026-03-15 17:00   14d 2h    sleeps in 2h          -           playbooks   idle
`
	if got := out.String(); got != want {
		t.Errorf("list says\n%s\nwant\n%s", got, want)
	}
}

// wakeSession is a fake session whose controller wakes the Playbook once
// something was written on it: every read after a patch shows it Awake.
func wakeSession(t *testing.T, now time.Time, policies []v1alpha1.TimeoutPolicy, obj *unstructured.Unstructured) (*session, *bytes.Buffer, *atomic.Bool) {
	t.Helper()
	s, out := fakeSession(t, now, policies, obj)
	fake := s.dyn.(*dynamicfake.FakeDynamicClient)
	var patched atomic.Bool
	fake.PrependReactor("patch", "playbooks", func(k8stesting.Action) (bool, runtime.Object, error) {
		patched.Store(true)
		return false, nil, nil
	})
	fake.PrependReactor("get", "playbooks", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if !patched.Load() {
			return false, nil, nil
		}
		o, err := fake.Tracker().Get(playbooksGVR, "", a.(k8stesting.GetAction).GetName())
		if err != nil {
			return true, nil, err
		}
		u := o.(*unstructured.Unstructured).DeepCopy()
		a2 := u.GetAnnotations()
		st := expiry.SleepState{Phase: expiry.PhaseAwake, Since: t0.Add(3 * time.Hour), Woke: now, WokeBy: "use (" + expiry.AnnotationLastActive + ")"}
		a2[expiry.AnnotationSleep] = st.String()
		u.SetAnnotations(a2)
		return true, u, nil
	})
	return s, out, &patched
}

func TestWake(t *testing.T) {
	now := t0.Add(6*time.Hour + 300*time.Millisecond)
	sleeping := []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks", sleepy)}
	defer func(p time.Duration) { wakePoll = p }(wakePoll)
	wakePoll = 10 * time.Millisecond

	t.Run("writes last-active on an object asleep, as touch does, and waits until it is awake", func(t *testing.T) {
		s, out, patched := wakeSession(t, now, sleeping, playbook(asleep(t0.Add(3*time.Hour))))
		if err := s.wake(context.Background(), ref{name: "2b1e7c9e"}, "text", true, time.Minute); err != nil {
			t.Fatal(err)
		}
		if !patched.Load() {
			t.Fatal("nothing was written")
		}
		obj, err := s.dyn.(*dynamicfake.FakeDynamicClient).Tracker().Get(playbooksGVR, "", "2b1e7c9e")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := obj.(*unstructured.Unstructured).GetAnnotations()[expiry.AnnotationLastActive], "2026-03-01T15:00:00Z"; got != want {
			t.Errorf("last-active %q, want %q (now, truncated: never ahead of the clock)", got, want)
		}
		want := `playbook/2b1e7c9e ("Weekend demo") woken: last active 2026-03-01T15:00:00Z
  expires 2026-03-15T18:00:01Z (in 14d 3h)
  waking: woken by use (timeout.amphitheatre.app/last-active); the controller restores what its sleep scaled down
  awake: woke 2026-03-01T15:00:00Z (now), by use (timeout.amphitheatre.app/last-active)
`
		if out.String() != want {
			t.Errorf("wake says\n%s\nwant\n%s", out.String(), want)
		}
	})

	t.Run("writes nothing on an object that is not asleep", func(t *testing.T) {
		used := map[string]string{expiry.AnnotationLastActive: t0.Add(5 * time.Hour).Format(time.RFC3339)}
		s, out, patched := wakeSession(t, now, sleeping, playbook(used))
		if err := s.wake(context.Background(), ref{name: "2b1e7c9e"}, "text", true, time.Minute); err != nil {
			t.Fatal(err)
		}
		if patched.Load() {
			t.Error("wake wrote on an object awake")
		}
		if first := strings.SplitN(out.String(), "\n", 2)[0]; first != `playbook/2b1e7c9e ("Weekend demo") is not asleep: nothing to wake` {
			t.Errorf("wake says %q", first)
		}
		if !strings.Contains(out.String(), "awake: sleeps 2026-03-01T17:00:00Z (in 1h 59m) unless it is used") {
			t.Errorf("wake does not say when it sleeps:\n%s", out.String())
		}
	})

	t.Run("refuses an object whose policy has no sleep", func(t *testing.T) {
		s, _, patched := wakeSession(t, now, []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks")}, playbook(nil))
		err := s.wake(context.Background(), ref{name: "2b1e7c9e"}, "text", true, time.Minute)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != ExitRefused || !strings.Contains(err.Error(), "has no spec.sleep") {
			t.Errorf("error %v, want exit 7 saying the policy has no sleep", err)
		}
		if patched.Load() {
			t.Error("wake wrote under a policy without sleep")
		}
	})

	t.Run("gives up waiting after the timeout", func(t *testing.T) {
		s, _ := fakeSession(t, now, sleeping, playbook(asleep(t0.Add(3*time.Hour))))
		err := s.wake(context.Background(), ref{name: "2b1e7c9e"}, "text", true, 50*time.Millisecond)
		if code, msg := classify(err); code != ExitError || !strings.Contains(msg, "did not wake within 50ms: its sleep annotation says Asleep") {
			t.Errorf("exit %d %q, want 1 saying it did not wake", code, msg)
		}
	})
}

func TestTouchUnderAPolicyThatSleeps(t *testing.T) {
	now := t0.Add(6 * time.Hour)
	onlySleep := []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks", sleepy)}
	throttled := []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks", sleepy, func(s *v1alpha1.TimeoutPolicySpec) {
		s.IdleTTL = "10d" // a write at most every 9m: sleep.afterIdle/20
	})}
	recent := []string{expiry.AnnotationLastActive, now.Add(-5 * time.Minute).Format(time.RFC3339)}
	tests := []struct {
		name     string
		policies []v1alpha1.TimeoutPolicy
		obj      *unstructured.Unstructured
		written  bool
	}{
		{"writes under sleep.afterIdle without idleTTL", onlySleep, playbook(nil), true},
		{"wakes an object asleep within the throttling window", throttled, playbook(annotated(asleep(now.Add(-2*time.Minute)), recent...)), true},
		{"is throttled on an object awake", throttled, playbook(annotated(nil, recent...)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, patched := wakeSession(t, now, tt.policies, tt.obj)
			if _, err := s.change(context.Background(), ref{name: "2b1e7c9e"}, "text", touchPatch); err != nil {
				t.Fatal(err)
			}
			if patched.Load() != tt.written {
				t.Errorf("written %v, want %v", patched.Load(), tt.written)
			}
		})
	}
}
