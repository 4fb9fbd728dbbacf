// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// fate is what each Playbook of the demo should go through. life is its
// lifetime from creation (none for expires-at, whose annotation says);
// stages are the reminders each channel carries about it, in order.
type fate struct {
	title  string
	life   time.Duration
	stages []string
	// kept is never deleted; invalid has an annotation the controller
	// warns about; postponed waits past its expiry for the minimum notice;
	// extended is moved by the plugin, by extendBy; alice is named by the
	// notify annotation.
	kept, invalid, postponed, extended, alice bool
}

var firstScene = []fate{
	{title: "default-ttl", life: 40 * time.Second, stages: []string{"12s", "6s"}},
	{title: "ttl-15s", life: 15 * time.Second, stages: []string{"12s", "6s"}, alice: true},
	{title: "expires-at", stages: []string{"12s", "6s"}},
	{title: "legacy-ttl-20", life: 20 * time.Second, stages: []string{"12s", "6s"}},
	{title: "keep-me", kept: true},
	{title: "invalid-ttl", life: 40 * time.Second, stages: []string{"12s", "6s"}, invalid: true},
	// Its 6s reminder leaves 2s of the 8s notice before the expiry.
	{title: "short-notice", life: 8 * time.Second, stages: []string{"6s"}, postponed: true},
	{title: "too-short", life: 4 * time.Second},
	// Reminded of its first expiry, then of the one 20s later.
	{title: "extend-me", life: 10 * time.Second, stages: []string{"6s", "12s", "6s"}, extended: true, alice: true},
}

// useScene are the lifetimes under the policy of the scene on use (idleTTL 3s,
// maxTTL 9s, keep Forbidden), none of which reminds anyone.
var useScene = []fate{
	{title: "used", life: 9 * time.Second},
	{title: "idle-twin", life: 3 * time.Second},
	// Annotated by hand with an expiry a minute out: clamped to maxTTL.
	{title: "extended-past-max", life: 9 * time.Second, invalid: true},
	// keep=true, which the policy forbids: it goes like its idle twin.
	{title: "keep-refused", life: 3 * time.Second, invalid: true},
}

// TestDemo plays the whole demo against a real control plane and the real
// controller binary, and checks what happened from the facts the demo
// gathered (the controller's audit trail, what its receivers got, the
// Events, the plugin's JSON), not from the wording of its narration.
func TestDemo(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, which builds the control plane (etcd, kube-apiserver, kube-controller-manager) and sets it")
	}

	var buf bytes.Buffer
	start := time.Now()
	res, err := run(t.Context(), &buf, 150*time.Second)
	t.Logf("demo output after %s:\n%s", time.Since(start).Round(time.Second), buf.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if want := len(firstScene) + 1 + len(digestTitles) + 1 + len(useScene) + 2; len(res.playbooks) != want {
		t.Fatalf("the demo made %d Playbooks, want %d", len(res.playbooks), want)
	}

	for _, c := range firstScene {
		t.Run(c.title, func(t *testing.T) {
			p := res.playbook(t, c.title, 1)
			reminded := "is reminded of nothing"
			if len(c.stages) > 0 {
				reminded = "is reminded " + strings.Join(c.stages, ", then ") + " ahead, by mail and webhook, before the delete"
			}
			t.Run(reminded, func(t *testing.T) { checkReminders(t, res, p, c) })
			t.Run(deletion(c), func(t *testing.T) { checkDeletion(t, res, p, c) })
			t.Run("is told of the rest once on each channel, as recorded", func(t *testing.T) { checkOtherMessages(t, res, p, c) })
		})
	}
	for _, c := range useScene {
		t.Run(c.title+" "+deletion(c), func(t *testing.T) {
			checkDeletion(t, res, res.playbook(t, c.title, sceneUse), c)
		})
	}
	t.Run("used outlives its idle twin", func(t *testing.T) {
		used, twin := res.playbook(t, "used", sceneUse), res.playbook(t, "idle-twin", sceneUse)
		if !used.deletedAt.After(twin.deletedAt) {
			t.Errorf("used deleted at %s, its idle twin at %s", used.deletedAt, twin.deletedAt)
		}
	})
	t.Run("the links of a reminder keep one Playbook longer and delete another", func(t *testing.T) { checkLinks(t, res) })
	t.Run(sleepTitle, func(t *testing.T) { checkSleep(t, res) })
	t.Run("the owner's digest", func(t *testing.T) { checkDigest(t, res) })
	checkMessages(t, res)
	checkEvents(t, res)
	checkPlugin(t, res)
	checkCleanup(t, res)
}

