// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/audit"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

const namespace = "team-a"

var (
	configMapGVK = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	configMaps   = schema.GroupResource{Resource: "configmaps"}
	// t0 is where simulated time starts. It lies before the real time on
	// purpose: the controller bounds sends with context deadlines taken
	// from the simulated clock, and a deadline before simEnd is one of
	// those, while one after it is a real-time timeout.
	t0     = time.Date(2025, time.January, 6, 9, 0, 0, 0, time.UTC)
	simEnd = t0.AddDate(0, 6, 0)
)

// maxReconciles bounds the reconciles of one step: more is a hot loop.
const maxReconciles = 5000

// settleFor is the delivery bound: how long after every channel recovers
// each message must have reached it.
const settleFor = 20 * time.Minute

// world is the simulated cluster around one controller: the API server
// (the fake client), the cache in front of it, the channels, the work
// queue and the clock.
type world struct {
	ctx      context.Context
	clock    *clocktesting.FakeClock
	store    client.WithWatch
	live     client.WithWatch
	cached   client.WithWatch
	recorder *recorder
	trail    *auditSink
	disabled map[string]string

	ctrl *instance

	queue map[string]time.Time
	fails map[string]int

	// mu guards what the channels' senders touch: they run in goroutines.
	mu       sync.Mutex
	channels [numChannels]channelState
	hist     History

	created [numObjects]int
	polGen  [numPolicies]int
	// since is when each object's expiry was last set by hand.
	since map[types.UID]time.Time
	// usedAt is when each object's spec was last edited: use, under a
	// policy with idleTTL.
	usedAt map[types.UID]time.Time
	// activeWritten is when each object's last-active annotation took
	// the value it holds.
	activeWritten map[types.UID]time.Time
	// stale holds, while the cache lags, the objects as the cache still
	// shows them (nil: not there yet).
	lagUntil time.Time
	stale    map[string]*corev1.ConfigMap
	// conflicts counts, per object, the controller writes that another
	// writer gets in before.
	conflicts map[string]int
	touches   int
	hotLoop   bool
	// owner is the object each workload namespace belongs to, and
	// scaledUp when someone else last scaled an object's workload up from
	// zero (which wakes it).
	owner    map[string]types.UID
	scaledUp map[types.UID]time.Time
	// scaleUps are those scale-ups, numbered by seq, and scaledUpWorkload
	// the last of each workload (by namespace/name); lookSeq is seq when
	// the controller's look under way began.
	seq              int
	lookSeq          int
	scaleUps         map[types.UID][]scaleUpAt
	scaledUpWorkload map[string]time.Time
	// changed are the changes to running workloads not counted as use
	// yet, and listed the seq of the controller's last read of each
	// object's workloads.
	changed map[types.UID][]change
	listed  map[types.UID]int
	// race is a scale-up armed to come in the middle of a sleep or wake.
	race *race
	// otherUse is when each object was last edited, and policyChanged
	// when a policy last was: what may wake an object besides a scale-up.
	otherUse      map[types.UID]time.Time
	policyChanged time.Time
	// crashIn counts down the controller's writes to the one it dies at;
	// crashed says it died, and a new process is to start.
	crashIn int
	crashed bool
	// downUntil is when the process that follows a crash takes over,
	// failover after it.
	downUntil time.Time
	failover  time.Duration
	// trace, when set, is told each step, delete and send.
	trace func(format string, args ...any)
}

func (w *world) tracef(format string, args ...any) {
	if w.trace != nil {
		w.trace("%s "+format, append([]any{w.now().Sub(t0)}, args...)...)
	}
}

