// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package slack

import (
	"strings"
	"unicode/utf8"

	slackapi "github.com/slack-go/slack"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// Slack refuses a whole message (HTTP 400, invalid_blocks) when one text
// is longer than its block allows; these keep long titles and details
// from turning into a delivery that never succeeds.
const (
	maxHeader  = 150
	maxSection = 3000
	maxField   = 2000
)

// build lays out m as one Block Kit message, with c.Subject as the text
// Slack shows in notifications and where blocks cannot be displayed, and
// m's links as buttons: interactive ones, which post their token to the
// actions server through the Slack app, or else links to the page.
func build(m notify.Message, c notify.Content, interactive bool) *slackapi.WebhookMessage {
	title := m.Object.Title
	if title == "" {
		title = m.Object.Name
	}
	subject := c.Subject
	if strings.TrimSpace(subject) == "" {
		// An overriding template may render an empty subject; a header
		// without text is refused.
		subject = m.Object.Kind + " " + notify.Display(m.Object)
	}
	name := m.Object.Name
	if m.Object.Namespace != "" {
		name = m.Object.Namespace + "/" + name
	}

	fields := []*slackapi.TextBlockObject{
		mrkdwn(fit("*Kind*\n", m.Object.Kind, "", maxField)),
		mrkdwn(fit("*Name*\n", name, "", maxField)),
		mrkdwn("*" + whenLabel(m) + "*\n" + notify.Human(m.ExpiresAt) + "\n" + notify.Relative(m.ExpiresAt, m.Time)),
	}
	if m.Type == v1alpha1.EventReminder && m.Stage != "" {
		fields = append(fields, mrkdwn(fit("*Reminder*\n", m.Stage, " before expiry", maxField)))
	}
	blocks := []slackapi.Block{
		slackapi.NewHeaderBlock(slackapi.NewTextBlockObject(slackapi.PlainTextType, truncate(subject, maxHeader), true, false)),
		slackapi.NewSectionBlock(mrkdwn(fit("*", title, "*", maxSection)), fields, nil),
	}
	if (m.Type == v1alpha1.EventDeletionFailed || m.Type == v1alpha1.EventPostponed) && m.Detail != "" {
		blocks = append(blocks, slackapi.NewSectionBlock(mrkdwn(fit("*Why*\n", m.Detail, "", maxSection)), nil, nil))
	}
	if m.Type == v1alpha1.EventDeleted && m.Reclaimed != nil {
		blocks = append(blocks, slackapi.NewSectionBlock(mrkdwn(fit("*Freed*\n", m.Reclaimed.String(), "", maxSection)), nil, nil))
	}
	// Once an object is being deleted or gone, extending it does nothing.
	if m.Extend != "" && m.Type != v1alpha1.EventExpired && m.Type != v1alpha1.EventDeleted {
		blocks = append(blocks, slackapi.NewSectionBlock(mrkdwn(fit("*To keep it longer*\n```", m.Extend, "```", maxSection)), nil, nil))
	}
	if m.Actions != nil {
		blocks = append(blocks, actions(m, interactive))
	}
	blocks = append(blocks, slackapi.NewContextBlock("", mrkdwn(fit("Sent by timeout-controller for policy *", m.Policy, "*", maxField))))

	return &slackapi.WebhookMessage{
		Text:   escape(subject),
		Blocks: &slackapi.Blocks{BlockSet: blocks},
	}
}

// actions lays out m's links as buttons, each with the action as its
// action_id. An interactive button carries the link's token as its value
// and acts through the Slack app (the actions server checks the request's
// signature); otherwise, and for "See it", a button opens the page, where
// the action is one more click. Deleting asks first.
func actions(m notify.Message, interactive bool) *slackapi.ActionBlock {
	l := m.Actions
	button := func(action, label, url string) *slackapi.ButtonBlockElement {
		b := slackapi.NewButtonBlockElement(action, "", slackapi.NewTextBlockObject(slackapi.PlainTextType, label, false, false))
		if interactive {
			b.Value = l.Token
		} else {
			b.URL = url
		}
		return b
	}
	var elements []slackapi.BlockElement
	if l.Extend != "" {
		label := "Keep it longer"
		if l.Step != "" {
			label = "Keep it " + l.Step + " longer"
		}
		elements = append(elements, button("extend", label, l.Extend).WithStyle(slackapi.StylePrimary))
	}
	if l.Wake != "" {
		label := "Wake it"
		if m.Type == v1alpha1.EventSleeping {
			label = "Keep it awake"
		}
		elements = append(elements, button("wake", label, l.Wake))
	}
	if l.Delete != "" {
		b := button("delete", "I am done: delete it now", l.Delete).WithStyle(slackapi.StyleDanger)
		if interactive {
			plain := func(s string) *slackapi.TextBlockObject {
				return slackapi.NewTextBlockObject(slackapi.PlainTextType, s, false, false)
			}
			b = b.WithConfirm(slackapi.NewConfirmationBlockObject(plain("Delete it now?"),
				plain(truncate(m.Object.Kind+" "+m.Object.Name+" is deleted as at its expiry, and what it runs with it.", maxConfirm)),
				plain("Delete it"), plain("Keep it")))
		}
		elements = append(elements, b)
	}
	view := slackapi.NewButtonBlockElement("view", "", slackapi.NewTextBlockObject(slackapi.PlainTextType, "See it", false, false))
	view.URL = l.Page
	elements = append(elements, view)
	return slackapi.NewActionBlock("actions", elements...)
}

// maxConfirm bounds the text of a confirmation dialog.
const maxConfirm = 300

// whenLabel names the time m is about.
func whenLabel(m notify.Message) string {
	switch {
	case m.Type == v1alpha1.EventExtended:
		return "Now expires"
	case m.Type == v1alpha1.EventPostponed:
		return "Not deleted before"
	case m.Type == v1alpha1.EventSleeping:
		return "Goes to sleep"
	case m.ExpiresAt.After(m.Time):
		return "Expires"
	default:
		return "Expired"
	}
}

// mrkdwn is a Slack-markdown text taken verbatim, so that names and titles
// are not turned into links or channel references.
func mrkdwn(s string) *slackapi.TextBlockObject {
	return slackapi.NewTextBlockObject(slackapi.MarkdownType, s, false, true)
}

// escape keeps user-controlled text (titles, names, details) from being
// read as Slack control sequences: a title of "<!channel>" would otherwise
// notify everyone in the channel.
var escape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace

// fit escapes s and puts it between prefix and suffix, cutting s short
// (with an ellipsis, and never inside an escape) so that the whole is at
// most n characters.
func fit(prefix, s, suffix string, n int) string {
	n -= utf8.RuneCountInString(prefix) + utf8.RuneCountInString(suffix)
	if e := escape(s); utf8.RuneCountInString(e) <= n {
		return prefix + e + suffix
	}
	var b strings.Builder
	b.WriteString(prefix)
	used := 0
	for _, r := range s {
		e := escape(string(r))
		k := utf8.RuneCountInString(e)
		if used+k > n-1 {
			break
		}
		b.WriteString(e)
		used += k
	}
	b.WriteString("…")
	b.WriteString(suffix)
	return b.String()
}

// truncate shortens s to at most n characters, ending in an ellipsis when
// it cut something.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
