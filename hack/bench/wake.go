// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// The phases of a sleeper's run: before its use (the sleep), and after.
const (
	phaseSleep = iota
	phaseWake
)

// sleeperLog is what the bench saw of the sleepers: each workload's
// replicas over time and the writes to it, and each sleeper's own writes.
type sleeperLog struct {
	mu sync.Mutex
	by map[string]*sleeperSeen
}

// sleeperSeen is one sleeper as seen.
type sleeperSeen struct {
	// workloads by kind/name.
	workloads map[string]*workloadSeen
	asleepAt  time.Time
	// usedAt is when the bench used it, by via; wokeAt when the last of
	// its workloads ran again.
	usedAt time.Time
	via    string
	wokeAt time.Time
	// writes to the Playbook, by phase.
	writes [2]int
}

// workloadSeen is one workload: the values of spec.replicas it had, in
// order, and the writes of the sleep's fields (replicas, its annotation,
// its label), by phase.
type workloadSeen struct {
	replicas []int32
	writes   [2]int
}

func (s *sleeperSeen) phase() int {
	if s.usedAt.IsZero() {
		return phaseSleep
	}
	return phaseWake
}

// all reports whether every workload's last replicas satisfies ok.
func (s *sleeperSeen) all(ok func(int32) bool) bool {
	if len(s.workloads) < len(sleeperWorkloads) {
		return false
	}
	for _, w := range s.workloads {
		if len(w.replicas) == 0 || !ok(w.replicas[len(w.replicas)-1]) {
			return false
		}
	}
	return true
}

// watchSleepers starts informers on the sleepers' workloads and on the
// sleepers, and returns once they have synced.
func (cl *cluster) watchSleepers(ctx context.Context, sp *sleeperPop) (*sleeperLog, error) {
	l := &sleeperLog{by: make(map[string]*sleeperSeen, len(sp.names))}
	for _, name := range sp.names {
		l.by[name] = &sleeperSeen{workloads: map[string]*workloadSeen{}}
	}
	f := informers.NewSharedInformerFactoryWithOptions(cl.kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = sleeperLabel
	}))
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.workload(nil, obj) },
		UpdateFunc: l.workload,
	}
	synced := []cache.InformerSynced{}
	for _, inf := range []cache.SharedIndexInformer{f.Apps().V1().Deployments().Informer(), f.Apps().V1().StatefulSets().Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, err
		}
		synced = append(synced, inf.HasSynced)
	}
	pbs := metadatainformer.NewFilteredMetadataInformer(cl.meta, playbooks, "", 0, cache.Indexers{}, func(o *metav1.ListOptions) {
		o.LabelSelector = sleeperLabel
	}).Informer()
	if _, err := pbs.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: l.playbook}); err != nil {
		return nil, err
	}
	synced = append(synced, pbs.HasSynced)
	f.Start(ctx.Done())
	go pbs.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, errors.New("the sleepers' informers did not sync")
	}
	return l, nil
}

// workload notes a workload's replicas, and a write of the fields a sleep
// or wake writes.
func (l *sleeperLog) workload(old, obj any) {
	kind, meta, replicas := workloadOf(obj)
	if meta == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.by[meta.Labels[sleeperLabel]]
	if s == nil {
		return
	}
	key := kind + "/" + meta.Name
	w := s.workloads[key]
	if w == nil {
		w = &workloadSeen{}
		s.workloads[key] = w
	}
	if old != nil {
		_, was, wasReplicas := workloadOf(old)
		if was != nil && (wasReplicas != replicas ||
			was.Annotations[expiry.AnnotationReplicas] != meta.Annotations[expiry.AnnotationReplicas] ||
			was.Labels[expiry.LabelAsleep] != meta.Labels[expiry.LabelAsleep]) {
			w.writes[s.phase()]++
		}
	}
	if n := len(w.replicas); n > 0 && w.replicas[n-1] == replicas {
		return
	}
	w.replicas = append(w.replicas, replicas)
	now := time.Now()
	switch {
	case s.asleepAt.IsZero() && s.all(func(r int32) bool { return r == 0 }):
		s.asleepAt = now
	case !s.usedAt.IsZero() && s.wokeAt.IsZero() && s.all(func(r int32) bool { return r > 0 }):
		s.wokeAt = now
	}
}

