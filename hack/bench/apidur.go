// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
	"slices"
)

// buckets is a histogram as Prometheus exposes it: each upper bound (le)
// to the count of observations at or below it, +Inf included.
type buckets map[float64]float64

// requestDurations reads, from the API server's metrics, how long it took
// to serve the requests on the resources keep accepts
// (apiserver_request_duration_seconds), by "VERB resource[/subresource]"
// and summed over its other labels: the API server's own part of each
// request, from its arrival to its answer, without the client or the
// network. Watches are left out: they last as long as they are open.
func requestDurations(fams families, keep func(resource string) bool) map[string]buckets {
	return fams.histograms("apiserver_request_duration_seconds", func(labels map[string]string) string {
		if labels["verb"] == "WATCH" || !keep(labels["resource"]) {
			return ""
		}
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		return key
	})
}

// etcdDurations reads, from the API server's metrics, how long etcd took
// to answer its requests about the resources keep accepts
// (etcd_request_duration_seconds), by "operation resource": of a request
// the API server served, the part it waited for etcd.
func etcdDurations(fams families, keep func(resource string) bool) map[string]buckets {
	return fams.histograms("etcd_request_duration_seconds", func(labels map[string]string) string {
		if !keep(labels["resource"]) {
			return ""
		}
		return labels["operation"] + " " + labels["resource"]
	})
}

// histograms sums the histograms of family by the key keyOf gives their
// labels, leaving out those it gives none.
func (fams families) histograms(family string, keyOf func(labels map[string]string) string) map[string]buckets {
	out := map[string]buckets{}
	f, ok := fams[family]
	if !ok {
		return out
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		h := m.GetHistogram()
		key := keyOf(labels)
		if h == nil || key == "" {
			continue
		}
		b := out[key]
		if b == nil {
			b = buckets{}
			out[key] = b
		}
		for _, bucket := range h.GetBucket() {
			if le := bucket.GetUpperBound(); !math.IsInf(le, 1) {
				b[le] += float64(bucket.GetCumulativeCount())
			}
		}
		b[math.Inf(1)] += float64(h.GetSampleCount())
	}
	return out
}

// servedSince returns, by request, the stats of the durations observed
// between snapshots a and b.
func servedSince(a, b map[string]buckets) map[string]durationStats {
	out := map[string]durationStats{}
	for k, h := range b {
		if st := h.since(a[k]).stats(); st.Count > 0 {
			out[k] = st
		}
	}
	return out
}

// since is the histogram of the observations made after a.
func (b buckets) since(a buckets) buckets {
	out := buckets{}
	for le, n := range b {
		out[le] = n - a[le]
	}
	return out
}

// durationStats are quantiles estimated from a histogram's buckets.
type durationStats struct {
	Count float64 `json:"count"`
	P50   float64 `json:"p50Ms"`
	P99   float64 `json:"p99Ms"`
}

// stats estimates the count, p50 and p99 of b in milliseconds, as
// Prometheus' histogram_quantile does: linearly within the bucket the
// quantile falls in, from the bucket below's bound (0 for the first).
// A quantile in the +Inf bucket is the highest finite bound.
func (b buckets) stats() durationStats {
	bounds := make([]float64, 0, len(b))
	for le := range b {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	total := b[math.Inf(1)]
	quantile := func(q float64) float64 {
		rank := q * total
		lower, below := 0.0, 0.0
		for _, le := range bounds {
			n := b[le]
			if n >= rank {
				if math.IsInf(le, 1) {
					return lower * 1000
				}
				if n == below {
					return le * 1000
				}
				return (lower + (le-lower)*(rank-below)/(n-below)) * 1000
			}
			lower, below = le, n
		}
		return lower * 1000
	}
	if total == 0 {
		return durationStats{}
	}
	return durationStats{Count: total, P50: quantile(0.5), P99: quantile(0.99)}
}