type channelState struct {
	downUntil time.Time
	slowUntil time.Time
	slowBy    time.Duration
	resets    int
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

var scheme = newScheme()

func newWorld(disabled map[string]string) *world {
	w := &world{
		ctx:           logf.IntoContext(context.Background(), simLogger()),
		clock:         clocktesting.NewFakeClock(t0),
		queue:         map[string]time.Time{},
		fails:         map[string]int{},
		since:         map[types.UID]time.Time{},
		usedAt:        map[types.UID]time.Time{},
		stale:         map[string]*corev1.ConfigMap{},
		activeWritten: map[types.UID]time.Time{},
		conflicts:     map[string]int{},
		disabled:      disabled,
		owner:         map[string]types.UID{},
		scaledUp:      map[types.UID]time.Time{},
		scaleUps:      map[types.UID][]scaleUpAt{},
		otherUse:      map[types.UID]time.Time{},
		// By namespace/name.
		scaledUpWorkload: map[string]time.Time{},
		changed:          map[types.UID][]change{}, listed: map[types.UID]int{},
	}
	w.hist.Healthy = true
	w.recorder = &recorder{w: w}
	w.trail = &auditSink{w: w}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{"env": "dev"}}}
	// The plain tracker: the one that manages fields builds a REST mapper
	// on every write, which would spend most of a run.
	tracker := clienttesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder())
	w.store = fake.NewClientBuilder().WithScheme(scheme).WithObjectTracker(tracker).WithObjects(append(simChannels(), ns)...).
		WithIndex(&corev1.Namespace{}, ownerIndex, func(o client.Object) []string {
			var uids []string
			for _, ref := range o.GetOwnerReferences() {
				uids = append(uids, string(ref.UID))
			}
			return uids
		}).Build()
	w.live = interceptor.NewClient(w.store, interceptor.Funcs{Patch: w.patch, Delete: w.delete, List: w.listWorkloads,
		SubResourceGet: w.subResourceGet, SubResourcePatch: w.subResourcePatch})
	w.cached = interceptor.NewClient(w.live, interceptor.Funcs{Get: w.cacheGet})
	w.ctrl = start(w)
	return w
}

func (w *world) now() time.Time { return w.clock.Now() }

// enqueue queues the object at at, unless it is queued earlier already.
func (w *world) enqueue(name string, at time.Time) {
	at = later(at, w.downUntil)
	if q, ok := w.queue[name]; !ok || at.Before(q) {
		w.queue[name] = at
	}
}

func (w *world) enqueueAll() {
	for i := range numObjects {
		w.enqueue(objName(i), w.now())
	}
	w.enqueue(outboxKey, w.now())
}

func objName(i int) string { return fmt.Sprintf("o%d", i) }
func polName(i int) string { return fmt.Sprintf("p%d", i) }

func (w *world) get(name string) (*corev1.ConfigMap, bool) {
	cm := &corev1.ConfigMap{}
	if err := w.store.Get(w.ctx, types.NamespacedName{Namespace: namespace, Name: name}, cm); err != nil {
		return nil, false
	}
	return cm, true
}

// beforeWrite remembers, while the cache lags, the object as the cache
// still shows it.
func (w *world) beforeWrite(name string) {
	if !w.now().Before(w.lagUntil) {
		return
	}
	if _, ok := w.stale[name]; ok {
		return
	}
	cm, _ := w.get(name)
	w.stale[name] = cm
}

// watched queues the object a write changed, as the watch does once the
// cache has seen the write: at once, or when the lag ends.
func (w *world) watched(name string) {
	if _, lagging := w.stale[name]; !lagging {
		w.enqueue(name, w.now())
	}
}

// cacheGet serves an object as the lagging cache shows it.
func (w *world) cacheGet(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	pom, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok || key.Namespace != namespace {
		return c.Get(ctx, key, obj, opts...)
	}
	old, lagging := w.stale[key.Name]
	if !lagging {
		return c.Get(ctx, key, obj, opts...)
	}
	if old == nil {
		return apierrors.NewNotFound(configMaps, key.Name)
	}
	pom.ObjectMeta = *old.ObjectMeta.DeepCopy()
	return nil
}

// endLag brings the cache up to date, which sends the watch events it
// held back.
func (w *world) endLag() {
	for name := range w.stale {
		w.enqueue(name, w.now())
	}
	clear(w.stale)
	w.lagUntil = time.Time{}
}

