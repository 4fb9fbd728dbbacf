// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// process is one of the cluster's processes, logging to Dir/logs/NAME.log.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// stopped: Stop stopped it, so its exit is no failure.
	stopped bool
}

// start starts a process of the cluster. It runs in its own process
// group, so that Ctrl-C reaches only the program that started the cluster,
// which then stops the processes in order; and it is killed if that
// program dies.
func (c *Cluster) start(_ context.Context, name, bin string, args ...string) error {
	log, err := os.Create(c.path("logs", name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = log.Close()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
	return nil
}

// exited reports a process that has exited, with the end of its log.
func (c *Cluster) exited() error {
	for _, p := range c.procs {
		if p.stopped {
			continue
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v); the end of %s:\n%s", p.name, p.err, c.path("logs", p.name+".log"), tail(c.path("logs", p.name+".log"), 20))
		default:
		}
	}
	return nil
}

// Running reports whether every process of the cluster still runs, and
// which one exited if not.
func (c *Cluster) Running() error { return c.exited() }

func (c *Cluster) stop(name string) {
	for _, p := range c.procs {
		if p.name != name {
			continue
		}
		p.stopped = true
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// Stop stops the cluster and removes what Start made: Pods and their
// network namespaces, containerd's tasks and shims, kube-proxy's iptables
// rules, the bridge, mounts under Dir, and Dir itself but for its logs
// when KeepLogs is set. It goes on past errors and returns them all.
func (c *Cluster) Stop() error {
	if c == nil || c.lock == nil {
		return nil
	}
	defer func() { _ = c.lock.Close() }()
	if !c.started {
		return nil
	}
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// No new Pods, then none at all: the kubelet stops each sandbox,
	// which removes its network namespace and address.
	c.stop("kube-controller-manager")
	c.stop("kube-scheduler")
	if c.Config != nil && c.running("kubelet") && c.running("kube-apiserver") {
		if err := c.drain(ctx); err != nil {
			errs = append(errs, fmt.Errorf("remove the Pods: %w", err))
		}
	}
	c.stop("kubelet")
	c.stop("kube-proxy")
	if len(c.procs) > 0 {
		if err := run(ctx, filepath.Join(c.assets, "kube-proxy"), "--cleanup"); err != nil {
			errs = append(errs, err)
		}
	}
	if c.running("containerd") {
		errs = append(errs, c.killTasks(ctx))
	}
	c.stop("containerd")
	killShims(c.socket)
	c.stop("kube-apiserver")
	c.stop("etcd")

	errs = append(errs, unmountUnder(c.Dir))
	for ns := range listNetns() {
		if !c.netns[ns] {
			_ = syscall.Unmount(filepath.Join("/var/run/netns", ns), syscall.MNT_DETACH)
			_ = os.Remove(filepath.Join("/var/run/netns", ns))
		}
	}
	removeKubeletChains(ctx)
	if err := run(ctx, "ip", "link", "del", Bridge); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.removeDir())
	return errors.Join(errs...)
}

func (c *Cluster) running(name string) bool {
	for _, p := range c.procs {
		if p.name == name {
			select {
			case <-p.done:
				return false
			default:
				return true
			}
		}
	}
	return false
}

// drain deletes every Pod at once and waits for the kubelet to stop their
// containers.
func (c *Cluster) drain(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, ns := range nss.Items {
		err := cs.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
		if err != nil {
			return err
		}
	}
	return c.poll(ctx, "containers stopped", time.Minute, func(ctx context.Context) error {
		out, err := exec.CommandContext(ctx, "ctr", "--address="+c.socket, "--namespace=k8s.io", "tasks", "ls", "-q").Output()
		if err != nil {
			return err
		}
		if n := len(strings.Fields(string(out))); n > 0 {
			return fmt.Errorf("%d containers still run", n)
		}
		return nil
	})
}

// killTasks kills what the kubelet left running.
func (c *Cluster) killTasks(ctx context.Context) error {
	ctr := func(args ...string) ([]byte, error) {
		return exec.CommandContext(ctx, "ctr", append([]string{"--address=" + c.socket, "--namespace=k8s.io"}, args...)...).Output()
	}
	out, err := ctr("tasks", "ls", "-q")
	if err != nil {
		return fmt.Errorf("list containerd's tasks: %w", err)
	}
	for _, id := range strings.Fields(string(out)) {
		_, _ = ctr("tasks", "kill", "--signal=SIGKILL", id)
		_, _ = ctr("tasks", "delete", "--force", id)
	}
	return nil
}

// killShims kills the containerd shims of this cluster's containerd: they
// outlive containerd by design.
func killShims(socket string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid := 0
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if strings.HasSuffix(args[0], "containerd-shim-runc-v2") && slices.Contains(args, socket) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// unmountUnder lazily unmounts every mount below dir, deepest first: the
// kubelet's volumes and containerd's root filesystems.
func unmountUnder(dir string) error {
	if dir == "" {
		return nil
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	var mounts []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			mounts = append(mounts, fields[4])
		}
	}
	var errs []error
	for _, m := range slices.Backward(mounts) {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// removeKubeletChains removes the iptables chains the kubelet makes
// (kube-proxy --cleanup removes its own), and the jumps to them.
func removeKubeletChains(ctx context.Context) {
	for _, chain := range []string{"INPUT", "OUTPUT"} {
		_ = run(ctx, "iptables", "-t", "filter", "-D", chain, "-j", "KUBE-FIREWALL")
	}
	for _, table := range []string{"filter", "nat", "mangle"} {
		for _, chain := range []string{"KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"} {
			_ = run(ctx, "iptables", "-t", table, "-F", chain)
			_ = run(ctx, "iptables", "-t", table, "-X", chain)
		}
	}
}

// listNetns lists the named network namespaces, where containerd puts its
// Pods'.
func listNetns() map[string]bool {
	names := map[string]bool{}
	entries, _ := os.ReadDir("/var/run/netns")
	for _, e := range entries {
		names[e.Name()] = true
	}
	return names
}

// KeepLogs makes Stop keep Dir/logs, for a run that failed.
func (c *Cluster) KeepLogs() { c.opts.KeepLogs = true }

func (c *Cluster) removeDir() error {
	if c.Dir == "" {
		return nil
	}
	if !c.opts.KeepLogs {
		return os.RemoveAll(c.Dir)
	}
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() != "logs" {
			errs = append(errs, os.RemoveAll(filepath.Join(c.Dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// tail is the last n lines of a file.
func tail(file string, n int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TaskPID is the host's process ID of a running container, by its
// containerd ID (a Pod's containerStatuses[].containerID without
// "containerd://").
func (c *Cluster) TaskPID(ctx context.Context, id string) (int, error) {
	out, err := exec.CommandContext(ctx, "ctr", "--address="+c.socket, "--namespace=k8s.io", "tasks", "ls").Output()
	if err != nil {
		return 0, fmt.Errorf("list containerd's tasks: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == id && f[2] == "RUNNING" {
			pid := 0
			_, err := fmt.Sscan(f[1], &pid)
			return pid, err
		}
	}
	return 0, fmt.Errorf("no running container %s", id)
}
