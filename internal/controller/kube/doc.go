// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kube holds what every job of the controller shares about Kubernetes:
// Event reasons and the note cutter, metadata reads, references, timeouts.
//
// It holds no state and makes no decision, and imports no other package of
// internal/controller: everything else may import it.
package kube