// interfere lets another writer change the object just before the
// controller writes to it: the controller's write then conflicts.
func (w *world) interfere(ctx context.Context, c client.WithWatch, name string) {
	if w.conflicts[name] == 0 {
		return
	}
	w.conflicts[name]--
	cm, ok := w.get(name)
	if !ok {
		return
	}
	w.beforeWrite(name)
	w.touches++
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels["touched"] = strconv.Itoa(w.touches)
	if err := c.Update(ctx, cm); err == nil {
		w.watched(name)
	}
}

// patch is the API server's patch, which, as the real one does, refuses
// a patch that carries a resourceVersion other than the object's.
func (w *world) patch(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	if err := w.crashSleepWrite(obj, p); err != nil {
		return err
	}
	before, after := w.raceWrite(obj, p)
	before()
	defer after()
	switch obj.(type) {
	case *appsv1.Deployment, *appsv1.StatefulSet:
		return w.patchWorkload(ctx, c, obj, p, opts...)
	}
	if _, ok := obj.(*metav1.PartialObjectMetadata); !ok || obj.GetNamespace() != namespace {
		return c.Patch(ctx, obj, p, opts...)
	}
	name := obj.GetName()
	w.interfere(ctx, c, name)
	data, err := p.Data(obj)
	if err != nil {
		return err
	}
	var body struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		return err
	}
	cur, ok := w.get(name)
	if !ok {
		return apierrors.NewNotFound(configMaps, name)
	}
	if rv := body.Metadata.ResourceVersion; rv != "" && rv != cur.ResourceVersion {
		return apierrors.NewConflict(configMaps, name, errors.New("the object has been modified"))
	}
	w.beforeWrite(name)
	if err := c.Patch(ctx, obj, p, opts...); err != nil {
		return err
	}
	w.sawSleep(cur)
	w.sawWake(cur)
	w.watched(name)
	return nil
}

// delete is the API server's delete, with its preconditions on UID and
// resourceVersion. It records what the world makes of the object at the
// moment it goes.
func (w *world) delete(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
	if obj.GetNamespace() != namespace {
		return c.Delete(ctx, obj, opts...)
	}
	name := obj.GetName()
	w.interfere(ctx, c, name)
	cur, ok := w.get(name)
	if !ok {
		return apierrors.NewNotFound(configMaps, name)
	}
	var o client.DeleteOptions
	o.ApplyOptions(opts)
	if pre := o.Preconditions; pre != nil {
		if pre.UID != nil && *pre.UID != cur.UID || pre.ResourceVersion != nil && *pre.ResourceVersion != cur.ResourceVersion {
			return apierrors.NewConflict(configMaps, name, errors.New("the precondition on UID or resourceVersion failed"))
		}
	}
	facts := w.facts(cur, w.policies())
	w.beforeWrite(name)
	if err := c.Delete(ctx, cur); err != nil {
		return err
	}
	w.mu.Lock()
	w.hist.Deletions = append(w.hist.Deletions, Deletion{At: w.now(), Facts: facts})
	w.mu.Unlock()
	w.tracef("deleted %s: %+v", name, facts)
	w.watched(name)
	return nil
}

func (w *world) policies() []v1alpha1.TimeoutPolicy {
	var l v1alpha1.TimeoutPolicyList
	if err := w.store.List(w.ctx, &l); err != nil {
		panic(err)
	}
	return l.Items
}

