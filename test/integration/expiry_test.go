// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

func TestDeletesAPlaybookWithinASecondOfItsExpiry(t *testing.T) {
	t.Parallel()
	createPolicy(t, "on-time", playbookPolicy("on-time", "1h"))

	pb := create(t, playbooks, newPlaybook("on-time", "short-lived", map[string]string{expiry.AnnotationTTL: "3s"}))
	pb.expectDeletedOnTime(t, pb.after(3*time.Second))

	findEvent(t, eventNamespace, pb.GetName(), "Expired")
	deleted := findEvent(t, eventNamespace, pb.GetName(), "Deleted")
	mustContain(t, deleted.Note, "policy on-time", "propagation Background")
}

func TestExpiresAtWinsOverTTL(t *testing.T) {
	t.Parallel()
	createPolicy(t, "expires-at", playbookPolicy("expires-at", "1h"))

	at := time.Now().Add(4 * time.Second).UTC().Truncate(time.Second)
	pb := create(t, playbooks, newPlaybook("expires-at", "absolute", map[string]string{
		expiry.AnnotationExpiresAt: at.Format(time.RFC3339),
		expiry.AnnotationTTL:       "1s",
	}))
	pb.expectDeletedOnTime(t, at)
}

func TestKeepsAPlaybookAnnotatedKeep(t *testing.T) {
	t.Parallel()
	createPolicy(t, "keep", playbookPolicy("keep", "1s"))

	pb := create(t, playbooks, newPlaybook("keep", "precious", map[string]string{
		expiry.AnnotationKeep: "true",
		expiry.AnnotationTTL:  "1s",
	}))
	// Governed and seen as kept, not merely overlooked.
	awaitPolicy(t, "keep", "counting the Playbook as kept", func(p *v1alpha1.TimeoutPolicy) bool { return p.Status.Kept == 1 })
	pb.expectKept(t, time.Until(pb.after(5*time.Second)))
}

func TestAnExtensionWrittenJustBeforeExpiryWins(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		before time.Duration
	}{
		{"one second before expiry", time.Second},
		// So close that the controller's wake-up is already due when the
		// cache sees it: only the resourceVersion precondition on the
		// delete can save it.
		{"a few milliseconds before expiry", 5 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			test := fmt.Sprintf("extend-%d", tc.before.Milliseconds())
			createPolicy(t, test, playbookPolicy(test, "1h"))

			// On a busy machine the write may land after the delete was
			// accepted: Amphitheatre's finalizer keeps the Playbook, in
			// Terminating, and the write succeeds but came too late. That
			// race went the other way; the scenario is played again.
			for attempt := 1; attempt <= 3; attempt++ {
				pb := create(t, playbooks, newPlaybook(test, "extended", map[string]string{expiry.AnnotationTTL: "4s"}))
				time.Sleep(time.Until(pb.after(4 * time.Second).Add(-tc.before)))
				newExpiry := pb.after(7 * time.Second)
				patched, err := dyn.Resource(playbooks).Patch(context.Background(), pb.GetName(), types.MergePatchType,
					fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, expiry.AnnotationExpiresAt, newExpiry.UTC().Format(time.RFC3339)),
					metav1.PatchOptions{})
				if err != nil {
					t.Fatalf("extend %s: %v", pb.GetName(), err)
				}
				if patched.GetDeletionTimestamp() != nil {
					t.Logf("attempt %d: the extension landed after the delete was accepted", attempt)
					continue
				}
				pb.expectDeletedOnTime(t, newExpiry)
				return
			}
			t.Fatal("every extension landed after the delete: the machine is too slow to play this race")
		})
	}
}

func TestHonoursTheLegacyBareTTLAnnotation(t *testing.T) {
	t.Parallel()
	createPolicy(t, "legacy", playbookPolicy("legacy", "1h"))

	t.Run("deletes after the legacy ttl in seconds", func(t *testing.T) {
		t.Parallel()
		pb := create(t, playbooks, newPlaybook("legacy", "legacy", map[string]string{expiry.AnnotationLegacyTTL: "3"}))
		pb.expectDeletedOnTime(t, pb.after(3*time.Second))
	})
	t.Run("ignores it when a prefixed ttl is present", func(t *testing.T) {
		t.Parallel()
		pb := create(t, playbooks, newPlaybook("legacy", "prefixed", map[string]string{
			expiry.AnnotationLegacyTTL: "1",
			expiry.AnnotationTTL:       "1h",
		}))
		pb.expectKept(t, 4*time.Second)
	})
}

