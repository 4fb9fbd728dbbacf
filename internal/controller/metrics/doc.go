// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package metrics holds the metrics that several jobs update (counts,
// lags, per-policy gauges) and the auth of the endpoint that serves them.
//
// A job's own metrics stay with the job. It imports kube only, and never
// reads or writes a governed object.
package metrics
