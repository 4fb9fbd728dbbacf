// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/actions"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
)

// The scene of acting from a message: links in messages. The controller runs with
// --actions-url, the actions server beside it, and a link taken out of a
// reminder mail is followed over HTTP as its recipient would: its page,
// then its buttons.
const (
	linksPolicy = "demo-links"
	// keptTitle is kept longer from its reminder, doneTitle deleted.
	keptTitle = "keep-me-longer"
	doneTitle = "done-with-it"
	// linksLife and linksLead: the reminder comes 2s after creation and
	// announces the deletion 6s later, which "delete it now" then waits
	// for: a deletion time people were told is kept.
	linksLife = 8 * time.Second
	linksLead = "6s"
	// linkStep is the policy's extendBy: how far "Keep it longer" moves
	// the expiry.
	linkStep = time.Minute
)

// linkFacts are what the scene on links did and saw, for the test.
type linkFacts struct {
	// links are those of keptTitle's reminder: extend, delete, page.
	links map[string]string
	// pageStatus is the status of the link's page (GET).
	pageStatus int
	// was and extendedTo are keptTitle's expiry before and after "Keep
	// it longer".
	was, extendedTo time.Time
	// stamp is keptTitle's changed-by annotation after it.
	stamp expiry.ChangedBy
	// deleteStatus is the status of doneTitle's "delete it now" click.
	deleteStatus int
	// actionsPID is the actions server's process.
	actionsPID int
}

