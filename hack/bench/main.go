// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Command bench measures the timeout controller against a local control plane: deletion and reminder lag, memory, CPU, cold start and API requests.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/hack/internal/repo"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
)

// config is what one run measures; every field is a flag.
type config struct {
	// N Playbooks exist when the controller starts; Expiring of them
	// expire during the run, the others a day later.
	N        int `json:"n"`
	Expiring int `json:"expiring"`
	// Burst of the expiring Playbooks expire in the same second, in the
	// middle of Window; the others are spread uniformly over Window.
	Burst  int           `json:"burst"`
	Window time.Duration `json:"window"`
	// Reminders is the policy's only reminder lead; 0 sends none.
	Reminders time.Duration `json:"reminders"`
	// Margin separates the end of creation from the first due moment,
	// so that the controller has started before anything falls due.
	Margin time.Duration `json:"margin"`
	// Grace is how long after the last due moment the run waits for
	// deletions and reminders that have not come.
	Grace time.Duration `json:"grace"`
	// Settle is how long the run keeps listening once everything came,
	// to catch duplicates.
	Settle time.Duration `json:"settle"`
	// Slow more Playbooks have their reminders fall due in the same
	// second, sent by e-mail to an SMTP server that takes SMTPDelay to
	// accept each message; they expire long after the run.
	Slow       int           `json:"slow,omitempty"`
	SMTPDelay  time.Duration `json:"smtpDelay,omitempty"`
	Characters int           `json:"characters"`
	// Owned creates the expiring Playbooks as Amphitheatre does, each with
	// its namespace amp-<id> holding Actors, Deployments and Services, and
	// puts Amphitheatre's finalizer on every Playbook. The run then also
	// waits, until OwnedGrace after the last expiry, for each expiring
	// Playbook's namespace to be gone.
	Owned      bool          `json:"owned,omitempty"`
	OwnedGrace time.Duration `json:"ownedGrace,omitempty"`
	// PlainOthers leaves the timeout annotation off the Playbooks that do
	// not expire during the run: they live by the policy's defaultTTL.
	PlainOthers bool `json:"plainOthers,omitempty"`
	// LastApplied is the share of the Playbooks (0 to 1) that carry
	// kubectl's last-applied-configuration.
	LastApplied float64 `json:"lastApplied"`
	// Touch is the share of the Playbooks whose spec is edited (use the
	// controller observes) every TouchEvery for TouchFor. They do not
	// expire during the run, and a policy of their own governs them, with
	// IdleTTL, so that the expiries the run measures stay where they are.
	Touch      float64       `json:"touch,omitempty"`
	TouchEvery time.Duration `json:"touchEvery,omitempty"`
	TouchFor   time.Duration `json:"touchFor,omitempty"`
	IdleTTL    time.Duration `json:"idleTTL,omitempty"`
	Creators   int           `json:"creators"`
	// Workers, QPS and BurstAPI are passed to the controller when set.
	Workers  int     `json:"workers,omitempty"`
	QPS      float64 `json:"qps,omitempty"`
	BurstAPI int     `json:"burstAPI,omitempty"`
	// ControllerArgs are further flags for the controller, and
	// ControllerEnv further variables in its environment (GOGC, say).
	ControllerArgs []string `json:"controllerArgs,omitempty"`
	ControllerEnv  []string `json:"controllerEnv,omitempty"`
	// Log keeps the controller's log at this path; it is removed otherwise.
	Log string `json:"-"`
	// Profile, when set, is a directory for the controller's CPU profile
	// of the whole run and its heap profiles at sync and at the end.
	Profile string `json:"-"`
	// Series, when set, is a file for the controller's own metrics,
	// scraped every SeriesEvery over the run (hack/dashboard renders it).
	Series      string        `json:"-"`
	SeriesEvery time.Duration `json:"-"`
	// SleepingPolicy adds a policy that puts Playbooks to sleep (none of
	// the run's), so that the controller watches the workloads a sleep
	// scaled down; OtherDeployments more Deployments, of no Playbook and
	// none asleep, exist before the controller starts (implying
	// SleepingPolicy): what the controller holds and asks of the API
	// server must not grow with them.
	SleepingPolicy   bool `json:"sleepingPolicy,omitempty"`
	OtherDeployments int  `json:"otherDeployments,omitempty"`
	// Sleepers more Playbooks, made as Amphitheatre makes them with two
	// Deployments and a StatefulSet each, fall asleep over the same window
	// as the expiring ones expire; then Wakes of them are used within
	// WakeWindow, half by last-active and half by exec through the
	// connection webhook, and SingleWakes more one at a time; then ScaleUps
	// more are woken one at a time by the bench scaling one of their
	// Deployments up, as someone else would (wake.go).
	Sleepers    int           `json:"sleepers,omitempty"`
	Wakes       int           `json:"wakes,omitempty"`
	WakeWindow  time.Duration `json:"wakeWindow,omitempty"`
	SingleWakes int           `json:"singleWakes,omitempty"`
	ScaleUps    int           `json:"scaleUps,omitempty"`
	// Peer, when set, is the binary of another TTL controller, run in
	// place of timeout-controller on the same objects:
	// TwiN/k8s-ttl-controller's, whose annotation each Playbook then
	// also carries (peer.go).
	Peer string `json:"peer,omitempty"`
}

