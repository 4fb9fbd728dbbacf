// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"math/rand/v2"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// busyRetry is how soon a message is tried again after its channels were
// busy (notify.ErrBusy), before a jitter of as much again: soon, since
// nothing failed, but not so soon that a thousand waiting reminders keep
// the workers spinning. The object keeps no backoff and no failure: the
// message was not sent, so it cannot be sent twice.
const busyRetry = 500 * time.Millisecond

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

// allBusy reports whether every one of the named channels has no free
// slot right now.
func (s *channelSet) allBusy(names []string) bool {
	if s == nil || len(names) == 0 {
		return false
	}
	for _, name := range names {
		n, ok := s.notifiers[name]
		if !ok || !notify.Busy(n) {
			return false
		}
	}
	return true
}