// facts is the world's own reading of which policy governs cm and when
// cm expires under it: the ranking is read from the API's documentation
// (higher priority first, then name), not from the controller.
func (w *world) facts(cm *corev1.ConfigMap, pols []v1alpha1.TimeoutPolicy) Facts {
	f := Facts{UID: cm.UID, Name: cm.Name, Since: w.since[cm.UID]}
	if f.Since.IsZero() {
		f.Since = cm.CreationTimestamp.Time
	}
	slices.SortFunc(pols, func(a, b v1alpha1.TimeoutPolicy) int {
		if a.Spec.Priority != b.Spec.Priority {
			return int(b.Spec.Priority) - int(a.Spec.Priority)
		}
		return strings.Compare(a.Name, b.Name)
	})
	for _, p := range pols {
		sel := labels.Everything()
		if p.Spec.Selector != nil {
			s, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
			if err != nil {
				// It might select the object: nothing below it may act.
				f.Shadowed = true
				return f
			}
			sel = s
		}
		if !sel.Matches(labels.Set(cm.Labels)) {
			continue
		}
		sched, err := expiry.NewSchedule(p.Spec)
		if err != nil {
			f.Shadowed = true
			return f
		}
		created := cm.CreationTimestamp.Time
		annotations := cm.Annotations
		if p.Spec.Keep == v1alpha1.KeepForbidden {
			annotations = maps.Clone(annotations)
			delete(annotations, expiry.AnnotationKeep)
		}
		life := expiry.Compute(created, annotations, sched.DefaultTTL)
		f.Policy, f.DryRun, f.Kept = p.Name, p.Spec.Deletion.DryRun, life.Keep
		f.Capped = p.Spec.Deletion.MaxPerMinute > 0
		f.ExpiresAt, f.MinimumNotice = life.ExpiresAt, sched.MinimumNotice
		// The idle clock and the maximum, read from the policy's
		// documentation rather than from internal/expiry: an object lives
		// until the later of its creation clock and its last use plus
		// idleTTL, never past its creation plus maxTTL.
		if !f.Kept && p.Spec.MaxTTL != "" {
			f.MaxAt = created.Add(sched.MaxTTL)
			f.ExpiresAt = earliest(f.ExpiresAt, f.MaxAt)
		}
		f.DueBy = f.ExpiresAt
		idleSets := false
		if !f.Kept && p.Spec.IdleTTL != "" {
			first, latest := w.lastUse(cm)
			f.IdleAt = first.Add(sched.IdleTTL)
			if !f.MaxAt.IsZero() {
				f.IdleAt = earliest(f.IdleAt, f.MaxAt)
			}
			if f.IdleAt.After(f.ExpiresAt) {
				f.ExpiresAt, idleSets = f.IdleAt, true
			}
			if due := latest.Add(sched.IdleTTL); due.After(f.DueBy) {
				f.DueBy = due
				if !f.MaxAt.IsZero() {
					f.DueBy = earliest(due, f.MaxAt)
				}
			}
		}
		sleepSets := false
		if rule, ok := sleepRuleOf(p.Spec); ok && !f.Kept {
			sleepSets = w.sleepFacts(cm, rule, &f)
		}
		// Whether the idle clock sets the expiry where the controller may
		// have placed the last use as late as it may (when it saw an
		// edit): a stage that does not apply then may go unsent.
		idleSetsLate := idleSets
		if _, latest := w.lastUse(cm); !f.Kept && p.Spec.IdleTTL != "" && !sleepSets {
			late := latest.Add(sched.IdleTTL)
			if !f.MaxAt.IsZero() {
				late = earliest(late, f.MaxAt)
			}
			idleSetsLate = idleSetsLate || late.After(f.ExpiresAt)
		}
		for _, lead := range sched.Reminders {
			// A lead of idleTTL or more would fall due at the moment of
			// use: it does not apply to an expiry the idle clock sets; nor
			// does a reminder due before the last use, of one the sleep
			// sets, where the controller may have placed that use (as
			// late as when it saw an edit).
			due := f.ExpiresAt.Add(-lead)
			if sleepSets {
				if _, latest := w.lastUse(cm); !due.After(latest) {
					continue
				}
			} else if idleSetsLate && lead >= sched.IdleTTL {
				continue
			}
			if !due.Before(f.Since) {
				f.StageApplies = true
			}
		}
		return f
	}
	return f
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// lastUse is the span in which the controller may place cm's last use:
// first is the latest of its creation, a valid last-active annotation
// and its last spec edit as the world made it; latest is where the
// controller may have put the edit instead. The controller counts an edit
// from when it sees it, which is later (a lagging cache, a restart before
// it recorded the edit, a policy that gains idleTTL): until its activity
// annotation records the generation, the edit may yet count from now.
//
// A last-active ahead of the clock counts from when the controller first
// saw it: no earlier than when it was written (or an earlier sighting of
// the same time, which the controller's note keeps), and no later than
// the sighting its note records, or now while there is no note.
func (w *world) lastUse(cm *corev1.ConfigMap) (first, latest time.Time) {
	first = cm.CreationTimestamp.Time
	latest = first
	var recorded struct {
		Generation int64     `json:"generation"`
		At         time.Time `json:"at"`
		Ahead      *struct {
			LastActive time.Time `json:"lastActive"`
			Seen       time.Time `json:"seen"`
		} `json:"ahead"`
	}
	readErr := json.Unmarshal([]byte(cm.Annotations[expiry.AnnotationActivity]), &recorded)
	if v, ok := cm.Annotations[expiry.AnnotationLastActive]; ok {
		if t, err := time.Parse(time.RFC3339, strings.TrimSpace(v)); err == nil {
			low, high := t, t
			if written := w.activeWritten[cm.UID]; written.Before(low) {
				low = written
			}
			noted := readErr == nil && recorded.Ahead != nil && recorded.Ahead.LastActive.Equal(t)
			switch {
			case noted && recorded.Ahead.Seen.Before(low):
				low, high = recorded.Ahead.Seen, recorded.Ahead.Seen
			case noted && recorded.Ahead.Seen.Before(high):
				high = recorded.Ahead.Seen
			case !noted && t.After(w.now().Add(expiry.Skew)):
				high = w.now()
			}
			if low.After(first) {
				first = low
			}
			if high.After(latest) {
				latest = high
			}
		}
	}
	// A wake is use: it restarts the idle clock.
	if st := readSleep(cm); st.Woke.After(first) {
		first = st.Woke
	}
	if latest.Before(first) {
		latest = first
	}
	if cm.Generation <= 1 {
		return first, latest
	}
	if edit := w.usedAt[cm.UID]; edit.After(first) {
		first = edit
	}
	seen := w.now()
	if readErr == nil && recorded.Generation >= cm.Generation {
		seen = recorded.At
	}
	if seen.After(latest) {
		latest = seen
	}
	if first.After(latest) {
		latest = first
	}
	return first, latest
}

// send is channel i receiving m.
func (w *world) send(ctx context.Context, i int, m notify.Message) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := &w.channels[i]
	at := m.Time
	if at.Before(ch.slowUntil) {
		at = at.Add(ch.slowBy)
	}
	s := Send{ID: m.ID, UID: m.Object.UID, Type: m.Type, Stage: m.Stage, Channel: fmt.Sprintf("sim-%d", i)}
	if !oneOffType(m.Type) {
		s.Announced = m.ExpiresAt
	}
	if m.Type == v1alpha1.EventReminder {
		s.IdleAt = w.idleAtSend(m.Object.Name, m.Object.UID)
	}
	switch {
	case m.Type == v1alpha1.EventSleeping:
		// The sleep it says is coming.
		s.Cycle = m.ExpiresAt
	case cycleType(m.Type):
		s.Cycle = w.cycleOf(m.Object.Name, m.Object.UID, m.Type)
	}
	if dl, ok := ctx.Deadline(); ok && dl.Before(simEnd) && at.After(dl) {
		// Abandoned by the controller at its deadline.
		w.reach(dl)
		s.At = dl
		w.hist.Sends = append(w.hist.Sends, s)
		return context.DeadlineExceeded
	}
	w.reach(at)
	s.At = at
	if at.Before(ch.downUntil) {
		w.hist.Sends = append(w.hist.Sends, s)
		return errors.New("connection refused")
	}
	s.Accepted = true
	if ch.resets > 0 {
		ch.resets--
		w.hist.Sends = append(w.hist.Sends, s)
		return errors.New("connection reset after the request was sent")
	}
	s.Reported = true
	w.hist.Sends = append(w.hist.Sends, s)
	w.tracef("%s accepted %s %s about %s announcing %s", s.Channel, s.Type, s.Stage, s.UID, s.Announced.Sub(t0))
	return nil
}