func TestAnInvalidAnnotationWarnsAndFallsBackToTheDefault(t *testing.T) {
	t.Parallel()
	createPolicy(t, "invalid", playbookPolicy("invalid", "4s"))

	pb := create(t, playbooks, newPlaybook("invalid", "typo", map[string]string{expiry.AnnotationTTL: "3 days"}))
	warning := findEvent(t, eventNamespace, pb.GetName(), "InvalidTimeout")
	if warning.Type != "Warning" {
		t.Errorf("InvalidTimeout event type = %s, want Warning", warning.Type)
	}
	mustContain(t, warning.Note, expiry.AnnotationTTL, `"3 days"`, "expected", "14d")
	pb.expectDeletedOnTime(t, pb.after(4*time.Second))
}

func TestDryRunDeletesNothing(t *testing.T) {
	t.Parallel()
	spec := playbookPolicy("dry-run", "1h")
	spec.Deletion.DryRun = true
	createPolicy(t, "dry-run", spec)

	pb := create(t, playbooks, newPlaybook("dry-run", "rehearsal", map[string]string{expiry.AnnotationTTL: "1s"}))
	would := findEvent(t, eventNamespace, pb.GetName(), "WouldDelete")
	mustContain(t, would.Note, "dry-run")
	pb.expectKept(t, 2*time.Second)
	for _, reason := range events(t, eventNamespace, pb.GetName()) {
		if reason == "Deleted" || reason == "Expired" {
			t.Errorf("dry run recorded a %s event", reason)
		}
	}
}

func TestUsesThePolicyDefaultWithoutAnnotations(t *testing.T) {
	t.Parallel()
	createPolicy(t, "default", playbookPolicy("default", "3s"))

	pb := create(t, playbooks, newPlaybook("default", "plain", nil))
	pb.expectDeletedOnTime(t, pb.after(3*time.Second))
}

func TestPolicyStatusCountsWhatItGoverns(t *testing.T) {
	t.Parallel()
	spec := playbookPolicy("status", "1h")
	spec.Reminders = []v1alpha1.Duration{"2h"}
	createPolicy(t, "status", spec)

	soon := create(t, playbooks, newPlaybook("status", "soon", nil))
	create(t, playbooks, newPlaybook("status", "later", map[string]string{expiry.AnnotationTTL: "1d"}))
	create(t, playbooks, newPlaybook("status", "kept", map[string]string{expiry.AnnotationKeep: "true"}))

	fixture.Eventually(t, 10*time.Second, "status counts", func() (bool, error) {
		p, err := getPolicy("status")
		if err != nil {
			return false, err
		}
		s := p.Status
		ok := s.Tracked == 2 && s.Kept == 1 && s.ExpiringSoon == 1 &&
			s.NextExpiry != nil && s.NextExpiry.Time.Equal(soon.after(time.Hour)) &&
			s.ObservedGeneration == p.Generation
		return ok, fmt.Errorf("status %+v", s)
	})
}

// TestALongInvalidValueIsStillWarnedAbout: the API server refuses an Event
// note over 1024 bytes for good, so a long value must be cut in the note
// for the Warning to be recorded at all.
func TestALongInvalidValueIsStillWarnedAbout(t *testing.T) {
	t.Parallel()
	const test = "invalid-long"
	createPolicy(t, test, playbookPolicy(test, "1h"))

	value := strings.Repeat("1", 1500) + "é"
	pb := create(t, playbooks, newPlaybook(test, "a long typo", map[string]string{expiry.AnnotationTTL: value}))
	warning := findEvent(t, eventNamespace, pb.GetName(), "InvalidTimeout")
	if warning.Type != "Warning" || len(warning.Note) > 1024 || !utf8.ValidString(warning.Note) {
		t.Errorf("%s Event with a note of %d bytes, valid UTF-8 %t", warning.Type, len(warning.Note), utf8.ValidString(warning.Note))
	}
	mustContain(t, warning.Note, expiry.AnnotationTTL, `"`+value[:64]+`"…(1502 bytes)`, "expected a positive duration")
	fixture.Eventually(t, 5*time.Second, "an audit record with the whole value", func() (bool, error) {
		return slices.ContainsFunc(auditRecords(t, pb.GetUID()), func(r audit.Record) bool {
			return r.Type == audit.InvalidAnnotation && strings.Contains(r.Error, `"`+value+`"`)
		}), nil
	})
}
