// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// watcher is one of the bench's watches, on Playbooks or (-owned) on
// namespaces: it notes when each object's DELETED event arrived.
type watcher struct {
	what   string
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	deleted map[string]time.Time
	// repeats counts DELETED events for names already deleted.
	repeats int
	err     error
}

// watchDeletions watches the resource (what names it in errors) from the
// collection's current version, so that the objects already there are not
// replayed; size is how many deletions to expect.
func (cl *cluster) watchDeletions(ctx context.Context, resource schema.GroupVersionResource, what string, size int) (*watcher, error) {
	r := cl.meta.Resource(resource)
	list, err := r.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("read the %s' resourceVersion: %w", what, err)
	}
	rv := list.ResourceVersion
	ctx, cancel := context.WithCancel(ctx)
	wi, err := r.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch %s: %w", what, err)
	}
	w := &watcher{what: what, cancel: cancel, done: make(chan struct{}), deleted: make(map[string]time.Time, size)}
	go func() {
		defer close(w.done)
		for {
			for ev := range wi.ResultChan() {
				now := time.Now()
				if ev.Type == watch.Error {
					w.fail(apierrors.FromObject(ev.Object))
					continue
				}
				o, ok := ev.Object.(*metav1.PartialObjectMetadata)
				if !ok {
					continue
				}
				rv = o.ResourceVersion
				if ev.Type == watch.Deleted {
					w.mu.Lock()
					if _, seen := w.deleted[o.Name]; seen {
						w.repeats++
					} else {
						w.deleted[o.Name] = now
					}
					w.mu.Unlock()
				}
			}
			if ctx.Err() != nil {
				return
			}
			// The API server ends every watch after a while: carry on
			// from the last version seen.
			if wi, err = r.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}); err != nil {
				w.fail(err)
				return
			}
		}
	}()
	return w, nil
}

func (w *watcher) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = fmt.Errorf("watch %s: %w", w.what, err)
	}
	w.mu.Unlock()
}

func (w *watcher) stop() {
	w.cancel()
	<-w.done
}

// deletedAt returns when name's DELETED event arrived.
func (w *watcher) deletedAt(name string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.deleted[name]
	return at, ok
}

// receiver is a webhook endpoint that checks each delivery's Standard
// Webhooks signature with its own HMAC, as a real receiver would, and
// notes when each reminder arrived.
type receiver struct {
	url    string
	secret string
	key    []byte
	srv    *http.Server

	mu        sync.Mutex
	reminders map[string][]time.Time
	// others counts the other messages by type; refused, the requests
	// that failed the checks. ids holds every message's id, and again
	// counts deliveries of an id already received, by type (they are
	// counted in reminders and others too).
	others  map[string]int
	refused []string
	ids     map[string]bool
	again   map[string]int

	// smtp is the slow SMTP server (-slow) at smtpAddr; mail notes when
	// it accepted each Playbook's reminders, by name.
	smtp     *smtp.Server
	smtpAddr *net.TCPAddr
	mail     map[string][]time.Time
}

func startReceiver(smtpDelay time.Duration) (*receiver, error) {
	rc := &receiver{key: make([]byte, 32), reminders: map[string][]time.Time{}, others: map[string]int{}, mail: map[string][]time.Time{}, ids: map[string]bool{}, again: map[string]int{}}
	_, _ = rand.Read(rc.key)
	rc.secret = "whsec_" + base64.StdEncoding.EncodeToString(rc.key)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	rc.url = "http://" + l.Addr().String() + "/hooks/timeout"
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks/timeout", rc.serve)
	rc.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = rc.srv.Serve(l) }()
	if err := rc.startSMTP(smtpDelay); err != nil {
		rc.close()
		return nil, err
	}
	return rc, nil
}