func workloadOf(obj any) (string, *metav1.ObjectMeta, int32) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return "Deployment", &o.ObjectMeta, replicasOf(o.Spec.Replicas)
	case *appsv1.StatefulSet:
		return "StatefulSet", &o.ObjectMeta, replicasOf(o.Spec.Replicas)
	}
	return "", nil, 0
}

func replicasOf(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// playbook counts a write to a sleeper.
func (l *sleeperLog) playbook(old, obj any) {
	was, ok1 := old.(*metav1.PartialObjectMetadata)
	now, ok2 := obj.(*metav1.PartialObjectMetadata)
	if !ok1 || !ok2 || was.ResourceVersion == now.ResourceVersion {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.by[now.Name]; s != nil {
		s.writes[s.phase()]++
	}
}

// asleep counts the sleepers asleep.
func (l *sleeperLog) asleep() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.by {
		if !s.asleepAt.IsZero() {
			n++
		}
	}
	return n
}

// woken counts those of names that woke since their use.
func (l *sleeperLog) woken(names []string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, name := range names {
		if !l.by[name].wokeAt.IsZero() {
			n++
		}
	}
	return n
}

// wakeReport is what the -sleepers run measured.
type wakeReport struct {
	Sleepers int `json:"sleepers"`
	// AfterIdle is the sleepers' policy's; SpreadSeconds, from the first
	// sleep due to the last.
	AfterIdle     string  `json:"afterIdle"`
	SpreadSeconds float64 `json:"spreadSeconds"`
	// AllAsleepSeconds is from the first sleep due until every sleeper's
	// workloads were at zero.
	AllAsleepSeconds float64 `json:"allAsleepSeconds"`
	// Sleep is from each sleep due to its last workload at zero.
	Sleep lagStats `json:"sleep"`
	// The writes of a sleep's or wake's fields (replicas, the replicas
	// annotation, the sleep's label) to each workload; Max, the most any
	// one workload had. PlaybookWrites are the writes to each sleeper.
	WorkloadWritesPerSleep    float64 `json:"workloadWritesPerSleep"`
	MaxWorkloadWritesPerSleep int     `json:"maxWorkloadWritesPerSleep"`
	PlaybookWritesPerSleep    float64 `json:"playbookWritesPerSleep"`
	WorkloadWritesPerWake     float64 `json:"workloadWritesPerWake"`
	MaxWorkloadWritesPerWake  int     `json:"maxWorkloadWritesPerWake"`
	PlaybookWritesPerWake     float64 `json:"playbookWritesPerWake"`
	// RequestsPerSleep are the controller's requests on workloads and on
	// the Playbooks' scale, from its start until all were asleep, per
	// sleeper; kube-controller-manager's on their status left out.
	RequestsPerSleep map[string]float64 `json:"requestsPerSleep"`
	// CPUSecondsAsleep and PeakRSSAsleepBytes are the controller's when
	// all were asleep.
	CPUSecondsAsleep   float64 `json:"cpuSecondsAsleep"`
	PeakRSSAsleepBytes int64   `json:"peakRSSAsleepBytes"`
	// Burst is from each use of the -wakes to its last workload's replicas
	// written back; LastActive and Exec split it by the use. Single is the
	// same for the -single-wakes, one at a time; ScaleUp, from the scale-up
	// of one workload of each of the -scale-ups to the others' replicas
	// written back.
	BurstSeconds float64  `json:"burstSeconds"`
	Burst        lagStats `json:"burst"`
	LastActive   lagStats `json:"burstByLastActive"`
	Exec         lagStats `json:"burstByExec"`
	Single       lagStats `json:"single"`
	ScaleUp      lagStats `json:"scaleUp"`
	// Fights counts workloads whose replicas went down again after a
	// wake brought them up, or that changed more than down once and up once.
	Fights int `json:"fights"`
	// Load is what the API server served, and the CPU each process
	// spent, from the first use of the burst until all had woken.
	Load burstLoad `json:"burstLoad"`
}

// burstLoad is the API server's work over the burst of wakes: every
// request of every client (the controller, kube-controller-manager
// bringing the Pods back, the bench's uses), watches left out.
type burstLoad struct {
	Seconds  float64 `json:"seconds"`
	Requests float64 `json:"requests"`
	Writes   float64 `json:"writes"`
	// CPUSeconds are by process: etcd, kube-apiserver,
	// kube-controller-manager, the bench and the controller.
	CPUSeconds map[string]float64 `json:"cpuSeconds"`
}

// sleepPhase waits until every sleeper is asleep, or Grace past the last
// sleep due, then measures the wakes: a burst of -wakes uses within
// -wake-window, half by last-active, half by exec, then -single-wakes
// one at a time.
func (m *measurement) sleepPhase(ctx context.Context, c *controllerProc, tick *time.Ticker) error {
	sp, l := m.sleepers, m.sleeperLog
	last := time.Time{}
	for _, due := range sp.due {
		if due.After(last) {
			last = due
		}
	}
	// The controller spaces the sleeps that begin (--sleeps-per-second,
	// 10 by default): allow for 5 a second.
	deadline := last.Add(m.cfg.Grace + time.Duration(len(sp.names))*200*time.Millisecond)
	next := time.Now().Add(10 * time.Second)
	for l.asleep() < len(sp.names) {
		if time.Now().After(deadline) {
			m.problems = append(m.problems, fmt.Sprintf("%d of %d sleepers asleep %s after the last sleep due", l.asleep(), len(sp.names), time.Since(last).Round(time.Second)))
			break
		}
		if time.Now().After(next) {
			m.p.say("%d of %d sleepers asleep", l.asleep(), len(sp.names))
			next = next.Add(10 * time.Second)
		}
		if err := m.wait(ctx, c, tick, time.Time{}); err != nil {
			return err
		}
	}
	var err error
	if m.asleep, err = m.cl.apiMetrics(ctx); err != nil {
		return err
	}
	if m.atAsleep, err = readProc(c.cmd.Process.Pid); err != nil {
		return err
	}
	m.p.say("all %d sleepers asleep", l.asleep())
	// The wakes must not be followed by sleeps again.
	if err := m.cl.setSleeperPolicy(ctx, 24*time.Hour); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)

	// Those asleep, in the order they were created.
	var asleep []string
	l.mu.Lock()
	for _, name := range sp.names {
		if !l.by[name].asleepAt.IsZero() {
			asleep = append(asleep, name)
		}
	}
	l.mu.Unlock()
	if len(asleep) < m.cfg.Wakes+m.cfg.SingleWakes+m.cfg.ScaleUps {
		return fmt.Errorf("%d sleepers asleep, fewer than the %d wakes, %d single wakes and %d scale-ups", len(asleep), m.cfg.Wakes, m.cfg.SingleWakes, m.cfg.ScaleUps)
	}
	burst := asleep[:m.cfg.Wakes]
	singles := asleep[m.cfg.Wakes : m.cfg.Wakes+m.cfg.SingleWakes]
	scaleUps := asleep[m.cfg.Wakes+m.cfg.SingleWakes : m.cfg.Wakes+m.cfg.SingleWakes+m.cfg.ScaleUps]
	m.burst = burst
	m.p.say("using %d sleepers within %s, half by last-active and half by exec", len(burst), m.cfg.WakeWindow)
	if err := m.takeBurstLoad(ctx, c, 0); err != nil {
		return err
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(burst))
	for i, name := range burst {
		at := start.Add(time.Duration(int64(m.cfg.WakeWindow) * int64(i) / int64(len(burst))))
		time.Sleep(time.Until(at))
		wg.Go(func() {
			if err := m.use(ctx, name, i%2 == 1); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	m.burstTook = time.Since(start)
	close(errs)
	for err := range errs {
		m.problems = append(m.problems, err.Error())
	}
	wakeDeadline := time.Now().Add(m.cfg.Grace)
	for l.woken(burst) < len(burst) && time.Now().Before(wakeDeadline) {
		if err := m.wait(ctx, c, tick, time.Time{}); err != nil {
			return err
		}
	}
	if err := m.takeBurstLoad(ctx, c, 1); err != nil {
		return err
	}
	m.p.say("%d of %d woken", l.woken(burst), len(burst))

	// One wake alone is measured on a quiet cluster: once the burst has
	// woken and kube-controller-manager has brought its Pods back.
	if err := m.waitQuiet(ctx, func() bool { return l.woken(burst) == len(burst) }); err != nil {
		return err
	}
	for i, name := range singles {
		m.oneAtATime(name, func() error { return m.use(ctx, name, i%2 == 1) })
	}
	m.p.say("%d single wakes, %d woken", len(singles), l.woken(singles))
	for _, name := range scaleUps {
		m.oneAtATime(name, func() error { return m.scaleUp(ctx, name) })
	}
	m.p.say("%d scale-ups, %d woken", len(scaleUps), l.woken(scaleUps))
	return nil
}

// oneAtATime wakes the sleeper name by wake, and waits up to 10 s for it
// to wake, then half a second more.
func (m *measurement) oneAtATime(name string, wake func() error) {
	if err := wake(); err != nil {
		m.problems = append(m.problems, err.Error())
		return
	}
	one := []string{name}
	until := time.Now().Add(10 * time.Second)
	for m.sleeperLog.woken(one) == 0 && time.Now().Before(until) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
}

// viaScaleUp is the use of a sleeper woken by a scale-up.
const viaScaleUp = "scale-up"

// scaleUp scales a sleeper's web Deployment back to one replica, as
// someone other than the controller would: its replicas alone, leaving
// the sleep's annotation and label.
func (m *measurement) scaleUp(ctx context.Context, name string) error {
	s := m.sleeperLog.by[name]
	m.sleeperLog.mu.Lock()
	s.usedAt, s.via = time.Now(), viaScaleUp
	m.sleeperLog.mu.Unlock()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "amp-" + name, Name: sleeperWorkloads[0].name}}
	if err := m.cl.client.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":1}}`))); err != nil {
		return fmt.Errorf("scale up sleeper %s: %w", name, err)
	}
	return nil
}