// idleAtSend is the last use plus idleTTL of the object, as the world
// reads it now, if the controller's cache shows the object as it is;
// zero when it lags (the controller cannot know of a use it does not
// see) or the governing policy has no idleTTL.
func (w *world) idleAtSend(name string, uid types.UID) time.Time {
	if _, lagging := w.stale[name]; lagging {
		return time.Time{}
	}
	cm, ok := w.get(name)
	if !ok || cm.UID != uid {
		return time.Time{}
	}
	return w.facts(cm, w.policies()).IdleAt
}

// reach moves the clock forward to at; time never goes back.
func (w *world) reach(at time.Time) {
	if at.After(w.clock.Now()) {
		w.clock.SetTime(at)
	}
}

// recorder keeps the Events that announce a deletion time.
type recorder struct{ w *world }

var announced = regexp.MustCompile(`(?:deletion at|postponed to|waits until) (\d{4}-\d\d-\d\dT[0-9:.]+Z)`)

func (r *recorder) Eventf(regarding runtime.Object, _ runtime.Object, _, reason, _, note string, args ...any) {
	ref, ok := regarding.(*corev1.ObjectReference)
	if !ok {
		return
	}
	if reason == "DeletionThrottled" {
		// A cap's turn says when the deletion may go at the earliest, not
		// a time anyone was promised: the turns are in memory, and a new
		// leader spaces the backlog afresh.
		return
	}
	text := fmt.Sprintf(note, args...)
	switch reason {
	case "Slept", "Woke", "WokeExternally":
		r.w.sawSleepEvent(ref.UID, reason, text)
	}
	m := announced.FindStringSubmatch(text)
	if m == nil {
		return
	}
	if reason == "MessageSent" && (strings.Contains(text, " slept message ") || strings.Contains(text, " woke message ")) {
		// It gives a deletion time, but it is no reminder.
		reason = "CycleMessageSent"
	}
	if reason == "MessageSent" && !strings.Contains(text, " reminder via ") {
		// Sent the extended or postponed message: not a reminder, but
		// its deletion time is announced all the same.
		reason = "AnnouncementSent"
	}
	at, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil {
		return
	}
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	r.w.hist.Events = append(r.w.hist.Events, Announcement{At: r.w.now(), UID: ref.UID, Reason: reason, Announced: at})
	r.w.tracef("event %s about %s: %s", reason, ref.UID, text)
}