func (rc *receiver) close() {
	_ = rc.srv.Close()
	if rc.smtp != nil {
		_ = rc.smtp.Close()
	}
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
	mac := hmac.New(sha256.New, rc.key)
	fmt.Fprintf(mac, "%s.%s.%s", id, ts, body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	var ev struct {
		ID      string `json:"id"`
		Type    string `json:"type"`
		Subject string `json:"subject"`
	}
	problem := ""
	switch {
	case err != nil:
		problem = "read body: " + err.Error()
	case !hmac.Equal([]byte(r.Header.Get("webhook-signature")), []byte(want)):
		problem = "bad signature"
	case json.Unmarshal(body, &ev) != nil || ev.ID != id:
		problem = "bad envelope"
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if problem != "" {
		rc.refused = append(rc.refused, problem)
		http.Error(w, problem, http.StatusBadRequest)
		return
	}
	t := strings.TrimPrefix(ev.Type, notify.CloudEventTypePrefix)
	if rc.ids[id] {
		rc.again[t]++
	}
	rc.ids[id] = true
	if t == "reminder" {
		rc.reminders[ev.Subject] = append(rc.reminders[ev.Subject], arrived)
	} else {
		rc.others[t]++
	}
	w.WriteHeader(http.StatusNoContent)
}

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// families is a Prometheus text exposition, read: its metric families by
// name.
type families map[string]*dto.MetricFamily

// readFamilies reads a Prometheus text exposition.
func readFamilies(text []byte) (families, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return fams, nil
}

// parseMetrics returns the samples of the named counters and gauges in a
// Prometheus text exposition, and of the named histograms their counts.
func parseMetrics(text []byte, names ...string) ([]sample, error) {
	fams, err := readFamilies(text)
	if err != nil {
		return nil, err
	}
	return fams.samples(names...), nil
}

// samples returns the samples of the named counters and gauges, and of
// the named histograms their counts.
func (families families) samples(names ...string) []sample {
	var out []sample
	for _, name := range names {
		f, ok := families[name]
		if !ok {
			continue
		}
		for _, m := range f.GetMetric() {
			s := sample{name: name, labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Counter != nil:
				s.value = m.GetCounter().GetValue()
			case m.Gauge != nil:
				s.value = m.GetGauge().GetValue()
			case m.Histogram != nil:
				s.value = float64(m.GetHistogram().GetSampleCount())
			default:
				s.value = m.GetUntyped().GetValue()
			}
			out = append(out, s)
		}
	}
	return out
}

// ctrlMetrics is what the bench reads of the controller's own metrics,
// about its object controller.
type ctrlMetrics struct {
	Reconciles float64 `json:"reconciles"`
	// ActivityWrites counts the writes of observed use (idleTTL).
	ActivityWrites float64 `json:"activityWrites"`
	Errors         float64 `json:"reconcileErrors"`
	depth          float64
	active         float64
	// OwnedGone counts the deleted objects whose last owned namespace the
	// controller saw go (timeout_controller_gone_lag_seconds,
	// what="owned").
	OwnedGone float64 `json:"ownedGone"`
	// Go's own account of its memory, to explain the RSS: the heap in
	// use, the heap idle but not yet returned to the OS, stacks, and the
	// heap size the next GC is due at.
	HeapInuse    float64 `json:"heapInuseBytes"`
	HeapRetained float64 `json:"heapIdleRetainedBytes"`
	Stacks       float64 `json:"stackBytes"`
	NextGC       float64 `json:"nextGCBytes"`
	// HeapLive is the heap the last collection found live: what the
	// objects cost, without the collector's slack.
	HeapLive float64 `json:"heapLiveBytes"`
}

func scrapeController(ctx context.Context, addr string) (ctrlMetrics, error) {
	body, err := httpGet(ctx, "http://"+addr+"/metrics")
	if err != nil {
		return ctrlMetrics{}, err
	}
	var m ctrlMetrics
	samples, err := parseMetrics(body, "controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total",
		"workqueue_depth", "controller_runtime_active_workers", "go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes",
		"go_memstats_heap_released_bytes", "go_memstats_stack_inuse_bytes", "go_memstats_next_gc_bytes", "go_gc_heap_live_bytes",
		"timeout_controller_activity_writes_total", "timeout_controller_gone_lag_seconds")
	if err != nil {
		return ctrlMetrics{}, err
	}
	for _, s := range samples {
		switch s.name {
		case "go_memstats_heap_inuse_bytes":
			m.HeapInuse = s.value
		case "go_memstats_heap_idle_bytes":
			m.HeapRetained += s.value
		case "go_memstats_heap_released_bytes":
			m.HeapRetained -= s.value
		case "go_memstats_stack_inuse_bytes":
			m.Stacks = s.value
		case "go_memstats_next_gc_bytes":
			m.NextGC = s.value
		case "timeout_controller_activity_writes_total":
			m.ActivityWrites = s.value
		case "go_gc_heap_live_bytes":
			m.HeapLive = s.value
		case "timeout_controller_gone_lag_seconds":
			if s.labels["what"] == "owned" {
				m.OwnedGone = s.value
			}
		}
		if s.labels["controller"] != "object" {
			continue
		}
		switch s.name {
		case "controller_runtime_reconcile_total":
			m.Reconciles += s.value
		case "controller_runtime_reconcile_errors_total":
			m.Errors += s.value
		case "workqueue_depth":
			m.depth += s.value
		case "controller_runtime_active_workers":
			m.active += s.value
		}
	}
	return m, nil
}

func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	// Compressing a response costs the controller a large writer per
	// scrape: the bench must not be what its peak memory measures.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, err
}

// procStat is what /proc says of a process: peak and current resident
// memory, and CPU time spent.
type procStat struct {
	peakRSS, rss int64
	// anon and file split rss into the heap and stacks, and the pages of
	// the binary and libraries.
	anon, file int64
	cpu        time.Duration
}

// clockTicks is USER_HZ, the unit of times in /proc/<pid>/stat: 100 on
// every Linux platform Go supports.
const clockTicks = 100

func readProc(pid int) (procStat, error) {
	var st procStat
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	for line := range strings.Lines(string(status)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmHWM:":
			st.peakRSS = kb << 10
		case "VmRSS:":
			st.rss = kb << 10
		case "RssAnon:":
			st.anon = kb << 10
		case "RssFile:":
			st.file = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, err
	}
	// The command name, in parentheses, may hold spaces: count fields
	// after it. utime and stime are the 14th and 15th fields.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return st, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	st.cpu = time.Duration(utime+stime) * time.Second / clockTicks
	return st, nil
}

// controlPlane finds the etcd and kube-apiserver processes this process
// started, by name, so that their CPU time can be read too. The kernel
// keeps 15 characters of kube-controller-manager's name: startCluster
// takes its pid from the process instead.
func controlPlane() map[string]int {
	out := map[string]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(string(stat[end+1:]))
		if name := string(stat[open+1 : end]); len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) && (name == "etcd" || name == "kube-apiserver") {
			out[name] = pid
		}
	}
	return out
}

