// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// apply makes step s happen. A step about something that is not there
// (an annotation on a deleted object) does nothing.
func (w *world) apply(s Step) {
	switch s.Kind {
	case kCreate:
		w.create(s)
	case kTTL, kInvalidTTL:
		w.annotate(s.Obj, true, expiry.AnnotationTTL, s.Val)
	case kTypo:
		k, v, _ := strings.Cut(s.Val, "=")
		w.annotate(s.Obj, false, k, w.relative(v))
	case kExtend, kShorten:
		cm, ok := w.get(objName(s.Obj))
		if !ok {
			return
		}
		base := w.facts(cm, w.policies()).ExpiresAt
		if base.IsZero() {
			base = w.now().Add(30 * time.Minute)
		}
		at := base.Add(ms(s.DurMS))
		if s.Kind == kShorten {
			at = base.Add(-ms(s.DurMS))
		}
		w.annotate(s.Obj, true, expiry.AnnotationExpiresAt, at.Truncate(time.Second).UTC().Format(time.RFC3339))
	case kKeep:
		w.annotate(s.Obj, true, expiry.AnnotationKeep, "true")
	case kUnkeep:
		w.annotate(s.Obj, true, expiry.AnnotationKeep, "")
	case kNotify:
		w.annotate(s.Obj, false, notify.AnnotationNotify, s.Val)
	case kPolicyCreate, kPolicyEdit:
		w.writePolicy(s.Pol, s.Kind == kPolicyCreate, func(p *v1alpha1.TimeoutPolicy) { applySpec(p, s.Val) })
	case kPolicyInvalidTTL:
		w.writePolicy(s.Pol, false, func(p *v1alpha1.TimeoutPolicy) { p.Spec.DefaultTTL = "1hour" })
	case kPolicyInvalidSelector:
		w.writePolicy(s.Pol, false, func(p *v1alpha1.TimeoutPolicy) {
			p.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus", Values: []string{"a"}}}}
		})
	case kPolicyDelete:
		if p, ok := w.policy(s.Pol); ok {
			if err := w.store.Delete(w.ctx, p); err == nil {
				w.policyChanged = w.now()
				w.enqueueAll()
			}
		}
	case kPrioritySwap:
		a, okA := w.policy(s.Pol)
		b, okB := w.policy(s.Obj)
		if okA && okB && s.Pol != s.Obj {
			pa, pb := a.Spec.Priority, b.Spec.Priority
			w.writePolicy(s.Pol, false, func(p *v1alpha1.TimeoutPolicy) { p.Spec.Priority = pb })
			w.writePolicy(s.Obj, false, func(p *v1alpha1.TimeoutPolicy) { p.Spec.Priority = pa })
		}
	case kSelectorChange:
		w.writePolicy(s.Pol, false, func(p *v1alpha1.TimeoutPolicy) { p.Spec.Selector = selector(s.Val) })
	case kDryRunToggle:
		w.writePolicy(s.Pol, false, func(p *v1alpha1.TimeoutPolicy) { p.Spec.Deletion.DryRun = !p.Spec.Deletion.DryRun })
	case kCap:
		n, _ := strconv.Atoi(s.Val)
		w.writePolicy(s.Pol, false, func(p *v1alpha1.TimeoutPolicy) { p.Spec.Deletion.MaxPerMinute = int32(n) })
	case kOutage, kSlow, kReset:
		w.mu.Lock()
		ch := &w.channels[s.Ch]
		switch s.Kind {
		case kOutage:
			ch.downUntil = w.now().Add(ms(s.DurMS))
		case kSlow:
			ch.slowUntil, ch.slowBy = w.now().Add(20*time.Minute), ms(s.DurMS)
		case kReset:
			ch.resets++
		}
		w.hist.Healthy = false
		w.mu.Unlock()
	case kCacheLag:
		w.lagUntil = w.now().Add(ms(s.DurMS))
		// A change made during the lag reaches the controller when it
		// ends: nothing can be on time before then.
		if w.lagUntil.After(w.hist.Excused) {
			w.hist.Excused = w.lagUntil
		}
	case kConflict:
		w.conflicts[objName(s.Obj)] += int(s.DurMS)
	case kRestart:
		w.ctrl = start(w)
		clear(w.fails)
		w.enqueueAll()
	case kLeader:
		// The old leader finishes the reconcile it had under way after
		// the new one has started.
		old := w.ctrl
		w.ctrl = start(w)
		clear(w.fails)
		w.enqueueAll()
		w.handle(objName(s.Obj), old)
	case kClockJump:
		// The process is frozen (a paused VM) while time passes.
		w.clock.Step(ms(s.DurMS))
		w.hist.Excused = w.now()
	case kUse:
		w.use(s.Obj)
	case kLastActive:
		w.annotate(s.Obj, false, expiry.AnnotationLastActive, w.activeAt(s.Val))
	case kScaleUp, kReapply:
		w.scaleUp(s)
	case kScaleUpRace:
		w.startRace(s)
	case kCrash:
		// The process dies at its DurMS-th write of a sleep or wake from
		// now; the next takes over Val later (a lease, a crash loop).
		w.crashIn = int(s.DurMS)
		w.failover, _ = time.ParseDuration(s.Val)
	case kWait:
	default:
		panic("unknown step kind " + s.Kind)
	}
}