// auditSink reads the audit trail back as it is written.
type auditSink struct{ w *world }

func (a *auditSink) Write(p []byte) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader(p))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec audit.Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return 0, fmt.Errorf("audit line %q: %w", sc.Text(), err)
		}
		a.w.mu.Lock()
		a.w.hist.Audit = append(a.w.hist.Audit, rec)
		a.w.mu.Unlock()
	}
	return len(p), sc.Err()
}

// advance lets d of simulated time pass, reconciling what falls due in
// the order it falls due (by name when at the same time).
func (w *world) advance(d time.Duration) {
	target := w.now().Add(d)
	for n := 0; ; n++ {
		if n > maxReconciles {
			w.hotLoop = true
			return
		}
		name, at := "", time.Time{}
		for k, q := range w.queue {
			if name == "" || q.Before(at) || q.Equal(at) && k < name {
				name, at = k, q
			}
		}
		if !w.lagUntil.IsZero() && !w.lagUntil.After(target) && (name == "" || w.lagUntil.Before(at)) {
			w.reach(w.lagUntil)
			w.endLag()
			continue
		}
		if name == "" || at.After(target) {
			break
		}
		delete(w.queue, name)
		w.reach(at)
		w.handle(name, w.ctrl)
	}
	w.reach(target)
}

