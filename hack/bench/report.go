// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
)

// measurement follows one run from the controller's start to the end.
type measurement struct {
	cfg config
	pop *population
	cl  *cluster
	rc  *receiver
	w   *watcher
	// ns watches namespaces (-owned); nil otherwise.
	ns  *watcher
	p   *progress
	log string
	// idle is the controller measured alone before any Playbook existed.
	idle idleFigures

	started, trackedAt time.Time
	before, synced     apiSnapshot
	end                apiSnapshot
	atSync, atEnd      procStat
	ctrl, ctrlAtSync   ctrlMetrics
	problems           []string
	// touch is what the run with activity measured; ctrlAddr is where
	// the controller's metrics are.
	touch    *touchReport
	ctrlAddr string
	// sleepers are the -sleepers and what was seen of them; asleep and
	// atAsleep the API server's counts and the controller's process when
	// all were asleep; burstTook how long the burst of uses took to send.
	sleepers   *sleeperPop
	sleeperLog *sleeperLog
	asleep     apiSnapshot
	atAsleep   procStat
	burstTook  time.Duration
	burst      []string
	// burstEnds are the API server's counts and the controller's process
	// as the burst of uses began and when it had all woken.
	burstEnds [2]struct {
		api  apiSnapshot
		proc procStat
		at   time.Time
	}
}

// poll is how often the bench looks at the controller's metrics before
// it is tracking everything, and at its own notes afterwards.
const poll = 100 * time.Millisecond

