// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package eval holds what one pass of the object reconciler makes of one
// governed object (Evaluation), which the jobs it hands the object to read.
//
// It decides nothing (internal/decide does) and writes nothing; it imports
// channelset only, for the channels the evaluation carries.
package eval
