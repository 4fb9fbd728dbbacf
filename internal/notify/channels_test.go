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
	n := v1alpha1.Notifications{Channels: []v1alpha1.ChannelReference{
		{Name: "team-mail", Events: []v1alpha1.EventType{v1alpha1.EventReminder}},
		{Name: "team-chat"},
		{Name: "deletions", Events: []v1alpha1.EventType{v1alpha1.EventDeleted}},
	}}
	got := ChannelNames(n)
	want := map[v1alpha1.EventType][]string{
		v1alpha1.EventReminder:  {"team-mail", "team-chat"},
		v1alpha1.EventExtended:  {"team-chat"},
		v1alpha1.EventPostponed: {"team-chat"},
		// The rehearsal of a dry run is on the record: going live owes
		// notice after it.
		v1alpha1.EventWouldDelete: {"team-chat"},
		// The sleeping, slept and woke messages are said once per sleep
		// and wake.
		v1alpha1.EventSleeping: {"team-chat"},
		v1alpha1.EventSlept:    {"team-chat"},
		v1alpha1.EventWoke:     {"team-chat"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ChannelNames = %v, want %v", got, want)
	}
	if got := ChannelNames(v1alpha1.Notifications{}); !reflect.DeepEqual(got[v1alpha1.EventReminder], []string{"events"}) {
		t.Errorf("without channels: %v", got)
	}
}