// measure waits until the controller tracks every Playbook, then until
// every expiring one has been reminded and deleted (or the grace is
// over), and takes the figures at both moments.
func (m *measurement) measure(ctx context.Context, c *controllerProc, before apiSnapshot) error {
	m.before, m.started = before, time.Now()
	pid := c.cmd.Process.Pid
	deadline := m.pop.lastDue.Add(m.cfg.Grace)
	if len(m.pop.slow) > 0 {
		// Generous: as if the controller sent 4 at a time.
		if d := m.pop.slowDue.Add(time.Duration(len(m.pop.slow)/4+1) * m.cfg.SMTPDelay).Add(m.cfg.Grace); d.After(deadline) {
			deadline = d
		}
	}
	if c.profileAddr != "" {
		defer m.profileCPU(ctx, c)()
		defer m.saveProfile(ctx, c, "/debug/pprof/heap", "heap-end.pb.gz")
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()

	// Tracked: every object has been reconciled once (its wake-up is
	// scheduled) and nothing is queued or in progress. The controller's
	// own metrics say so at no cost to it; the policy's status would
	// mean listing and evaluating every object each second.
	for {
		cm, err := scrapeController(ctx, c.metricsAddr)
		if err == nil && cm.Reconciles >= float64(m.cfg.N+m.cfg.Slow+m.cfg.Sleepers) && cm.depth == 0 && cm.active == 0 {
			m.trackedAt, m.ctrlAtSync = time.Now(), cm
			break
		}
		if err := m.wait(ctx, c, tick, deadline); err != nil {
			return fmt.Errorf("%w before the controller tracked all %d Playbooks", err, m.cfg.N)
		}
	}
	var err error
	if m.atSync, err = readProc(pid); err != nil {
		return err
	}
	if m.synced, err = m.cl.apiMetrics(ctx); err != nil {
		return err
	}
	if c.profileAddr != "" {
		m.saveProfile(ctx, c, "/debug/pprof/heap", "heap-sync.pb.gz")
	}
	m.p.say("all %d tracked %s after the start; the first due moment is %s later", m.cfg.N,
		m.trackedAt.Sub(m.started).Round(time.Millisecond), m.pop.firstDue.Sub(m.trackedAt).Round(100*time.Millisecond))
	if m.trackedAt.After(m.pop.firstDue) {
		m.problems = append(m.problems, "the controller was not tracking everything when the first reminder or expiry fell due: raise -margin")
	}

	m.ctrlAddr = c.metricsAddr
	stopTouching := m.startTouching(ctx)
	next := time.Now().Add(10 * time.Second)
	for !m.complete() {
		if time.Now().After(deadline) {
			m.problems = append(m.problems, fmt.Sprintf("gave up waiting %s after the last expiry", m.cfg.Grace))
			break
		}
		if time.Now().After(next) {
			deleted, reminded := m.progress()
			m.p.say("%d of %d deleted, %d reminded", deleted, len(m.pop.expiring), reminded)
			next = next.Add(10 * time.Second)
		}
		if err := m.wait(ctx, c, tick, time.Time{}); err != nil {
			return err
		}
	}
	stopTouching()
	if err := m.waitOwned(ctx, c, tick); err != nil {
		return err
	}
	if m.sleepers != nil {
		if err := m.sleepPhase(ctx, c, tick); err != nil {
			return err
		}
	}
	// Anything sent twice would come within moments.
	settle := time.Now().Add(m.cfg.Settle)
	for time.Now().Before(settle) {
		if err := m.wait(ctx, c, tick, time.Time{}); err != nil {
			return err
		}
	}

	if m.end, err = m.cl.apiMetrics(ctx); err != nil {
		return err
	}
	if m.atEnd, err = readProc(pid); err != nil {
		return err
	}
	if m.ctrl, err = scrapeController(ctx, c.metricsAddr); err != nil {
		return err
	}
	m.w.mu.Lock()
	err = m.w.err
	m.w.mu.Unlock()
	if m.ns != nil {
		m.ns.mu.Lock()
		err = errors.Join(err, m.ns.err)
		m.ns.mu.Unlock()
	}
	return err
}

// waitOwned waits (-owned) until the namespace of every expiring Playbook
// is gone, or OwnedGrace has passed since the last expiry. Namespaces left
// then are counted in the report, not a failure: how fast they go is
// kube-controller-manager's to say.
func (m *measurement) waitOwned(ctx context.Context, c *controllerProc, tick *time.Ticker) error {
	if m.ns == nil {
		return nil
	}
	deadline := m.pop.lastDue.Add(m.cfg.OwnedGrace)
	next := time.Now()
	for {
		gone := m.namespacesGone()
		if gone == len(m.pop.expiring) {
			m.p.say("all %d namespaces gone", gone)
			return nil
		}
		if time.Now().After(deadline) {
			m.p.say("%d of %d namespaces gone %s after the last expiry; stopped waiting", gone, len(m.pop.expiring), m.cfg.OwnedGrace)
			return nil
		}
		if time.Now().After(next) {
			m.p.say("%d of %d namespaces gone", gone, len(m.pop.expiring))
			next = next.Add(10 * time.Second)
		}
		if err := m.wait(ctx, c, tick, time.Time{}); err != nil {
			return err
		}
	}
}

// namespacesGone counts the expiring Playbooks whose namespace is gone.
func (m *measurement) namespacesGone() int {
	gone := 0
	for _, name := range m.pop.expiring {
		if _, ok := m.ns.deletedAt(testenv.Namespace(name)); ok {
			gone++
		}
	}
	return gone
}

// profileCPU profiles the controller and the API server (on two cores,
// what the controller waits for) until the last expiry and a little more,
// and returns a function that waits for both profiles.
func (m *measurement) profileCPU(ctx context.Context, c *controllerProc) (wait func()) {
	seconds := int(time.Until(m.pop.lastDue).Seconds()) + 5
	var wg sync.WaitGroup
	wg.Go(func() { m.saveProfile(ctx, c, fmt.Sprintf("/debug/pprof/profile?seconds=%d", seconds), "cpu.pb.gz") })
	wg.Go(func() {
		data, err := m.cl.rest.Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(seconds)).
			Timeout(time.Duration(seconds+30) * time.Second).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(filepath.Join(m.cfg.Profile, "apiserver-cpu.pb.gz"), data, 0o644)
		}
		if err != nil {
			m.p.say("profile apiserver-cpu.pb.gz: %v", err)
		}
	})
	return wg.Wait
}

