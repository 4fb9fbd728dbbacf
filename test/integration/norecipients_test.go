// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// An e-mail channel is the only one that carries a policy's reminders, the
// policy gives it no "to", and a Playbook names nobody: the reminder
// reaches nobody, so the Playbook is never deleted. The policy says so in
// its Ready condition; a notify annotation on the Playbook gets it
// reminded and the policy Ready again.
func TestAPolicyWhoseEmailReachesNobodySaysSo(t *testing.T) {
	t.Parallel()
	const test = "no-recipients"
	mb := fixture.NewMailbox(t, nil)
	host, port := mb.Host, mb.Port
	createChannel(t, test, v1alpha1.NotificationChannelSpec{Email: &v1alpha1.EmailChannel{
		Host: host, Port: port, Security: "None", From: "timeout@example.com",
	}})
	spec := playbookPolicy(test, "1h")
	spec.Reminders = []v1alpha1.Duration{"1h"}
	spec.MinimumNotice = "1h"
	spec.Notifications.Channels = []v1alpha1.ChannelReference{{Name: test}}
	createPolicy(t, test, spec)
	awaitPolicy(t, test, "ready with nothing to govern", func(p *v1alpha1.TimeoutPolicy) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady)
	})

	pb := create(t, playbooks, newPlaybook(test, "nameless", nil))
	var ready *metav1.Condition
	fixture.Eventually(t, 10*time.Second, "policy "+test+" not ready for want of recipients", func() (bool, error) {
		p, err := getPolicy(test)
		if err != nil {
			return false, err
		}
		ready = meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		return ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == v1alpha1.ReasonNoRecipients,
			fmt.Errorf("Ready = %+v", ready)
	})
	mustContain(t, ready.Message,
		"Nobody is reminded of the playbooks whose "+notify.AnnotationNotify+" annotation names no e-mail address that "+test+" sends to",
		"so they are not deleted", "spec.notifications.channels[].to")
	warning := findEvent(t, eventNamespace, test, "NoRecipients")
	mustContain(t, warning.Note, "Nobody is reminded of the playbooks")
	// What the Playbook itself shows: its reminder failed for want of
	// anyone to send it to.
	mustContain(t, findEvent(t, eventNamespace, pb.GetName(), "MessageFailed").Note, "no recipients")

	mergePatch(t, playbooks, "", pb.GetName(), fmt.Sprintf(`{"metadata":{"annotations":{%q:"alice@example.com"}}}`, notify.AnnotationNotify))
	fixture.Eventually(t, 15*time.Second, "the reminder to alice", func() (bool, error) {
		for _, m := range mb.WithHeader("X-Timeout-Object", pb.GetName()) {
			if slices.Contains(m.To, "alice@example.com") {
				return true, nil
			}
		}
		return false, nil
	})
	awaitPolicy(t, test, "ready once the Playbook names someone", func(p *v1alpha1.TimeoutPolicy) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady)
	})
}
