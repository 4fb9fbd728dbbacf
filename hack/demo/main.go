// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Command demo starts a local control plane, the timeout controller, a mail inbox and a webhook receiver, and narrates the reminders people get, the Playbooks expiring on time, what kubectl timeout shows and changes, the audit trail and a restore from the archive.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/hack/internal/repo"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
)

func main() {
	timeout := flag.Duration("timeout", 150*time.Second, "Give up, clean up and fail after this long.")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	_, err := run(ctx, os.Stdout, *timeout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// errTimeLimit is the cause of the context's end when -timeout is reached.
var errTimeLimit = errors.New("time limit reached")

// run tells the whole story on out and cleans up after itself on every
// path. Its last line is the summary. It returns the facts it gathered
// (what was created, recorded, received and shown), as far as it got.
func run(ctx context.Context, out io.Writer, timeout time.Duration) (*results, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%w (%s)", errTimeLimit, timeout))
	defer cancel()
	// envtest logs through controller-runtime, which otherwise prints a
	// warning and a stack trace when no logger was ever set.
	logf.SetLogger(logr.Discard())

	n := &narrator{out: out, start: time.Now()}
	s := &story{n: n}
	err := stage(ctx, n, s)
	if len(s.cast) > 0 {
		fmt.Fprintln(out, s.summary())
	}
	if err != nil {
		return s.results(), err
	}
	return s.results(), s.verdict()
}

// stage sets up the control plane and the controller, plays the story and
// takes everything down again. Cleanup is deferred so that a failure or
// an interrupt at any step still leaves nothing running.
func stage(ctx context.Context, n *narrator, s *story) (err error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return errors.New("KUBEBUILDER_ASSETS is not set: run `make demo`, which builds the control plane (etcd, kube-apiserver, kube-controller-manager) and sets it")
	}
	root, err := repo.Root()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "timeout-demo-")
	if err != nil {
		return err
	}
	w := newWorkdir(tmp)
	s.files, s.facts.workdir = w, tmp
	defer func() {
		_ = os.RemoveAll(tmp)
		n.say("removed %s, and with it the kubeconfig, the controller's log, the audit log and the archive", tmp)
	}()

	n.say("starting a local control plane (etcd, kube-apiserver and kube-controller-manager) and building the controller")
	built := make(chan error, 1)
	go func() {
		build := exec.CommandContext(ctx, "go", "build", "-o", w.bin, "./cmd/timeout-controller")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			built <- fmt.Errorf("build the controller: %w\n%s", err, out)
			return
		}
		built <- nil
	}()

	plane, startErr := testenv.Start(ctx, testenv.Options{Root: root})
	defer func() {
		if err := plane.Stop(); err != nil {
			n.say("stopping the control plane: %v", err)
			return
		}
		n.say("stopped the control plane")
	}()
	// The build writes into tmp: it must end before tmp is removed.
	buildErr := <-built
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if err := errors.Join(startErr, buildErr); err != nil {
		return err
	}
	cfg, env := plane.Config, plane.Env
	// Amphitheatre's controller, for deletions: it removes its finalizer
	// from each Playbook being deleted.
	standInCtx, stopStandIn := context.WithCancel(ctx)
	waitStandIn, err := testenv.RunFinalizer(standInCtx, cfg)
	if err != nil {
		stopStandIn()
		return err
	}
	defer func() { stopStandIn(); waitStandIn() }()
	n.say("control plane up at %s", cfg.Host)

	if err := os.WriteFile(w.kubeconfig, env.KubeConfig, 0o600); err != nil {
		return err
	}
	n.more("kubeconfig: %s", w.kubeconfig)
	n.more("to look around from another terminal while the demo runs:")
	n.more("  export KUBECONFIG=%s", w.kubeconfig)
	n.more("  kubectl get playbooks -w")
	n.more("  go run ./cmd/kubectl-timeout list    # the plugin, from this repository")

	// Started before the controller, so that they stop after it: nothing
	// it sends while it shuts down meets a closed port.
	rc, err := startReceivers()
	if err != nil {
		return err
	}
	defer func() {
		rc.stop()
		n.say("stopped the mail inbox and the webhook receiver")
	}()
	n.say("mail inbox (SMTP, no TLS, no auth) at %s; webhook receiver at %s", rc.mailAddr(), rc.webhookURL)

	c, err := startController(w)
	if err != nil {
		return err
	}
	defer func() {
		// The log goes with tmp: show how it ended when something went
		// wrong, unless the person stopped the demo themselves.
		stoppedByUser := ctx.Err() != nil && !errors.Is(context.Cause(ctx), errTimeLimit)
		if err != nil && !stoppedByUser {
			n.tail(w.log, 10)
		}
		if err := c.stop(); err != nil {
			n.say("stopping the controller: %v", err)
			return
		}
		n.say("stopped the controller")
	}()
	s.facts.pid = c.cmd.Process.Pid
	n.say("controller running (pid %d), logging to %s", c.cmd.Process.Pid, w.log)
	n.more("audit trail: %s; archive: %s", w.audit, w.archive)

	s.kubectl = newKubectl(n, w.kubeconfig, w.cache)
	return s.play(ctx, cfg, c, rc)
}