// saveProfile fetches a profile from the controller into cfg.Profile,
// retrying while the controller is starting. Failures are only reported:
// a profile is an aid, not a figure.
func (m *measurement) saveProfile(ctx context.Context, c *controllerProc, path, file string) {
	var err error
	for range 50 {
		var data []byte
		if data, err = httpGet(ctx, "http://"+c.profileAddr+path); err == nil {
			err = os.WriteFile(filepath.Join(m.cfg.Profile, file), data, 0o644)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		m.p.say("profile %s: %v", file, err)
	}
}

// wait waits for the next tick, and fails when the run cannot go on.
func (m *measurement) wait(ctx context.Context, c *controllerProc, tick *time.Ticker, deadline time.Time) error {
	if !deadline.IsZero() && time.Now().After(deadline) {
		return errors.New("the last expiry and its grace have passed")
	}
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-c.done:
		return fmt.Errorf("the controller exited: %v", c.err)
	case <-tick.C:
		return nil
	}
}

func (m *measurement) complete() bool {
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	m.rc.mu.Lock()
	defer m.rc.mu.Unlock()
	for _, name := range m.pop.expiring {
		if _, ok := m.w.deleted[name]; !ok {
			return false
		}
		if _, ok := m.rc.reminders[name]; !ok && m.cfg.Reminders > 0 && m.cfg.Peer == "" {
			return false
		}
	}
	for _, name := range m.pop.slow {
		if _, ok := m.rc.mail[name]; !ok {
			return false
		}
	}
	return true
}

func (m *measurement) progress() (deleted, reminded int) {
	m.w.mu.Lock()
	deleted = len(m.w.deleted)
	m.w.mu.Unlock()
	m.rc.mu.Lock()
	reminded = len(m.rc.reminders)
	m.rc.mu.Unlock()
	return deleted, reminded
}

// report is what a run measured; it is also the JSON the bench writes.
type report struct {
	Machine machine `json:"machine"`
	Config  config  `json:"config"`
	// ControllerFlags are the values the controller says it runs with.
	ControllerFlags map[string]any `json:"controllerFlags"`

	CreateSeconds float64 `json:"createSeconds"`
	// ColdStartSeconds is from starting the controller's process until it
	// tracks every Playbook; HeadroomSeconds, from then until the first
	// reminder or expiry fell due.
	ColdStartSeconds float64 `json:"coldStartSeconds"`
	HeadroomSeconds  float64 `json:"headroomSeconds"`

	Deletion lagStats `json:"deletion"`
	// DeletionLate and DeletionTook split the controller's part of each
	// deletion, as its log says: from the deletion due to the start of
	// the reconcile that deleted (the wake-up and the queue), and from
	// then to the DELETE accepted (its reads and writes). The rest of
	// Deletion is the API server's watch to the bench.
	DeletionLate lagStats `json:"deletionLate"`
	DeletionTook lagStats `json:"deletionTook"`
	Reminder     lagStats `json:"reminder"`
	// Owned is, with -owned, from each expiring Playbook's expiry to its
	// namespace amp-<id> gone (DELETED): the last object it owned gone.
	// Its Missing are the namespaces still there at the end.
	Owned *lagStats `json:"owned,omitempty"`
	// SlowReminder is, for the -slow Playbooks, when the slow SMTP server
	// accepted each one's reminder, less the second they all fell due.
	SlowReminder *lagStats `json:"slowReminder,omitempty"`
	// Messages counts the other messages the receiver accepted, by type;
	// Redelivered, the deliveries of an id it had already accepted (any
	// type, reminders included); Refused, the requests that failed its
	// checks.
	Messages    map[string]int `json:"messages"`
	Redelivered map[string]int `json:"redelivered"`
	Refused     int            `json:"refused"`

	// IdleRSSBytes and IdleHeapLiveBytes are the resident memory and the
	// live heap of the controller running with its policy and no
	// Playbook; HeapLivePerObjectBytes is what each tracked Playbook
	// added to the live heap by the time all were tracked.
	IdleRSSBytes           int64   `json:"idleRSSBytes"`
	IdleHeapLiveBytes      int64   `json:"idleHeapLiveBytes"`
	HeapLivePerObjectBytes float64 `json:"heapLivePerObjectBytes"`
	// BinaryBytes is the size of the controller's binary, built as the
	// image builds it.
	BinaryBytes int64 `json:"binaryBytes"`

	PeakRSSBytes       int64 `json:"peakRSSBytes"`
	RSSAtSyncBytes     int64 `json:"rssAtSyncBytes"`
	PeakRSSAtSyncBytes int64 `json:"peakRSSAtSyncBytes"`
	// RSSAnonAtSyncBytes and RSSFileAtSyncBytes split RSSAtSyncBytes into
	// anonymous memory (heap, stacks) and file pages (the binary).
	RSSAnonAtSyncBytes int64   `json:"rssAnonAtSyncBytes"`
	RSSFileAtSyncBytes int64   `json:"rssFileAtSyncBytes"`
	CPUSeconds         float64 `json:"cpuSeconds"`
	CPUSecondsAtSync   float64 `json:"cpuSecondsAtSync"`
	// OtherCPUSeconds is the CPU time etcd, kube-apiserver,
	// kube-controller-manager and the bench itself spent during the
	// initial sync and after it, by process: they share the machine with
	// the controller.
	OtherCPUSeconds struct {
		InitialSync map[string]float64 `json:"initialSync"`
		AfterSync   map[string]float64 `json:"afterSync"`
	} `json:"otherCPUSeconds"`

	// API counts the controller's requests by "VERB resource", as the API
	// server counted them, the bench's own taken out. A watch is counted
	// when it ends, so Watches gives those the controller opened instead.
	API struct {
		InitialSync counts `json:"initialSync"`
		AfterSync   counts `json:"afterSync"`
		Watches     counts `json:"watches"`
		// ServedAfterSync is how long the API server itself took to
		// serve the requests after the sync
		// (apiserver_request_duration_seconds, estimated from its
		// buckets): of a DELETE, the part of the controller's
		// reconcile-to-accepted that is neither the controller nor the
		// way to the API server. It counts everyone's requests, the
		// bench's included.
		ServedAfterSync map[string]durationStats `json:"servedAfterSync"`
		// EtcdAfterSync is how long etcd took to answer the API server
		// after the sync, by "operation resource"
		// (etcd_request_duration_seconds, estimated from its buckets).
		EtcdAfterSync map[string]durationStats `json:"etcdAfterSync"`
	} `json:"api"`

	// Touch is the run with activity (-touch), when there was one.
	Touch *touchReport `json:"touch,omitempty"`
	// Wake is the run with sleepers (-sleepers), when there was one.
	Wake *wakeReport `json:"wake,omitempty"`

	Controller       ctrlMetrics `json:"controller"`
	ControllerAtSync ctrlMetrics `json:"controllerAtSync"`
	Problems         []string    `json:"problems,omitempty"`

	// Peer is, with -peer, the whole report: what compares of the peer.
	Peer *peerReport `json:"-"`
}

