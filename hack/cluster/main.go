// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Command cluster runs `make cluster`: a one-node cluster built from source
// (internal/testenv/cluster) until Ctrl-C, then tears it down. It prints
// the kubeconfig to use. With -install it also installs the CRDs of
// config/crd and Amphitheatre's.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/amphitheatre-app/timeout-controller/internal/testenv/cluster"
)

func main() {
	assets := flag.String("assets", os.Getenv("KUBEBUILDER_ASSETS"), "the directory of `hack/control-plane.sh --node`")
	root := flag.String("root", ".", "the repository")
	keep := flag.Bool("keep-logs", false, "keep the processes' logs in the cluster's directory after it stops")
	flag.Parse()
	if err := run(*root, *assets, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run(root, assets string, keep bool) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := cluster.Start(ctx, cluster.Options{Root: root, Assets: assets, KeepLogs: keep, Progress: os.Stderr})
	defer func() {
		fmt.Fprintln(os.Stderr, "cluster: stopping")
		if serr := c.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	if err != nil {
		return err
	}
	fmt.Printf("cluster: ready; its processes log to %s/logs\n", c.Dir)
	fmt.Printf("  export KUBECONFIG=%s\n", c.Kubeconfig)
	fmt.Printf("  %s/kubectl get nodes\n", assets)
	fmt.Println("cluster: Ctrl-C stops it and removes everything it made")
	<-ctx.Done()
	return nil
}
