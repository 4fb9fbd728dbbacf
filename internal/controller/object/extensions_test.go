// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// Every extension is audited with who made it, and how, as the
// changed-by stamp names them, whether or not a reminder was recorded
// about the expiry it replaced, and once.
func TestTheAuditOfAnExtensionNamesWhoMadeIt(t *testing.T) {
	was := fixture.T0.Add(10 * time.Minute)
	alice := expiry.ChangedBy{By: "alice@example.com", Groups: []string{"developers"}, Changed: []string{"expires-at"}}
	byLink := expiry.ChangedBy{By: "alice@example.com", Changed: []string{"expires-at"}, Via: expiry.ViaLink}
	for _, tt := range []struct {
		name       string
		stamp      expiry.ChangedBy
		record     *expiry.Record
		wantDetail string
	}{
		{"after a reminder, with the expiry it replaced", alice, &expiry.Record{ExpiresAt: was, Since: fixture.T0}, "expiry moved from " + was.Format(time.RFC3339) + " by " + expiry.AnnotationExpiresAt},
		{"before any reminder, when nothing recorded the expiry it replaced", alice, nil, "expiry set by " + expiry.AnnotationExpiresAt + "; no earlier expiry was recorded"},
		{"naming the recipient of the link a change was made from, and the link", byLink, &expiry.Record{ExpiresAt: was, Since: fixture.T0}, "expiry moved from " + was.Format(time.RFC3339) + " by " + expiry.AnnotationExpiresAt},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stamp, _ := json.Marshal(tt.stamp)
			annotations := []string{
				expiry.AnnotationExpiresAt, fixture.T0.Add(2 * time.Hour).Format(time.RFC3339),
				expiry.AnnotationChangedBy, string(stamp),
			}
			if tt.record != nil {
				annotations = append(annotations, expiry.AnnotationReminders, tt.record.String())
			}
			cm := fixture.NewConfigMap("extended", fixture.Annotated(annotations...))
			h := newHarness(t, fixture.T0.Add(5*time.Minute), fixture.Policy("extensions", fixture.DefaultTTL("10m")), cm)
			var trail bytes.Buffer
			h.r.Audit = audit.New(&trail)
			for range 3 {
				if _, err := h.reconcile(cm); err != nil {
					t.Fatal(err)
				}
			}
			var extended []audit.Record
			dec := json.NewDecoder(&trail)
			for {
				var got audit.Record
				if err := dec.Decode(&got); err != nil {
					break
				}
				if got.Type == audit.Extended {
					extended = append(extended, got)
				}
			}
			if len(extended) != 1 {
				t.Fatalf("%d extended records over three looks, want 1: %+v", len(extended), extended)
			}
			got := extended[0]
			if got.By != tt.stamp.By || !slices.Equal(got.Groups, tt.stamp.Groups) || got.Via != tt.stamp.Via {
				t.Errorf("the extended record names %q of %v via %q, want %q of %v via %q", got.By, got.Groups, got.Via, tt.stamp.By, tt.stamp.Groups, tt.stamp.Via)
			}
			if got.Detail != tt.wantDetail {
				t.Errorf("the extended record says %q, want %q", got.Detail, tt.wantDetail)
			}
		})
	}
}

// The Event that says the extended message went out names whom the link
// it was made from was sent to; one made with kubectl is told as before.
func TestTheExtendedMessageEventNamesALinksRecipient(t *testing.T) {
	for _, tt := range []struct {
		name string
		via  string
		want string
	}{
		{name: "names the recipient of a link", via: expiry.ViaLink, want: "; extended by alice@example.com via link)"},
		{name: "names the recipient of a Slack button", via: expiry.ViaSlack, want: "; extended by alice@example.com via slack)"},
		{name: "says nothing more of a change through the API", want: time.RFC3339},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cm := fixture.NewConfigMap("linked")
			h := newHarness(t, fixture.T0.Add(31*time.Minute), remindingPolicy("0s"), cm)
			mustReconcile(t, h, cm) // the 30m reminder
			mustReconcile(t, h, cm)
			stamp, _ := json.Marshal(expiry.ChangedBy{By: "alice@example.com", Changed: []string{"expires-at"}, Via: tt.via})
			h.annotate(cm, expiry.AnnotationExpiresAt, fixture.T0.Add(3*time.Hour).Format(time.RFC3339), expiry.AnnotationChangedBy, string(stamp))
			fixture.Drain(h.rec)
			for range 3 {
				mustReconcile(t, h, cm)
			}
			if n := h.scripted.count(v1alpha1.EventExtended); n != 1 {
				t.Fatalf("%d extended messages, want 1", n)
			}
			evs := fixture.Drain(h.rec)
			i := slices.IndexFunc(evs, func(e string) bool { return strings.Contains(e, "Sent the extended message") })
			if i < 0 {
				t.Fatalf("no Event for the extended message among %q", evs)
			}
			if tt.via == "" && strings.Contains(evs[i], "extended by") {
				t.Errorf("Event %q names someone for a change through the API", evs[i])
			}
			if tt.via != "" && !strings.HasSuffix(evs[i], tt.want) {
				t.Errorf("Event %q, want it to end in %q", evs[i], tt.want)
			}
		})
	}
}
