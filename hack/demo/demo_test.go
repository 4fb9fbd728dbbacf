// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/plugin"
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

var actOne = []fate{
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

// actTwo are the lifetimes under the second act's policy (idleTTL 3s,
// maxTTL 9s, keep Forbidden), none of which reminds anyone.
var actTwo = []fate{
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
	if len(res.playbooks) != len(actOne)+len(actTwo)+2 {
		t.Fatalf("the demo made %d Playbooks, want %d", len(res.playbooks), len(actOne)+len(actTwo)+2)
	}

	for _, c := range actOne {
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
	for _, c := range actTwo {
		t.Run(c.title+" "+deletion(c), func(t *testing.T) {
			checkDeletion(t, res, res.playbook(t, c.title, 2), c)
		})
	}
	t.Run("used outlives its idle twin", func(t *testing.T) {
		used, twin := res.playbook(t, "used", 2), res.playbook(t, "idle-twin", 2)
		if !used.deletedAt.After(twin.deletedAt) {
			t.Errorf("used deleted at %s, its idle twin at %s", used.deletedAt, twin.deletedAt)
		}
	})
	t.Run("the links of a reminder keep one Playbook longer and delete another", func(t *testing.T) { checkLinks(t, res) })
	checkMessages(t, res)
	checkEvents(t, res)
	checkPlugin(t, res)
	checkCleanup(t, res)
}

// checkLinks checks the third act: the links of reminders, followed over
// HTTP, kept one Playbook a step longer as their recipient's, and deleted
// another with the controller's usual records and messages.
func checkLinks(t *testing.T, res *results) {
	kept, done := res.playbook(t, keptTitle, 3), res.playbook(t, doneTitle, 3)
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

// playbook returns the Playbook of the act with the given title.
func (r *results) playbook(t *testing.T, title string, act int) playbookFacts {
	t.Helper()
	for _, p := range r.playbooks {
		if p.title == title && p.act == act {
			return p
		}
	}
	t.Fatalf("no Playbook %q in act %d", title, act)
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

// checkReminders checks which reminders the controller recorded and the
// receivers got about p, on each channel, and that they came before the
// deletion.
func checkReminders(t *testing.T, res *results, p playbookFacts, c fate) {
	for _, via := range []string{viaMail, viaWebhook} {
		var recorded []string
		for _, rec := range res.records(p.obj.GetUID(), audit.Notified) {
			if rec.Message == string(v1alpha1.EventReminder) && rec.Channel == channelOf(via) {
				recorded = append(recorded, rec.Stage)
			}
		}
		if !slices.Equal(recorded, c.stages) {
			t.Errorf("the audit trail has reminders %v via %s, want %v", recorded, channelOf(via), c.stages)
		}
		got := res.received(p.obj.GetName(), via, v1alpha1.EventReminder)
		if len(got) != len(c.stages) {
			t.Errorf("%d reminders came by %s, want %d (%v)", len(got), via, len(c.stages), c.stages)
		}
		for i, m := range got {
			if via == viaWebhook && i < len(c.stages) && m.stage != c.stages[i] {
				t.Errorf("reminder %d by webhook is of stage %s, want %s", i+1, m.stage, c.stages[i])
			}
			if deleting := res.records(p.obj.GetUID(), audit.Deleting); len(deleting) > 0 && !m.arrived.Before(deleting[0].Time) {
				t.Errorf("the %s reminder by %s came %s after the delete was sent", m.stage, via, m.arrived.Sub(deleting[0].Time))
			}
		}
	}
	for _, m := range res.received(p.obj.GetName(), viaMail, v1alpha1.EventReminder) {
		if !slices.Contains(m.to, mailTo) || slices.Contains(m.to, "alice@demo.local") != c.alice {
			t.Errorf("a reminder was mailed to %v; want %s, and alice@demo.local only if the notify annotation names her (%t)", m.to, mailTo, c.alice)
		}
	}
}

// checkDeletion checks that p was deleted once, neither before its expiry
// nor before the minimum notice after its first reminder, and not late;
// or, when kept, not at all.
func checkDeletion(t *testing.T, res *results, p playbookFacts, c fate) {
	uid := p.obj.GetUID()
	archived, deleting, deleted := res.records(uid, audit.Archived), res.records(uid, audit.Deleting), res.records(uid, audit.Deleted)
	if c.kept {
		if len(archived)+len(deleting)+len(deleted) > 0 || !p.deletedAt.IsZero() {
			t.Errorf("the kept Playbook was deleted: %d archived, %d deleting and %d deleted records; seen deleted at %s",
				len(archived), len(deleting), len(deleted), p.deletedAt)
		}
		return
	}
	if len(deleting) != 1 || len(deleted) != 1 || p.deletedAt.IsZero() {
		t.Fatalf("%d deleting and %d deleted records, seen deleted at %s; want one deletion", len(deleting), len(deleted), p.deletedAt)
	}
	// Only the first act's policy archives.
	if want := b2i(p.act == 1); len(archived) != want {
		t.Errorf("%d archived records, want %d", len(archived), want)
	} else if want == 1 && archived[0].Time.After(deleting[0].Time) {
		t.Errorf("archived at %s, after the deleting record at %s", archived[0].Time, deleting[0].Time)
	}

	due := expiresAt(t, p, c)
	if c.extended {
		if moved := due.Sub(p.obj.GetCreationTimestamp().Add(c.life)); moved != mustDuration(t, extendBy) {
			t.Errorf("the extension moved the expiry by %s, want %s", moved, extendBy)
		}
	}
	// A reminder reached people no earlier than it came to the receivers.
	var first time.Time
	for _, via := range []string{viaMail, viaWebhook} {
		if got := res.received(p.obj.GetName(), via, v1alpha1.EventReminder); len(got) > 0 && (first.IsZero() || got[0].arrived.Before(first)) {
			first = got[0].arrived
		}
	}
	if !first.IsZero() {
		if notice := first.Add(mustDuration(t, minimumNotice)); notice.After(due) {
			due = notice
		}
	}
	if at := deleting[0].Time; at.Before(due) {
		t.Errorf("deleted EARLY: the delete was sent at %s, %s before %s", at, due.Sub(at), due)
	}
	if lag := deleted[0].Time.Sub(due); lag > lateAfter {
		t.Errorf("deleted LATE: %s after %s", lag, due)
	}
	if postponed := len(res.records(uid, audit.Postponed)) > 0; postponed != c.postponed {
		t.Errorf("postponed on the audit trail: %t, want %t", postponed, c.postponed)
	}
	if invalid := len(res.records(uid, audit.InvalidAnnotation)) > 0; invalid != c.invalid {
		t.Errorf("an invalid-annotation record: %t, want %t", invalid, c.invalid)
	}
}

// checkOtherMessages checks the messages besides reminders: the expiry
// and the deletion, the extension and the postponement, each once on each
// channel and on the audit trail.
func checkOtherMessages(t *testing.T, res *results, p playbookFacts, c fate) {
	want := map[v1alpha1.EventType]int{
		v1alpha1.EventExpired:   b2i(!c.kept),
		v1alpha1.EventDeleted:   b2i(!c.kept),
		v1alpha1.EventExtended:  b2i(c.extended),
		v1alpha1.EventPostponed: b2i(c.postponed),
	}
	for typ, n := range want {
		for _, via := range []string{viaMail, viaWebhook} {
			got := res.received(p.obj.GetName(), via, typ)
			if len(got) != n {
				t.Errorf("%d %s messages by %s, want %d", len(got), typ, via, n)
			}
			recorded := 0
			for _, rec := range res.records(p.obj.GetUID(), audit.Notified) {
				if rec.Message == string(typ) && rec.Channel == channelOf(via) {
					recorded++
				}
			}
			if recorded != n {
				t.Errorf("%d notified records of %s messages via %s, want %d", recorded, typ, channelOf(via), n)
			}
			if typ == v1alpha1.EventExtended && via == viaWebhook && len(got) == 1 && !got[0].expiresAt.Equal(expiresAt(t, p, c)) {
				t.Errorf("the extended message announces %s, want the new expiry %s", got[0].expiresAt, expiresAt(t, p, c))
			}
		}
	}
}

// checkMessages checks what reached the receivers as a whole.
func checkMessages(t *testing.T, res *results) {
	names := map[string]bool{}
	for _, p := range res.playbooks {
		names[p.obj.GetName()] = p.title == "ttl-15s" || p.title == "extend-me"
	}
	t.Run("receives every message once, signed, about a Playbook of the demo", func(t *testing.T) {
		seen := map[string]bool{}
		for _, m := range res.messages {
			key := m.via + " " + m.id
			switch _, ours := names[m.name]; {
			case m.refused != "":
				t.Errorf("the webhook receiver refused a request (id %s): %s", m.id, m.refused)
			case seen[key]:
				t.Errorf("%s message %s (%s about %s) came twice", m.via, m.id, m.event, m.name)
			case !ours:
				t.Errorf("%s message %s about %q, which the demo did not make", m.via, m.id, m.name)
			}
			seen[key] = true
		}
	})
	t.Run("mails alice only about the Playbooks that name her", func(t *testing.T) {
		for _, m := range res.messages {
			if m.via == viaMail && slices.Contains(m.to, "alice@demo.local") && !names[m.name] {
				t.Errorf("alice got a %s mail about %s", m.event, m.name)
			}
		}
	})
	t.Run("records no message twice for the same expiry", func(t *testing.T) {
		seen := map[string]bool{}
		for _, rec := range res.trail {
			if rec.Type != audit.Notified || rec.ExpiresAt == nil {
				continue
			}
			key := string(rec.Object.UID) + " " + rec.ExpiresAt.String() + " " + rec.Message + " " + rec.Stage + " " + rec.Channel
			if seen[key] {
				t.Errorf("recorded twice: %s", key)
			}
			seen[key] = true
		}
	})
}

// checkEvents checks the Kubernetes Events the controller recorded.
func checkEvents(t *testing.T, res *results) {
	has := func(p playbookFacts, typ, reason string) bool {
		return slices.ContainsFunc(res.events, func(e eventsv1.Event) bool {
			return e.Regarding.UID == p.obj.GetUID() && e.Type == typ && e.Reason == reason
		})
	}
	for _, c := range actOne {
		p := res.playbook(t, c.title, 1)
		t.Run("events of "+c.title, func(t *testing.T) {
			for _, e := range []struct {
				typ, reason string
				want        bool
			}{
				{corev1.EventTypeNormal, kube.ReasonExpired, !c.kept},
				{corev1.EventTypeNormal, kube.ReasonDeleted, !c.kept},
				{corev1.EventTypeNormal, kube.ReasonDeletionPostponed, c.postponed},
				{corev1.EventTypeWarning, kube.ReasonInvalidTimeout, c.invalid},
			} {
				if got := has(p, e.typ, e.reason); got != e.want {
					t.Errorf("a %s %s Event: %t, want %t", e.typ, e.reason, got, e.want)
				}
			}
		})
	}
	for _, c := range actTwo {
		p := res.playbook(t, c.title, 2)
		t.Run("events of "+c.title, func(t *testing.T) {
			if got := has(p, corev1.EventTypeWarning, kube.ReasonInvalidTimeout); got != c.invalid {
				t.Errorf("a Warning %s Event: %t, want %t", kube.ReasonInvalidTimeout, got, c.invalid)
			}
		})
	}
}

// checkPlugin checks what the plugin showed and how it exited.
func checkPlugin(t *testing.T, res *results) {
	checkPluginRuns(t, res)
	checkListed(t, res)
	checkExplained(t, res)
	checkFinalList(t, res)
}

// checkPluginRuns checks the exit codes of the plugin's commands.
func checkPluginRuns(t *testing.T, res *results) {
	t.Run("refuses only the extension past the maximum and the forbidden keep", func(t *testing.T) {
		refused := map[string]int{"extend extended-past-max 1m": plugin.ExitPastMaximum, "keep keep-refused": plugin.ExitKeepForbidden}
		ran := map[string]bool{}
		for _, r := range res.plugin {
			line := strings.Join(r.args, " ")
			ran[line] = true
			if want := refused[line]; r.code != want {
				t.Errorf("kubectl timeout %s: exit code %d, want %d", line, r.code, want)
			}
		}
		for _, line := range []string{"list", "explain short-notice", "extend extend-me " + extendBy, "explain used",
			"extend extended-past-max 1m", "keep keep-refused"} {
			if !ran[line] {
				t.Errorf("kubectl timeout %s was not run", line)
			}
		}
	})
}

// checkListed checks the list at the start: the cast, in order of
// deletion, with their flags and deletion times.
func checkListed(t *testing.T, res *results) {
	t.Run("lists the cast at the start, soonest deletion first", func(t *testing.T) {
		items := res.listed.Items
		if len(items) != len(actOne) {
			t.Fatalf("%d items, want %d", len(items), len(actOne))
		}
		if items[0].Title != "too-short" || items[len(items)-1].Title != "keep-me" {
			t.Errorf("first %s and last %s; want too-short, the soonest, first and keep-me, kept, last", items[0].Title, items[len(items)-1].Title)
		}
		for _, it := range items {
			i := slices.IndexFunc(actOne, func(c fate) bool { return c.title == it.Title })
			if i < 0 {
				t.Errorf("unexpected item %s", it.Title)
				continue
			}
			c, p := actOne[i], res.playbook(t, it.Title, 1)
			var flags []string
			switch {
			case c.kept:
				flags = []string{"keep"}
			case c.invalid:
				flags = []string{"invalid"}
			case len(c.stages) > 0 && mustDuration(t, c.stages[0]) < mustDuration(t, minimumNotice):
				// Its first reminder leaves less than the notice.
				flags = []string{"postponed"}
			}
			if !slices.Equal(it.Flags, flags) {
				t.Errorf("%s: flags %v, want %v", it.Title, it.Flags, flags)
			}
			if c.kept {
				if it.DeleteAt != nil {
					t.Errorf("%s: deleted at %s, want never", it.Title, time.Time(*it.DeleteAt))
				}
				continue
			}
			// Planned as if every reminder went out on time: the deletion
			// is the expiry, or the first reminder plus the notice. The
			// list came before the extension.
			want := expiresAt(t, p, c)
			if c.extended {
				want = p.obj.GetCreationTimestamp().Add(c.life)
			}
			if len(c.stages) > 0 {
				if notice := want.Add(-mustDuration(t, c.stages[0])).Add(mustDuration(t, minimumNotice)); notice.After(want) {
					want = notice
				}
			}
			if it.DeleteAt == nil || time.Time(*it.DeleteAt).Before(want) || time.Time(*it.DeleteAt).Sub(want) > lateAfter {
				t.Errorf("%s: deleted at %v, want %s", it.Title, it.DeleteAt, want)
			}
		}
	})
}

// checkExplained checks the explanation of short-notice.
func checkExplained(t *testing.T, res *results) {
	t.Run("explains that short-notice waits for the minimum notice", func(t *testing.T) {
		x := res.explained
		if x.Object.Title != "short-notice" || x.Lifetime == nil || x.Notice == nil || len(x.Next) == 0 {
			t.Fatalf("explanation %+v", x)
		}
		if x.Lifetime.Source != expiry.AnnotationTTL || x.Lifetime.Value != "8s" {
			t.Errorf("lifetime set by %s=%q, want %s=8s", x.Lifetime.Source, x.Lifetime.Value, expiry.AnnotationTTL)
		}
		if !x.Notice.Owed || x.Notice.MinimumNotice != minimumNotice {
			t.Errorf("notice %+v, want %s owed", x.Notice, minimumNotice)
		}
		actions := make([]string, 0, len(x.Next))
		for _, s := range x.Next {
			actions = append(actions, s.Action)
		}
		if !slices.Contains(actions, string(v1alpha1.EventPostponed)) || actions[len(actions)-1] != plugin.ActionDelete {
			t.Errorf("next %v, want a postponed message and the deletion last", actions)
		}
	})
}

// checkFinalList checks the list after the restore.
func checkFinalList(t *testing.T, res *results) {
	t.Run("lists keep-me and the restored default-ttl at the end", func(t *testing.T) {
		old := res.playbook(t, "default-ttl", 1)
		got := map[string]plugin.Item{}
		for _, it := range res.finalList.Items {
			got[it.Title] = it
		}
		if len(got) != 2 {
			t.Fatalf("items %v, want keep-me and default-ttl", res.finalList.Items)
		}
		if it := got["keep-me"]; !slices.Equal(it.Flags, []string{"keep"}) {
			t.Errorf("keep-me: flags %v, want [keep]", it.Flags)
		}
		it := got["default-ttl"]
		if it.Name != old.obj.GetName() || it.UID == string(old.obj.GetUID()) {
			t.Errorf("default-ttl restored as %s (UID %s); want its old name %s and a new UID (was %s)", it.Name, it.UID, old.obj.GetName(), old.obj.GetUID())
		}
		if it.ExpiresAt == nil || time.Time(*it.ExpiresAt).Sub(time.Time(it.Created)) != 40*time.Second || len(it.RemindersSent) != 0 {
			t.Errorf("default-ttl restored with expiry %v from creation %s and reminders %v; want a fresh lifetime of 40s", it.ExpiresAt, time.Time(it.Created), it.RemindersSent)
		}
	})
}

// checkCleanup checks that the demo leaves nothing behind.
func checkCleanup(t *testing.T, res *results) {
	t.Run("leaves no temporary directory behind", func(t *testing.T) {
		if res.workdir == "" {
			t.Fatal("no work directory in the results")
		}
		if _, err := os.Stat(res.workdir); !os.IsNotExist(err) {
			t.Errorf("%s still exists (stat: %v)", res.workdir, err)
		}
	})
	t.Run("leaves no actions server running", func(t *testing.T) {
		if res.link.actionsPID == 0 {
			t.Fatal("no actions server pid in the results")
		}
		if p, err := os.FindProcess(res.link.actionsPID); err == nil && p.Signal(syscall.Signal(0)) == nil {
			t.Errorf("actions server process %d is still running", res.link.actionsPID)
		}
	})
	t.Run("leaves no controller running", func(t *testing.T) {
		if res.pid == 0 {
			t.Fatal("no controller pid in the results")
		}
		if p, err := os.FindProcess(res.pid); err == nil && p.Signal(syscall.Signal(0)) == nil {
			t.Errorf("controller process %d is still running", res.pid)
		}
	})
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
