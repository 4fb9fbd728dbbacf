// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package actions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/rules"
)

// FieldManager names the actions server in managedFields.
const FieldManager = "timeout-controller-actions"

// conflictAttempts bounds how often a click is judged again after the
// object changed under it.
const conflictAttempts = 5

// visit is one request with a verified token.
type visit struct {
	claims Claims
	// form is the form token the page's buttons post.
	form string
	// do is the action the link asked to show first (?do=extend).
	do Action
	// by and via are what the changed-by stamp says: the recipient or the
	// signed-in user, and "link" or "slack".
	by, via string
}

// outcome is what a click came to.
type outcome struct {
	result  string
	status  int
	message string
	tone    string
	details []string
	// ev is the object as it is after the click; nil when it is gone.
	ev    *rules.Evaluation
	links linkRules
}

// objectPage is an object's page: GET never changes anything.
func (s *Server) objectPage(ctx context.Context, v visit, now time.Time) page {
	l, o := s.load(ctx, *v.claims.Object, "", now)
	if o != nil {
		count(View, o.result)
		return s.outcomePage(v, o, now)
	}
	count(View, resultShown)
	title, _ := heading(l.ev)
	return page{Title: title, Form: v.form, Objects: []objectView{s.objectView(v, l.ev, l.links, "", now)}}
}

// objectClick carries out a click on an object's page.
func (s *Server) objectClick(ctx context.Context, v visit, a Action, now time.Time) page {
	if !v.claims.Allows(a) {
		count(a, resultInvalid)
		return problem(http.StatusForbidden, "Not allowed", "This link does not allow that. Nothing was done.")
	}
	o := s.act(ctx, v, *v.claims.Object, "", a, now)
	count(a, o.result)
	return s.outcomePage(v, o, now)
}

// outcomePage shows what a click (or a failed read) came to, with the
// object as it is now when there is one.
func (s *Server) outcomePage(v visit, o *outcome, now time.Time) page {
	p := page{Message: o.message, Details: o.details, Tone: o.tone, status: o.status, Form: v.form}
	if o.ev == nil {
		if p.Title = "Nothing to do"; o.result == resultError {
			p.Title = "Try again"
		}
		return p
	}
	p.Title, _ = heading(o.ev)
	if v.claims.Owner != "" {
		p.Owner = v.claims.Owner
	}
	object := ""
	if v.claims.Owner != "" {
		object = objectKey(o.ev)
	}
	p.Objects = []objectView{s.objectView(v, o.ev, o.links, object, now)}
	return p
}

// load reads the object a token names from the API server and evaluates
// it. When it cannot be shown (gone, another one, not governed, or the API
// server failed) the outcome says so. owner, when set, must be the
// object's owner.
func (s *Server) load(ctx context.Context, ref Ref, owner string, now time.Time) (*loaded, *outcome) {
	obj := &unstructured.Unstructured{}
	gvk := schema.GroupVersionKind{Group: ref.Group, Version: ref.Version, Kind: ref.Kind}
	obj.SetGroupVersionKind(gvk)
	err := s.o.API.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, obj)
	name := strings.ToLower(ref.Kind) + " " + refName(ref)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil, &outcome{result: resultGone, status: http.StatusGone, tone: "bad",
			message: "It no longer exists: " + name + " was deleted.", details: []string{"There is nothing left to do."}}
	case err != nil:
		return nil, s.failed(ctx, "read", ref, err)
	case obj.GetUID() != ref.UID:
		return nil, &outcome{result: resultGone, status: http.StatusGone, tone: "bad",
			message: "This link is for an object that no longer exists: " + name + " was deleted, and the one there now is another, made since.",
			details: []string{"Nothing was done. The messages about the new one carry its own links."}}
	case owner != "" && obj.GetAnnotations()[notify.AnnotationOwner] != owner:
		return nil, &outcome{result: resultInvalid, status: http.StatusForbidden, tone: "bad",
			message: name + " does not belong to " + owner + ": this page cannot change it."}
	}
	pl, err := s.policies.list(ctx)
	if err != nil {
		return nil, s.failed(ctx, "list policies", ref, err)
	}
	ev, err := rules.Evaluate(obj, gvk, obj.GetNamespace() != "", pl.items, namespaceLabels(ctx, s.o.Cache, obj.GetNamespace()), now)
	if err != nil {
		return nil, s.failed(ctx, "evaluate", ref, err)
	}
	switch {
	case ev.Governing == nil:
		return nil, &outcome{result: resultGone, status: http.StatusOK,
			message: "No TimeoutPolicy governs " + name + " any more: nothing will delete it, so there is nothing to do here.",
			details: []string{"If you expected one to, ask the people who run the timeout-controller."}}
	case ev.Governing.SpecErr != nil:
		return nil, &outcome{result: resultRefused, status: http.StatusConflict, tone: "bad",
			message: "Policy " + ev.Governing.Name + " cannot be used as it is written, so it deletes nothing now and links cannot change anything.",
			details: []string{"Ask the people who run the timeout-controller to fix it."}}
	}
	return &loaded{obj: obj, ev: ev, links: linkRulesFor(ev.Governing.Schedule), policies: pl}, nil
}