// cpuTimes reads the CPU time of each process, and of this one as "bench".
func cpuTimes(pids map[string]int) map[string]time.Duration {
	out := map[string]time.Duration{}
	for name, pid := range pids {
		if st, err := readProc(pid); err == nil {
			out[name] = st.cpu
		}
	}
	if st, err := readProc(os.Getpid()); err == nil {
		out["bench"] = st.cpu
	}
	return out
}

// idleFigures are the controller's memory when it has nothing to track.
type idleFigures struct {
	proc    procStat
	metrics ctrlMetrics
}

// idleSettle is how long the idle controller runs before it is measured:
// past its start-up, its first policy reconcile and a few collections.
const idleSettle = 10 * time.Second

// measureIdle runs the controller with no Playbook in the cluster and
// reads its memory once it has settled, then stops it.
func measureIdle(ctx context.Context, cl *cluster, logPath string, cfg config) (idleFigures, error) {
	c, err := startController(cl.bin, cl.kubeconfig, logPath, cfg)
	if err != nil {
		return idleFigures{}, err
	}
	defer c.stop()
	return untilSettled(ctx, c, "controller", logPath, func() (idleFigures, bool, error) {
		m, err := scrapeController(ctx, c.metricsAddr)
		if err != nil {
			return idleFigures{}, false, nil
		}
		st, err := readProc(c.cmd.Process.Pid)
		return idleFigures{proc: st, metrics: m}, true, err
	})
}

// untilSettled waits idleSettle after c started, then calls measure every
// poll until it has measured, fails, or c exits.
func untilSettled(ctx context.Context, c *controllerProc, what, logPath string, measure func() (idleFigures, bool, error)) (idleFigures, error) {
	settled := time.Now().Add(idleSettle)
	for {
		select {
		case <-ctx.Done():
			return idleFigures{}, ctx.Err()
		case <-c.done:
			return idleFigures{}, fmt.Errorf("the idle %s exited: %v (log %s)", what, c.err, logPath)
		case <-time.After(poll):
		}
		if time.Now().Before(settled) {
			continue
		}
		if fig, done, err := measure(); done || err != nil {
			return fig, err
		}
	}
}
