// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Command demo starts a local control plane, the timeout controller, a
// mail inbox and a webhook receiver, and tells the product's story scene
// by scene (scenes in story.go, a file each): reminders and deletion, an
// extension, sleep and wake, the namespaces reclaimed, an owner's digest,
// the audit trail and a restore, lifetimes that follow use, acting from a
// message. It fails on anything early, late, missing or doubled.
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
	"syscall"
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

	// The admission webhook that counts an exec into a Pod as use, as
	// config/webhook ships it, pointed at the controller on loopback.
	hook, err := testenv.FreeAddr()
	if err != nil {
		return err
	}
	if err := registerConnectWebhook(ctx, cfg, hook); err != nil {
		return err
	}
	s.hook = hook

	c, err := startController(w, hook)
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
	n.more("its admission webhook, which counts an exec into a Pod as use, at https://%s (ValidatingWebhookConfiguration %s)", hook, connectWebhook)
	n.more("audit trail: %s; archive: %s", w.audit, w.archive)

	s.kubectl = newKubectl(n, w.kubeconfig, w.cache)
	return s.play(ctx, cfg, c, rc)
}