// quietWrites is the API server's write rate, over quietEvery, below
// which the cluster counts as quiet; quietWait, how long the bench waits
// for it.
const (
	quietWrites = 20.0
	quietEvery  = 2 * time.Second
	quietWait   = 3 * time.Minute
)

// waitQuiet waits until done says so and the API server writes fewer
// than quietWrites a second, or quietWait.
func (m *measurement) waitQuiet(ctx context.Context, done func() bool) error {
	deadline := time.Now().Add(quietWait)
	prev, err := m.cl.apiMetrics(ctx)
	if err != nil {
		return err
	}
	for time.Now().Before(deadline) {
		time.Sleep(quietEvery)
		cur, err := m.cl.apiMetrics(ctx)
		if err != nil {
			return err
		}
		rate := (cur.writes - prev.writes) / quietEvery.Seconds()
		if done() && rate < quietWrites {
			m.p.say("quiet: the API server writes %.0f a second", rate)
			return nil
		}
		prev = cur
	}
	m.problems = append(m.problems, fmt.Sprintf("the cluster was not quiet %s after the burst: the single wakes are measured under load", quietWait))
	return nil
}

// takeBurstLoad reads the API server's counts and the controller's
// process as the burst begins (i 0) and once it has woken (i 1).
func (m *measurement) takeBurstLoad(ctx context.Context, c *controllerProc, i int) error {
	var err error
	m.burstEnds[i].at = time.Now()
	if m.burstEnds[i].api, err = m.cl.apiMetrics(ctx); err != nil {
		return err
	}
	m.burstEnds[i].proc, err = readProc(c.cmd.Process.Pid)
	return err
}

