// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A peer is another TTL controller run in place of timeout-controller on
// the same objects (-peer): TwiN/k8s-ttl-controller, which lists every
// Playbook in pages of 500 every five minutes and deletes those whose
// peerTTLAnnotation has passed. It serves no metrics and sends no
// reminders: the bench reads its process, its log and the API server.

// peerTTLAnnotation is the peer's annotation: a lifetime (1h, 2d) counted
// from the object's creationTimestamp.
const peerTTLAnnotation = "k8s-ttl-controller.twin.sh/ttl"

// peerDefaultTTL is the peer's lifetime for the -plain-others Playbooks:
// the defaultTTL of the bench's policy, which they live by under
// timeout-controller.
const peerDefaultTTL = 14 * 24 * time.Hour

// peerResources is the peer's API_RESOURCES_TO_WATCH: it compares each
// entry with the plural name of every resource the API server serves.
var peerResources = playbooks.Resource

// setPeerTTL gives obj the peer's annotation with the lifetime that ends
// at expiresAt; plain objects (-plain-others) get peerDefaultTTL.
func setPeerTTL(obj *unstructured.Unstructured, expiresAt time.Time, plain bool) {
	lifetime := peerDefaultTTL
	if !plain {
		// The API server stamps creationTimestamp in whole seconds, no
		// earlier than now: the peer's expiry is expiresAt, or a second
		// later when the request straddles a second, never before.
		lifetime = expiresAt.Sub(time.Now().Truncate(time.Second))
	}
	a := obj.GetAnnotations()
	a[peerTTLAnnotation] = lifetime.String()
	obj.SetAnnotations(a)
}