// loaded is an object read and evaluated.
type loaded struct {
	obj      *unstructured.Unstructured
	ev       *rules.Evaluation
	links    linkRules
	policies policyList
}

// evaluate judges obj again, as it is after a write.
func (s *Server) evaluate(ctx context.Context, l *loaded, obj *unstructured.Unstructured, now time.Time) *rules.Evaluation {
	ev, err := rules.Evaluate(obj, l.ev.GVK, obj.GetNamespace() != "", l.policies.items, namespaceLabels(ctx, s.o.Cache, obj.GetNamespace()), now)
	if err != nil || ev.Governing == nil || ev.Governing.SpecErr != nil {
		return l.ev
	}
	return ev
}

// failed is the outcome of an API call that failed or took too long:
// "try again", never an error page that hangs.
func (s *Server) failed(ctx context.Context, what string, ref Ref, err error) *outcome {
	s.o.Log.Info("API call failed", "call", what, "kind", ref.Kind, "namespace", ref.Namespace, "name", ref.Name, "error", err.Error())
	msg := "The Kubernetes API server did not answer in time, so nothing was done. Try again in a moment."
	if ctx.Err() == nil && !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err) && !apierrors.IsTooManyRequests(err) {
		msg = "The Kubernetes API server could not be reached or refused the request, so nothing was done. Try again in a moment."
	}
	return &outcome{result: resultError, status: http.StatusServiceUnavailable, tone: "bad", message: msg}
}

