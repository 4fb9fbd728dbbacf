// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package sleep carries out a sleep and a wake: it scales the workloads of
// the namespaces an object owns, and watches those a sleep scaled down.
//
// It decides neither when an object sleeps nor when it wakes (the object
// reconciler does, through internal/expiry), and sends no message.
package sleep
