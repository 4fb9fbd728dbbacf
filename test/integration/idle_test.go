// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/plugin"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// idlePolicy governs the test's Playbooks with "at least defaultTTL, and
// idleTTL after the last use".
func idlePolicy(test string, defaultTTL, idleTTL v1alpha1.Duration) v1alpha1.TimeoutPolicySpec {
	spec := playbookPolicy(test, defaultTTL)
	spec.IdleTTL = idleTTL
	spec.Reminders = []v1alpha1.Duration{}
	spec.MinimumNotice = "0s"
	return spec
}

// touch records use of the Playbook now, as Amphitheatre's API server
// would, and returns the time it wrote.
func touch(t *testing.T, name string) time.Time {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Second)
	mergePatch(t, playbooks, "", name, fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, expiry.AnnotationLastActive, now.Format(time.RFC3339)))
	return now
}

// editTitle changes the Playbook's spec, which bumps its generation.
func editTitle(t *testing.T, name, title string) {
	t.Helper()
	mergePatch(t, playbooks, "", name, fmt.Sprintf(`{"spec":{"title":%q}}`, title))
}

func TestATouchedPlaybookOutlivesItsIdleTwin(t *testing.T) {
	t.Parallel()
	createPolicy(t, "idle-twins", idlePolicy("idle-twins", "3s", "3s"))

	used := create(t, playbooks, newPlaybook("idle-twins", "used", nil))
	idle := create(t, playbooks, newPlaybook("idle-twins", "idle", nil))

	stop := make(chan struct{})
	lastTouch := make(chan time.Time, 1)
	go func() {
		var last time.Time
		defer func() { lastTouch <- last }()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				last = touch(t, used.GetName())
			}
		}
	}()

	idle.expectDeletedOnTime(t, idle.after(3*time.Second))
	used.expectKept(t, 4*time.Second)
	close(stop)
	last := <-lastTouch
	// Unused from now on: it goes idleTTL after its last use.
	used.expectDeletedOnTime(t, last.Add(3*time.Second))
	deleted := findEvent(t, eventNamespace, used.GetName(), "Expired")
	mustContain(t, deleted.Note, "idleTTL")
}