// act judges a click and, when the rules allow it, writes it: the change,
// the changed-by stamp and the use of the link in one patch locked on the
// object's UID and resourceVersion. When the object changed meanwhile it
// is read and judged again, so that two clicks at once (on two replicas)
// give one change.
func (s *Server) act(ctx context.Context, v visit, ref Ref, owner string, a Action, now time.Time) *outcome {
	for attempt := 1; ; attempt++ {
		l, o := s.load(ctx, ref, owner, now)
		if o != nil {
			return o
		}
		obj, ev, links := l.obj, l.ev, l.links
		uses := parseUses(obj.GetAnnotations()[expiry.AnnotationLinkUses])
		if u, ok := findUse(uses, v.claims.ID, a); ok {
			return &outcome{result: resultAlready, status: http.StatusOK, ev: ev, links: links,
				message: fmt.Sprintf("This link was already used to %s, %s. Each link acts once: nothing more was done.", verb(a), when(u.At, now))}
		}
		p, err := decideClick(ev, a, links)
		var refusal *rules.Refusal
		if errors.As(err, &refusal) {
			return &outcome{result: resultRefused, status: http.StatusConflict, tone: "bad", ev: ev, links: links,
				message: refused(ev, refusal, now), details: whomToAsk(ev)}
		}
		if err != nil {
			return s.failed(ctx, "decide", ref, err)
		}
		if p.None {
			return &outcome{result: resultNone, status: http.StatusOK, ev: ev, links: links, message: nothingToDo(ev, a, p, now)}
		}
		stamp, changed := s.stamp(v, p)
		extra := map[string]string{expiry.AnnotationChangedBy: stamp}
		if a == Extend {
			if err := rules.CheckLimits(ev, p, extra); errors.As(err, &refusal) {
				return &outcome{result: resultRefused, status: http.StatusConflict, tone: "bad", ev: ev, links: links,
					message: refused(ev, refusal, now), details: whomToAsk(ev)}
			}
		}
		annotations := map[string]*string{}
		for k, val := range p.Set {
			annotations[k] = val
		}
		annotations[expiry.AnnotationChangedBy] = &stamp
		if at, ok := p.Set[expiry.AnnotationLastActive]; ok && at != nil {
			// A wake or a touch is use by the link's holder: last-use says
			// whose and how, as the admission policy stamps it for writes
			// through the API, so that the Woke Event and the audit name them.
			if t, err := time.Parse(time.RFC3339, *at); err == nil {
				lastUse := expiry.Use{At: t, Via: v.via, By: v.by}.Annotation()
				annotations[expiry.AnnotationLastUse] = &lastUse
			}
		}
		usesValue := withUse(uses, use{ID: v.claims.ID, Action: a, At: now})
		annotations[expiry.AnnotationLinkUses] = &usesValue
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"uid":             ref.UID,
			"resourceVersion": obj.GetResourceVersion(),
			"annotations":     annotations,
		}})
		if err != nil {
			return s.failed(ctx, "patch", ref, err)
		}
		err = s.o.API.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body), client.FieldOwner(FieldManager))
		switch {
		case apierrors.IsConflict(err) && attempt < conflictAttempts:
			continue
		case apierrors.IsNotFound(err):
			return &outcome{result: resultGone, status: http.StatusGone, tone: "bad",
				message: "It was deleted before the change could be written: nothing was done."}
		case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
			// An admission policy refused it: its message is for people.
			s.o.Log.Info("change refused at admission", "id", v.claims.ID, "action", a, "kind", ref.Kind, "namespace", ref.Namespace, "name", ref.Name, "error", err.Error())
			return &outcome{result: resultRefused, status: http.StatusConflict, tone: "bad", ev: ev, links: links,
				message: "The cluster refused the change: " + statusMessage(err), details: whomToAsk(ev)}
		case err != nil:
			return s.failed(ctx, "patch", ref, err)
		}
		s.o.Log.Info("link used", "id", v.claims.ID, "action", a, "via", v.via, "kind", ref.Kind, "namespace", ref.Namespace, "name", ref.Name, "changed", changed)
		after := s.evaluate(ctx, l, obj, now)
		return &outcome{result: resultDone, status: http.StatusOK, tone: "good", ev: after, links: links, message: done(after, a, p, now)}
	}
}

// decideClick is the rule of an action.
func decideClick(ev *rules.Evaluation, a Action, links linkRules) (*rules.Patch, error) {
	switch a {
	case Extend:
		return rules.ExtendBy(ev, links.step)
	case Wake:
		if ev.SleepState() == rules.SleepAwake && ev.Governing.Schedule.SleepAfterIdle > 0 {
			// About to sleep: use now puts the sleep off.
			return rules.Touch(ev)
		}
		return rules.Wake(ev)
	case Delete:
		return rules.DeleteNow(ev, links.deleteNow)
	}
	return nil, fmt.Errorf("unknown action %q", a)
}

// stamp is the changed-by annotation of a change through a link: who (the
// recipient or the signed-in user) and via what, with no groups (a link
// never carries an exempt group's rights).
func (s *Server) stamp(v visit, p *rules.Patch) (string, []string) {
	var changed []string
	for _, k := range expiry.LifetimeKeys {
		if _, ok := p.Set[expiry.Prefix+k]; ok {
			changed = append(changed, k)
		}
	}
	b, _ := json.Marshal(struct {
		By      string   `json:"by"`
		Via     string   `json:"via"`
		Changed []string `json:"changed"`
	}{v.by, v.via, changed})
	return string(b), changed
}

