// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Command image runs `make image`: the controller's image, what the
// Dockerfile builds, from a static binary and with no container engine
// (internal/testenv/image), as a docker-archive tarball.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/amphitheatre-app/timeout-controller/internal/testenv/image"
)

func main() {
	tag := flag.String("tag", "ghcr.io/amphitheatre-app/timeout-controller:dev", "the image's name")
	out := flag.String("o", "bin/timeout-controller-image.tar", "the tarball to write")
	arch := flag.String("arch", "", "the GOARCH to build for; this machine's when empty")
	flag.Parse()
	if err := image.Controller(context.Background(), ".", *out, *arch, *tag); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Println(*out)
}
