// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"maps"
	"math/rand/v2"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// busyRetry is how soon a message is tried again after its channels were
// busy (notify.ErrBusy), before a jitter of as much again: soon, since
// nothing failed and a reminder with a short lead must not miss it (the
// bench's smoke test reminds 3 s ahead), while a look that finds the
// channel busy again costs no API request. The object keeps no backoff
// and no failure: the message was not sent, so it cannot be sent twice.
const busyRetry = 250 * time.Millisecond

func busyResult() ctrl.Result {
	return ctrl.Result{RequeueAfter: busyRetry + rand.N(busyRetry)}
}

// orBusy is res, or sooner when some channels were busy.
func orBusy(res ctrl.Result, busy []string) ctrl.Result {
	if len(busy) == 0 {
		return res
	}
	if b := busyResult(); res.RequeueAfter <= 0 || b.RequeueAfter < res.RequeueAfter {
		return b
	}
	return res
}

// reserve takes a slot of each named channel for the message about to be
// sent, so that a worker whose channels are all busy costs the API server
// nothing (the title's read comes after). It returns the set to send
// with, in which the reserved channels give their slot back when they
// send; the names it reserved, in their order; those that were busy; and
// a release for the slots of messages not sent after all.
func (s *channelSet) reserve(names []string) (held *channelSet, reserved, busy []string, release func()) {
	held = &channelSet{names: s.names, notifiers: maps.Clone(s.notifiers), templates: s.templates, emailDomains: s.emailDomains}
	var releases []func()
	for _, name := range names {
		n, ok := s.notifiers[name]
		if !ok {
			// The Kubernetes Event: never busy.
			reserved = append(reserved, name)
			continue
		}
		h, rel, ok := notify.Reserve(n)
		if !ok {
			busy = append(busy, name)
			continue
		}
		held.notifiers[name] = h
		reserved = append(reserved, name)
		releases = append(releases, rel)
	}
	return held, reserved, busy, func() {
		for _, rel := range releases {
			rel()
		}
	}
}