func verb(a Action) string {
	switch a {
	case Extend:
		return "keep it longer"
	case Wake:
		return "wake it"
	case Delete:
		return "delete it"
	}
	return string(a)
}

// done says what a click did.
func done(ev *rules.Evaluation, a Action, p *rules.Patch, now time.Time) string {
	switch a {
	case Extend:
		return "Done: it now expires " + when(p.At, now) + "."
	case Wake:
		if at := ev.SleepsAt(); ev.SleepState() == rules.SleepAwake && !at.IsZero() {
			return "Done: counted as use now; it goes to sleep " + when(at, now) + " unless it is used."
		}
		return "Done: it is waking up. The timeout-controller brings its workloads back within a minute."
	case Delete:
		d := ev.DeleteAt()
		switch {
		case ev.Governing.Spec.Deletion.DryRun:
			return "Done: it has expired, but its policy only rehearses deletions."
		case d.IsZero() || !d.After(now.Add(time.Minute)):
			return "Done: it has expired, and the timeout-controller deletes it now."
		default:
			return "Done: it has expired, and will be deleted " + when(d, now) + ", after the minimum notice the reminders promised."
		}
	}
	return "Done."
}

// nothingToDo says why a click wrote nothing.
func nothingToDo(ev *rules.Evaluation, a Action, p *rules.Patch, now time.Time) string {
	switch {
	case a == Wake && ev.SleepState() == rules.SleepWaking:
		return "It is already waking up: nothing more to do."
	case a == Wake && ev.SleepState() == rules.SleepAwake && ev.Governing.Schedule.SleepAfterIdle > 0:
		return "It was used a moment ago: its sleep is put off already."
	case a == Wake:
		return "It is not asleep: there is nothing to wake."
	case a == Delete:
		return "It has expired already: the timeout-controller deletes it as soon as the notice owed allows."
	}
	return "It already expires " + when(p.At, now) + ": nothing to change."
}

// refused says in plain words why a rule refused a click.
func refused(ev *rules.Evaluation, r *rules.Refusal, now time.Time) string {
	policy := ev.Governing.Name
	switch r.Reason {
	case rules.AtMaximum, rules.PastMaximum:
		return fmt.Sprintf("It cannot be kept longer: policy %s ends every life %s after creation, which for this one is %s. Nothing was changed.",
			policy, expiry.FormatDuration(ev.Governing.Schedule.MaxTTL), when(r.Limit, now))
	case rules.PastLimits:
		return "It cannot be kept longer: policy " + policy + "'s extension limits refuse it (" + r.Limits.Expected + "). Nothing was changed."
	case rules.Kept:
		return "It is kept (the keep annotation): it never expires, so there is nothing to extend or delete. Nothing was changed."
	case rules.DryRun:
		return "Policy " + policy + " only rehearses deletions (a dry run): deleting it now would delete nothing. Nothing was changed."
	case rules.DeleteForbidden:
		return "Policy " + policy + " does not let links delete objects. Nothing was changed; it is deleted when it expires, " + when(ev.Life.ExpiresAt, now) + "."
	case rules.NeverSleeps:
		return "Policy " + policy + " never puts it to sleep, so there is nothing to wake."
	case rules.WouldShorten:
		return "That would shorten its life, which a link does not do. Nothing was changed."
	}
	return "The policy does not allow that. Nothing was changed."
}

// whomToAsk names who may go past the rules: the policy's exempt groups.
func whomToAsk(ev *rules.Evaluation) []string {
	if l := ev.Governing.Schedule.Limits; l != nil && len(l.Exempt) > 0 {
		return []string{"Members of " + strings.Join(l.Exempt, " or ") + " may go past the limits: ask one of them."}
	}
	return []string{"The people who run the timeout-controller decide its policies: ask them if you need more."}
}

func statusMessage(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return st.Status().Message
	}
	return "the request was not allowed"
}

func refName(r Ref) string {
	if r.Namespace != "" {
		return r.Namespace + "/" + r.Name
	}
	return r.Name
}
