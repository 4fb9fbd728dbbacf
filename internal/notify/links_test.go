// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package notify

import (
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// fakeLinker signs "links" that name the recipient, as the controller's
// do in effect, and remembers whom it signed for.
type fakeLinker struct {
	recipients []string
	err        error
}

func (f *fakeLinker) Link(m Message, recipient string) (Message, error) {
	if f.err != nil {
		return m, f.err
	}
	f.recipients = append(f.recipients, recipient)
	page := "https://timeout.example.com/a/tok-" + recipient
	l := &Links{Page: page, Extend: page + "?do=extend", Step: "1 day", Token: "tok-" + recipient}
	if m.Type == v1alpha1.EventSleeping || m.Type == v1alpha1.EventSlept {
		l.Wake = page + "?do=wake"
	}
	if m.Digest != nil {
		m.Digest = &Digest{Stage: m.Digest.Stage, Owner: m.Digest.Owner, Items: append([]DigestItem(nil), m.Digest.Items...)}
		for i := range m.Digest.Items {
			item := "https://timeout.example.com/a/tok-" + m.Digest.Items[i].Object.Name
			m.Digest.Items[i].Actions = &Links{Page: item, Extend: item + "?do=extend", Delete: item + "?do=delete", Step: "1 day"}
		}
		l = &Links{Page: "https://timeout.example.com/o/tok-" + recipient}
	}
	m.Actions = l
	return m, nil
}

func linkedMessage(t v1alpha1.EventType, linker Linker) Message {
	m := message(t)
	m.Linker = linker
	return m
}

func TestContentForRendersEachRecipientsLinks(t *testing.T) {
	tpl, err := NewTemplates(nil)
	if err != nil {
		t.Fatal(err)
	}
	linker := &fakeLinker{}
	m := linkedMessage(v1alpha1.EventReminder, linker)
	c, err := tpl.Render(m)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(c.Text, "https://") {
		t.Fatalf("the content before For carries links:\n%s", c.Text)
	}
	for _, who := range []string{"alice@example.com", "bob@example.com"} {
		got, gc, err := c.For(m, who)
		if err != nil {
			t.Fatal(err)
		}
		page := "https://timeout.example.com/a/tok-" + who
		if got.Actions == nil || got.Actions.Page != page || got.Linker != nil {
			t.Errorf("For(%s) = %+v, want its links and no linker", who, got.Actions)
		}
		if !strings.Contains(gc.Text, "See it: "+page+"\n") || !strings.Contains(gc.Text, "Keep it 1 day longer: "+page+"?do=extend\n") {
			t.Errorf("text for %s lacks its links:\n%s", who, gc.Text)
		}
		if other := "tok-bob"; who == "alice@example.com" && strings.Contains(gc.Text+gc.HTML, other) {
			t.Errorf("alice's copy carries bob's link")
		}
	}
	if strings.Join(linker.recipients, ",") != "alice@example.com,bob@example.com" {
		t.Errorf("links signed for %q", linker.recipients)
	}

	t.Run("leaves a message without a linker as it is", func(t *testing.T) {
		plain := message(v1alpha1.EventReminder)
		pc, _ := tpl.Render(plain)
		got, gc, err := pc.For(plain, "alice@example.com")
		if err != nil || got.Actions != nil || gc != pc {
			t.Errorf("For without a linker = %+v, %v", got.Actions, err)
		}
	})
	t.Run("fails without a token in its error", func(t *testing.T) {
		m := linkedMessage(v1alpha1.EventReminder, &fakeLinker{err: errors.New("no key")})
		_, _, err := c.For(m, "alice@example.com")
		if err == nil || !strings.Contains(err.Error(), "no key") {
			t.Errorf("For with a failing linker: %v", err)
		}
	})
}

// hrefs are the targets of the HTML part's links.
var hrefs = regexp.MustCompile(`<a href="([^"]+)"`)

func TestLinksAreButtonsInHTMLAndURLsInText(t *testing.T) {
	tpl, err := NewTemplates(nil)
	if err != nil {
		t.Fatal(err)
	}
	digest := message(v1alpha1.EventReminder)
	digest.Digest = &Digest{Stage: "3d", Owner: "alice", Items: []DigestItem{
		{Object: Object{Kind: "Playbook", Name: "pb-1", Namespace: "team-a"}, ExpiresAt: digest.ExpiresAt, Extend: "kubectl annotate playbook pb-1"},
		{Object: Object{Kind: "Playbook", Name: "pb-2"}, ExpiresAt: digest.ExpiresAt.Add(time.Hour), Extend: "kubectl annotate playbook pb-2"},
	}}
	for _, tt := range []struct {
		name, file string
		m          Message
		texts      []string
		// buttons are the HTML part's links, in order.
		buttons []string
	}{
		{
			name:    "a reminder offers to keep it longer and shows its page",
			file:    "reminder",
			m:       message(v1alpha1.EventReminder),
			texts:   []string{"Keep it 1 day longer: https://timeout.example.com/a/tok-a@x?do=extend\nSee it: https://timeout.example.com/a/tok-a@x\n\nWith kubectl: kubectl annotate"},
			buttons: []string{"https://timeout.example.com/a/tok-a@x?do=extend", "https://timeout.example.com/a/tok-a@x"},
		},
		{
			name:    "a sleeping message offers to keep it awake",
			file:    "sleeping",
			m:       message(v1alpha1.EventSleeping),
			texts:   []string{"Keep it awake: https://timeout.example.com/a/tok-a@x?do=wake\n"},
			buttons: []string{"https://timeout.example.com/a/tok-a@x?do=extend", "https://timeout.example.com/a/tok-a@x?do=wake", "https://timeout.example.com/a/tok-a@x"},
		},
		{
			name:    "a slept message offers to wake it",
			file:    "slept",
			m:       message(v1alpha1.EventSlept),
			texts:   []string{"Wake it: https://timeout.example.com/a/tok-a@x?do=wake\n"},
			buttons: []string{"https://timeout.example.com/a/tok-a@x?do=extend", "https://timeout.example.com/a/tok-a@x?do=wake", "https://timeout.example.com/a/tok-a@x"},
		},
		{
			name: "a digest gives each object its links, and the owner's page",
			file: "digest",
			m:    digest,
			texts: []string{
				"(2026-11-24T12:00:00Z), in 3 days.\n  Keep it 1 day longer: https://timeout.example.com/a/tok-pb-1?do=extend\n  I am done, delete it now: https://timeout.example.com/a/tok-pb-1?do=delete\n  See it: https://timeout.example.com/a/tok-pb-1\n  With kubectl: kubectl annotate playbook pb-1\n",
				"All your objects, and what you can do with each: https://timeout.example.com/o/tok-a@x\n",
			},
			buttons: []string{
				"https://timeout.example.com/a/tok-pb-1?do=extend", "https://timeout.example.com/a/tok-pb-1?do=delete", "https://timeout.example.com/a/tok-pb-1",
				"https://timeout.example.com/a/tok-pb-2?do=extend", "https://timeout.example.com/a/tok-pb-2?do=delete", "https://timeout.example.com/a/tok-pb-2",
				"https://timeout.example.com/o/tok-a@x",
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.m.Linker = &fakeLinker{}
			c, err := tpl.Render(tt.m)
			if err != nil {
				t.Fatal(err)
			}
			_, c, err = c.For(tt.m, "a@x")
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tt.texts {
				if !strings.Contains(c.Text, want) {
					t.Errorf("text lacks %q:\n%s", want, c.Text)
				}
			}
			var got []string
			for _, m := range hrefs.FindAllStringSubmatch(c.HTML, -1) {
				got = append(got, m[1])
			}
			if strings.Join(got, " ") != strings.Join(tt.buttons, " ") {
				t.Errorf("HTML links %q, want %q", got, tt.buttons)
			}
			// The URLs are the buttons' targets, never text beside them.
			if n := strings.Count(c.HTML, "https://"); n != len(tt.buttons) {
				t.Errorf("HTML holds %d URLs for %d buttons:\n%s", n, len(tt.buttons), c.HTML)
			}
			if strings.Contains(c.HTML, "<img") || strings.Contains(c.HTML, "<style") || strings.Contains(c.HTML, "<script") {
				t.Errorf("HTML has an image, a style sheet or a script:\n%s", c.HTML)
			}
			golden(t, filepath.Join("render", "linked-"+tt.file+".txt"), c.Subject+"\n---\n"+c.Text+"---\n"+c.HTML)
		})
	}
}

func TestTemplatesPlaceLinks(t *testing.T) {
	t.Run("an override places them where it likes", func(t *testing.T) {
		tpl, err := NewTemplates([]v1alpha1.MessageTemplate{{
			Event: v1alpha1.EventReminder,
			Text:  "{{display .Object}} goes {{relative .ExpiresAt .Time}}.{{with .Actions}} Keep it: {{.Extend}}{{end}}{{template \"actions\" .}}",
			HTML:  `<p>{{with .Actions}}<a href="{{.Page}}">open</a>{{end}}</p>`,
		}})
		if err != nil {
			t.Fatal(err)
		}
		m := linkedMessage(v1alpha1.EventReminder, &fakeLinker{})
		c, _ := tpl.Render(m)
		_, c, err = c.For(m, "a@x")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(c.Text, `"hello-go" (2b1e7c9e) goes in 3 days. Keep it: https://timeout.example.com/a/tok-a@x?do=extend`) ||
			!strings.Contains(c.Text, "\n\nKeep it 1 day longer: ") {
			t.Errorf("text = %q", c.Text)
		}
		if c.HTML != `<p><a href="https://timeout.example.com/a/tok-a@x">open</a></p>` {
			t.Errorf("html = %q", c.HTML)
		}
		plain, _ := tpl.Render(message(v1alpha1.EventReminder))
		if plain.Text != "\"hello-go\" (2b1e7c9e) goes in 3 days.\n\n-- \nSent by timeout-controller for policy playbooks.\n" || plain.HTML != "<p></p>" {
			t.Errorf("without links: %q, %q", plain.Text, plain.HTML)
		}
	})
	t.Run("an override that reads links a message may lack is refused", func(t *testing.T) {
		_, err := NewTemplates([]v1alpha1.MessageTemplate{{Event: v1alpha1.EventReminder, Text: "See it: {{.Actions.Page}}"}})
		if err == nil || !strings.Contains(err.Error(), "reminder.text") || !strings.Contains(err.Error(), "nil pointer") {
			t.Errorf("NewTemplates = %v, want the reminder's text refused", err)
		}
	})
}