// use uses a sleeper: by an exec into a Pod of its namespace (the API
// server asks the connection webhook first; no Pod runs while it sleeps,
// and the exec then fails), or by writing last-active, as Amphitheatre's
// API server does when its developer comes back.
func (m *measurement) use(ctx context.Context, name string, exec bool) error {
	s := m.sleeperLog.by[name]
	now := time.Now()
	m.sleeperLog.mu.Lock()
	s.usedAt, s.via = now, "last-active"
	if exec {
		s.via = "exec"
	}
	m.sleeperLog.mu.Unlock()
	if exec {
		req := m.cl.kube.CoreV1().RESTClient().Post().Namespace("amp-"+name).Resource("pods").Name("web-0").SubResource("exec").
			Param("command", "sh").Param("stdout", "true")
		err := req.Do(ctx).Error()
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsBadRequest(err) {
			return nil
		}
		return fmt.Errorf("exec into sleeper %s: %w", name, err)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, expiry.AnnotationLastActive, now.UTC().Format(time.RFC3339))
	if err := m.cl.client.Patch(ctx, sleeperObject(name), client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("write last-active on sleeper %s: %w", name, err)
	}
	return nil
}

// wakeReport sums up the sleepers.
func (m *measurement) wakeReport() *wakeReport {
	sp, l := m.sleepers, m.sleeperLog
	r := &wakeReport{Sleepers: len(sp.names), AfterIdle: expiry.FormatDuration(sp.afterIdle), BurstSeconds: m.burstTook.Seconds()}
	l.mu.Lock()
	defer l.mu.Unlock()
	var first, last, allAsleep time.Time
	var sleepLags, burst, byLastActive, byExec, single, scaleUp []time.Duration
	var sleepWrites, wakeWrites, pbSleepWrites, pbWakeWrites, woke int
	inBurst := map[string]bool{}
	for _, name := range m.burst {
		inBurst[name] = true
	}
	for name, s := range l.by {
		due := sp.due[name]
		if first.IsZero() || due.Before(first) {
			first = due
		}
		if due.After(last) {
			last = due
		}
		if !s.asleepAt.IsZero() {
			sleepLags = append(sleepLags, s.asleepAt.Sub(due))
			if s.asleepAt.After(allAsleep) {
				allAsleep = s.asleepAt
			}
		}
		pbSleepWrites += s.writes[phaseSleep]
		for _, w := range s.workloads {
			sleepWrites += w.writes[phaseSleep]
			r.MaxWorkloadWritesPerSleep = max(r.MaxWorkloadWritesPerSleep, w.writes[phaseSleep])
			// A scale-up's own write is the bench's: the writes per wake
			// are those of the uses.
			if !s.usedAt.IsZero() && s.via != viaScaleUp {
				wakeWrites += w.writes[phaseWake]
				r.MaxWorkloadWritesPerWake = max(r.MaxWorkloadWritesPerWake, w.writes[phaseWake])
			}
			if fought(w.replicas) {
				r.Fights++
			}
		}
		if s.usedAt.IsZero() || s.wokeAt.IsZero() {
			continue
		}
		lag := s.wokeAt.Sub(s.usedAt)
		if s.via == viaScaleUp {
			scaleUp = append(scaleUp, lag)
			continue
		}
		woke++
		pbWakeWrites += s.writes[phaseWake]
		switch {
		case !inBurst[name]:
			single = append(single, lag)
		case s.via == "exec":
			burst, byExec = append(burst, lag), append(byExec, lag)
		default:
			burst, byLastActive = append(burst, lag), append(byLastActive, lag)
		}
	}
	r.SpreadSeconds = last.Sub(first).Seconds()
	if !allAsleep.IsZero() {
		r.AllAsleepSeconds = allAsleep.Sub(first).Seconds()
	}
	n := float64(max(len(sp.names), 1))
	r.Sleep.fill(len(sp.names), sleepLags)
	r.WorkloadWritesPerSleep, r.PlaybookWritesPerSleep = float64(sleepWrites)/n, float64(pbSleepWrites)/n
	if woke > 0 {
		r.WorkloadWritesPerWake, r.PlaybookWritesPerWake = float64(wakeWrites)/float64(woke), float64(pbWakeWrites)/float64(woke)
	}
	r.Burst.fill(m.cfg.Wakes, burst)
	r.LastActive.fill((m.cfg.Wakes+1)/2, byLastActive)
	r.Exec.fill(m.cfg.Wakes/2, byExec)
	r.Single.fill(m.cfg.SingleWakes, single)
	r.ScaleUp.fill(m.cfg.ScaleUps, scaleUp)
	if a, b := m.burstEnds[0], m.burstEnds[1]; b.api.ended != nil {
		r.Load = burstLoad{Seconds: b.at.Sub(a.at).Seconds(), Requests: b.api.total - a.api.total, Writes: b.api.writes - a.api.writes,
			CPUSeconds: cpuDelta(a.api, b.api)}
		r.Load.CPUSeconds["controller"] = (b.proc.cpu - a.proc.cpu).Seconds()
	}
	r.RequestsPerSleep = map[string]float64{}
	if m.asleep.ended != nil {
		for k, v := range delta(m.before, m.asleep) {
			resource := k[strings.IndexByte(k, ' ')+1:]
			if (strings.HasPrefix(resource, "deployments") || strings.HasPrefix(resource, "statefulsets") || resource == "playbooks/scale") &&
				!strings.HasSuffix(resource, "/status") {
				r.RequestsPerSleep[k] = v / n
			}
		}
		r.CPUSecondsAsleep, r.PeakRSSAsleepBytes = m.atAsleep.cpu.Seconds(), m.atAsleep.peakRSS
	}
	return r
}

