// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package object holds the governed-object reconciler: it decides, deletes,
// follows a deletion through Terminating, and counts what it reclaimed.
//
// It hands sending to delivery, sleep and wake to sleep, and use to usage,
// and keeps no state of theirs.
package object
