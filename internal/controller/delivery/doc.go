// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package delivery sends the messages about governed objects (reminders,
// digests, outbox), with their retries, busy channels and records.
//
// It decides neither what is due nor when (the object reconciler does) and
// deletes nothing; it builds no channel (channelset does).
package delivery