type machine struct {
	CPUs   int    `json:"cpus"`
	Model  string `json:"cpuModel"`
	Memory int64  `json:"memoryBytes"`
	Go     string `json:"go"`
	// Load is the load average (1, 5, 15 minutes) when the report was
	// made: anything else running shares the two cores.
	Load string `json:"load"`
	// Steal is the share of the CPUs' time, from the bench's start until
	// the report, that the hypervisor gave to other machines: a virtual
	// machine's neighbours slow every process of the run alike.
	Steal float64 `json:"stealShare"`
}

// String is the machine as the report's "machine" line gives it.
func (m machine) String() string {
	return fmt.Sprintf("%d CPUs, %s, %s, %s, load %s at the end; %.1f%% of the CPUs' time stolen by the hypervisor during the run",
		m.CPUs, m.Model, mib(m.Memory), m.Go, m.Load, 100*m.Steal)
}

// cpuTicks reads, from /proc/stat, the time all CPUs have spent, in
// ticks, and how much of it was stolen by the hypervisor.
func cpuTicks() (total, steal uint64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return parseCPUTicks(line)
}

// parseCPUTicks reads the "cpu" line of /proc/stat: user, nice, system,
// idle, iowait, irq, softirq and steal make the total; guest and
// guest_nice are counted in user and nice already.
func parseCPUTicks(line string) (total, steal uint64) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:9] {
		n, _ := strconv.ParseUint(v, 10, 64)
		total += n
		if i == 7 {
			steal = n
		}
	}
	return total, steal
}

