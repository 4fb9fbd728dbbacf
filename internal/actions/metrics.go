// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package actions

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Results of a request, the result label of timeout_controller_actions_total.
const (
	resultShown   = "shown"   // a page was shown (action view)
	resultDone    = "done"    // the change was written
	resultNone    = "none"    // nothing needed writing (not asleep, already at that expiry)
	resultAlready = "already" // the link was used for this action before
	resultRefused = "refused" // a rule refused it (limits, maxTTL, keep, …)
	resultGone    = "gone"    // the object no longer exists (or is another one now), or is no longer governed
	resultInvalid = "invalid" // a bad token, form, signature, or a cross-site post
	resultLimited = "limited" // the address made too many requests
	resultError   = "error"   // the API server failed or was too slow: "try again"
)

var (
	actionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "timeout_controller_actions_total",
		Help: "Requests to the actions server (links in messages, Slack buttons), by action (view, extend, wake, delete) and result (shown, done, none, already, refused, gone, invalid, limited, error).",
	}, []string{"action", "result"})
	actionsSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "timeout_controller_actions_request_duration_seconds",
		Help:    "Time the actions server took to answer a request, by what was asked: page (an object's page), owner (an owner's page), click (a POST from a page) or slack (a Slack button).",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 1.5, 2, 5},
	}, []string{"request"})
)

func init() {
	metrics.Registry.MustRegister(actionsTotal, actionsSeconds)
}
