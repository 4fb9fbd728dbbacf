// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Command kubectl-timeout is the kubectl plugin of the timeout-controller: `kubectl timeout --help`.
package main

import (
	"os"

	"github.com/amphitheatre-app/timeout-controller/internal/plugin"
)

func main() {
	os.Exit(plugin.Main())
}