// validatePeer rejects, with -peer, what measures timeout-controller's
// own features or needs its metrics.
func (c config) validatePeer() error {
	var bad []string
	for flag, set := range map[string]bool{
		"-slow": c.Slow > 0, "-touch": c.Touch > 0, "-series": c.Series != "", "-profile": c.Profile != "",
		"-workers": c.Workers > 0, "-qps": c.QPS > 0, "-burst-api": c.BurstAPI > 0,
	} {
		if set {
			bad = append(bad, flag)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("-peer runs another controller: %s apply to timeout-controller only", strings.Join(bad, ", "))
	}
	return nil
}

// peerRun is the peer's binary and the HOME it runs with, whose
// .kube/config is the bench's kubeconfig.
type peerRun struct {
	bin         string
	home        string
	binaryBytes int64
}

func newPeerRun(bin, kubeconfig, tmp string) (*peerRun, error) {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(bin)
	if err != nil {
		return nil, fmt.Errorf("-peer: %w", err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("-peer: %s is not an executable file", bin)
	}
	pr := &peerRun{bin: bin, home: filepath.Join(tmp, "peer-home"), binaryBytes: fi.Size()}
	data, err := os.ReadFile(kubeconfig)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(pr.home, ".kube"), 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(pr.home, ".kube", "config"), data, 0o600); err != nil {
		return nil, err
	}
	return pr, nil
}

// env is the peer's environment: ENVIRONMENT=dev makes it read
// $HOME/.kube/config instead of the in-cluster configuration.
// -controller-env comes last and wins.
func (pr *peerRun) env(cfg config) []string {
	env := append(os.Environ(), "HOME="+pr.home, "ENVIRONMENT=dev", "API_RESOURCES_TO_WATCH="+peerResources)
	return append(env, cfg.ControllerEnv...)
}

func (pr *peerRun) start(logPath string, cfg config) (*controllerProc, error) {
	return launch("peer", pr.bin, cfg.ControllerArgs, pr.env(cfg), logPath)
}

// measureIdle runs the peer with no Playbook in the cluster and reads its
// memory once it has settled and ended a pass, then stops it.
func (pr *peerRun) measureIdle(ctx context.Context, logPath string, cfg config) (idleFigures, error) {
	c, err := pr.start(logPath, cfg)
	if err != nil {
		return idleFigures{}, err
	}
	defer c.stop()
	l, err := openPeerLog(logPath)
	if err != nil {
		return idleFigures{}, err
	}
	defer l.close()
	return untilSettled(ctx, c, "peer", logPath, func() (idleFigures, bool, error) {
		if err := l.poll(); err != nil || len(l.passes) == 0 {
			return idleFigures{}, false, err
		}
		st, err := readProc(c.cmd.Process.Pid)
		return idleFigures{proc: st}, true, err
	})
}

// peerLog follows the peer's log for the end of each pass, which it logs
// as "Execution took 1234ms, sleeping for 5m0s", and for its errors.
type peerLog struct {
	f      *os.File
	buf    []byte
	rest   []byte
	passes []peerPass
	errors int
}

// peerPass is one pass of the peer: how long it logged it took, and when
// the bench read that line.
type peerPass struct {
	took time.Duration
	end  time.Time
}

func (p peerPass) start() time.Time { return p.end.Add(-p.took) }

var (
	peerPassLine = regexp.MustCompile(`Execution took (\d+)ms`)
	// peerErrorLine matches what the peer logs when a list or a delete
	// failed, or a whole pass did.
	peerErrorLine = regexp.MustCompile(`Error checking|failed to delete|Error during execution`)
)

func openPeerLog(path string) (*peerLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &peerLog{f: f, buf: make([]byte, 64<<10)}, nil
}

func (l *peerLog) close() { _ = l.f.Close() }

// poll reads what the peer logged since the last call.
func (l *peerLog) poll() error {
	now := time.Now()
	for {
		n, err := l.f.Read(l.buf)
		l.rest = append(l.rest, l.buf[:n]...)
		if errors.Is(err, io.EOF) || n == 0 {
			break
		}
		if err != nil {
			return fmt.Errorf("read the peer's log: %w", err)
		}
	}
	for {
		i := bytes.IndexByte(l.rest, '\n')
		if i < 0 {
			break
		}
		line := l.rest[:i]
		l.rest = l.rest[i+1:]
		if m := peerPassLine.FindSubmatch(line); m != nil {
			ms, _ := strconv.ParseInt(string(m[1]), 10, 64)
			l.passes = append(l.passes, peerPass{took: time.Duration(ms) * time.Millisecond, end: now})
		} else if peerErrorLine.Match(line) {
			l.errors++
		}
	}
	// What is left is a part of a line: keep it, not the buffer it is in.
	l.rest = append([]byte(nil), l.rest...)
	return nil
}

// runPeer runs the peer on the Playbooks and measures it.
func (m *measurement) runPeer(ctx context.Context, pr *peerRun, before apiSnapshot) (*report, error) {
	c, err := pr.start(m.log, m.cfg)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	m.p.say("peer started (pid %d), log %s", c.cmd.Process.Pid, m.log)
	l, err := openPeerLog(m.log)
	if err != nil {
		return nil, err
	}
	defer l.close()
	err = m.measurePeer(ctx, c, l, before)
	return &report{Peer: m.peerReport(pr, l)}, err
}

// measurePeer waits until the peer ends its first pass, which has listed
// every Playbook once (the counterpart of timeout-controller tracking
// them all), then until every expiring Playbook is deleted or a pass that
// started after the last expiry has ended, and takes the figures at both
// moments.
func (m *measurement) measurePeer(ctx context.Context, c *controllerProc, l *peerLog, before apiSnapshot) error {
	m.before, m.started = before, time.Now()
	pid := c.cmd.Process.Pid
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for len(l.passes) == 0 {
		if err := m.wait(ctx, c, tick, time.Time{}); err != nil {
			return fmt.Errorf("%w before the peer ended its first pass", err)
		}
		if err := l.poll(); err != nil {
			return err
		}
	}
	first := l.passes[0]
	m.trackedAt = first.end
	var err error
	if m.atSync, err = readProc(pid); err != nil {
		return err
	}
	if m.synced, err = m.cl.apiMetrics(ctx); err != nil {
		return err
	}
	m.p.say("first pass took %s (logged), ended %s after the start; the first expiry is %s later", first.took,
		m.trackedAt.Sub(m.started).Round(time.Millisecond), m.firstExpiry().Sub(m.trackedAt).Round(100*time.Millisecond))

	// The peer deletes what has expired on each pass, five minutes apart.
	var giveUp time.Time
	next := time.Now().Add(30 * time.Second)
	for !m.complete() {
		if err := l.poll(); err != nil {
			return err
		}
		if last := l.passes[len(l.passes)-1]; giveUp.IsZero() && last.start().After(m.pop.lastDue) {
			// Its DELETED events may still be on their way.
			giveUp = time.Now().Add(m.cfg.Settle)
		}
		if !giveUp.IsZero() && time.Now().After(giveUp) {
			deleted, _ := m.progress()
			m.problems = append(m.problems, fmt.Sprintf("%d expiring Playbooks were left after the peer's first pass that started after the last expiry",
				len(m.pop.expiring)-deleted))
			break
		}
		if time.Now().After(next) {
			deleted, _ := m.progress()
			m.p.say("%d of %d deleted; the peer ended %d passes", deleted, len(m.pop.expiring), len(l.passes))
			next = next.Add(30 * time.Second)
		}
		if err := m.wait(ctx, c, tick, time.Time{}); err != nil {
			return err
		}
	}
	if err := m.waitOwned(ctx, c, tick); err != nil {
		return err
	}
	settle := time.Now().Add(m.cfg.Settle)
	for time.Now().Before(settle) {
		if err := m.wait(ctx, c, tick, time.Time{}); err != nil {
			return err
		}
	}
	if err := l.poll(); err != nil {
		return err
	}
	if m.end, err = m.cl.apiMetrics(ctx); err != nil {
		return err
	}
	if m.atEnd, err = readProc(pid); err != nil {
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

// firstExpiry is when the first expiring Playbook expires: the peer knows
// no reminders, whose lead the first due moment includes.
func (m *measurement) firstExpiry() time.Time {
	if len(m.pop.expiring) == 0 {
		return m.pop.firstDue
	}
	return m.pop.firstDue.Add(m.cfg.Reminders)
}

// peerReport is what a run with -peer measured: the figures that compare
// with timeout-controller's, under names that say what they are for a
// controller that passes over every object instead of tracking each.
type peerReport struct {
	Machine machine `json:"machine"`
	Config  config  `json:"config"`
	// Binary is the peer's path; BinaryBytes its size.
	Binary        string  `json:"binary"`
	BinaryBytes   int64   `json:"binaryBytes"`
	CreateSeconds float64 `json:"createSeconds"`
	// IdleRSSBytes is the peer's resident memory with no Playbook, at
	// least 10 s after its start and after its first pass.
	IdleRSSBytes int64 `json:"idleRSSBytes"`
	// FirstPassSeconds is the first pass as the peer logged it;
	// FirstPassEndSeconds, from starting its process until the bench
	// read that line: the counterpart of the controller's cold start.
	// HeadroomSeconds is from then until the first expiry.
	FirstPassSeconds    float64 `json:"firstPassSeconds"`
	FirstPassEndSeconds float64 `json:"firstPassEndSeconds"`
	HeadroomSeconds     float64 `json:"headroomSeconds"`
	// PassSeconds are all its passes, as logged.
	PassSeconds []float64 `json:"passSeconds"`
	// LogErrors counts the failed lists, deletes and passes it logged.
	LogErrors int `json:"logErrors"`

	PeakRSSBytes int64 `json:"peakRSSBytes"`
	// The RSS at the end of the first pass, split as the controller's
	// at sync, and the peak until then.
	RSSAtFirstPassBytes     int64   `json:"rssAtFirstPassBytes"`
	PeakRSSAtFirstPassBytes int64   `json:"peakRSSAtFirstPassBytes"`
	RSSAnonAtFirstPassBytes int64   `json:"rssAnonAtFirstPassBytes"`
	RSSFileAtFirstPassBytes int64   `json:"rssFileAtFirstPassBytes"`
	CPUSeconds              float64 `json:"cpuSeconds"`
	CPUSecondsAtFirstPass   float64 `json:"cpuSecondsAtFirstPass"`
	OtherCPUSeconds         struct {
		FirstPass      map[string]float64 `json:"firstPass"`
		AfterFirstPass map[string]float64 `json:"afterFirstPass"`
	} `json:"otherCPUSeconds"`
	// API counts the peer's requests as report.API counts the
	// controller's.
	API struct {
		FirstPass      counts `json:"firstPass"`
		AfterFirstPass counts `json:"afterFirstPass"`
		Watches        counts `json:"watches"`
	} `json:"api"`

	// Deletion is from each expiring Playbook's expiry to its DELETED
	// event; the peer's passes are five minutes apart.
	Deletion lagStats  `json:"deletion"`
	Owned    *lagStats `json:"owned,omitempty"`

	// NotMeasured names what the bench measures of timeout-controller
	// and not of a peer, and why.
	NotMeasured []string `json:"notMeasured"`
	Problems    []string `json:"problems,omitempty"`
}

// peerNotMeasured are the figures a peer run leaves out.
var peerNotMeasured = []string{
	"reminders: the peer sends none",
	"live heap, Go heap, reconciles: the peer serves no metrics",
}

func (m *measurement) peerReport(pr *peerRun, l *peerLog) *peerReport {
	r := &peerReport{Machine: thisMachine(), Config: m.cfg, Binary: pr.bin, BinaryBytes: pr.binaryBytes,
		CreateSeconds: m.pop.took.Seconds(), IdleRSSBytes: m.idle.proc.rss, LogErrors: l.errors,
		NotMeasured: peerNotMeasured, Problems: m.problems}
	for _, p := range l.passes {
		r.PassSeconds = append(r.PassSeconds, p.took.Seconds())
	}
	if len(l.passes) > 0 {
		r.FirstPassSeconds = l.passes[0].took.Seconds()
	}
	if !m.trackedAt.IsZero() {
		r.FirstPassEndSeconds = m.trackedAt.Sub(m.started).Seconds()
		r.HeadroomSeconds = m.firstExpiry().Sub(m.trackedAt).Seconds()
		r.RSSAtFirstPassBytes, r.PeakRSSAtFirstPassBytes = m.atSync.rss, m.atSync.peakRSS
		r.RSSAnonAtFirstPassBytes, r.RSSFileAtFirstPassBytes = m.atSync.anon, m.atSync.file
		r.CPUSecondsAtFirstPass = m.atSync.cpu.Seconds()
		r.API.FirstPass = delta(m.before, m.synced)
		r.OtherCPUSeconds.FirstPass = cpuDelta(m.before, m.synced)
		r.API.Watches = opened(m.before, m.synced)
	}
	if m.end.ended != nil {
		r.API.AfterFirstPass = delta(m.synced, m.end)
		r.OtherCPUSeconds.AfterFirstPass = cpuDelta(m.synced, m.end)
		r.PeakRSSBytes, r.CPUSeconds = m.atEnd.peakRSS, m.atEnd.cpu.Seconds()
	}
	r.Deletion = m.deletionLags(m.expiringSet())
	if m.ns != nil {
		r.Owned = m.ownedLags()
	}
	return r
}

// print writes the peer's report as one table, laid out as the
// controller's.
func (r *peerReport) print(out io.Writer) {
	c := r.Config
	fact := func(label, format string, args ...any) {
		fmt.Fprintf(out, "%-26s %s\n", label, fmt.Sprintf(format, args...))
	}
	plain := ""
	if c.PlainOthers {
		plain = fmt.Sprintf("; the others without a timeout annotation (peer TTL %s)", peerDefaultTTL)
	}
	fact("run", "N=%d, %d expiring over %s (%d in one second)%s; %.0f%% with last-applied-configuration; each also with %s",
		c.N, c.Expiring, c.Window, c.Burst, plain, 100*c.LastApplied, peerTTLAnnotation)
	fact("peer", "%s", strings.Join(slices.Concat([]string{r.Binary, "ENVIRONMENT=dev", "API_RESOURCES_TO_WATCH=" + peerResources},
		c.ControllerArgs, c.ControllerEnv), " "))
	fact("machine", "%s", r.Machine)
	fact("created", "%d in %.1fs (%.0f/s)", c.N, r.CreateSeconds, float64(c.N)/r.CreateSeconds)
	fact("first pass", "%.2fs as logged, ended %.2fs after the start; %.1fs before the first expiry", r.FirstPassSeconds,
		r.FirstPassEndSeconds, r.HeadroomSeconds)
	passes := make([]string, len(r.PassSeconds))
	for i, s := range r.PassSeconds {
		passes[i] = fmt.Sprintf("%.2fs", s)
	}
	fact("peer passes", "%d: %s; %d errors logged", len(passes), strings.Join(passes, ", "), r.LogErrors)
	fact("peer idle", "%s resident, with no Playbook; binary %.1f MB", mib(r.IdleRSSBytes), float64(r.BinaryBytes)/1e6)
	fact("peer peak RSS", "%s (at the end of the first pass: %s = %s anonymous + %s file; peak %s)", mib(r.PeakRSSBytes),
		mib(r.RSSAtFirstPassBytes), mib(r.RSSAnonAtFirstPassBytes), mib(r.RSSFileAtFirstPassBytes), mib(r.PeakRSSAtFirstPassBytes))
	fact("peer CPU", "%.2fs (%.2fs at the end of the first pass)", r.CPUSeconds, r.CPUSecondsAtFirstPass)
	fact("other CPU, first pass", "%s", otherCPU(r.OtherCPUSeconds.FirstPass))
	fact("other CPU, after it", "%s", otherCPU(r.OtherCPUSeconds.AfterFirstPass))
	if o := r.Owned; o != nil {
		fact("owned namespaces", "%d of %d gone within %s of the last expiry, %d left", o.Observed, o.Expected, c.OwnedGrace, o.Missing)
	}
	fact("not measured", "%s", strings.Join(r.NotMeasured, "; "))
	printLags(out, []namedLags{{"deletion", r.Deletion}, {"owned gone (namespace)", deref(r.Owned)}})
	printRequests(out, [2]string{"first pass", "after it"}, r.API.FirstPass, r.API.AfterFirstPass, r.API.Watches, c.Expiring, nil)
	if c.Owned {
		fmt.Fprintln(out, "(with -owned these include kube-controller-manager's requests: garbage collection and namespace deletion)")
	}
	for _, p := range r.Problems {
		fmt.Fprintln(out, "problem:", p)
	}
}
