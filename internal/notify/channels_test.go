// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package notify

import (
	"reflect"
	"testing"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// The names planned from a spec are those of the notifiers built from it
// (the controller checks this when it builds them).
func TestChannelNames(t *testing.T) {
	n := v1alpha1.Notifications{
		Email: &v1alpha1.EmailNotifications{Events: []v1alpha1.EventType{v1alpha1.EventReminder}},
		Slack: &v1alpha1.SlackNotifications{},
		Webhooks: []v1alpha1.WebhookNotifications{
			{Name: "audit"},
			{Name: "deletions", Events: []v1alpha1.EventType{v1alpha1.EventDeleted}},
		},
	}
	got := ChannelNames(n)
	want := map[v1alpha1.EventType][]string{
		v1alpha1.EventReminder:  {"email", "slack", "webhook/audit"},
		v1alpha1.EventExtended:  {"slack", "webhook/audit"},
		v1alpha1.EventPostponed: {"slack", "webhook/audit"},
		// The rehearsal of a dry run is on the record: going live owes
		// notice after it.
		v1alpha1.EventWouldDelete: {"slack", "webhook/audit"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ChannelNames = %v, want %v", got, want)
	}
	if got := ChannelNames(v1alpha1.Notifications{}); !reflect.DeepEqual(got[v1alpha1.EventReminder], []string{"events"}) {
		t.Errorf("without channels: %v", got)
	}
}