// linksAct restarts the controller with --actions-url, starts the actions
// server, and follows the links of two reminders: keep one longer, delete
// the other now. With --actions-url, a message goes as a copy per
// recipient, its links signed for each: the first scene, which counts
// mails by Message-ID, has none.
func (s *story) linksAct(ctx context.Context, set *set) (err error) {
	cl, c := set.cl, set.c
	addr, err := testenv.FreeAddr()
	if err != nil {
		return err
	}
	base := "http://" + addr
	s.n.say("the controller again, now with --actions-url %s, and the actions server there", base)
	if err := c.restart(s.files, s.hook, "--actions-url", base); err != nil {
		return err
	}
	s.facts.pid = c.cmd.Process.Pid
	srv := &proc{}
	err = srv.start(s.files.bin, filepath.Join(s.files.dir, "actions.log"),
		"--serve=actions", "--kubeconfig", s.files.kubeconfig, "--actions-bind-address", addr,
		// The controller, out of a cluster, keeps the keyring in "default".
		"--actions-keyring-secret", metav1.NamespaceDefault+"/"+actions.SecretName,
		"--secret-namespace", secretNamespace, "--metrics-bind-address=0", "--health-probe-bind-address=0")
	if err != nil {
		return err
	}
	s.facts.link.actionsPID = srv.cmd.Process.Pid
	defer func() {
		if stopErr := srv.stop(); stopErr != nil {
			s.n.say("stopping the actions server: %v", stopErr)
		} else {
			s.n.say("stopped the actions server")
		}
	}()
	s.n.more("actions server: timeout-controller --serve=actions (pid %d), logging to %s", srv.cmd.Process.Pid, filepath.Join(s.files.dir, "actions.log"))

	policy := &v1alpha1.TimeoutPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: linksPolicy},
		Spec: v1alpha1.TimeoutPolicySpec{
			Target:        v1alpha1.Target{APIVersion: playbookGVK.GroupVersion().String(), Kind: playbookGVK.Kind},
			Selector:      &metav1.LabelSelector{MatchLabels: map[string]string{sceneLabel: "links"}},
			Priority:      10,
			DefaultTTL:    v1alpha1.Duration(expiry.FormatDuration(linksLife)),
			Reminders:     []v1alpha1.Duration{linksLead},
			MinimumNotice: "0s",
			Extensions:    &v1alpha1.Extensions{MaxStep: "2m", MaxCount: new(int32(2))},
			Actions:       &v1alpha1.Actions{ExtendBy: v1alpha1.Duration(expiry.FormatDuration(linkStep)), DeleteNow: v1alpha1.DeleteNowAllowed},
			Notifications: v1alpha1.Notifications{Channels: []v1alpha1.ChannelReference{{Name: mailChannel, To: []string{mailTo}}}},
		},
	}
	if err := cl.Create(ctx, policy); err != nil {
		return fmt.Errorf("create TimeoutPolicy %s: %w", linksPolicy, err)
	}
	s.n.say("TimeoutPolicy %s (priority 10) governs the Playbooks labelled %s=links: %s to live, a reminder %s ahead by mail to %s",
		linksPolicy, sceneLabel, policy.Spec.DefaultTTL, linksLead, mailTo)
	s.n.more("actions: extendBy %s (within extensions.maxStep %s) and deleteNow: Allowed", policy.Spec.Actions.ExtendBy, policy.Spec.Extensions.MaxStep)
	if err := awaitReady(ctx, cl, set.c, linksPolicy); err != nil {
		return err
	}

	kept, done := &useRole{title: keptTitle}, &useRole{title: doneTitle}
	s.linkCast = []*useRole{kept, done}
	msgs := make(chan message, 64)
	for _, r := range s.linkCast {
		r.obj = newPlaybook(r.title, nil, "")
		r.obj.SetLabels(map[string]string{sceneLabel: "links"})
		set.rc.route(msgs, r.obj.GetName())
		if err := cl.Create(ctx, r.obj); err != nil {
			return fmt.Errorf("create Playbook %s: %w", r.title, err)
		}
	}
	s.n.say("created Playbooks %s and %s: each expires %s after its creation", keptTitle, doneTitle, linksLife)

	from := len(s.facts.messages)
	reminder, err := s.awaitMail(ctx, msgs, from, kept.obj.GetName(), v1alpha1.EventReminder)
	if err != nil {
		return err
	}
	s.facts.link.links = reminder.links
	if reminder.links["extend"] == "" || reminder.links["delete"] == "" {
		return fmt.Errorf("the reminder to %s carries no links to keep and delete: %v", strings.Join(reminder.to, ", "), reminder.links)
	}
	s.n.say("the reminder about %s mailed to %s carries links signed for that address (a copy per recipient):", keptTitle, strings.Join(reminder.to, ", "))
	for _, what := range []string{"extend", "delete", "page"} {
		s.n.more("  %-7s %s", what, shorten(reminder.links[what]))
	}

	// The person opens the link: the page changes nothing; its button
	// does.
	status, body, err := httpGet(ctx, reminder.links["extend"])
	if err != nil {
		return err
	}
	s.facts.link.pageStatus = status
	form := formToken.FindStringSubmatch(body)
	if status != http.StatusOK || form == nil {
		return fmt.Errorf("GET the link's page: %d, %s", status, firstLine(body))
	}
	s.n.say("GET %s: %d, the page of %s with a button per action; nothing changed", shorten(reminder.links["extend"]), status, keptTitle)
	s.facts.link.was = kept.obj.GetCreationTimestamp().Add(linksLife)
	status, body, err = httpPost(ctx, base, reminder.links["page"], form[1], actions.Extend)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("press keep it longer: %d, %s", status, firstLine(body))
	}
	s.n.say("pressed %q: %d, %q", "Keep it 1 minute longer", status, outcome(body))
	var got unstructured.Unstructured
	got.SetGroupVersionKind(playbookGVK)
	if err := cl.Get(ctx, client.ObjectKeyFromObject(kept.obj), &got); err != nil {
		return err
	}
	s.facts.link.extendedTo, _ = time.Parse(time.RFC3339, got.GetAnnotations()[expiry.AnnotationExpiresAt])
	s.facts.link.stamp, _ = expiry.ParseChangedBy(got.GetAnnotations())
	s.n.more("%s is now %s (%s later), and %s says %s",
		expiry.AnnotationExpiresAt, s.n.at(s.facts.link.extendedTo), s.facts.link.extendedTo.Sub(s.facts.link.was),
		expiry.AnnotationChangedBy, got.GetAnnotations()[expiry.AnnotationChangedBy])
	extended, err := s.awaitMail(ctx, msgs, from, kept.obj.GetName(), v1alpha1.EventExtended)
	if err != nil {
		return err
	}
	s.n.say("mail to %s: %s", strings.Join(extended.to, ", "), extended.subject)

	// Done with the other: its reminder's "delete it now". The controller
	// deletes it as at any expiry, at the time its reminder announced.
	reminder, err = s.awaitMail(ctx, msgs, from, done.obj.GetName(), v1alpha1.EventReminder)
	if err != nil {
		return err
	}
	status, body, err = httpGet(ctx, reminder.links["delete"])
	if err != nil {
		return err
	}
	if form = formToken.FindStringSubmatch(body); status != http.StatusOK || form == nil {
		return fmt.Errorf("GET the delete link's page: %d, %s", status, firstLine(body))
	}
	status, body, err = httpPost(ctx, base, reminder.links["page"], form[1], actions.Delete)
	if err != nil {
		return err
	}
	s.facts.link.deleteStatus = status
	if status != http.StatusOK {
		return fmt.Errorf("press delete it now: %d, %s", status, firstLine(body))
	}
	s.n.say("pressed %q on the page of %s: %d, %q", "I am done: delete it now", doneTitle, status, outcome(body))
	deleted, err := s.awaitMail(ctx, msgs, from, done.obj.GetName(), v1alpha1.EventDeleted)
	if err != nil {
		return err
	}
	done.deletedAt = deleted.arrived
	s.n.say("mail to %s: %s", strings.Join(deleted.to, ", "), deleted.subject)
	// What comes later is the end of the demo's to gather.
	s.facts.messages = append(s.facts.messages, set.rc.unroute(msgs, kept.obj.GetName(), done.obj.GetName())...)
	return nil
}

