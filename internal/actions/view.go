// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package actions

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/rules"
)

// objectView is what a page shows of an object: its facts and a button
// per action the token allows, each saying what it would do now (or why
// it would not), judged by the same rules as a click.
func (s *Server) objectView(v visit, ev *rules.Evaluation, links linkRules, object string, now time.Time) objectView {
	title, sub := heading(ev)
	ov := objectView{ID: "obj", Heading: title, Subheading: sub, Facts: facts(ev, now)}
	if object != "" {
		ov.ID = idOf(object)
	}
	if ev.Terminating() {
		return ov
	}
	uses := parseUses(ev.Object.GetAnnotations()[expiry.AnnotationLinkUses])
	if u, ok := lastUse(uses, v.claims.ID); ok {
		ov.Facts = append(ov.Facts, fact{"This link", "used to " + verb(u.Action) + ", " + when(u.At, now)})
	}
	order := []Action{Extend, Wake, Delete}
	if v.do == Wake || v.do == Delete {
		order = []Action{v.do, Extend}
		for _, a := range []Action{Wake, Delete} {
			if a != v.do {
				order = append(order, a)
			}
		}
	}
	for _, a := range order {
		if !v.claims.Allows(a) {
			continue
		}
		b, show := s.button(v, ev, links, a, uses, now)
		if !show {
			continue
		}
		b.ID, b.Object = ov.ID+"-"+string(a), object
		b.Primary = !b.Disabled && (a == v.do || (v.do == "" && a == Extend))
		ov.Buttons = append(ov.Buttons, b)
	}
	return ov
}

// button is the button of one action, and whether to show it at all.
func (s *Server) button(v visit, ev *rules.Evaluation, links linkRules, a Action, uses []use, now time.Time) (button, bool) {
	b := button{Action: a}
	switch a {
	case Extend:
		b.Label = "Keep it longer"
	case Wake:
		b.Label = "Wake it"
		if ev.SleepState() == rules.SleepAwake {
			b.Label = "Keep it awake"
		}
		if ev.SleepState() == "" {
			// Under a policy that does not sleep, a wake makes no sense.
			return b, false
		}
	case Delete:
		b.Label = "I am done: delete it now"
		if !links.deleteNow {
			return b, false
		}
	}
	if u, ok := findUse(uses, v.claims.ID, a); ok {
		b.Disabled, b.Explain = true, "This link was used for this "+when(u.At, now)+"; each link acts once."
		return b, true
	}
	p, err := decideClick(ev, a, links)
	var r *rules.Refusal
	if err == nil && a == Extend && !p.None {
		stamp, _ := s.stamp(v, p)
		err = rules.CheckLimits(ev, p, map[string]string{expiry.AnnotationChangedBy: stamp})
	}
	switch {
	case errors.As(err, &r):
		b.Disabled, b.Explain = true, refused(ev, r, now)
		return b, true
	case err != nil:
		return b, false
	case p.None:
		b.Disabled, b.Explain = true, nothingToDo(ev, a, p, now)
		return b, a != Wake || ev.SleepState() != rules.SleepAwake
	}
	switch a {
	case Extend:
		b.Label = "Keep it longer, until " + p.At.UTC().Format("2006-01-02 15:04 UTC")
		b.Explain = fmt.Sprintf("Moves its expiry from %s to %s (%s later).", ev.Life.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"),
			p.At.UTC().Format("2006-01-02 15:04 UTC"), span(p.At.Sub(ev.Life.ExpiresAt)))
	case Wake:
		if ev.SleepState() == rules.SleepAwake {
			b.Explain = "Counts as use now, which puts off its sleep."
		} else {
			b.Explain = "Brings its workloads back, as any use does; it then sleeps again only after the policy's idle time."
		}
	case Delete:
		b.Explain = "It expires now, and the timeout-controller deletes it as at any expiry (archive, audit, the deleted message); after the minimum notice, if a reminder promised one."
		if ev.Record != nil && !ev.Record.Noticed.IsZero() && ev.Governing.Schedule.MinimumNotice > 0 {
			if at := ev.Record.Noticed.Add(ev.Governing.Schedule.MinimumNotice); at.After(now) {
				b.Explain = "It expires now, and is deleted " + when(at, now) + ", after the minimum notice the reminders promised, as at any expiry (archive, audit, the deleted message)."
			}
		}
	}
	return b, true
}

// lastUse is the newest use of token id.
func lastUse(uses []use, id string) (use, bool) {
	for i := len(uses) - 1; i >= 0; i-- {
		if uses[i].ID == id {
			return uses[i], true
		}
	}
	return use{}, false
}

// objectKey names an object in an owner page's forms:
// group/version/kind/namespace/name/uid.
func objectKey(ev *rules.Evaluation) string {
	o := ev.Object
	return strings.Join([]string{ev.GVK.Group, ev.GVK.Version, ev.GVK.Kind, o.GetNamespace(), o.GetName(), string(o.GetUID())}, "/")
}

// parseObjectKey reads objectKey.
func parseObjectKey(k string) (Ref, bool) {
	p := strings.Split(k, "/")
	if len(p) != 6 || p[1] == "" || p[2] == "" || p[4] == "" || p[5] == "" || len(k) > 700 {
		return Ref{}, false
	}
	return Ref{Group: p[0], Version: p[1], Kind: p[2], Namespace: p[3], Name: p[4], UID: types.UID(p[5])}, true
}

// idOf is a short HTML id for an object key.
func idOf(key string) string {
	if i := strings.LastIndex(key, "/"); i >= 0 {
		key = key[i+1:]
	}
	return "x" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return -1
	}, strings.ToLower(key))
}
