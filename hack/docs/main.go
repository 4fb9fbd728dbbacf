// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Command docs writes the tables of docs/reference that restate the code
// (flags, metrics, RBAC, the CRDs' fields) and, with -check, fails when a
// page is stale: a generated table out of date, a link or anchor that does
// not resolve, or a flag or its default, Event reason, metric, condition
// reason, annotation, CRD field or event type that the code and the pages
// disagree on.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/amphitheatre-app/timeout-controller/hack/internal/repo"
)

func main() {
	check := flag.Bool("check", false, "Change nothing: list every stale or wrong page and exit 1 if there is one.")
	flag.Parse()
	if err := run(*check); err != nil {
		fmt.Fprintln(os.Stderr, "docs:", err)
		os.Exit(1)
	}
}

func run(check bool) error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	facts, err := Gather(root)
	if err != nil {
		return err
	}
	if !check {
		changed, err := Generate(root, facts)
		for _, f := range changed {
			fmt.Println("wrote", f)
		}
		return err
	}
	problems, err := Check(root, facts)
	if err != nil {
		return err
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problems in the docs; `make docs` rewrites the generated tables", len(problems))
	}
	return nil
}