// checkLinks checks the scene on links: the links of reminders, followed over
// HTTP, kept one Playbook a step longer as their recipient's, and deleted
// another with the controller's usual records and messages.
func checkLinks(t *testing.T, res *results) {
	kept, done := res.playbook(t, keptTitle, sceneLinks), res.playbook(t, doneTitle, sceneLinks)
	l := res.link
	for _, what := range []string{"extend", "delete", "page"} {
		if !strings.Contains(l.links[what], "/a/") {
			t.Errorf("the reminder's %s link is %q", what, l.links[what])
		}
	}
	if l.pageStatus != http.StatusOK || l.deleteStatus != http.StatusOK {
		t.Errorf("the page answered %d, the delete %d; want 200", l.pageStatus, l.deleteStatus)
	}
	if moved := l.extendedTo.Sub(l.was); moved != linkStep {
		t.Errorf("keep it longer moved the expiry from %s to %s, want %s later", l.was, l.extendedTo, linkStep)
	}
	if l.stamp.By != mailTo || l.stamp.Via != expiry.ViaLink {
		t.Errorf("the stamp after the click is %+v, want by %s via link", l.stamp, mailTo)
	}
	for _, p := range []playbookFacts{kept, done} {
		extended := res.records(p.obj.GetUID(), audit.Extended)
		if len(extended) != 1 || extended[0].By != mailTo || extended[0].Via != expiry.ViaLink {
			t.Errorf("%s: extended records %+v, want one by %s via link", p.title, extended, mailTo)
		}
		if got := res.received(p.obj.GetName(), viaMail, v1alpha1.EventReminder); len(got) != 1 || !slices.Equal(got[0].to, []string{mailTo}) {
			t.Errorf("%s: %d reminder mails, want one to %s", p.title, len(got), mailTo)
		}
	}
	if got := res.received(kept.obj.GetName(), viaMail, v1alpha1.EventExtended); len(got) != 1 {
		t.Errorf("%d extended mails about %s, want 1", len(got), keptTitle)
	}
	if !kept.deletedAt.IsZero() || len(res.records(kept.obj.GetUID(), audit.Deleted)) != 0 {
		t.Errorf("%s, kept a minute longer, was deleted", keptTitle)
	}
	if len(res.records(done.obj.GetUID(), audit.Deleted)) != 1 || done.deletedAt.IsZero() || len(res.received(done.obj.GetName(), viaMail, v1alpha1.EventDeleted)) != 1 {
		t.Errorf("%s was not deleted once, with its deleted mail, after delete it now", doneTitle)
	}
}

// deletion says what should become of a Playbook, as a test name.
func deletion(c fate) string {
	if c.kept {
		return "is never deleted"
	}
	when := c.life.String() + " after creation"
	if c.life == 0 {
		when = "at its expires-at"
	}
	return "is deleted once, " + when + " or later for the notice, and not late"
}

// playbook returns the Playbook of the scene with the given title.
func (r *results) playbook(t *testing.T, title string, scene int) playbookFacts {
	t.Helper()
	for _, p := range r.playbooks {
		if p.title == title && p.scene == scene {
			return p
		}
	}
	t.Fatalf("no Playbook %q in scene %d", title, scene)
	return playbookFacts{}
}

// expiresAt is p's expiry: its expires-at annotation (the demo's, or the
// plugin's after an extension), or its creation plus c.life.
func expiresAt(t *testing.T, p playbookFacts, c fate) time.Time {
	t.Helper()
	if v, ok := p.obj.GetAnnotations()[expiry.AnnotationExpiresAt]; ok && !c.invalid {
		at, err := time.Parse(time.RFC3339, v)
		if err != nil {
			t.Fatalf("%s: %v", expiry.AnnotationExpiresAt, err)
		}
		return at
	}
	return p.obj.GetCreationTimestamp().Add(c.life)
}

// deletesMade returns the delete requests the controller made about uid
// that the API server took: its deleting records but those a
// delete-superseded or deletion-failed record answers (the object changed
// between the read and the delete, as a Playbook in use does).
func (r *results) deletesMade(uid types.UID) []audit.Record {
	deleting := r.records(uid, audit.Deleting)
	answered := len(r.records(uid, audit.DeleteSuperseded)) + len(r.records(uid, audit.DeletionFailed))
	return deleting[min(answered, len(deleting)):]
}

// records returns the audit records about uid of type typ.
func (r *results) records(uid types.UID, typ audit.Type) []audit.Record {
	var out []audit.Record
	for _, rec := range r.trail {
		if rec.Object.UID == uid && rec.Type == typ {
			out = append(out, rec)
		}
	}
	return out
}

// received returns the messages about the named object that came via via
// (mail or webhook) of type typ, in arrival order, duplicates left out.
func (r *results) received(name, via string, typ v1alpha1.EventType) []message {
	seen := map[string]bool{}
	var out []message
	for _, m := range r.messages {
		if m.name == name && m.via == via && m.event == typ && m.refused == "" && !seen[m.id] {
			seen[m.id] = true
			out = append(out, m)
		}
	}
	return out
}

// channelOf names the NotificationChannel that reaches the demo via via.
func channelOf(via string) string {
	if via == viaMail {
		return mailChannel
	}
	return webhookName
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := expiry.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