// relative turns "+5m" into a time that far from now.
func (w *world) relative(v string) string {
	if d, ok := strings.CutPrefix(v, "+"); ok {
		dur, err := time.ParseDuration(d)
		if err != nil {
			panic(err)
		}
		return w.now().Add(dur).Truncate(time.Second).UTC().Format(time.RFC3339)
	}
	return v
}

func (w *world) create(s Step) {
	name := objName(s.Obj)
	if _, ok := w.get(name); ok {
		return
	}
	w.created[s.Obj]++
	parts := strings.Split(s.Val, ";")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace:         namespace,
		Name:              name,
		UID:               types.UID(fmt.Sprintf("%s-%d", name, w.created[s.Obj])),
		Labels:            map[string]string{"app": parts[0]},
		CreationTimestamp: metav1.NewTime(w.now().Truncate(time.Second)),
		// As the API server creates a custom resource.
		Generation: 1,
	}}
	for _, kv := range parts[1:] {
		k, v, _ := strings.Cut(kv, "=")
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[expiry.Prefix+k] = w.relative(v)
	}
	w.beforeWrite(name)
	if err := w.store.Create(w.ctx, cm); err != nil {
		panic(err)
	}
	w.createWorkload(cm)
	w.watched(name)
}

// use edits the object's spec, as a user of the object does: the API
// server raises its generation, which counts as use under an idle policy.
func (w *world) use(obj int) {
	name := objName(obj)
	cm, ok := w.get(name)
	if !ok {
		return
	}
	cm.Generation++
	cm.Data = map[string]string{"spec": strconv.FormatInt(cm.Generation, 10)}
	w.beforeWrite(name)
	if err := w.store.Update(w.ctx, cm); err != nil {
		panic(err)
	}
	w.usedAt[cm.UID] = w.now()
	w.otherUse[cm.UID] = w.now()
	w.watched(name)
}

// activeAt is the last-active value v stands for: "now" is the current
// time truncated to the second, as clients are told to write it; "+d"
// and "-d" are that far from now; anything else is written as it is.
func (w *world) activeAt(v string) string {
	switch {
	case v == "now":
		return w.now().Truncate(time.Second).UTC().Format(time.RFC3339)
	case strings.HasPrefix(v, "-"):
		d, err := time.ParseDuration(v)
		if err != nil {
			panic(err)
		}
		return w.now().Add(d).Truncate(time.Second).UTC().Format(time.RFC3339)
	}
	return w.relative(v)
}