// awaitMail waits for the mail of type typ about the named Playbook,
// among the messages from index from of the run's facts on, keeping every
// message that comes meanwhile with them.
func (s *story) awaitMail(ctx context.Context, msgs <-chan message, from int, name string, typ v1alpha1.EventType) (message, error) {
	match := func(m message) bool { return m.via == viaMail && m.name == name && m.event == typ }
	for _, m := range s.facts.messages[from:] {
		if match(m) {
			return m, nil
		}
	}
	timeout := time.After(20 * time.Second)
	for {
		select {
		case <-ctx.Done():
			return message{}, fmt.Errorf("%w while waiting for the %s mail about %s", context.Cause(ctx), typ, name)
		case <-timeout:
			return message{}, fmt.Errorf("no %s mail about %s within 20s", typ, name)
		case m := <-msgs:
			s.facts.messages = append(s.facts.messages, m)
			if match(m) {
				return m, nil
			}
		}
	}
}

var (
	formToken = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	doneLine  = regexp.MustCompile(`<p>([^<]*)</p>`)
)

func httpGet(ctx context.Context, u string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	return do(req)
}

// httpPost presses a page's button as a browser does: the page's form,
// from the page's own origin.
func httpPost(ctx context.Context, base, pageURL, csrf string, a actions.Action) (int, string, error) {
	form := url.Values{"csrf": {csrf}, "action": {string(a)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, pageURL, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return do(req)
}

func do(req *http.Request) (int, string, error) {
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		// The URL carries the token: the error does not repeat it.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return 0, "", fmt.Errorf("%s the actions server: %w", req.Method, err)
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, string(b), err
}

// outcome is what a page says happened: its first paragraph.
func outcome(body string) string {
	if m := doneLine.FindStringSubmatch(body); m != nil {
		return strings.TrimSpace(m[1])
	}
	return firstLine(body)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// shorten cuts the token out of the middle of a link for the narration.
func shorten(u string) string {
	i := strings.Index(u, "/a/")
	if i < 0 || len(u) < i+3+24 {
		return u
	}
	tok, rest, _ := strings.Cut(u[i+3:], "?")
	if rest != "" {
		rest = "?" + rest
	}
	return u[:i+3] + tok[:12] + "…" + tok[len(tok)-8:] + rest
}
