// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package notify

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

func TestParseRecipients(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		allowed []string
		emails  []string
		slack   []string
		refused []string
	}{
		{name: "reads addresses and channels", value: "alice@example.com, #team-amp",
			emails: []string{"alice@example.com"}, slack: []string{"#team-amp"}},
		{name: "ignores blanks and repeats", value: " alice@example.com,,ALICE@example.com , #a,#a",
			emails: []string{"alice@example.com"}, slack: []string{"#a"}},
		{name: "refuses a URL and keeps the others", value: "https://attacker.example/x, bob@example.com",
			emails: []string{"bob@example.com"}, refused: []string{"https://attacker.example/x"}},
		{name: "refuses a bare host", value: "attacker.example:25", refused: []string{"attacker.example:25"}},
		{name: "refuses an address with a display name", value: "Bob <bob@example.com>", refused: []string{"Bob <bob@example.com>"}},
		{name: "refuses an incomplete address", value: "carol@", refused: []string{"carol@"}},
		{name: "refuses a channel with capitals or spaces", value: "#Team, # x", refused: []string{"#Team", "# x"}},
		{name: "keeps addresses in an allowed domain or its subdomains", value: "a@example.com, b@eu.example.com, c@evil.com",
			allowed: []string{"example.com"}, emails: []string{"a@example.com", "b@eu.example.com"}, refused: []string{"c@evil.com"}},
		{name: "refuses a domain literal and an IP address", value: "a@[10.0.0.1], b@10.0.0.1", refused: []string{"a@[10.0.0.1]", "b@10.0.0.1"}},
		{name: "refuses entries past the tenth", value: "a@x.io,b@x.io,c@x.io,d@x.io,e@x.io,f@x.io,g@x.io,h@x.io,i@x.io,#j,k@x.io",
			emails: []string{"a@x.io", "b@x.io", "c@x.io", "d@x.io", "e@x.io", "f@x.io", "g@x.io", "h@x.io", "i@x.io"}, slack: []string{"#j"},
			refused: []string{"k@x.io"}},
		{name: "does not take a domain that merely ends the same", value: "d@notexample.com",
			allowed: []string{"example.com"}, refused: []string{"d@notexample.com"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, errs := ParseRecipients(tt.value, tt.allowed)
			if !slices.Equal(r.Emails, tt.emails) || !slices.Equal(r.SlackChannels, tt.slack) {
				t.Errorf("ParseRecipients(%q) = %+v", tt.value, r)
			}
			if len(errs) != len(tt.refused) {
				t.Fatalf("errors = %v, want one for each of %q", errs, tt.refused)
			}
			for i, err := range errs {
				if !strings.Contains(err.Error(), tt.refused[i]) {
					t.Errorf("error %q does not name %q", err, tt.refused[i])
				}
			}
		})
	}
}

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func message(t v1alpha1.EventType) Message {
	return Message{
		ID: "id", Type: t, Time: now,
		Object:    Object{APIVersion: "amphitheatre.app/v1", Kind: "Playbook", Name: "2b1e7c9e", UID: "u", Title: "hello-go"},
		ExpiresAt: now.Add(72 * time.Hour), Stage: "3d", Policy: "playbooks", Detail: "because", Extend: "kubectl annotate ...",
	}
}