// startTicks are the CPUs' ticks when the bench started.
var startTicks = func() [2]uint64 {
	total, steal := cpuTicks()
	return [2]uint64{total, steal}
}()

// lagStats are the lags of one kind of outcome, in milliseconds.
type lagStats struct {
	Expected   int     `json:"expected"`
	Observed   int     `json:"observed"`
	Missing    int     `json:"missing"`
	Early      int     `json:"early"`
	Duplicates int     `json:"duplicates"`
	P50        float64 `json:"p50Ms"`
	P90        float64 `json:"p90Ms"`
	P99        float64 `json:"p99Ms"`
	Max        float64 `json:"maxMs"`
}

func (m *measurement) report() *report {
	r := &report{Machine: thisMachine(), Config: m.cfg, ControllerFlags: startFlags(m.log), Problems: m.problems, Touch: m.touch}
	r.CreateSeconds = m.pop.took.Seconds()
	r.IdleRSSBytes, r.IdleHeapLiveBytes = m.idle.proc.rss, int64(m.idle.metrics.HeapLive)
	if fi, err := os.Stat(m.cl.bin); err == nil {
		r.BinaryBytes = fi.Size()
	}
	if !m.trackedAt.IsZero() {
		r.ColdStartSeconds = m.trackedAt.Sub(m.started).Seconds()
		r.HeadroomSeconds = m.pop.firstDue.Sub(m.trackedAt).Seconds()
		r.RSSAtSyncBytes, r.PeakRSSAtSyncBytes = m.atSync.rss, m.atSync.peakRSS
		r.RSSAnonAtSyncBytes, r.RSSFileAtSyncBytes = m.atSync.anon, m.atSync.file
		r.ControllerAtSync = m.ctrlAtSync
		r.HeapLivePerObjectBytes = (m.ctrlAtSync.HeapLive - m.idle.metrics.HeapLive) / float64(m.cfg.N)
		r.CPUSecondsAtSync = m.atSync.cpu.Seconds()
		r.API.InitialSync = delta(m.before, m.synced)
		r.OtherCPUSeconds.InitialSync = cpuDelta(m.before, m.synced)
		r.API.Watches = opened(m.before, m.synced)
	}
	if m.end.ended != nil {
		r.API.AfterSync = delta(m.synced, m.end)
		r.API.ServedAfterSync = servedSince(m.synced.served, m.end.served)
		r.API.EtcdAfterSync = servedSince(m.synced.etcd, m.end.etcd)
		r.OtherCPUSeconds.AfterSync = cpuDelta(m.synced, m.end)
		r.PeakRSSBytes, r.CPUSeconds = m.atEnd.peakRSS, m.atEnd.cpu.Seconds()
		r.Controller = m.ctrl
	}

	expiring := m.expiringSet()
	r.Deletion = m.deletionLags(expiring)
	r.DeletionLate, r.DeletionTook = deletionParts(m.log, expiring)
	if m.ns != nil {
		r.Owned = m.ownedLags()
	}

	m.rc.mu.Lock()
	var lags []time.Duration
	for name, arrivals := range m.rc.reminders {
		due := m.pop.expiresAt[name].Add(-m.cfg.Reminders)
		lag := arrivals[0].Sub(due)
		if lag < 0 {
			r.Reminder.Early++
		}
		r.Reminder.Duplicates += len(arrivals) - 1
		if expiring[name] {
			lags = append(lags, lag)
		}
	}
	r.Messages, r.Redelivered, r.Refused = m.rc.others, m.rc.again, len(m.rc.refused)
	if len(m.pop.slow) > 0 {
		r.SlowReminder = &lagStats{}
		var slow []time.Duration
		for _, arrivals := range m.rc.mail {
			lag := arrivals[0].Sub(m.pop.slowDue)
			if lag < 0 {
				r.SlowReminder.Early++
			}
			r.SlowReminder.Duplicates += len(arrivals) - 1
			slow = append(slow, lag)
		}
		r.SlowReminder.fill(len(m.pop.slow), slow)
	}
	m.rc.mu.Unlock()
	if m.cfg.Reminders > 0 {
		r.Reminder.fill(len(m.pop.expiring), lags)
	}
	if m.sleepers != nil {
		r.Wake = m.wakeReport()
	}
	return r
}

