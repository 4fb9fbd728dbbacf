// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/channelset"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// An e-mail channel that reaches nobody holds every deletion owed notice:
// the policy says so in its Ready condition, which a notify annotation or
// a to turns back.
func TestAPolicyWhoseObjectsHaveNobodyToRemindIsNotReady(t *testing.T) {
	remindsByMail := func(refs ...v1alpha1.ChannelReference) func(*v1alpha1.TimeoutPolicy) {
		return func(p *v1alpha1.TimeoutPolicy) {
			p.Spec.Reminders = []v1alpha1.Duration{"1h"}
			p.Spec.MinimumNotice = "24h"
			p.Spec.Notifications.Channels = refs
		}
	}
	for _, tt := range []struct {
		name        string
		policy      *v1alpha1.TimeoutPolicy
		objects     []client.Object
		wantReason  string
		wantMessage []string
	}{
		{
			name:       "is not ready when an object names nobody and the policy gives no to",
			policy:     fixture.Policy("mail", remindsByMail(v1alpha1.ChannelReference{Name: "mail"})),
			objects:    []client.Object{fixture.NewConfigMap("named", fixture.Annotated(notify.AnnotationNotify, "alice@example.com")), fixture.NewConfigMap("nameless")},
			wantReason: v1alpha1.ReasonNoRecipients,
			wantMessage: []string{
				"Nobody is reminded of the configmaps whose timeout.amphitheatre.app/notify annotation names no e-mail address that mail sends to",
				"so they are not deleted", "mail is the only channel that carries this policy's reminders and the policy gives it no \"to\"",
				"spec.notifications.channels[].to",
			},
		},
		{
			name:   "names every e-mail channel that carries reminders",
			policy: fixture.Policy("mails", remindsByMail(v1alpha1.ChannelReference{Name: "mail"}, v1alpha1.ChannelReference{Name: "team-mail"})),
			objects: []client.Object{
				fixture.NewConfigMap("slack-only", fixture.Annotated(notify.AnnotationNotify, "#team-amp")),
			},
			wantReason:  v1alpha1.ReasonNoRecipients,
			wantMessage: []string{"that mail, team-mail send to", "mail, team-mail are the only channels that carry"},
		},
		{
			name:       "is ready when every object names someone",
			policy:     fixture.Policy("mail", remindsByMail(v1alpha1.ChannelReference{Name: "mail"})),
			objects:    []client.Object{fixture.NewConfigMap("named", fixture.Annotated(notify.AnnotationNotify, "alice@example.com"))},
			wantReason: v1alpha1.ReasonActive,
		},
		{
			name:       "is ready when it governs nothing",
			policy:     fixture.Policy("mail", remindsByMail(v1alpha1.ChannelReference{Name: "mail"})),
			wantReason: v1alpha1.ReasonActive,
		},
		{
			name:       "is ready when the object that names nobody is kept",
			policy:     fixture.Policy("mail", remindsByMail(v1alpha1.ChannelReference{Name: "mail"})),
			objects:    []client.Object{fixture.NewConfigMap("kept", fixture.Annotated("timeout.amphitheatre.app/keep", "true"))},
			wantReason: v1alpha1.ReasonActive,
		},
		{
			name: "is ready when it owes no notice",
			policy: fixture.Policy("mail", remindsByMail(v1alpha1.ChannelReference{Name: "mail"}), func(p *v1alpha1.TimeoutPolicy) {
				p.Spec.MinimumNotice = "0s"
			}),
			objects:    []client.Object{fixture.NewConfigMap("nameless")},
			wantReason: v1alpha1.ReasonActive,
		},
		{
			name:       "is ready when no reminder's lead fits the object's lifetime, so none is owed",
			policy:     fixture.Policy("mail", remindsByMail(v1alpha1.ChannelReference{Name: "mail"})),
			objects:    []client.Object{fixture.NewConfigMap("brief", fixture.TTL("10m"))},
			wantReason: v1alpha1.ReasonActive,
		},
		{
			name:   "is ready when a reminder reached someone already",
			policy: fixture.Policy("mail", remindsByMail(v1alpha1.ChannelReference{Name: "mail"})),
			objects: []client.Object{fixture.NewConfigMap("reminded", fixture.Annotated(expiry.AnnotationReminders, (&expiry.Record{
				ExpiresAt: fixture.T0.Add(time.Hour), Since: fixture.T0, NoticeAt: fixture.T0.Add(30 * time.Second), Noticed: fixture.T0.Add(30 * time.Second),
				Sent: map[string]expiry.Delivery{"1h": {At: fixture.T0.Add(30 * time.Second), Channels: []string{"ops"}}},
			}).String()))},
			wantReason: v1alpha1.ReasonActive,
		},
		{
			name:       "is ready when the policy gives the channel a to",
			policy:     fixture.Policy("mail", remindsByMail(v1alpha1.ChannelReference{Name: "mail", To: []string{"platform@example.com"}})),
			objects:    []client.Object{fixture.NewConfigMap("nameless")},
			wantReason: v1alpha1.ReasonActive,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newPolicyHarness(t, fixture.T0.Add(time.Minute), append(tt.objects, tt.policy)...)
			h.r.Channels = readinessChannels(t)
			_, p := h.reconcile(t, tt.policy.Name)
			ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			if ready == nil || ready.Reason != tt.wantReason {
				t.Fatalf("Ready = %+v, want reason %s", ready, tt.wantReason)
			}
			if want := metav1.ConditionStatus(map[bool]string{true: "True", false: "False"}[tt.wantReason == v1alpha1.ReasonActive]); ready.Status != want {
				t.Errorf("Ready status %s, want %s", ready.Status, want)
			}
			for _, m := range tt.wantMessage {
				if !strings.Contains(ready.Message, m) {
					t.Errorf("Ready message %q does not contain %q", ready.Message, m)
				}
			}
			wantEvents := []string(nil)
			if tt.wantReason == v1alpha1.ReasonNoRecipients {
				wantEvents = []string{"Warning NoRecipients"}
			}
			if evs := fixture.Kinds(fixture.Drain(h.rec)); !slices.Equal(evs, wantEvents) {
				t.Errorf("Events = %q, want %q", evs, wantEvents)
			}
		})
	}

	t.Run("turns ready once the object names someone", func(t *testing.T) {
		cm := fixture.NewConfigMap("nameless")
		h := newPolicyHarness(t, fixture.T0.Add(time.Minute), cm, fixture.Policy("mail", remindsByMail(v1alpha1.ChannelReference{Name: "mail"})))
		h.r.Channels = readinessChannels(t)
		if _, p := h.reconcile(t, "mail"); !meta.IsStatusConditionFalse(p.Status.Conditions, v1alpha1.ConditionReady) {
			t.Fatalf("conditions %+v, want not Ready", p.Status.Conditions)
		}
		if err := h.client.Get(context.Background(), client.ObjectKeyFromObject(cm), cm); err != nil {
			t.Fatal(err)
		}
		cm.Annotations = map[string]string{notify.AnnotationNotify: "alice@example.com"}
		if err := h.client.Update(context.Background(), cm); err != nil {
			t.Fatal(err)
		}
		if _, p := h.reconcile(t, "mail"); !meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady) {
			t.Fatalf("conditions %+v, want Ready", p.Status.Conditions)
		}
	})
}

// readinessChannels are the channels the tests of remindsNobody name, as
// the policy reconciler builds them.
func readinessChannels(t *testing.T) *channelset.Channels {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(fixture.Scheme(t))
	for _, ch := range []*v1alpha1.NotificationChannel{fixture.Channel("mail", fixture.MailSpec), fixture.Channel("team-mail", fixture.TeamMailSpec), fixture.Channel("ops", fixture.HookSpec), fixture.Channel("slack", fixture.SlackSpec)} {
		b = b.WithObjects(ch)
	}
	return &channelset.Channels{Reader: b.Build(), Clock: clocktesting.NewFakePassiveClock(fixture.T0),
		Secrets: fixture.SecretsByKey{"key": "a signing key", "url": "https://hooks.slack.com/services/T0/B0/x"}}
}
