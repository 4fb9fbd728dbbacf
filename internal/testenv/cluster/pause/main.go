// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Command pause is the one-node cluster's sandbox: it holds a Pod's
// namespaces and waits to be stopped, as registry.k8s.io/pause does. It
// is built locally because no registry is reachable here.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