func (m *measurement) expiringSet() map[string]bool {
	expiring := make(map[string]bool, len(m.pop.expiring))
	for _, name := range m.pop.expiring {
		expiring[name] = true
	}
	return expiring
}

// deletionLags are the lags from each expiring Playbook's expiry to its
// DELETED event; Early counts any Playbook deleted before its expiry.
func (m *measurement) deletionLags(expiring map[string]bool) lagStats {
	var s lagStats
	var lags []time.Duration
	m.w.mu.Lock()
	for name, at := range m.w.deleted {
		lag := at.Sub(m.pop.expiresAt[name])
		if lag < 0 {
			s.Early++
		}
		if expiring[name] {
			lags = append(lags, lag)
		}
	}
	s.Duplicates = m.w.repeats
	m.w.mu.Unlock()
	s.fill(len(m.pop.expiring), lags)
	return s
}

// ownedLags are the lags from each expiring Playbook's expiry to its
// namespace gone.
func (m *measurement) ownedLags() *lagStats {
	s := &lagStats{}
	var lags []time.Duration
	for _, name := range m.pop.expiring {
		at, ok := m.ns.deletedAt(testenv.Namespace(name))
		if !ok {
			continue
		}
		lag := at.Sub(m.pop.expiresAt[name])
		if lag < 0 {
			s.Early++
		}
		lags = append(lags, lag)
	}
	m.ns.mu.Lock()
	s.Duplicates = m.ns.repeats
	m.ns.mu.Unlock()
	s.fill(len(m.pop.expiring), lags)
	return s
}

func (s *lagStats) fill(expected int, lags []time.Duration) {
	s.Expected, s.Observed, s.Missing = expected, len(lags), expected-len(lags)
	if len(lags) == 0 {
		return
	}
	slices.Sort(lags)
	// Nearest rank: the smallest lag at least p of them do not exceed.
	at := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(lags)))) - 1
		return float64(lags[max(i, 0)].Microseconds()) / 1000
	}
	s.P50, s.P90, s.P99, s.Max = at(0.50), at(0.90), at(0.99), at(1)
}

// delta is what the controller asked of the API server between a and b:
// the server's counts less the bench's own.
func delta(a, b apiSnapshot) counts {
	out := counts{}
	for k, v := range b.ended {
		if d := v - a.ended[k] - (b.bench[k] - a.bench[k]); d != 0 {
			out[k] = d
		}
	}
	return out
}

func cpuDelta(a, b apiSnapshot) map[string]float64 {
	out := map[string]float64{}
	for k, v := range b.cpu {
		out[k] = (v - a.cpu[k]).Seconds()
	}
	return out
}

func thisMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(data)); len(f) >= 3 {
			m.Load = strings.Join(f[:3], " ")
		}
	}
	if total, steal := cpuTicks(); total > startTicks[0] {
		m.Steal = float64(steal-startTicks[1]) / float64(total-startTicks[0])
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				m.Memory = kb << 10
			}
		}
	}
	return m
}

