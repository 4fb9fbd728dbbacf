// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/actions"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// withActionsURL runs the in-process controller with --actions-url until
// the test ends. Tests that call it are not parallel: the parallel tests
// must not see links.
func withActionsURL(t *testing.T, url string) {
	t.Helper()
	if err := stopController(); err != nil {
		t.Fatal(err)
	}
	actionsURL = url
	if _, err := startController(restConfig, testScheme); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stopController(); err != nil {
			t.Error(err)
		}
		actionsURL = ""
		if _, err := startController(restConfig, testScheme); err != nil {
			t.Errorf("restart the in-process controller: %v", err)
		}
	})
}

// mailParts returns the text and HTML parts of a received mail.
func mailParts(t *testing.T, m fixture.Mail) (text, html string) {
	t.Helper()
	mediaType, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/alternative" {
		t.Fatalf("Content-Type %q (%v), want multipart/alternative", m.Header.Get("Content-Type"), err)
	}
	r := multipart.NewReader(strings.NewReader(m.Body), params["boundary"])
	for {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			return text, html
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
		switch ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type")); ct {
		case "text/plain":
			text = string(b)
		case "text/html":
			html = string(b)
		}
	}
}

var (
	extendLine = regexp.MustCompile(`Keep it 1 day longer: (https://timeout\.example\.com/a/([A-Za-z0-9_.-]+))\?do=extend\n`)
	deleteLine = regexp.MustCompile(`I am done, delete it now: (https://timeout\.example\.com/a/[A-Za-z0-9_.-]+)\?do=delete\n`)
)

// TestRemindersCarryLinksForEachRecipient is not parallel: it restarts
// the controller with --actions-url. Each recipient of a reminder gets a
// mail of their own whose links are signed for them, with the keyring
// the controller made in its namespace.
func TestRemindersCarryLinksForEachRecipient(t *testing.T) {
	withActionsURL(t, "https://timeout.example.com")
	const test = "links"
	mb := fixture.NewMailbox(t, nil)
	spec := reminderPolicy(t, test, []v1alpha1.Duration{"4s"}, "2s", mb, nil)
	spec.Actions = &v1alpha1.Actions{DeleteNow: v1alpha1.DeleteNowAllowed}
	createPolicy(t, test, spec)
	pb := create(t, playbooks, newPlaybook(test, "linked", map[string]string{
		expiry.AnnotationTTL:    "6s",
		notify.AnnotationNotify: "alice@example.com",
	}))

	var mails []fixture.Mail
	fixture.Eventually(t, 10*time.Second, "a reminder to each recipient", func() (bool, error) {
		mails = nil
		for _, m := range mb.WithHeader("X-Timeout-Object", pb.GetName()) {
			if m.Header.Get("X-Timeout-Event") == "reminder" {
				mails = append(mails, m)
			}
		}
		return len(mails) >= 2, nil
	})
	secret := &corev1.Secret{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: outboxNamespace, Name: actions.SecretName}, secret); err != nil {
		t.Fatalf("the keyring Secret: %v", err)
	}
	ring, err := actions.KeyringFromSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	var recipients []string
	for _, m := range mails {
		if len(m.To) != 1 {
			t.Fatalf("a reminder with links went to %q, want one recipient per mail", m.To)
		}
		recipients = append(recipients, m.To[0])
		text, html := mailParts(t, m)
		ext := extendLine.FindStringSubmatch(text)
		if ext == nil || !deleteLine.MatchString(text) {
			t.Fatalf("the text to %s lacks the links:\n%s", m.To[0], text)
		}
		page, token := ext[1], ext[2]
		secrets = append(secrets, token)
		for _, href := range []string{page + "?do=extend", page + "?do=delete", page} {
			if !strings.Contains(html, `<a href="`+href+`"`) {
				t.Errorf("the HTML to %s has no button to %s", m.To[0], href)
			}
		}
		c, err := ring.Verify(token, time.Now())
		if err != nil {
			t.Fatalf("the link to %s does not verify: %v", m.To[0], err)
		}
		if c.Object == nil || c.Object.UID != pb.GetUID() || c.Object.Name != pb.GetName() || c.Recipient != m.To[0] ||
			!slices.Equal(c.Actions, []actions.Action{actions.View, actions.Extend, actions.Delete}) || !c.Expires.Equal(pb.after(6*time.Second).Truncate(time.Second)) {
			t.Errorf("the link to %s says %+v about %+v", m.To[0], c, c.Object)
		}
	}
	slices.Sort(recipients)
	if !slices.Equal(recipients, []string{"alice@example.com", "ops@example.com"}) {
		t.Errorf("reminders went to %q", recipients)
	}
}

