// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package channelset

import (
	"context"
	"testing"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// recipientChannels are the channels the tests of remindsNobody name.
func recipientChannels(t *testing.T) *Channels {
	t.Helper()
	return channelsWith(t, fixture.SecretsByKey{"key": "a signing key", "url": "https://hooks.slack.com/services/T0/B0/x"},
		fixture.Channel("mail", fixture.MailSpec), fixture.Channel("team-mail", fixture.TeamMailSpec), fixture.Channel("ops", fixture.HookSpec), fixture.Channel("slack", fixture.SlackSpec))
}

func TestWhoCanBeReminded(t *testing.T) {
	notifyOf := func(v string) map[string]string { return map[string]string{notify.AnnotationNotify: v} }
	c := recipientChannels(t)
	for _, tt := range []struct {
		name        string
		refs        []v1alpha1.ChannelReference
		annotations map[string]string
		// owner is the owner's address, under a policy that tells owners.
		owner      string
		wantNobody bool
	}{
		{name: "an e-mail channel without to reaches nobody for an object that names nobody",
			refs: []v1alpha1.ChannelReference{{Name: "mail"}}, wantNobody: true},
		{name: "an e-mail channel without to reaches the address an object names",
			refs: []v1alpha1.ChannelReference{{Name: "mail"}}, annotations: notifyOf("alice@example.com")},
		{name: "a Slack channel an object names is no e-mail recipient",
			refs: []v1alpha1.ChannelReference{{Name: "mail"}}, annotations: notifyOf("#team-amp"), wantNobody: true},
		{name: "an address the annotation's parser refuses reaches nobody",
			refs: []v1alpha1.ChannelReference{{Name: "mail"}}, annotations: notifyOf("alice@10.0.0.1, alice"), wantNobody: true},
		{name: "an address outside the channel's allowed domains reaches nobody",
			refs: []v1alpha1.ChannelReference{{Name: "team-mail"}}, annotations: notifyOf("alice@example.com"), wantNobody: true},
		{name: "an address inside the channel's allowed domains is reached",
			refs: []v1alpha1.ChannelReference{{Name: "team-mail"}}, annotations: notifyOf("alice@team-a.example.com")},
		{name: "an address one of two e-mail channels allows is reached",
			refs:        []v1alpha1.ChannelReference{{Name: "team-mail"}, {Name: "mail"}},
			annotations: notifyOf("alice@example.com")},
		{name: "the policy's to reaches someone whatever the object says",
			refs: []v1alpha1.ChannelReference{{Name: "mail", To: []string{"platform@example.com"}}}},
		{name: "a webhook reaches its receiver",
			refs: []v1alpha1.ChannelReference{{Name: "mail"}, {Name: "ops"}}},
		{name: "a Slack channel reaches its incoming webhook's own channel",
			refs: []v1alpha1.ChannelReference{{Name: "mail"}, {Name: "slack"}}},
		{name: "a webhook that carries no reminders reaches nobody with them",
			refs: []v1alpha1.ChannelReference{{Name: "mail"}, {Name: "ops", Events: []v1alpha1.EventType{v1alpha1.EventDeleted}}}, wantNobody: true},
		{name: "an e-mail channel that carries no reminders leaves them to the Events",
			refs: []v1alpha1.ChannelReference{{Name: "mail", Events: []v1alpha1.EventType{v1alpha1.EventDeleted}}}},
		{name: "Events are the reminders of a policy without channels"},
		{name: "an e-mail channel without to reaches the owner",
			refs: []v1alpha1.ChannelReference{{Name: "mail"}}, owner: "alice@example.com"},
		{name: "an owner outside the channel's allowed domains is reached by nobody",
			refs: []v1alpha1.ChannelReference{{Name: "team-mail"}}, owner: "alice@example.com", wantNobody: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := fixture.Policy("p", func(p *v1alpha1.TimeoutPolicy) { p.Spec.Notifications.Channels = tt.refs })
			set, err := c.Get(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			if got := set.RemindsNobody(tt.annotations, tt.owner); got != tt.wantNobody {
				t.Errorf("remindsNobody = %t, want %t", got, tt.wantNobody)
			}
		})
	}
}
