// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package actions

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/amphitheatre-app/timeout-controller/internal/decide"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/rules"
)

//go:embed templates
var templates embed.FS

var (
	pageTemplate = template.Must(template.ParseFS(templates, "templates/page.html"))
	// css is the pages' only style, inline; the Content-Security-Policy
	// allows it by its hash and nothing else.
	css = func() string {
		b, err := templates.ReadFile("templates/style.css")
		if err != nil {
			panic(err)
		}
		return string(b)
	}()
	contentSecurityPolicy = func() string {
		sum := sha256.Sum256([]byte(css))
		return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
			"'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
	}()
)

// page is what a page shows.
type page struct {
	Title string
	// Message is the answer to what was asked, in plain words; Tone is
	// good, bad or "" (neutral).
	Message string
	Tone    string
	Details []string
	// Owner is set on an owner's page.
	Owner   string
	Objects []objectView
	// Form is the form token every button posts.
	Form string
	CSS  template.CSS

	status int
}

// objectView is one object on a page.
type objectView struct {
	ID         string
	Heading    string
	Subheading string
	Facts      []fact
	Buttons    []button
}

type fact struct{ Label, Value string }

// button is one action a page offers, as a form that posts it.
type button struct {
	ID      string
	Action  Action
	Label   string
	Explain string
	// Object names the object on an owner's page, whose token covers many.
	Object   string
	Primary  bool
	Disabled bool
}

// setHeaders sets the headers every answer carries: nothing is cached
// (the URL holds a token), sent on as a referrer, framed or sniffed.
func setHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// render writes the page with its status.
func render(w http.ResponseWriter, p page) {
	p.CSS = template.CSS(css)
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, p); err != nil {
		http.Error(w, "the page could not be made", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	status := p.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// problem is a page that only says something went wrong, or cannot be.
func problem(status int, title, message string) page {
	return page{Title: title, Message: message, Tone: "bad", status: status}
}

// when writes a time for people: "2026-12-24 18:00 UTC (in 2d 4h)".
func when(t, now time.Time) string {
	return t.UTC().Format("2006-01-02 15:04 UTC") + " (" + relative(t, now) + ")"
}

// relative writes t as seen from now: "in 2d 4h", "3h ago", "now".
func relative(t, now time.Time) string {
	d := t.Sub(now)
	switch {
	case d >= time.Minute:
		return "in " + span(d)
	case d <= -time.Minute:
		return span(-d) + " ago"
	}
	return "now"
}

// span writes a duration in its two largest units, down to minutes.
func span(d time.Duration) string {
	d = d.Truncate(time.Minute)
	days, hours, minutes := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour), int(d%time.Hour/time.Minute)
	var parts []string
	if days > 0 {
		parts = append(parts, fmt.Sprintf("%dd", days))
	}
	if hours > 0 {
		parts = append(parts, fmt.Sprintf("%dh", hours))
	}
	if minutes > 0 && days == 0 {
		parts = append(parts, fmt.Sprintf("%dm", minutes))
	}
	if len(parts) == 0 {
		return "less than a minute"
	}
	return strings.Join(parts[:min(2, len(parts))], " ")
}

// heading names an object for people: its title, else its kind and name.
func heading(ev *rules.Evaluation) (string, string) {
	kind := strings.ToLower(ev.GVK.Kind)
	name := ev.Object.GetName()
	if ns := ev.Object.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	if t := decide.Title(ev.Object); t != "" {
		return t, kind + " " + name
	}
	return kind + " " + name, ""
}

// facts are what a page says about an object: its clocks, its policy, the
// reminders sent, who changed it, the uses of links.
func facts(ev *rules.Evaluation, now time.Time) []fact {
	var out []fact
	add := func(label, value string) { out = append(out, fact{label, value}) }
	add("Policy", ev.Governing.Name)
	switch {
	case ev.Terminating():
		add("Deleted", "it is being deleted now")
		return out
	case ev.Life.Keep:
		add("Expires", "never: it is kept (the keep annotation)")
	default:
		add("Expires", when(ev.Life.ExpiresAt, now))
		if d := ev.DeleteAt(); !d.IsZero() && !d.Equal(ev.Life.ExpiresAt) {
			why := ""
			if ev.Postponed() {
				why = ", after the minimum notice the reminders promised"
			}
			add("Deleted", when(d, now)+why)
		}
		if !ev.Life.Max.IsZero() {
			add("At the latest", when(ev.Life.Max, now)+": the policy's maximum lifetime")
		}
	}
	switch ev.SleepState() {
	case rules.SleepAsleep:
		s := "asleep: its workloads are scaled down"
		if !ev.Life.Sleep.Since.IsZero() {
			s = "asleep since " + when(ev.Life.Sleep.Since, now)
		}
		add("Sleep", s)
	case rules.SleepWaking:
		add("Sleep", "waking up (woken by "+ev.WokenBy()+")")
	case rules.SleepAwake:
		if at := ev.SleepsAt(); !at.IsZero() {
			add("Sleep", "awake; goes to sleep "+when(at, now)+" unless it is used")
		} else {
			add("Sleep", "awake")
		}
	}
	if ev.Governing.Spec.Deletion.DryRun {
		add("Dry run", "the policy only rehearses deletions: it will not be deleted")
	}
	if stages := ev.SentStages(); len(stages) > 0 {
		add("Reminders sent", strings.Join(stages, ", ")+" before the expiry")
	}
	if e := ev.Life.Extensions; e != nil {
		if s := e.Extended(now); s != "" {
			add("Extended", s)
		}
	} else if c, ok := expiry.ParseChangedBy(ev.Object.GetAnnotations()); ok {
		add("Last changed by", c.By)
	}
	if o := ev.Object.GetAnnotations()[notify.AnnotationOwner]; o != "" {
		add("Owner", o)
	}
	return out
}
