// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package notify

import (
	"bytes"
	"errors"
	"fmt"
	htmltemplate "html/template"
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
		text: `Your {{.Object.Kind}} {{display .Object}} will be deleted {{relative .ExpiresAt .Time}}, on {{human .ExpiresAt}} ({{rfc3339 .ExpiresAt}}).

To keep it longer: {{.Extend}}`,
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
		text:    `Your {{.Object.Kind}} {{display .Object}} will be put to sleep {{relative .ExpiresAt .Time}}, on {{human .ExpiresAt}} ({{rfc3339 .ExpiresAt}}): what it runs stops until it is used again. Using it before then keeps it awake; using it later wakes it.`,
	},
	v1alpha1.EventSlept: {
		subject: `{{.Object.Kind}} {{display .Object}} is asleep`,
		text: `Your {{.Object.Kind}} {{display .Object}} has been put to sleep: what it runs is stopped. Using it wakes it, and restores what the sleep changed.

If it stays asleep, it will be deleted {{relative .ExpiresAt .Time}}, on {{human .ExpiresAt}} ({{rfc3339 .ExpiresAt}}).`,
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
  To keep it longer: {{.Extend}}
{{end}}`,
}

// DefaultDigestTemplate returns the subject and text templates of an
// owner's digest.
func DefaultDigestTemplate() (subject, text string) {
	return digestTemplate.subject, digestTemplate.text
}

const htmlLayout = `<!DOCTYPE html>
<html><body style="font-family: sans-serif">
<h2>{{.Subject}}</h2>
{{range .Paragraphs}}<p>{{.}}</p>
{{end}}<p style="color: #666">{{.Footer}}</p>
</body></html>`

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
		layout:  htmltemplate.Must(htmltemplate.New("layout").Parse(htmlLayout)),
	}
	t.digest.subject = template.Must(template.New("digest.subject").Funcs(funcs).Parse(digestTemplate.subject))
	t.digest.text = template.Must(template.New("digest.text").Funcs(funcs).Parse(digestTemplate.text))
	for et, d := range defaults {
		t.subject[et] = template.Must(template.New(string(et) + ".subject").Funcs(funcs).Parse(d.subject))
		t.text[et] = template.Must(template.New(string(et) + ".text").Funcs(funcs).Parse(d.text))
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
			if tpl, err := template.New(string(o.Event) + ".text").Funcs(funcs).Parse(o.Text); err != nil {
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
	// does not exist): try every one on a sample message now, not when a
	// reminder is due.
	for _, et := range v1alpha1.EventTypes {
		if _, err := t.Render(sample(et)); err != nil {
			errs = append(errs, err)
		}
	}
	return t, errors.Join(errs...)
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
	var b bytes.Buffer
	if err := subject.Execute(&b, m); err != nil {
		return c, fmt.Errorf("template %s: %w", subject.Name(), err)
	}
	c.Subject = strings.Join(strings.Fields(b.String()), " ")
	b.Reset()
	if err := text.Execute(&b, m); err != nil {
		return c, fmt.Errorf("template %s: %w", text.Name(), err)
	}
	body := strings.TrimSpace(b.String())
	c.Text = body + "\n\n-- \n" + footer(m) + "\n"
	b.Reset()
	if h, ok := t.html[m.Type]; ok && m.Digest == nil {
		if err := h.Execute(&b, m); err != nil {
			return c, fmt.Errorf("template %s: %w", h.Name(), err)
		}
	} else {
		err := t.layout.Execute(&b, map[string]any{"Subject": c.Subject, "Paragraphs": strings.Split(body, "\n\n"), "Footer": footer(m)})
		if err != nil {
			return c, fmt.Errorf("template layout: %w", err)
		}
	}
	c.HTML = b.String()
	return c, nil
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
