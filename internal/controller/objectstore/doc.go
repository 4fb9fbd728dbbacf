// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package objectstore keeps a compact record of each governed object in
// place of an informer's copy, and starts the watch of each target kind.
//
// It decides nothing and writes no object: it feeds the object controller
// looks (wakeup.Key) and answers reads of the records.
package objectstore
