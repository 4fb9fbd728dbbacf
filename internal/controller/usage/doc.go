// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package usage records use of governed objects: connections seen by the
// webhook, traffic from Prometheus, and activity (generation changes).
//
// It writes only the annotations of use, and decides nothing about expiry:
// the object reconciler reads them on its next look.
package usage
