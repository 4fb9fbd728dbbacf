// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package repo finds the repository the hack programs run in.
package repo

import (
	"errors"
	"os"
	"path/filepath"
)

// Root returns the nearest directory at or above the working directory
// that holds go.mod, so that the programs find the CRDs and the controller
// wherever they are started from inside the repository.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory: run this inside the repository")
		}
		dir = parent
	}
}