// handle runs one reconcile and queues what its result asks for, as
// controller-runtime's work queue does.
func (w *world) handle(name string, c *instance) {
	w.lookSeq = w.seq
	res, err := c.reconcile(w.ctx, name)
	now := w.now()
	if w.crashed {
		w.restartIfCrashed()
		return
	}
	if name != outboxKey {
		// A delete hands its messages to the outbox, whose sender a
		// channel wakes at once.
		w.enqueue(outboxKey, now)
	}
	switch {
	case err != nil:
		w.fails[name]++
		w.enqueue(name, now.Add(min(5*time.Millisecond<<min(w.fails[name]-1, 20), 1000*time.Second)))
	case res.RequeueAfter > 0:
		delete(w.fails, name)
		w.enqueue(name, now.Add(res.RequeueAfter))
	default:
		delete(w.fails, name)
		if res != (ctrl.Result{}) {
			w.enqueue(name, now)
		}
	}
	if name != outboxKey {
		w.looked(name, err)
	}
}

// lookBound is how soon a look may leave the object to the next: one
// the controller asks for (after a conflict, or a write of its own the
// watch brings back) within it is part of the same look.
const lookBound = time.Second

// looked records a look at name that leaves it in a sleep someone else
// scaled a workload up in before the look began.
func (w *world) looked(name string, err error) {
	cm, ok := w.get(name)
	if !ok {
		return
	}
	st := readSleep(cm)
	up := w.scaledUpBefore(cm.UID, w.lookSeq)
	if !st.sleeping() || up.IsZero() || up.Before(st.Since) {
		return
	}
	_, lagging := w.stale[name]
	next, queued := w.queue[name]
	again := queued && !next.After(w.now().Add(lookBound))
	l := Look{At: w.now(), Phase: st.Phase, SleptSince: st.Since, ScaledUp: up, Finished: err == nil && !lagging && !again,
		Facts: w.facts(cm, w.policies())}
	w.mu.Lock()
	w.hist.Looks = append(w.hist.Looks, l)
	w.mu.Unlock()
}

// history is what the checks read now.
func (w *world) history() *History {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.hist
	h.Now = w.now()
	h.Live = nil
	pols := w.policies()
	var l corev1.ConfigMapList
	if err := w.store.List(w.ctx, &l, client.InNamespace(namespace)); err != nil {
		panic(err)
	}
	for i := range l.Items {
		h.Live = append(h.Live, w.facts(&l.Items[i], pols))
	}
	return &h
}

// check runs the invariants against the history so far.
func (w *world) check() []Violation {
	out := violations(w.history(), w.disabled)
	if w.hotLoop {
		out = append(out, Violation{Check: "noHotLoop", Detail: fmt.Sprintf("more than %d reconciles in one step", maxReconciles)})
	}
	return out
}

// settle heals every channel and the cache, and lets the delivery bound
// pass.
func (w *world) settle() []Violation {
	w.mu.Lock()
	for i := range w.channels {
		w.channels[i] = channelState{}
	}
	w.mu.Unlock()
	w.endLag()
	for end := w.now().Add(settleFor); w.now().Before(end); {
		w.advance(time.Minute)
		if v := w.check(); len(v) > 0 {
			return v
		}
	}
	w.hist.Settled = true
	return w.check()
}

// simLogger is the controller's logger: none, or with SIM_LOG=1 its
// whole log on standard output, between the trace's lines.
func simLogger() logr.Logger {
	if os.Getenv("SIM_LOG") != "1" {
		return logr.Discard()
	}
	return funcr.New(func(prefix, args string) { fmt.Println(prefix, args) }, funcr.Options{Verbosity: 5})
}