// fought reports whether a workload's replicas went other than 1, 0, 1
// (or a prefix of it): scaled down again after a wake, or more than once.
func fought(replicas []int32) bool {
	want := []int32{1, 0, 1}
	if len(replicas) > len(want) {
		return true
	}
	for i, r := range replicas {
		if (want[i] == 0) != (r == 0) {
			return true
		}
	}
	return false
}

func (r *wakeReport) print(out io.Writer) {
	fmt.Fprintf(out, "\n%-26s %d, afterIdle %s, due over %.0fs; all asleep %.1fs after the first was due\n", "sleepers", r.Sleepers, r.AfterIdle, r.SpreadSeconds, r.AllAsleepSeconds)
	fmt.Fprintf(out, "%-26s %.1fs CPU, peak RSS %s when all were asleep\n", "controller, sleeps", r.CPUSecondsAsleep, mib(r.PeakRSSAsleepBytes))
	fmt.Fprintf(out, "%-26s workloads %.2f (max %d on one), Playbook %.2f\n", "writes per sleep", r.WorkloadWritesPerSleep, r.MaxWorkloadWritesPerSleep, r.PlaybookWritesPerSleep)
	fmt.Fprintf(out, "%-26s workloads %.2f (max %d on one), Playbook %.2f\n", "writes per wake", r.WorkloadWritesPerWake, r.MaxWorkloadWritesPerWake, r.PlaybookWritesPerWake)
	reqs := []string{}
	for k, v := range r.RequestsPerSleep {
		reqs = append(reqs, fmt.Sprintf("%s %.2f", k, v))
	}
	fmt.Fprintf(out, "%-26s %s\n", "requests per sleep", strings.Join(slices.Sorted(slices.Values(reqs)), ", "))
	fmt.Fprintf(out, "%-26s %d; burst of uses sent in %.1fs\n", "fights", r.Fights, r.BurstSeconds)
	if l := r.Load; l.Seconds > 0 {
		cpu := []string{}
		for _, k := range slices.Sorted(maps.Keys(l.CPUSeconds)) {
			cpu = append(cpu, fmt.Sprintf("%s %.1fs", k, l.CPUSeconds[k]))
		}
		fmt.Fprintf(out, "%-26s %.1fs until all woke: the API server served %.0f requests (%.0f/s), %.0f of them writes (%.0f/s); CPU %s\n",
			"burst, API server", l.Seconds, l.Requests, l.Requests/l.Seconds, l.Writes, l.Writes/l.Seconds, strings.Join(cpu, ", "))
	}
	printLags(out, []namedLags{{"sleep (due to all at 0)", r.Sleep}, {"wake, burst", r.Burst}, {"  by last-active", r.LastActive},
		{"  by exec", r.Exec}, {"wake, one alone", r.Single}, {"wake, by a scale-up", r.ScaleUp}})
}
