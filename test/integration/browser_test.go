// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"k8s.io/utils/ptr"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/actions"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/browser"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// envScreenshots names a directory the browser test writes its
// screenshots to (docs/images, to refresh the guide's); without it they
// go to the test's temporary directory.
const envScreenshots = "TIMEOUT_SCREENSHOTS"

// TestAPersonKeepsAPlaybookFromTheReminderInABrowser is not parallel: it
// restarts the controller with --actions-url. It does what the recipient
// of a reminder does, in Debian's headless Chromium: takes the link out
// of the mail the SMTP server received, opens it on a phone-sized screen,
// reads what the page says, and presses "Keep it longer". The Playbook is
// extended once, by the policy's step, stamped and audited as the
// recipient's via the link, and the extended message reaches the mailbox.
// axe-core finds no serious or critical problem on the object's page, the
// page after the click, or the owner's page.
func TestAPersonKeepsAPlaybookFromTheReminderInABrowser(t *testing.T) {
	base, ring := startActions(t)
	withActionsURL(t, base)
	const test = "links-browser"
	mb := fixture.NewMailbox(t, nil)
	spec := reminderPolicy(t, test, []v1alpha1.Duration{"20s"}, "0s", mb, nil)
	spec.Extensions = &v1alpha1.Extensions{MaxStep: "1h", MaxCount: ptr.To[int32](2), ExemptGroups: []string{"platform-team"}}
	spec.Actions = &v1alpha1.Actions{ExtendBy: "30m", DeleteNow: v1alpha1.DeleteNowAllowed}
	createPolicy(t, test, spec)
	owner := "dev-" + test + "@example.com"
	pb := create(t, playbooks, newPlaybook(test, "Checkout service", map[string]string{
		expiry.AnnotationTTL:    "25s",
		notify.AnnotationNotify: "alice@example.com",
		notify.AnnotationOwner:  owner,
	}))

	var text string
	fixture.Eventually(t, 15*time.Second, "alice's reminder in the mailbox", func() (bool, error) {
		for _, m := range mb.WithHeader("X-Timeout-Object", pb.GetName()) {
			if m.Header.Get("X-Timeout-Event") == "reminder" && len(m.To) == 1 && m.To[0] == "alice@example.com" {
				text, _ = mailParts(t, m)
				return true, nil
			}
		}
		return false, nil
	})
	link := regexp.MustCompile(`Keep it 30 minutes longer: (\S+\?do=extend)\n`).FindStringSubmatch(text)
	if link == nil || !strings.HasPrefix(link[1], base+"/a/") {
		t.Fatalf("no link to %s in the reminder:\n%s", base, text)
	}
	secrets = append(secrets, strings.TrimSuffix(strings.TrimPrefix(link[1], base+"/a/"), "?do=extend"))

	shots := os.Getenv(envScreenshots)
	if shots == "" {
		shots = t.TempDir()
	}
	ctx := browser.New(t, 1024)
	// A phone's screen: the narrowest the page must work at.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(320, 640), chromedp.Navigate(link[1]), chromedp.WaitVisible(chromedp.CSS("h1"))); err != nil {
		t.Fatal(err)
	}
	body, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, body, "Checkout service", "Keep it longer", "I am done: delete it now")
	if got := get(t, pb.GetName()).GetAnnotations()[expiry.AnnotationExpiresAt]; got != "" {
		t.Fatalf("opening the page wrote expires-at %q: a GET must change nothing", got)
	}
	width, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
	if err != nil || width > 320 {
		t.Errorf("the page is %d px wide at 320 (%v): it must not scroll sideways", width, err)
	}
	checkAccessible(ctx, t, "the object's page")
	screenshot(ctx, t, filepath.Join(shots, "actions-page.png"))

	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`form:has(input[name="action"][value="extend"]) button`)),
		chromedp.WaitVisible(chromedp.CSS("h1")),
	); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 10*time.Second, "the page after the click", func() (bool, error) {
		body, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		if err != nil {
			return false, err
		}
		return strings.Contains(body, "Done: it now expires"), fmt.Errorf("the page says %q", body)
	})
	checkAccessible(ctx, t, "the page after the click")
	obj := get(t, pb.GetName())
	if got, want := obj.GetAnnotations()[expiry.AnnotationExpiresAt], pb.after(25*time.Second+30*time.Minute).UTC().Format(time.RFC3339); got != want {
		t.Errorf("expires-at %q, want %q: the expiry plus the policy's extendBy", got, want)
	}
	mustContain(t, obj.GetAnnotations()[expiry.AnnotationChangedBy], `"by":"alice@example.com"`, `"via":"link"`)

	// Back and pressed again, as an impatient person does: nothing more.
	if err := chromedp.Do(ctx, chromedp.Navigate(link[1]), chromedp.WaitVisible(chromedp.CSS("h1"))); err != nil {
		t.Fatal(err)
	}
	if body, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body"))); err != nil {
		t.Fatal(err)
	}
	mustContain(t, body, "This link was used for this")

	fixture.Eventually(t, 15*time.Second, "one extension on the audit trail, alice's via the link", func() (bool, error) {
		var n int
		for _, r := range auditRecords(t, pb.GetUID()) {
			if r.Type != audit.Extended {
				continue
			}
			if r.By != "alice@example.com" || r.Via != expiry.ViaLink {
				return false, fmt.Errorf("extended record by %q via %q", r.By, r.Via)
			}
			n++
		}
		if n > 1 {
			return false, fmt.Errorf("%d extended records for one click", n)
		}
		return n == 1, nil
	})
	fixture.Eventually(t, 15*time.Second, "the extended message in the mailbox", func() (bool, error) {
		for _, m := range mb.WithHeader("X-Timeout-Object", pb.GetName()) {
			if m.Header.Get("X-Timeout-Event") == "extended" {
				return true, nil
			}
		}
		return false, nil
	})
	if got := get(t, pb.GetName()).GetAnnotations()[expiry.AnnotationExpiresAt]; got != pb.after(25*time.Second+30*time.Minute).UTC().Format(time.RFC3339) {
		t.Errorf("after a second visit expires-at is %q: a used link must act no more", got)
	}

	// The owner's page, as a digest's link opens it, wide and narrow.
	ownerLinks, err := ring.Links(mustParse(t, base), actions.Claims{Owner: owner, Recipient: owner,
		Actions: []actions.Action{actions.View, actions.Extend}, Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 15*time.Second, "the owner's page listing the Playbook", func() (bool, error) {
		if err := chromedp.Do(ctx, chromedp.Navigate(ownerLinks.Page), chromedp.WaitVisible(chromedp.CSS("h1"))); err != nil {
			return false, err
		}
		body, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		return strings.Contains(body, pb.GetName()), err
	})
	checkAccessible(ctx, t, "the owner's page")
	screenshot(ctx, t, filepath.Join(shots, "actions-owner-page.png"))
}

// checkAccessible fails the test on any serious or critical rule axe-core
// finds broken on the page ctx shows.
func checkAccessible(ctx context.Context, t *testing.T, what string) {
	t.Helper()
	vs, err := browser.Axe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Impact == "serious" || v.Impact == "critical" {
			t.Errorf("%s: %s", what, v)
		}
	}
}

// screenshot writes what ctx shows, the whole page, to path.
func screenshot(ctx context.Context, t *testing.T, path string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}
