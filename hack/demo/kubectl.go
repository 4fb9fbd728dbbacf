// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/amphitheatre-app/timeout-controller/internal/plugin"
)

// kubectl runs the kubectl-timeout plugin in the demo's own process, as
// `kubectl timeout ...` would run it from a shell with the demo's
// kubeconfig.
type kubectl struct {
	n     *narrator
	flags *genericclioptions.ConfigFlags
	// log holds the commands run so far and how each exited, shared by
	// every scene's plugin.
	log *pluginLog
}

// pluginLog is the commands run, in order, with their exit codes.
type pluginLog struct {
	mu   sync.Mutex
	runs []pluginRun
}

// runs returns the commands run so far.
func (k *kubectl) runs() []pluginRun {
	k.log.mu.Lock()
	defer k.log.mu.Unlock()
	return append([]pluginRun(nil), k.log.runs...)
}

// narrating returns the plugin that prints where n narrates: a scene
// played alongside tells its commands in its turn.
func (k *kubectl) narrating(n *narrator) *kubectl {
	return &kubectl{n: n, flags: k.flags, log: k.log}
}

// pluginRun is one command of the plugin and its exit code.
type pluginRun struct {
	args []string
	code int
}

// newKubectl reads the control plane's address and credentials from
// kubeconfig. Discovery is cached in cacheDir (the work directory), not
// in ~/.kube/cache, so that the demo writes nothing outside it; the same
// flags serve every command, so discovery runs once.
func newKubectl(n *narrator, kubeconfig, cacheDir string) *kubectl {
	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig = &kubeconfig
	flags.CacheDir = &cacheDir
	return &kubectl{n: n, flags: flags, log: &pluginLog{}}
}

// run prints the command line and what the command wrote, under the
// narration's last line. A non-zero exit code is an error.
func (k *kubectl) run(ctx context.Context, args ...string) error {
	return k.expect(ctx, plugin.ExitOK, args...)
}

// expect is run for a command that must exit with code: one the plugin
// refuses says so with its own code.
func (k *kubectl) expect(ctx context.Context, code int, args ...string) error {
	var out, errOut bytes.Buffer
	got := k.exec(ctx, &out, &errOut, args)
	k.n.more("$ kubectl timeout %s", strings.Join(args, " "))
	for _, b := range []*bytes.Buffer{&out, &errOut} {
		for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			if line != "" {
				k.n.more("%s", line)
			}
		}
	}
	if got != code {
		return fmt.Errorf("kubectl timeout %s: exit code %d, want %d: %s", args[0], got, code, strings.TrimSpace(errOut.String()))
	}
	return nil
}

// decode runs a command with -o json without printing anything and
// decodes what it wrote into v: the same view as the printed one, as
// facts for the demo's results.
func (k *kubectl) decode(ctx context.Context, v any, args ...string) error {
	var out, errOut bytes.Buffer
	args = append(args, "-o", "json")
	if code := k.exec(ctx, &out, &errOut, args); code != plugin.ExitOK {
		return fmt.Errorf("kubectl timeout %s: exit code %d: %s", strings.Join(args, " "), code, strings.TrimSpace(errOut.String()))
	}
	if err := json.Unmarshal(out.Bytes(), v); err != nil {
		return fmt.Errorf("kubectl timeout %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

func (k *kubectl) exec(ctx context.Context, out, errOut *bytes.Buffer, args []string) int {
	code := plugin.Run(ctx, args, plugin.Options{
		IOStreams:   genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut},
		ConfigFlags: k.flags,
	})
	k.log.mu.Lock()
	k.log.runs = append(k.log.runs, pluginRun{args: args, code: code})
	k.log.mu.Unlock()
	return code
}
