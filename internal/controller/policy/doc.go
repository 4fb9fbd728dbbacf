// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package policy holds the TimeoutPolicy and NotificationChannel reconcilers:
// their status and conditions, and the gates on the CRDs the controller needs.
//
// It reads governed objects only to count them, and neither writes nor
// deletes one.
package policy