// workdir is the demo's temporary directory and the files in it; the
// demo removes all of it when it ends.
type workdir struct {
	dir        string
	bin        string
	kubeconfig string
	// log is the controller's log, audit its audit trail (JSON Lines) and
	// archive the directory it writes manifests to before deleting.
	log     string
	audit   string
	archive string
	// cache is the plugin's discovery cache.
	cache string
}

func newWorkdir(dir string) *workdir {
	return &workdir{
		dir:        dir,
		bin:        filepath.Join(dir, "timeout-controller"),
		kubeconfig: filepath.Join(dir, "kubeconfig"),
		log:        filepath.Join(dir, "controller.log"),
		audit:      filepath.Join(dir, "audit.jsonl"),
		archive:    filepath.Join(dir, "archive"),
		cache:      filepath.Join(dir, "kube-cache"),
	}
}

// proc is the timeout-controller process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func startController(w *workdir, extra ...string) (*proc, error) {
	c := &proc{}
	return c, c.start(w.bin, w.log, controllerArgs(w, extra...)...)
}

func controllerArgs(w *workdir, extra ...string) []string {
	return append([]string{
		"--kubeconfig", w.kubeconfig,
		"--audit-log", w.audit,
		"--archive-dir", w.archive,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		// The demo has no node to exec into: no webhook, and no port to hold.
		"--webhook-port=0",
		"--cluster-event-namespace", eventNamespace,
		// Where the controller would run; the webhook's Secret is there.
		"--secret-namespace", secretNamespace,
	}, extra...)
}

// start runs bin with args as c, appending its output to the file at
// logPath.
func (c *proc) start(bin, logPath string, args ...string) error {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group: Ctrl-C in the terminal reaches only the demo,
	// which then stops the controller before the control plane.
	cmd.SysProcAttr = ownProcessGroup()
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s %s: %w", bin, strings.Join(args, " "), err)
	}
	done := make(chan struct{})
	c.cmd, c.done, c.err = cmd, done, nil
	go func() {
		err := cmd.Wait()
		log.Close()
		c.err = err
		close(done)
	}()
	return nil
}

// restart stops the controller and starts it again with the extra flags,
// as c: whoever stops c stops the new process.
func (c *proc) restart(w *workdir, extra ...string) error {
	if err := c.stop(); err != nil {
		return err
	}
	return c.start(w.bin, w.log, controllerArgs(w, extra...)...)
}

func (c *proc) stop() error {
	select {
	case <-c.done:
		return nil
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return nil
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
		return errors.New("did not stop within 10s of SIGTERM; killed it")
	}
}

// narrator writes lines stamped with the time since the demo started.
type narrator struct {
	out   io.Writer
	start time.Time
}

func (n *narrator) say(format string, args ...any) {
	fmt.Fprintf(n.out, "[%6.1fs] %s\n", time.Since(n.start).Seconds(), fmt.Sprintf(format, args...))
}

// more continues the previous line, aligned under its text.
func (n *narrator) more(format string, args ...any) {
	fmt.Fprintf(n.out, "%10s%s\n", "", fmt.Sprintf(format, args...))
}

// table writes tab-separated rows as aligned columns under the last line.
func (n *narrator) table(rows []string) {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(w, r)
	}
	w.Flush()
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		n.more("%s", line)
	}
}

// at is a moment as an offset from the start, the unit of the narration.
func (n *narrator) at(t time.Time) string {
	return fmt.Sprintf("+%.1fs", t.Sub(n.start).Seconds())
}

func (n *narrator) tail(path string, lines int) {
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	last := strings.Split(strings.TrimSpace(string(data)), "\n")
	last = last[max(0, len(last)-lines):]
	n.say("last lines of the controller log:")
	for _, l := range last {
		n.more("%s", l)
	}
}