// annotate writes (or, with an empty value, removes) an annotation by
// hand; sets says it sets the expiry, which supersedes what was announced.
func (w *world) annotate(obj int, sets bool, key, value string) {
	name := objName(obj)
	cm, ok := w.get(name)
	if !ok {
		return
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	if key == expiry.AnnotationLastActive && cm.Annotations[key] != value {
		w.activeWritten[cm.UID] = w.now()
	}
	if value == "" {
		delete(cm.Annotations, key)
	} else {
		cm.Annotations[key] = value
	}
	w.beforeWrite(name)
	if err := w.store.Update(w.ctx, cm); err != nil {
		panic(err)
	}
	if sets {
		w.since[cm.UID] = w.now()
	}
	w.otherUse[cm.UID] = w.now()
	w.watched(name)
}

func (w *world) policy(i int) (*v1alpha1.TimeoutPolicy, bool) {
	p := &v1alpha1.TimeoutPolicy{}
	if err := w.store.Get(w.ctx, types.NamespacedName{Name: polName(i)}, p); err != nil {
		return nil, false
	}
	return p, true
}

// writePolicy changes policy i with edit; create makes it when it is not
// there. Every object is looked at again, as the policy watch does.
func (w *world) writePolicy(i int, create bool, edit func(*v1alpha1.TimeoutPolicy)) {
	p, ok := w.policy(i)
	switch {
	case ok:
		edit(p)
		p.Generation++
		if err := w.store.Update(w.ctx, p); err != nil {
			panic(err)
		}
	case create:
		w.polGen[i]++
		p = &v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{
			Name: polName(i), UID: types.UID(fmt.Sprintf("%s-%d", polName(i), w.polGen[i])), Generation: 1,
		}}
		edit(p)
		if err := w.store.Create(w.ctx, p); err != nil {
			panic(err)
		}
	default:
		return
	}
	w.policyChanged = w.now()
	w.enqueueAll()
}

// applySpec sets p's spec from the compact form randomSpec writes:
// "ttl=1h,rem=20m;5m,notice=10m,sel=a,prio=3,dry=0,cap=0", optionally
// followed by ",idle=30m,max=2h,keep=Forbidden,arch=1,sleep=idle:15m:30m".
func applySpec(p *v1alpha1.TimeoutPolicy, compact string) {
	spec := v1alpha1.TimeoutPolicySpec{
		Target:        v1alpha1.Target{APIVersion: "v1", Kind: "ConfigMap"},
		Notifications: v1alpha1.Notifications{Channels: simReferences()},
		Reminders:     []v1alpha1.Duration{},
	}
	for _, kv := range strings.Split(compact, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "ttl":
			spec.DefaultTTL = v1alpha1.Duration(v)
		case "rem":
			for _, r := range strings.Split(v, ";") {
				if r != "" {
					spec.Reminders = append(spec.Reminders, v1alpha1.Duration(r))
				}
			}
		case "notice":
			spec.MinimumNotice = v1alpha1.Duration(v)
		case "sel":
			spec.Selector = selector(v)
		case "prio":
			n, _ := strconv.Atoi(v)
			spec.Priority = int32(n)
		case "dry":
			spec.Deletion.DryRun = v == "1"
		case "cap":
			n, _ := strconv.Atoi(v)
			spec.Deletion.MaxPerMinute = int32(n)
		case "idle":
			spec.IdleTTL = v1alpha1.Duration(v)
		case "max":
			spec.MaxTTL = v1alpha1.Duration(v)
		case "keep":
			spec.Keep = v1alpha1.KeepPolicy(v)
		case "arch":
			spec.Deletion.Archive = v == "1"
		case "sleep":
			// idle:15m:30m is afterIdle 15m, deleteAfter 30m; after:… is
			// after; a fourth part is the reminder.
			parts := strings.Split(v, ":")
			sl := &v1alpha1.Sleep{DeleteAfter: v1alpha1.Duration(parts[2])}
			if len(parts) > 3 {
				sl.Reminder = v1alpha1.Duration(parts[3])
			}
			if parts[0] == "idle" {
				sl.AfterIdle = v1alpha1.Duration(parts[1])
			} else {
				sl.After = v1alpha1.Duration(parts[1])
			}
			spec.Sleep = sl
		}
	}
	p.Spec = spec
}

func selector(app string) *metav1.LabelSelector {
	if app == "" {
		return nil
	}
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
}
