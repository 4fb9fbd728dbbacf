// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"

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
}

// newKubectl reads the control plane's address and credentials from
// kubeconfig. Discovery is cached in cacheDir (the work directory), not
// in ~/.kube/cache, so that the demo writes nothing outside it; the same
// flags serve every command, so discovery runs once.
func newKubectl(n *narrator, kubeconfig, cacheDir string) *kubectl {
	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig = &kubeconfig
	flags.CacheDir = &cacheDir
	return &kubectl{n: n, flags: flags}
}

// run prints the command line and what the command wrote, under the
// narration's last line. A non-zero exit code is an error.
func (k *kubectl) run(ctx context.Context, args ...string) error {
	var out, errOut bytes.Buffer
	code := plugin.Run(ctx, args, plugin.Options{
		IOStreams:   genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
		ConfigFlags: k.flags,
	})
	k.n.more("$ kubectl timeout %s", strings.Join(args, " "))
	for _, b := range []*bytes.Buffer{&out, &errOut} {
		for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			if line != "" {
				k.n.more("%s", line)
			}
		}
	}
	if code != plugin.ExitOK {
		return fmt.Errorf("kubectl timeout %s: exit code %d: %s", args[0], code, strings.TrimSpace(errOut.String()))
	}
	return nil
}