func main() {
	cfg := config{}
	flag.IntVar(&cfg.N, "n", 1000, "Playbooks in the cluster when the controller starts.")
	flag.IntVar(&cfg.Expiring, "expiring", -1, "How many of them expire during the run (all when negative); the others expire a day later.")
	flag.IntVar(&cfg.Burst, "burst", 0, "How many of the expiring Playbooks expire in the same second, in the middle of the window.")
	flag.DurationVar(&cfg.Window, "window", time.Minute, "The expiries of the other expiring Playbooks are spread uniformly over this window.")
	flag.DurationVar(&cfg.Reminders, "reminders", 30*time.Second, "The policy's reminder lead: a reminder is due this long before each expiry (0: no reminders).")
	flag.DurationVar(&cfg.Margin, "margin", 30*time.Second, "Time from the end of creation to the first due reminder or expiry, for the controller's cold start.")
	flag.DurationVar(&cfg.Grace, "grace", 30*time.Second, "How long past the last due moment to wait for missing deletions and reminders.")
	flag.DurationVar(&cfg.Settle, "settle", 3*time.Second, "How long to keep listening for duplicates once everything came.")
	flag.Float64Var(&cfg.Touch, "touch", 0, "Share of the Playbooks (0 to 1) whose spec is edited every -touch-every for -touch-for; they expire a day later, under a policy of their own with -idle-ttl.")
	flag.DurationVar(&cfg.TouchEvery, "touch-every", time.Second, "How often the touched Playbooks are edited.")
	flag.DurationVar(&cfg.TouchFor, "touch-for", time.Minute, "How long the touched Playbooks are edited, ending with the last expiry.")
	flag.DurationVar(&cfg.IdleTTL, "idle-ttl", 0, "The idleTTL of the policy of the -touch Playbooks (0: none).")
	flag.IntVar(&cfg.Slow, "slow", 0, "More Playbooks whose reminders fall due in the same second, a quarter into the window, sent by e-mail to a slow SMTP server.")
	flag.DurationVar(&cfg.SMTPDelay, "smtp-delay", 2*time.Second, "How long the slow SMTP server takes to accept each message (with -slow).")
	flag.IntVar(&cfg.Characters, "characters", 3, "Characters in each Playbook's spec.")
	flag.BoolVar(&cfg.Owned, "owned", false, "Create the expiring Playbooks as Amphitheatre does, each with its namespace amp-<id> of Actors, Deployments and Services, put Amphitheatre's finalizer on every Playbook, and measure when each expiring one's namespace is gone.")
	flag.DurationVar(&cfg.OwnedGrace, "owned-grace", 5*time.Minute, "With -owned, how long past the last expiry to wait for the namespaces to be gone; those left are counted, not a failure.")
	flag.BoolVar(&cfg.PlainOthers, "plain-others", false, "The Playbooks that do not expire during the run carry no timeout annotation and live by the policy's defaultTTL (14d), as Playbooks Amphitheatre creates do until someone extends one; by default every Playbook carries its expiry.")
	flag.Float64Var(&cfg.LastApplied, "last-applied", 0.5, "Share of the Playbooks (0 to 1) that carry kubectl's last-applied-configuration, their whole manifest, as `kubectl apply` writes it.")
	flag.IntVar(&cfg.Creators, "creators", 32, "Playbooks created in parallel.")
	flag.IntVar(&cfg.Workers, "workers", 0, "The controller's --workers (its default when 0).")
	flag.Float64Var(&cfg.QPS, "qps", 0, "The controller's --kube-api-qps (its default when 0).")
	flag.IntVar(&cfg.BurstAPI, "burst-api", 0, "The controller's --kube-api-burst (its default when 0).")
	var extra, env stringList
	flag.Var(&extra, "controller-arg", "A further flag for the controller, such as --zap-log-level=debug; repeatable.")
	flag.Var(&env, "controller-env", "A further NAME=value in the controller's environment, such as GOMEMLIMIT=200MiB; repeatable.")
	flag.StringVar(&cfg.Log, "log", "", "Keep the controller's log at this path.")
	flag.StringVar(&cfg.Profile, "profile", "", "Save the controller's CPU profile and heap profiles in this directory (profiling costs CPU: not for the figures).")
	flag.StringVar(&cfg.Series, "series", "", "Write the controller's timeout_controller_* metrics, scraped over the run, to this file (JSON lines) for hack/dashboard.")
	flag.DurationVar(&cfg.SeriesEvery, "series-interval", 2*time.Second, "How often -series scrapes the controller.")
	flag.StringVar(&cfg.Peer, "peer", "", "Run the TwiN/k8s-ttl-controller binary at this path in place of timeout-controller, on the same Playbooks, each also annotated with its TTL, and report its idle and peak RSS, first pass, CPU and API requests (no reminders, no metrics of its own). Its passes are 5 minutes apart: the run waits until the expiring ones are deleted or a pass that started after the last expiry has ended (docs/dev/bench.md).")
	flag.BoolVar(&cfg.SleepingPolicy, "sleeping-policy", false, "Add a policy with spec.sleep that selects none of the Playbooks, so that the controller watches the workloads a sleep scaled down (none here).")
	flag.IntVar(&cfg.OtherDeployments, "other-deployments", 0, "Create this many Deployments of no Playbook (0 replicas, 100 to a namespace) before the controller starts; implies -sleeping-policy. Compare with -sleeping-policy alone: the controller's memory and API requests must not grow with them.")
	flag.IntVar(&cfg.Sleepers, "sleepers", 0, "More Playbooks, each with its namespace of two Deployments and a StatefulSet at one replica, created over -window and put to sleep over the window the expiring ones expire in; then -wakes of them are used and the wake lag measured. Needs kube-controller-manager's time: give -timeout room.")
	flag.IntVar(&cfg.Wakes, "wakes", -1, "With -sleepers, how many are used at once, within -wake-window, half by a last-active write and half by an exec through the connection webhook (half the sleepers when negative).")
	flag.DurationVar(&cfg.WakeWindow, "wake-window", 10*time.Second, "The window the -wakes uses are spread over.")
	flag.IntVar(&cfg.SingleWakes, "single-wakes", 20, "With -sleepers, how many more are used one at a time after the burst, on a quiet cluster, alternately by last-active and by exec.")
	flag.IntVar(&cfg.ScaleUps, "scale-ups", 20, "With -sleepers, how many more are woken one at a time after the single wakes by a scale-up of their web Deployment, as Argo CD or a person would make it: the controller must see it through its watch of marked workloads and restore the others.")
	jsonPath := flag.String("json", "", "Write the report as JSON to this path.")
	timeout := flag.Duration("timeout", 20*time.Minute, "Give up, clean up and fail after this long.")
	flag.Parse()
	cfg.ControllerArgs, cfg.ControllerEnv = extra, env
	if cfg.Expiring < 0 {
		cfg.Expiring = cfg.N
	}
	if cfg.Wakes < 0 {
		cfg.Wakes = cfg.Sleepers / 2
	}
	if cfg.Sleepers == 0 {
		cfg.Wakes, cfg.SingleWakes, cfg.ScaleUps, cfg.WakeWindow = 0, 0, 0, 0
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	rep, err := run(ctx, cfg, os.Stderr)
	cancel()
	stop()
	if rep != nil {
		rep.print(os.Stdout)
		if *jsonPath != "" {
			if werr := writeJSON(*jsonPath, rep); werr != nil {
				err = errors.Join(err, werr)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type stringList []string

func (s *stringList) String() string     { return fmt.Sprint(*s) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func (c config) validate() error {
	switch {
	case c.N < 1:
		return errors.New("-n must be at least 1")
	case c.Expiring > c.N:
		return fmt.Errorf("-expiring %d is more than -n %d", c.Expiring, c.N)
	case c.Burst < 0 || c.Burst > c.Expiring:
		return fmt.Errorf("-burst %d must be between 0 and the expiring count %d", c.Burst, c.Expiring)
	case c.Window < 0 || c.Reminders < 0 || c.Margin < 0:
		return errors.New("-window, -reminders and -margin must not be negative")
	case c.Reminders%time.Second != 0 || c.Window%time.Second != 0:
		// Expiries have second precision, so due times stay exact.
		return errors.New("-window and -reminders must be whole seconds")
	case c.Touch < 0 || c.Touch > 1:
		return errors.New("-touch must be between 0 and 1")
	case c.LastApplied < 0 || c.LastApplied > 1:
		return errors.New("-last-applied must be between 0 and 1")
	case c.IdleTTL > 0 && c.Touch <= 0:
		return errors.New("-idle-ttl is the idleTTL of the -touch Playbooks' policy: it needs -touch")
	case c.Touch > 0 && c.TouchEvery <= 0:
		return errors.New("-touch-every must be positive")
	case c.OtherDeployments < 0:
		return errors.New("-other-deployments must not be negative")
	case c.Sleepers < 0 || c.Wakes < 0 || c.SingleWakes < 0 || c.ScaleUps < 0 || c.Wakes+c.SingleWakes+c.ScaleUps > c.Sleepers:
		return fmt.Errorf("-wakes %d, -single-wakes %d and -scale-ups %d must not be negative, nor together more than -sleepers %d", c.Wakes, c.SingleWakes, c.ScaleUps, c.Sleepers)
	case c.Sleepers > 0 && c.Peer != "":
		return errors.New("-sleepers measures this controller's sleep: not with -peer")
	case c.Creators < 1:
		return errors.New("-creators must be at least 1")
	case c.OwnedGrace < 0:
		return errors.New("-owned-grace must not be negative")
	case c.Peer != "":
		return c.validatePeer()
	}
	return nil
}

// run sets everything up, measures and takes everything down again. The
// report is returned whenever the measurement got far enough to have one,
// even with an error.
func run(ctx context.Context, cfg config, log io.Writer) (*report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run `make bench`, which builds etcd, kube-apiserver and kube-controller-manager and sets it")
	}
	// envtest logs through controller-runtime, which otherwise prints a
	// warning and a stack trace when no logger was ever set.
	logf.SetLogger(logr.Discard())
	p := &progress{out: log, start: time.Now()}

	root, err := repo.Root()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "timeout-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	p.say("starting etcd, kube-apiserver and kube-controller-manager, building the controller")
	cl, err := startCluster(ctx, root, tmp)
	if cl != nil {
		defer cl.stop()
	}
	if err != nil {
		return nil, err
	}
	rc, err := startReceiver(cfg.SMTPDelay)
	if err != nil {
		return nil, err
	}
	defer rc.close()
	if err := cl.createPolicy(ctx, cfg, rc); err != nil {
		return nil, err
	}
	if cfg.SleepingPolicy || cfg.OtherDeployments > 0 {
		if err := cl.createSleepingPolicy(ctx); err != nil {
			return nil, err
		}
	}
	if cfg.OtherDeployments > 0 {
		p.say("creating %d other Deployments, %d parallel", cfg.OtherDeployments, cfg.Creators)
		start := time.Now()
		if err := cl.createOtherDeployments(ctx, cfg.OtherDeployments, cfg.Creators); err != nil {
			return nil, err
		}
		p.say("created them in %s", time.Since(start).Round(time.Millisecond))
	}

	var pr *peerRun
	if cfg.Peer != "" {
		if pr, err = newPeerRun(cfg.Peer, cl.kubeconfig, tmp); err != nil {
			return nil, err
		}
	}

	// Idle: the controller with its policy and no Playbook at all, as a
	// cluster's add-on is sized before anything is created.
	var idle idleFigures
	if pr != nil {
		if idle, err = pr.measureIdle(ctx, filepath.Join(tmp, "idle.log"), cfg); err != nil {
			return nil, err
		}
		p.say("idle peer: %.1f MiB resident", float64(idle.proc.rss)/(1<<20))
	} else {
		if idle, err = measureIdle(ctx, cl, filepath.Join(tmp, "idle.log"), cfg); err != nil {
			return nil, err
		}
		p.say("idle controller: %.1f MiB resident, %.1f MiB live heap", float64(idle.proc.rss)/(1<<20), idle.metrics.HeapLive/(1<<20))
	}

	owned := ""
	if cfg.Owned {
		owned = fmt.Sprintf(", the %d expiring with their namespaces and %d actors", cfg.Expiring, len(testenv.DefaultActors))
	}
	var sp *sleeperPop
	if cfg.Sleepers > 0 {
		p.say("creating %d sleepers over %s, each with its namespace, two Deployments and a StatefulSet", cfg.Sleepers, cfg.Window)
		if sp, err = cl.createSleepers(ctx, cfg.Sleepers, cfg.Creators, cfg.Window); err != nil {
			return nil, err
		}
		p.say("created them in %s", sp.took.Round(time.Millisecond))
	}
	p.say("creating %d Playbooks with %d characters each%s, %d parallel", cfg.N, cfg.Characters, owned, cfg.Creators)
	pop, err := cl.populate(ctx, cfg)
	if err != nil {
		return nil, err
	}
	p.say("created them in %s (%.0f/s); the first due moment is %s after", pop.took.Round(time.Millisecond),
		float64(cfg.N)/pop.took.Seconds(), time.Until(pop.firstDue).Round(time.Second))
	m := &measurement{cfg: cfg, pop: pop, cl: cl, rc: rc, p: p, idle: idle, sleepers: sp}
	if sp != nil {
		// The sleeps fall due from the first expiry on, over the window.
		if err := cl.createSleeperPolicy(ctx, sp, m.firstExpiry()); err != nil {
			return nil, err
		}
		p.say("the sleepers' afterIdle is %s: their sleeps fall due from %s on", expiry.FormatDuration(sp.afterIdle),
			time.Until(m.firstExpiry()).Round(time.Second))
		if m.sleeperLog, err = cl.watchSleepers(ctx, sp); err != nil {
			return nil, err
		}
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		certDir := filepath.Join(tmp, "webhook")
		if err := cl.connectWebhook(ctx, root, certDir, port); err != nil {
			return nil, err
		}
		cfg.ControllerArgs = append(cfg.ControllerArgs, fmt.Sprintf("--webhook-port=%d", port), "--webhook-cert-dir="+certDir)
	}

	w, err := cl.watchDeletions(ctx, playbooks, "Playbooks", len(pop.expiring))
	if err != nil {
		return nil, err
	}
	defer w.stop()
	m.w = w
	if cfg.Owned {
		if m.ns, err = cl.watchDeletions(ctx, corev1.SchemeGroupVersion.WithResource("namespaces"), "namespaces", len(pop.expiring)); err != nil {
			return nil, err
		}
		defer m.ns.stop()
	}

	before, err := cl.apiMetrics(ctx)
	if err != nil {
		return nil, err
	}
	logPath := cfg.Log
	if logPath == "" {
		logPath = filepath.Join(tmp, "controller.log")
	}
	m.log = logPath
	if pr != nil {
		return m.runPeer(ctx, pr, before)
	}
	ctrl, err := startController(cl.bin, cl.kubeconfig, logPath, cfg)
	if err != nil {
		return nil, err
	}
	defer ctrl.stop()
	p.say("controller started (pid %d), log %s", ctrl.cmd.Process.Pid, logPath)
	stopSeries := func() error { return nil }
	if cfg.Series != "" {
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- recordSeries(sctx, ctrl.metricsAddr, cfg.Series, cfg.SeriesEvery) }()
		stopSeries = func() error { cancel(); return <-done }
	}
	err = m.measure(ctx, ctrl, before)
	err = errors.Join(err, stopSeries())
	return m.report(), err
}

func writeJSON(path string, rep *report) error {
	var v any = rep
	if rep.Peer != nil {
		v = rep.Peer
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// progress writes lines stamped with the time since the run started.
type progress struct {
	out   io.Writer
	start time.Time
}

func (p *progress) say(format string, args ...any) {
	fmt.Fprintf(p.out, "[%6.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}
