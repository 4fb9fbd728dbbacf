// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package channelset builds each policy's notification channels from its
// NotificationChannels, and checks that its author may use them (grants).
//
// It sends nothing and keeps no record of what was sent: delivery does.
package channelset