func TestDefaultTemplatesRenderEveryEventType(t *testing.T) {
	tpl, err := NewTemplates(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, et := range v1alpha1.EventTypes {
		t.Run(string(et), func(t *testing.T) {
			c, err := tpl.Render(message(et))
			if err != nil {
				t.Fatal(err)
			}
			for part, s := range map[string]string{"subject": c.Subject, "text": c.Text, "html": c.HTML} {
				if !strings.Contains(s, "hello-go") {
					t.Errorf("%s does not name the object's title: %q", part, s)
				}
			}
			if strings.Contains(c.Subject, "\n") {
				t.Errorf("subject spans lines: %q", c.Subject)
			}
			if !strings.Contains(c.Text, "2026-11-24T12:00:00Z") || !strings.Contains(c.Text, "Tuesday 24 November 2026, 12:00 UTC") {
				t.Errorf("text lacks the date in RFC 3339 and human form: %q", c.Text)
			}
			if !strings.Contains(c.HTML, "<html>") || !strings.Contains(c.HTML, "&#34;hello-go&#34;") {
				t.Errorf("html is not escaped HTML: %q", c.HTML)
			}
		})
	}
	c, _ := tpl.Render(message(v1alpha1.EventReminder))
	if c.Subject != `Playbook "hello-go" (2b1e7c9e) will be deleted in 3 days` || !strings.Contains(c.Text, "kubectl annotate") {
		t.Errorf("reminder = %+v", c)
	}
}

func TestADigestListsEachObjectWithItsExpiryAndHowToKeepIt(t *testing.T) {
	tpl, err := NewTemplates([]v1alpha1.MessageTemplate{{Event: v1alpha1.EventReminder, Subject: "override", HTML: "<p>override</p>"}})
	if err != nil {
		t.Fatal(err)
	}
	m := message(v1alpha1.EventReminder)
	first, second := m.ExpiresAt, m.ExpiresAt.Add(40*time.Minute)
	m.Digest = &Digest{Stage: "3d", Items: []DigestItem{
		{Object: Object{Kind: "Playbook", Name: "pb-1", Namespace: "team-a", Title: "<First>"}, ExpiresAt: first, Extend: "kubectl annotate playbook pb-1"},
		{Object: Object{Kind: "Playbook", Name: "pb-2", Namespace: "team-b"}, ExpiresAt: second, Extend: "kubectl annotate playbook pb-2"},
	}}
	c, err := tpl.Render(m)
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != "2 of your objects will be deleted, the first in 3 days" {
		t.Errorf("subject = %q: the reminder's override must not apply to a digest", c.Subject)
	}
	for _, want := range []string{`Playbook "<First>" (pb-1) in namespace team-a: on Tuesday 24 November 2026, 12:00 UTC (2026-11-24T12:00:00Z)`,
		"kubectl annotate playbook pb-1", "Playbook pb-2 in namespace team-b: on Tuesday 24 November 2026, 12:40 UTC", "kubectl annotate playbook pb-2"} {
		if !strings.Contains(c.Text, want) {
			t.Errorf("text lacks %q:\n%s", want, c.Text)
		}
	}
	if strings.Contains(c.HTML, "override") || !strings.Contains(c.HTML, "&#34;&lt;First&gt;&#34;") {
		t.Errorf("html is not the escaped digest: %q", c.HTML)
	}
}

func TestTemplateOverrides(t *testing.T) {
	tpl, err := NewTemplates([]v1alpha1.MessageTemplate{{
		Event:   v1alpha1.EventReminder,
		Subject: "[{{.Policy}}] {{.Object.Title}} goes {{relative .ExpiresAt .Time}}",
		HTML:    "<p>{{.Object.Title}}</p>",
	}})
	if err != nil {
		t.Fatal(err)
	}
	m := message(v1alpha1.EventReminder)
	m.Object.Title = "<b>x</b>"
	c, err := tpl.Render(m)
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != "[playbooks] <b>x</b> goes in 3 days" {
		t.Errorf("subject = %q", c.Subject)
	}
	if c.HTML != "<p>&lt;b&gt;x&lt;/b&gt;</p>" {
		t.Errorf("an HTML override is not escaped: %q", c.HTML)
	}
	if !strings.Contains(c.Text, "will be deleted in 3 days") {
		t.Errorf("text did not keep the default: %q", c.Text)
	}
	other, _ := tpl.Render(message(v1alpha1.EventDeleted))
	if !strings.Contains(other.Subject, "was deleted") {
		t.Errorf("another event type lost its default: %q", other.Subject)
	}
}

func TestTemplateErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name     string
		override v1alpha1.MessageTemplate
		want     string
	}{
		{"a subject that does not parse", v1alpha1.MessageTemplate{Event: v1alpha1.EventReminder, Subject: "{{.Policy"}, "spec.notifications.templates[0].subject"},
		{"a text naming a missing field", v1alpha1.MessageTemplate{Event: v1alpha1.EventDeleted, Text: "{{.Owner}}"}, "can't evaluate field Owner"},
		{"an HTML that does not parse", v1alpha1.MessageTemplate{Event: v1alpha1.EventExpired, HTML: "{{if}}"}, "spec.notifications.templates[0].html"},
		{"an unknown event type", v1alpha1.MessageTemplate{Event: "exploded", Subject: "x"}, `unknown event type "exploded"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewTemplates([]v1alpha1.MessageTemplate{tt.override})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewTemplates() error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestRelative(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{72 * time.Hour, "in 3 days"},
		{60 * time.Hour, "in 3 days"},
		{47 * time.Hour, "in 47 hours"},
		{2 * time.Hour, "in 2 hours"},
		{90 * time.Minute, "in 90 minutes"},
		{time.Minute, "in 60 seconds"},
		{time.Second, "in 1 second"},
		{-3 * time.Minute, "3 minutes ago"},
	} {
		if got := Relative(now.Add(tt.d), now); got != tt.want {
			t.Errorf("Relative(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestNewIDIsStablePerObjectExpiryTypeAndStage(t *testing.T) {
	at := now.Add(time.Hour)
	id := NewID("uid", at, v1alpha1.EventReminder, "3d")
	if id != NewID("uid", at, v1alpha1.EventReminder, "3d") {
		t.Error("the same message got two ids")
	}
	for name, other := range map[string]string{
		"another stage":  NewID("uid", at, v1alpha1.EventReminder, "2d"),
		"another expiry": NewID("uid", at.Add(time.Second), v1alpha1.EventReminder, "3d"),
		"another type":   NewID("uid", at, v1alpha1.EventExtended, "3d"),
		"another object": NewID("uid2", at, v1alpha1.EventReminder, "3d"),
	} {
		if other == id {
			t.Errorf("%s has the same id", name)
		}
	}
}

type fakeNotifier struct{ name string }

func (f fakeNotifier) Name() string                                 { return f.name }
func (f fakeNotifier) Accepts(v1alpha1.EventType) bool              { return true }
func (f fakeNotifier) Send(context.Context, Message, Content) error { return nil }

func TestBuildNamesEachChannelAfterItsNotificationChannel(t *testing.T) {
	// Two test kinds: "a" claims channels with an e-mail spec, and fails
	// for a host of "broken"; "b" claims those with a Slack spec.
	a := Kind{Name: "test-a", Build: func(_ context.Context, ch Channel, _ Secrets) (Notifier, error) {
		switch {
		case ch.Spec.Email == nil:
			return nil, nil
		case ch.Spec.Email.Host == "broken":
			return nil, errors.New("broken")
		}
		return fakeNotifier{"a"}, nil
	}}
	b := Kind{Name: "test-b", Build: func(_ context.Context, ch Channel, _ Secrets) (Notifier, error) {
		if ch.Spec.Slack == nil {
			return nil, nil
		}
		return fakeNotifier{"b"}, nil
	}}
	kinds := Kinds{a, b}
	mail := v1alpha1.NotificationChannelSpec{Email: &v1alpha1.EmailChannel{Host: "smtp.example.com"}}
	chat := v1alpha1.NotificationChannelSpec{Slack: &v1alpha1.SlackChannel{}}
	ns, err := kinds.Build(context.Background(), []Channel{
		{Name: "team-mail", Spec: mail, Events: []v1alpha1.EventType{v1alpha1.EventReminder}},
		{Name: "team-chat", Spec: chat},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range ns {
		names = append(names, n.Name())
	}
	if !slices.Equal(names, []string{"team-mail", "team-chat"}) {
		t.Errorf("Build() names = %v, want team-mail then team-chat", names)
	}
	if ns[0].Accepts(v1alpha1.EventDeleted) || !ns[0].Accepts(v1alpha1.EventReminder) {
		t.Error("a channel takes events other than those the policy chose for it")
	}

	_, err = kinds.Build(context.Background(), []Channel{
		{Name: "bad-mail", Spec: v1alpha1.NotificationChannelSpec{Email: &v1alpha1.EmailChannel{Host: "broken"}}},
		{Name: "nothing", Spec: v1alpha1.NotificationChannelSpec{}},
	}, nil)
	if err == nil || !strings.Contains(err.Error(), "channel bad-mail: test-a: broken") || !strings.Contains(err.Error(), "channel nothing: 0 kinds") {
		t.Errorf("Build() error = %v, want it to name every failing channel and kind", err)
	}
	if _, err := (Kinds{a, a}).Build(context.Background(), []Channel{{Name: "team-mail", Spec: mail}}, nil); err == nil ||
		!strings.Contains(err.Error(), "channel team-mail: 2 kinds") {
		t.Errorf("Build() with a kind listed twice: error = %v, want the channel claimed twice", err)
	}
	if _, err := (Kinds{b}).Build(context.Background(), []Channel{{Name: "team-mail", Spec: mail}}, nil); err == nil ||
		!strings.Contains(err.Error(), "channel team-mail: 0 kinds") {
		t.Errorf("Build() without the channel's kind: error = %v, want the channel claimed by none", err)
	}
}

func TestSubscribed(t *testing.T) {
	if !Subscribed(nil, v1alpha1.EventPostponed) {
		t.Error("an empty list does not subscribe to everything")
	}
	if Subscribed([]v1alpha1.EventType{v1alpha1.EventReminder}, v1alpha1.EventDeleted) {
		t.Error("a list subscribes to an event type it does not name")
	}
}

func FuzzParseRecipients(f *testing.F) {
	for _, seed := range []string{"alice@example.com, #team-amp", "https://x.example/y", "a@[10.0.0.1]", ",,,", "#" + strings.Repeat("a", 90), "Bob <b@x.io>"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		r, _ := ParseRecipients(value, []string{"example.com"})
		if n := len(r.Emails) + len(r.SlackChannels); n > MaxRecipients {
			t.Fatalf("%d recipients from %q, more than %d", n, value, MaxRecipients)
		}
		for _, e := range r.Emails {
			domain := strings.ToLower(e[strings.LastIndex(e, "@")+1:])
			if strings.ContainsAny(e, " <>/:[]\r\n") || domain != "example.com" && !strings.HasSuffix(domain, ".example.com") {
				t.Fatalf("accepted %q from %q", e, value)
			}
		}
		for _, c := range r.SlackChannels {
			if !slackChannel.MatchString(c) {
				t.Fatalf("accepted channel %q from %q", c, value)
			}
		}
	})
}
