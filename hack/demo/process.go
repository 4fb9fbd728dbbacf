// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

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

// startController starts the controller, serving its admission webhook
// at hook (host:port).
func startController(w *workdir, hook string, extra ...string) (*proc, error) {
	c := &proc{}
	return c, c.start(w.bin, w.log, controllerArgs(w, hook, extra...)...)
}

func controllerArgs(w *workdir, hook string, extra ...string) []string {
	host, port, _ := net.SplitHostPort(hook)
	return append([]string{
		"--kubeconfig", w.kubeconfig,
		"--audit-log", w.audit,
		"--archive-dir", w.archive,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		// On loopback, with a certificate for its address, which the
		// controller keeps and writes the caBundle of.
		"--webhook-port", port,
		"--webhook-service", host,
		"--webhook-configuration", connectWebhook,
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
func (c *proc) restart(w *workdir, hook string, extra ...string) error {
	if err := c.stop(); err != nil {
		return err
	}
	return c.start(w.bin, w.log, controllerArgs(w, hook, extra...)...)
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