// deletionParts reads, from the controller's log, the two parts of each
// expiring Playbook's deletion it logged: the wait for its reconcile to
// start and the reconcile's work until the DELETE was accepted.
func deletionParts(logPath string, expiring map[string]bool) (late, took lagStats) {
	f, err := os.Open(logPath)
	if err != nil {
		return
	}
	defer f.Close()
	var lates, tooks []time.Duration
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg    string `json:"msg"`
			Object struct {
				Name string `json:"name"`
			} `json:"object"`
			Late *float64 `json:"late"`
			Took *float64 `json:"took"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != "deleted" || !expiring[line.Object.Name] || line.Late == nil || line.Took == nil {
			continue
		}
		lates = append(lates, time.Duration(*line.Late*float64(time.Second)))
		tooks = append(tooks, time.Duration(*line.Took*float64(time.Second)))
	}
	late.fill(len(expiring), lates)
	took.fill(len(expiring), tooks)
	return late, took
}

// startFlags reads the values the controller logged at its start: the
// effective ones, defaults included.
func startFlags(logPath string) map[string]any {
	f, err := os.Open(logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "starting" {
			return map[string]any{"workers": line["workers"], "qps": line["qps"], "burst": line["burst"]}
		}
	}
	return nil
}

// print writes the report as one table: the run's facts, the lags, and
// the API requests by phase.
func (r *report) print(out io.Writer) {
	if r.Peer != nil {
		r.Peer.print(out)
		return
	}
	c := r.Config
	fact := func(label, format string, args ...any) {
		fmt.Fprintf(out, "%-26s %s\n", label, fmt.Sprintf(format, args...))
	}
	plain := ""
	if c.PlainOthers {
		plain = "; the others without a timeout annotation"
	}
	fact("run", "N=%d, %d expiring over %s (%d in one second), reminder %s before%s; %.0f%% with last-applied-configuration",
		c.N, c.Expiring, c.Window, c.Burst, c.Reminders, plain, 100*c.LastApplied)
	fact("controller", "workers=%v qps=%v burst=%v %s", r.ControllerFlags["workers"], r.ControllerFlags["qps"], r.ControllerFlags["burst"],
		strings.Join(append(slices.Clone(c.ControllerArgs), c.ControllerEnv...), " "))
	fact("machine", "%s", r.Machine)
	fact("created", "%d in %.1fs (%.0f/s)", c.N, r.CreateSeconds, float64(c.N)/r.CreateSeconds)
	fact("cold start", "%.2fs until all %d tracked; %.1fs before the first due moment", r.ColdStartSeconds, c.N, r.HeadroomSeconds)
	fact("controller idle", "%s resident, %s live heap, with no Playbook; binary %.1f MB", mib(r.IdleRSSBytes), mib(r.IdleHeapLiveBytes),
		float64(r.BinaryBytes)/1e6)
	fact("live heap per object", "%.0f B ((live heap at sync %s - idle) / N)", r.HeapLivePerObjectBytes, mib(int64(r.ControllerAtSync.HeapLive)))
	fact("controller peak RSS", "%s (at sync: %s = %s anonymous + %s file; peak %s)", mib(r.PeakRSSBytes),
		mib(r.RSSAtSyncBytes), mib(r.RSSAnonAtSyncBytes), mib(r.RSSFileAtSyncBytes), mib(r.PeakRSSAtSyncBytes))
	heap := func(m ctrlMetrics) string {
		return fmt.Sprintf("%s in use, %s idle, %s stacks, next GC at %s", mib(int64(m.HeapInuse)), mib(int64(m.HeapRetained)),
			mib(int64(m.Stacks)), mib(int64(m.NextGC)))
	}
	fact("controller Go heap", "at sync: %s", heap(r.ControllerAtSync))
	fact("", "at end: %s", heap(r.Controller))
	fact("controller CPU", "%.2fs (%.2fs at sync)", r.CPUSeconds, r.CPUSecondsAtSync)
	fact("other CPU, initial sync", "%s", otherCPU(r.OtherCPUSeconds.InitialSync))
	fact("other CPU, after sync", "%s", otherCPU(r.OtherCPUSeconds.AfterSync))
	fact("object reconciles", "%.0f (%.0f errors)", r.Controller.Reconciles, r.Controller.Errors)
	fact("other messages", "%v, %d refused, redelivered by id %v", r.Messages, r.Refused, r.Redelivered)
	if o := r.Owned; o != nil {
		fact("owned namespaces", "%d of %d gone within %s of the last expiry, %d left; the controller saw %.0f reclaimed",
			o.Observed, o.Expected, c.OwnedGrace, o.Missing, r.Controller.OwnedGone)
	}
	if t := r.Touch; t != nil {
		fact("activity", "%d Playbooks edited every %s for %.0fs under idleTTL %s: %d edits (%d failed)",
			t.Objects, c.TouchEvery, t.Seconds, c.IdleTTL, t.Edits, t.Failed)
		fact("", "%.0f activity writes: %.1f per object per hour, %.2f at a one-day idleTTL", t.Writes, t.WritesPerObjectHour, t.AtOneDayIdleTTL)
	}

	printLags(out, []namedLags{{"deletion", r.Deletion}, {"  due to reconcile (log)", r.DeletionLate}, {"  reconcile to accepted", r.DeletionTook}, {"owned gone (namespace)", deref(r.Owned)}, {"reminder", r.Reminder}, {"reminder, slow SMTP", deref(r.SlowReminder)}})
	printRequests(out, [2]string{"initial sync", "after sync"}, r.API.InitialSync, r.API.AfterSync, r.API.Watches, c.Expiring, r.API.ServedAfterSync)
	printEtcd(out, r.API.EtcdAfterSync)
	if c.Owned {
		fmt.Fprintln(out, "(with -owned these include kube-controller-manager's requests: garbage collection and namespace deletion)")
	}
	if r.Wake != nil {
		r.Wake.print(out)
	}
	for _, p := range r.Problems {
		fmt.Fprintln(out, "problem:", p)
	}
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// otherCPU names the CPU seconds of the processes that share the machine.
func otherCPU(m map[string]float64) string {
	return fmt.Sprintf("kube-apiserver %.1fs, etcd %.1fs, kube-controller-manager %.1fs, bench %.1fs",
		m["kube-apiserver"], m["etcd"], m["kube-controller-manager"], m["bench"])
}

type namedLags struct {
	name string
	s    lagStats
}

// printLags writes the table of lags, a row for each kind expected.
func printLags(out io.Writer, rows []namedLags) {
	fmt.Fprintf(out, "\n%-26s %9s %9s %9s %9s %9s %8s %6s %6s\n", "lag (ms)", "p50", "p90", "p99", "max", "observed", "missing", "early", "dup")
	for _, l := range rows {
		if l.s.Expected == 0 {
			continue
		}
		fmt.Fprintf(out, "%-26s %9.1f %9.1f %9.1f %9.1f %9d %8d %6d %6d\n", l.name,
			l.s.P50, l.s.P90, l.s.P99, l.s.Max, l.s.Observed, l.s.Missing, l.s.Early, l.s.Duplicates)
	}
}

// printRequests writes the table of API requests in the two phases named
// by phases, the second's also per expiring Playbook and, when served
// says, how long the API server took to serve them; and the watches open.
func printRequests(out io.Writer, phases [2]string, first, second, watches counts, expiring int, served map[string]durationStats) {
	fmt.Fprintf(out, "\n%-26s %12s %12s %14s", "API requests", phases[0], phases[1], "per expiring")
	if served != nil {
		fmt.Fprintf(out, "  %s", "served p50 / p99 (ms, all clients)")
	}
	fmt.Fprintln(out)
	keys := map[string]bool{}
	for _, cs := range []counts{first, second} {
		for k := range cs {
			keys[k] = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		per := "-"
		if expiring > 0 {
			per = fmt.Sprintf("%.2f", second[k]/float64(expiring))
		}
		fmt.Fprintf(out, "%-26s %12.0f %12.0f %14s", k, first[k], second[k], per)
		if st, ok := served[k]; ok {
			fmt.Fprintf(out, "  %.0f / %.0f", st.P50, st.P99)
		}
		fmt.Fprintln(out)
	}
	for _, k := range slices.Sorted(maps.Keys(watches)) {
		fmt.Fprintf(out, "%-26s %12.0f %12s %14s\n", k+" (open)", watches[k], "", "")
	}
}

// printEtcd prints how long etcd took to answer the API server's
// requests after the sync.
func printEtcd(out io.Writer, etcd map[string]durationStats) {
	if len(etcd) == 0 {
		return
	}
	fmt.Fprintf(out, "\n%-34s %10s %22s\n", "etcd, as the API server saw it", "requests", "p50 / p99 (ms)")
	for _, k := range slices.Sorted(maps.Keys(etcd)) {
		st := etcd[k]
		fmt.Fprintf(out, "%-34s %10.0f %22s\n", k, st.Count, fmt.Sprintf("%.1f / %.1f", st.P50, st.P99))
	}
}

func deref(s *lagStats) lagStats {
	if s == nil {
		return lagStats{}
	}
	return *s
}

// opened returns the watches open at b and not at a, by resource.
func opened(a, b apiSnapshot) counts {
	out := counts{}
	for k, v := range b.open {
		if d := v - a.open[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}