// TestALinkFromAReminderMailExtendsThePlaybook is not parallel: it
// restarts the controller with --actions-url. It follows a link as its
// recipient would: taken out of the reminder the mailbox received, its
// page opened and its button pressed on the actions server; the
// Playbook is extended by the policy's link step, stamped and audited as
// the recipient's, via the link, and the extended message's Event says so.
func TestALinkFromAReminderMailExtendsThePlaybook(t *testing.T) {
	base, _ := startActions(t)
	withActionsURL(t, base)
	const test = "links-followed"
	mb := fixture.NewMailbox(t, nil)
	spec := reminderPolicy(t, test, []v1alpha1.Duration{"20s"}, "0s", mb, nil)
	spec.Extensions = &v1alpha1.Extensions{MaxStep: "1h", MaxCount: ptr.To[int32](2)}
	spec.Actions = &v1alpha1.Actions{ExtendBy: "30m"}
	createPolicy(t, test, spec)
	pb := create(t, playbooks, newPlaybook(test, "followed", map[string]string{expiry.AnnotationTTL: "25s"}))

	var text string
	fixture.Eventually(t, 15*time.Second, "the reminder in the mailbox", func() (bool, error) {
		for _, m := range mb.WithHeader("X-Timeout-Object", pb.GetName()) {
			if m.Header.Get("X-Timeout-Event") == "reminder" {
				text, _ = mailParts(t, m)
				return true, nil
			}
		}
		return false, nil
	})
	link := regexp.MustCompile(`Keep it 30 minutes longer: (\S+)\?do=extend\n`).FindStringSubmatch(text)
	if link == nil || !strings.HasPrefix(link[1], base+"/a/") {
		t.Fatalf("no link to %s in the reminder:\n%s", base, text)
	}
	secrets = append(secrets, strings.TrimPrefix(link[1], base+"/a/"))

	status, body := page(t, link[1]+"?do=extend")
	m := formToken.FindStringSubmatch(body)
	if status != http.StatusOK || m == nil {
		t.Fatalf("the link's page: %d\n%s", status, body)
	}
	if status, body = click(t, base, link[1], m[1], actions.Extend); status != http.StatusOK || !strings.Contains(body, "Done: it now expires") {
		t.Fatalf("the click: %d\n%s", status, body)
	}
	obj := get(t, pb.GetName())
	if got, want := obj.GetAnnotations()[expiry.AnnotationExpiresAt], pb.after(25*time.Second+30*time.Minute).UTC().Format(time.RFC3339); got != want {
		t.Errorf("expires-at %q, want %q: the expiry plus the policy's extendBy", got, want)
	}
	mustContain(t, obj.GetAnnotations()[expiry.AnnotationChangedBy], `"by":"ops@example.com"`, `"via":"link"`)

	fixture.Eventually(t, 15*time.Second, "the extension on the audit trail", func() (bool, error) {
		for _, r := range auditRecords(t, pb.GetUID()) {
			if r.Type == audit.Extended {
				if r.By != "ops@example.com" || r.Via != expiry.ViaLink {
					return false, fmt.Errorf("extended record by %q via %q", r.By, r.Via)
				}
				return true, nil
			}
		}
		return false, nil
	})
	fixture.Eventually(t, 15*time.Second, "the extended message's Event", func() (bool, error) {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(eventNamespace)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == pb.GetName() && strings.Contains(e.Note, "Sent the extended message") {
				return strings.Contains(e.Note, "extended by ops@example.com via link"), fmt.Errorf("note %q", e.Note)
			}
		}
		return false, nil
	})
}
