// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package notify

import (
	"bytes"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// defaults are the subject and text templates of each event type. A new
// event type needs one entry here; the HTML part is the shared layout.
var defaults = map[v1alpha1.EventType]struct{ subject, text string }{
	v1alpha1.EventReminder: {
		subject: `{{.Object.Kind}} {{display .Object}} will be deleted {{relative .ExpiresAt .Time}}`,
		text: `Your {{.Object.Kind}} {{display .Object}} will be deleted {{relative .ExpiresAt .Time}}, on {{human .ExpiresAt}} ({{rfc3339 .ExpiresAt}}).{{template "actions" .}}

{{if .Actions}}With kubectl{{else}}To keep it longer{{end}}: {{.Extend}}`,
	},
	v1alpha1.EventExtended: {
		subject: `{{.Object.Kind}} {{display .Object}} now expires {{relative .ExpiresAt .Time}}`,
		text:    `Your {{.Object.Kind}} {{display .Object}} was extended: it will now be deleted on {{human .ExpiresAt}} ({{rfc3339 .ExpiresAt}}), {{relative .ExpiresAt .Time}}.`,
	},
	v1alpha1.EventPostponed: {
		subject: `Deletion of {{.Object.Kind}} {{display .Object}} postponed to {{human .ExpiresAt}}`,
		text: `Your {{.Object.Kind}} {{display .Object}} has expired, but it will not be deleted before {{human .ExpiresAt}} ({{rfc3339 .ExpiresAt}}): {{.Detail}}

To keep it longer: {{.Extend}}`,
	},
	v1alpha1.EventExpired: {
		subject: `{{.Object.Kind}} {{display .Object}} has expired`,
		text:    `Your {{.Object.Kind}} {{display .Object}} expired on {{human .ExpiresAt}} ({{rfc3339 .ExpiresAt}}) and is being deleted.`,
	},
	v1alpha1.EventDeleted: {
		subject: `{{.Object.Kind}} {{display .Object}} was deleted`,
		text: `Your {{.Object.Kind}} {{display .Object}} expired on {{human .ExpiresAt}} ({{rfc3339 .ExpiresAt}}) and was deleted.{{with .Reclaimed}}

Its namespaces ({{join .Namespaces ", "}}) held {{.}}; garbage collection removes them.{{end}}`,
	},
	v1alpha1.EventDeletionFailed: {
		subject: `Deleting {{.Object.Kind}} {{display .Object}} failed`,
		text:    `Your {{.Object.Kind}} {{display .Object}} expired on {{human .ExpiresAt}} ({{rfc3339 .ExpiresAt}}), but deleting it failed: {{.Detail}}. It will be tried again.`,
	},
	v1alpha1.EventSleeping: {
		subject: `{{.Object.Kind}} {{display .Object}} goes to sleep {{relative .ExpiresAt .Time}}`,
		text:    `Your {{.Object.Kind}} {{display .Object}} will be put to sleep {{relative .ExpiresAt .Time}}, on {{human .ExpiresAt}} ({{rfc3339 .ExpiresAt}}): what it runs stops until it is used again. Using it before then keeps it awake; using it later wakes it.{{template "actions" .}}`,
	},
	v1alpha1.EventSlept: {
		subject: `{{.Object.Kind}} {{display .Object}} is asleep`,
		text: `Your {{.Object.Kind}} {{display .Object}} has been put to sleep: what it runs is stopped. Using it wakes it, and restores what the sleep changed.

If it stays asleep, it will be deleted {{relative .ExpiresAt .Time}}, on {{human .ExpiresAt}} ({{rfc3339 .ExpiresAt}}).{{template "actions" .}}`,
	},
	v1alpha1.EventWoke: {
		subject: `{{.Object.Kind}} {{display .Object}} woke`,
		text:    `Your {{.Object.Kind}} {{display .Object}} woke{{with .Detail}} ({{.}}){{end}}: what the sleep changed is restored. It will not be deleted before {{human .ExpiresAt}} ({{rfc3339 .ExpiresAt}}).`,
	},
	v1alpha1.EventWouldDelete: {
		subject: `{{.Object.Kind}} {{display .Object}} would have been deleted`,
		text:    `Your {{.Object.Kind}} {{display .Object}} expired on {{human .ExpiresAt}} ({{rfc3339 .ExpiresAt}}). It was not deleted because policy {{.Policy}} is in dry-run mode.`,
	},
}

// digestTemplate is the subject and text of an owner's digest: one
// reminder stage about several objects. Policies cannot override it.
var digestTemplate = struct{ subject, text string }{
	subject: `{{len .Digest.Items}} of your objects will be deleted, the first {{relative .ExpiresAt .Time}}`,
	text: `These objects of yours will be deleted unless you keep them:
{{range .Digest.Items}}
- {{.Object.Kind}} {{display .Object}}{{with .Object.Namespace}} in namespace {{.}}{{end}}: on {{human .ExpiresAt}} ({{rfc3339 .ExpiresAt}}), {{relative .ExpiresAt $.Time}}.
{{with .Actions}}{{if .Extend}}  Keep it {{with .Step}}{{.}} {{end}}longer: {{.Extend}}
{{end}}{{if .Wake}}  Wake it: {{.Wake}}
{{end}}{{if .Delete}}  I am done, delete it now: {{.Delete}}
{{end}}  See it: {{.Page}}
{{end}}  {{if .Actions}}With kubectl{{else}}To keep it longer{{end}}: {{.Extend}}
{{end}}{{with .Actions}}
All your objects, and what you can do with each: {{.Page}}{{end}}`,
}

// actionsTemplate lays out a message's links in its text, where the
// default templates of the messages people can act on place it with
// {{template "actions" .}}; overrides may too. It writes nothing for a
// message without links.
const actionsTemplate = `{{define "actions"}}{{with .Actions}}

{{if .Extend}}Keep it {{with .Step}}{{.}} {{end}}longer: {{.Extend}}
{{end}}{{if .Wake}}{{if eq $.Type "sleeping"}}Keep it awake{{else}}Wake it{{end}}: {{.Wake}}
{{end}}{{if .Delete}}I am done, delete it now: {{.Delete}}
{{end}}See it: {{.Page}}{{end}}{{end}}`

// DefaultDigestTemplate returns the subject and text templates of an
// owner's digest.
func DefaultDigestTemplate() (subject, text string) {
	return digestTemplate.subject, digestTemplate.text
}

const htmlLayout = `<!DOCTYPE html>
<html><body style="font-family: sans-serif">
<h2>{{.Subject}}</h2>
{{range .Paragraphs}}{{with .Buttons}}{{template "buttons" .}}{{else}}<p>{{.Text}}</p>
{{end}}{{end}}{{range .Items}}<p style="margin: 24px 0 4px 0"><strong>{{.Name}}</strong>: {{.When}}</p>
{{template "buttons" .Buttons}}{{end}}{{with .Owner}}<p style="margin: 24px 0"><a href="{{.Page}}" style="color: #1a4fa0">All your objects, and what you can do with each</a></p>
{{end}}<p style="color: #666">{{.Footer}}</p>
</body></html>`

// buttonsTemplate lays out a message's links in its HTML part: links
// styled as buttons, with inline CSS only (mail clients drop style sheets)
// and no image. Each opens a page that says what the button there will do;
// nothing acts on a GET.
const buttonsTemplate = `{{define "buttons"}}<p style="margin: 16px 0">
{{- with .Links.Extend}}<a href="{{.}}" style="display: inline-block; margin: 0 8px 8px 0; padding: 10px 16px; border-radius: 4px; background: #1a4fa0; color: #ffffff; font-weight: bold; text-decoration: none">Keep it {{with $.Links.Step}}{{.}} {{end}}longer</a>
{{end}}
{{- with .Links.Wake}}<a href="{{.}}" style="display: inline-block; margin: 0 8px 8px 0; padding: 10px 16px; border-radius: 4px; background: #1a4fa0; color: #ffffff; font-weight: bold; text-decoration: none">{{if $.Awake}}Keep it awake{{else}}Wake it{{end}}</a>
{{end}}
{{- with .Links.Delete}}<a href="{{.}}" style="display: inline-block; margin: 0 8px 8px 0; padding: 10px 16px; border-radius: 4px; background: #a3231a; color: #ffffff; font-weight: bold; text-decoration: none">I am done: delete it now</a>
{{end}}
{{- with .Links.Page}}<a href="{{.}}" style="display: inline-block; margin: 0 8px 8px 0; padding: 9px 15px; border-radius: 4px; border: 1px solid #1a4fa0; background: #ffffff; color: #1a4fa0; text-decoration: none">See it</a>{{end}}</p>
{{end}}`

// layout is what htmlLayout lays out.
type layout struct {
	Subject    string
	Paragraphs []paragraph
	Footer     string
	// Items are a digest's objects, when it has links; Owner is then the
	// owner's page.
	Items []layoutItem
	Owner *Links
}

// paragraph is one paragraph of the text, or the buttons that stand for
// the paragraph of its links.
type paragraph struct {
	Text    string
	Buttons *buttons
}

type buttons struct {
	Links *Links
	// Awake says the object is not asleep yet: Wake keeps it awake.
	Awake bool
}

type layoutItem struct {
	Name, When string
	Buttons    buttons
}

// DefaultTemplate returns the default subject and text templates of
// event type t; false for a type without one.
func DefaultTemplate(t v1alpha1.EventType) (subject, text string, ok bool) {
	d, ok := defaults[t]
	return d.subject, d.text, ok
}

var funcs = template.FuncMap{
	"rfc3339":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"human":    Human,
	"relative": Relative,
	"display":  Display,
	"join":     strings.Join,
}

// Human writes t for people, in UTC: "Friday 27 November 2026, 14:00 UTC".
func Human(t time.Time) string {
	return t.UTC().Format("Monday 2 January 2006, 15:04 UTC")
}

// Relative writes t as seen from now: "in 3 days", "in 5 hours", "2 minutes ago".
func Relative(t, now time.Time) string {
	d := t.Sub(now)
	past := d < 0
	if past {
		d = -d
	}
	var s string
	switch {
	case d >= 48*time.Hour:
		s = Plural(int((d+12*time.Hour)/(24*time.Hour)), "day")
	case d >= 2*time.Hour:
		s = Plural(int((d+30*time.Minute)/time.Hour), "hour")
	case d >= 2*time.Minute:
		s = Plural(int((d+30*time.Second)/time.Minute), "minute")
	default:
		s = Plural(int((d+500*time.Millisecond)/time.Second), "second")
	}
	if past {
		return s + " ago"
	}
	return "in " + s
}

// Plural writes n and unit, with an s when n is not 1: "1 day", "3 days".
func Plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

// Display names an object for people: its title and name, or its name.
func Display(o Object) string {
	if o.Title != "" && o.Title != o.Name {
		return fmt.Sprintf("%q (%s)", o.Title, o.Name)
	}
	return o.Name
}

// Templates renders messages with the default templates and a policy's
// overrides.
type Templates struct {
	subject, text map[v1alpha1.EventType]*template.Template
	html          map[v1alpha1.EventType]*htmltemplate.Template
	layout        *htmltemplate.Template
	// digest renders the messages that carry a Digest.
	digest struct{ subject, text *template.Template }
}

// NewTemplates parses the defaults and the overrides. Its error names the
// event type and part of each override that does not parse or execute.
func NewTemplates(overrides []v1alpha1.MessageTemplate) (*Templates, error) {
	t := &Templates{
		subject: map[v1alpha1.EventType]*template.Template{},
		text:    map[v1alpha1.EventType]*template.Template{},
		html:    map[v1alpha1.EventType]*htmltemplate.Template{},
		layout:  htmltemplate.Must(htmltemplate.Must(htmltemplate.New("layout").Parse(buttonsTemplate)).Parse(htmlLayout)),
	}
	t.digest.subject = template.Must(template.New("digest.subject").Funcs(funcs).Parse(digestTemplate.subject))
	t.digest.text = template.Must(parseText("digest.text", digestTemplate.text))
	for et, d := range defaults {
		t.subject[et] = template.Must(template.New(string(et) + ".subject").Funcs(funcs).Parse(d.subject))
		t.text[et] = template.Must(parseText(string(et)+".text", d.text))
	}
	var errs []error
	for i, o := range overrides {
		field := fmt.Sprintf("spec.notifications.templates[%d]", i)
		if _, ok := defaults[o.Event]; !ok {
			errs = append(errs, fmt.Errorf("%s.event: unknown event type %q", field, o.Event))
			continue
		}
		if o.Subject != "" {
			if tpl, err := template.New(string(o.Event) + ".subject").Funcs(funcs).Parse(o.Subject); err != nil {
				errs = append(errs, fmt.Errorf("%s.subject: %w", field, err))
			} else {
				t.subject[o.Event] = tpl
			}
		}
		if o.Text != "" {
			if tpl, err := parseText(string(o.Event)+".text", o.Text); err != nil {
				errs = append(errs, fmt.Errorf("%s.text: %w", field, err))
			} else {
				t.text[o.Event] = tpl
			}
		}
		if o.HTML != "" {
			if tpl, err := htmltemplate.New(string(o.Event) + ".html").Funcs(htmltemplate.FuncMap(funcs)).Parse(o.HTML); err != nil {
				errs = append(errs, fmt.Errorf("%s.html: %w", field, err))
			} else {
				t.html[o.Event] = tpl
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// A template that parses can still fail on execution (a field that
	// does not exist, links used without {{with .Actions}}): try every one
	// on a sample message, with links and without, now, not when a
	// reminder is due.
	for _, et := range v1alpha1.EventTypes {
		for _, m := range []Message{sample(et), sampleLinked(et)} {
			if _, err := t.Render(m); err != nil {
				errs = append(errs, err)
				break
			}
		}
	}
	return t, errors.Join(errs...)
}

// parseText parses a text template that may place the message's links
// with {{template "actions" .}}.
func parseText(name, text string) (*template.Template, error) {
	tpl, err := template.New(name).Funcs(funcs).Parse(actionsTemplate)
	if err != nil {
		return nil, err
	}
	return tpl.Parse(text)
}

// Render writes m's subject and bodies.
func (t *Templates) Render(m Message) (Content, error) {
	var c Content
	subject, ok := t.subject[m.Type]
	if !ok {
		return c, fmt.Errorf("no template for event type %q", m.Type)
	}
	text := t.text[m.Type]
	if m.Digest != nil {
		subject, text = t.digest.subject, t.digest.text
	}
	c.templates = t
	var b bytes.Buffer
	if err := subject.Execute(&b, m); err != nil {
		return c, fmt.Errorf("template %s: %w", subject.Name(), err)
	}
	c.Subject = strings.Join(strings.Fields(b.String()), " ")
	b.Reset()
	body, err := execute(text, m)
	if err != nil {
		return c, err
	}
	c.Text = body + "\n\n-- \n" + footer(m) + "\n"
	if h, ok := t.html[m.Type]; ok && m.Digest == nil {
		if err := h.Execute(&b, m); err != nil {
			return c, fmt.Errorf("template %s: %w", h.Name(), err)
		}
		c.HTML = b.String()
		return c, nil
	}
	// The shared layout: the text's paragraphs, with buttons in place of
	// the links' plain URLs.
	l := layout{Subject: c.Subject, Footer: footer(m)}
	var bs *buttons
	switch {
	case m.Digest != nil && linked(m):
		plain := m
		plain.Actions, plain.Digest = nil, &Digest{Stage: m.Digest.Stage, Owner: m.Digest.Owner}
		l.Items, l.Owner = layoutItems(m), m.Actions
		if body, err = execute(text, plain); err != nil {
			return c, err
		}
	case m.Digest == nil && m.Actions != nil:
		bs = &buttons{Links: m.Actions, Awake: m.Type == v1alpha1.EventSleeping}
		if body, err = execute(text, marked(m)); err != nil {
			return c, err
		}
	}
	for _, p := range strings.Split(body, "\n\n") {
		if bs != nil && strings.Contains(p, linkMarker) {
			l.Paragraphs, bs = append(l.Paragraphs, paragraph{Buttons: bs}), nil
			continue
		}
		if !strings.Contains(p, linkMarker) {
			l.Paragraphs = append(l.Paragraphs, paragraph{Text: p})
		}
	}
	if bs != nil {
		// A text that does not place the links: the buttons come last.
		l.Paragraphs = append(l.Paragraphs, paragraph{Buttons: bs})
	}
	if err := t.layout.Execute(&b, l); err != nil {
		return c, fmt.Errorf("template layout: %w", err)
	}
	c.HTML = b.String()
	return c, nil
}

// execute runs a text template on m, trimmed of the space around.
func execute(text *template.Template, m Message) (string, error) {
	var b bytes.Buffer
	if err := text.Execute(&b, m); err != nil {
		return "", fmt.Errorf("template %s: %w", text.Name(), err)
	}
	return strings.TrimSpace(b.String()), nil
}

// linkMarker stands for every URL of the links in marked's text, which
// the HTML part shows as buttons instead.
const linkMarker = "\x00link\x00"

// marked is m with its links' URLs replaced by linkMarker.
func marked(m Message) Message {
	l := *m.Actions
	for _, u := range []*string{&l.Page, &l.Extend, &l.Wake, &l.Delete} {
		if *u != "" {
			*u = linkMarker
		}
	}
	m.Actions = &l
	return m
}

// linked reports whether m carries links for its recipient: its own, or
// those of a digest's objects.
func linked(m Message) bool {
	if m.Actions != nil {
		return true
	}
	return m.Digest != nil && slices.ContainsFunc(m.Digest.Items, func(i DigestItem) bool { return i.Actions != nil })
}

// layoutItems are the objects of a digest with their buttons, for the
// HTML part.
func layoutItems(m Message) []layoutItem {
	out := make([]layoutItem, 0, len(m.Digest.Items))
	for _, i := range m.Digest.Items {
		name := i.Object.Kind + " " + Display(i.Object)
		if i.Object.Namespace != "" {
			name += " in namespace " + i.Object.Namespace
		}
		out = append(out, layoutItem{
			Name:    name,
			When:    "deleted on " + Human(i.ExpiresAt) + ", " + Relative(i.ExpiresAt, m.Time),
			Buttons: buttons{Links: i.Actions},
		})
	}
	return out
}

func footer(m Message) string {
	return fmt.Sprintf("Sent by timeout-controller for policy %s.", m.Policy)
}

// sample is a message of type t with every field set, to try templates on.
func sample(t v1alpha1.EventType) Message {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	return Message{
		ID: "sample", Type: t, Time: now,
		Object:    Object{APIVersion: "amphitheatre.app/v1", Kind: "Playbook", Name: "sample", UID: "sample", Title: "Sample"},
		ExpiresAt: now.Add(72 * time.Hour), Stage: "3d", Policy: "sample", Detail: "sample",
		Recipients: Recipients{Emails: []string{"a@example.com"}, SlackChannels: []string{"#a"}},
		Extend:     "sample",
	}
}

// sampleLinked is sample with every link set.
func sampleLinked(t v1alpha1.EventType) Message {
	m := sample(t)
	m.Actions = &Links{Page: "https://sample/a/t", Extend: "https://sample/a/t?do=extend", Wake: "https://sample/a/t?do=wake",
		Delete: "https://sample/a/t?do=delete", Step: "1 day", Token: "t"}
	return m
}