func TestAGenerationChangeCountsAsUse(t *testing.T) {
	t.Parallel()
	createPolicy(t, "idle-generation", idlePolicy("idle-generation", "3s", "4s"))

	pb := create(t, playbooks, newPlaybook("idle-generation", "edited", nil))
	time.Sleep(time.Until(pb.after(2 * time.Second)))
	edited := time.Now()
	editTitle(t, pb.GetName(), "edited again")

	// Recorded by the controller, not by the test.
	var act expiry.Activity
	fixture.Eventually(t, 5*time.Second, "the controller records generation 2", func() (bool, error) {
		u, err := dyn.Resource(playbooks).Get(context.Background(), pb.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		act, err = expiry.ParseActivity(u.GetAnnotations()[expiry.AnnotationActivity])
		return act.Generation == 2, err
	})
	if act.At.Before(edited.Add(-time.Second)) {
		t.Fatalf("activity recorded at %s, before the edit at %s", act.At, edited)
	}
	// Without the edit it would have gone 4s after creation.
	pb.expectDeletedOnTime(t, act.At.Add(4*time.Second))
}

func TestWritesOfObservedUseAreThrottled(t *testing.T) {
	t.Parallel()
	// A window of idleTTL/20 = 1s.
	createPolicy(t, "idle-throttle", idlePolicy("idle-throttle", "1h", "20s"))
	pb := create(t, playbooks, newPlaybook("idle-throttle", "busy", nil))

	// Count the writes of the controller's annotations: the test's own
	// edits change only the spec.
	w, err := dyn.Resource(playbooks).Watch(context.Background(), metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", pb.GetName()).String(),
		ResourceVersion: pb.GetResourceVersion(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	writes := make(chan int, 1)
	done := make(chan struct{})
	go func() {
		n, last := 0, pb.GetAnnotations()
		for {
			select {
			case <-done:
				writes <- n
				return
			case ev := <-w.ResultChan():
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok || ev.Type != watch.Modified {
					continue
				}
				for _, k := range []string{expiry.AnnotationActivity, expiry.AnnotationReminders} {
					if u.GetAnnotations()[k] != last[k] {
						n++
						break
					}
				}
				last = u.GetAnnotations()
			}
		}
	}()

	// An edit every 100ms for 5s: 50 uses.
	start := time.Now()
	for i := range 50 {
		editTitle(t, pb.GetName(), fmt.Sprintf("busy %d", i))
		time.Sleep(100 * time.Millisecond)
	}
	elapsed := time.Since(start)
	// The last edit is recorded once its window has passed.
	fixture.Eventually(t, 5*time.Second, "the last generation recorded", func() (bool, error) {
		u, err := dyn.Resource(playbooks).Get(context.Background(), pb.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		act, err := expiry.ParseActivity(u.GetAnnotations()[expiry.AnnotationActivity])
		return act.Generation == u.GetGeneration() && act.Generation == 51, err
	})
	close(done)
	n := <-writes
	// One per second of edits, one for the first edit, one for the last.
	limit := int(elapsed/time.Second) + 2
	t.Logf("%d writes for 50 edits in %s", n, elapsed.Round(time.Millisecond))
	if n > limit || n < 2 {
		t.Fatalf("%d writes of the controller's annotations for 50 edits in %s; want 2 to %d", n, elapsed, limit)
	}
}

// TestPolicyStatusCountsIdleObjects: status.idle counts the tracked
// objects whose expiry the idle clock sets (issue 12), and follows them
// when their annotations change.
func TestPolicyStatusCountsIdleObjects(t *testing.T) {
	t.Parallel()
	const test = "idle-status"
	createPolicy(t, test, idlePolicy(test, "1h", "1h"))

	// Idle clock at creation plus an hour, the same as defaultTTL: not idle.
	create(t, playbooks, newPlaybook(test, "fresh", nil))
	// Its own ttl is shorter than idleTTL after its creation, its first use.
	short := create(t, playbooks, newPlaybook(test, "short", map[string]string{expiry.AnnotationTTL: "10m"}))
	// A ttl past any use.
	create(t, playbooks, newPlaybook(test, "long", map[string]string{expiry.AnnotationTTL: "1d"}))
	create(t, playbooks, newPlaybook(test, "kept", map[string]string{expiry.AnnotationKeep: "true"}))
	// Used after its creation: the idle clock moves past defaultTTL.
	used := create(t, playbooks, newPlaybook(test, "used", nil))
	time.Sleep(time.Until(used.after(time.Second)))
	touch(t, used.GetName())

	status := func(tracked, kept, idle int32) func() (bool, error) {
		return func() (bool, error) {
			p, err := getPolicy(test)
			if err != nil {
				return false, err
			}
			s := p.Status
			return s.Tracked == tracked && s.Kept == kept && s.Idle == idle,
				fmt.Errorf("tracked %d, kept %d, idle %d; want %d, %d, %d", s.Tracked, s.Kept, s.Idle, tracked, kept, idle)
		}
	}
	fixture.Eventually(t, 10*time.Second, "status counts the touched and the short-lived Playbooks as idle", status(4, 1, 2))

	// A day's ttl: the creation clock is later than any use now.
	mergePatch(t, playbooks, "", short.GetName(), fmt.Sprintf(`{"metadata":{"annotations":{%q:"1d"}}}`, expiry.AnnotationTTL))
	fixture.Eventually(t, 10*time.Second, "status no longer counts the extended Playbook as idle", status(4, 1, 1))
}

// A last-active of 2999 under a policy that forbids keep and has no
// maxTTL is use at the moment it was written, not a keep until 2999: the
// controller notes when it first saw it, the object is deleted idleTTL
// after that, the plugin shows the time left as such, and the policy says
// that forbidding keep alone bounds nothing.
func TestALastActiveInTheFarFutureIsNoKeep(t *testing.T) {
	t.Parallel()
	const test = "idle-forged"
	spec := idlePolicy(test, "2s", "4s")
	spec.Keep = v1alpha1.KeepForbidden
	createPolicy(t, test, spec)
	pb := create(t, playbooks, newPlaybook(test, "forged", nil))

	written := time.Now()
	mergePatch(t, playbooks, "", pb.GetName(), fmt.Sprintf(`{"metadata":{"annotations":{%q:"2999-01-01T00:00:00Z"}}}`, expiry.AnnotationLastActive))
	var act expiry.Activity
	fixture.Eventually(t, 5*time.Second, "the controller notes when it saw the last-active", func() (bool, error) {
		u, err := dyn.Resource(playbooks).Get(context.Background(), pb.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		act, err = expiry.ParseActivity(u.GetAnnotations()[expiry.AnnotationActivity])
		return act.Ahead != nil, err
	})
	if seen := act.Ahead.Seen; seen.Before(written.Add(-time.Second)) || seen.After(written.Add(onTime)) || !act.Ahead.LastActive.Equal(time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("noted %+v; want 2999-01-01 seen within %s after the write at %s", *act.Ahead, onTime, written.Format(time.RFC3339Nano))
	}

	list := decodeJSON[plugin.ItemList](t, kubectlTimeout(t, "list", "-l", testLabel+"="+test, "-o", "json").expect(t, plugin.ExitOK).out)
	if len(list.Items) != 1 || list.Items[0].SecondsLeft == nil || *list.Items[0].SecondsLeft > 4 {
		t.Errorf("list -o json says %+v; want at most 4 seconds left", list.Items)
	}
	if out := kubectlTimeout(t, "list", "-l", testLabel+"="+test).expect(t, plugin.ExitOK).out; strings.Contains(out, "106751d") || regexp.MustCompile(`\b[0-9]+y\b`).MatchString(out) {
		t.Errorf("list shows a span of years:\n%s", out)
	}

	pb.expectDeletedOnTime(t, act.Ahead.Seen.Add(4*time.Second))
	warned := findEvent(t, eventNamespace, pb.GetName(), "InvalidTimeout")
	mustContain(t, warned.Note, "counts from")

	p := &v1alpha1.TimeoutPolicy{}
	fixture.Eventually(t, 5*time.Second, "the policy says keep: Forbidden without maxTTL bounds nothing", func() (bool, error) {
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: test}, p); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionUnbounded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonNoMaxTTL, nil
	})
}
