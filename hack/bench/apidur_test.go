// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
	"testing"
)

func TestRequestDurationsSumTheVerbsHistogramsAndEstimateQuantiles(t *testing.T) {
	text := []byte(`# HELP apiserver_request_duration_seconds x
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{resource="playbooks",scope="resource",subresource="",verb="DELETE",le="0.025"} 10
apiserver_request_duration_seconds_bucket{resource="playbooks",scope="resource",subresource="",verb="DELETE",le="0.05"} 40
apiserver_request_duration_seconds_bucket{resource="playbooks",scope="resource",subresource="",verb="DELETE",le="0.1"} 90
apiserver_request_duration_seconds_bucket{resource="playbooks",scope="resource",subresource="",verb="DELETE",le="+Inf"} 100
apiserver_request_duration_seconds_sum{resource="playbooks",scope="resource",subresource="",verb="DELETE"} 5
apiserver_request_duration_seconds_count{resource="playbooks",scope="resource",subresource="",verb="DELETE"} 100
apiserver_request_duration_seconds_bucket{resource="playbooks",scope="resource",subresource="",verb="GET",le="0.025"} 7
apiserver_request_duration_seconds_bucket{resource="playbooks",scope="resource",subresource="",verb="GET",le="0.05"} 7
apiserver_request_duration_seconds_bucket{resource="playbooks",scope="resource",subresource="",verb="GET",le="0.1"} 7
apiserver_request_duration_seconds_bucket{resource="playbooks",scope="resource",subresource="",verb="GET",le="+Inf"} 7
apiserver_request_duration_seconds_sum{resource="playbooks",scope="resource",subresource="",verb="GET"} 1
apiserver_request_duration_seconds_count{resource="playbooks",scope="resource",subresource="",verb="GET"} 7
# HELP etcd_request_duration_seconds x
# TYPE etcd_request_duration_seconds histogram
etcd_request_duration_seconds_bucket{group="amphitheatre.app",operation="delete",resource="playbooks",le="0.005"} 3
etcd_request_duration_seconds_bucket{group="amphitheatre.app",operation="delete",resource="playbooks",le="0.025"} 4
etcd_request_duration_seconds_bucket{group="amphitheatre.app",operation="delete",resource="playbooks",le="+Inf"} 4
etcd_request_duration_seconds_sum{group="amphitheatre.app",operation="delete",resource="playbooks"} 0.03
etcd_request_duration_seconds_count{group="amphitheatre.app",operation="delete",resource="playbooks"} 4
etcd_request_duration_seconds_bucket{group="",operation="delete",resource="configmaps",le="0.005"} 1
etcd_request_duration_seconds_bucket{group="",operation="delete",resource="configmaps",le="0.025"} 1
etcd_request_duration_seconds_bucket{group="",operation="delete",resource="configmaps",le="+Inf"} 1
etcd_request_duration_seconds_sum{group="",operation="delete",resource="configmaps"} 0.001
etcd_request_duration_seconds_count{group="",operation="delete",resource="configmaps"} 1
`)
	before := buckets{0.025: 10, 0.05: 20, 0.1: 20, math.Inf(1): 20}
	fams, err := readFamilies(text)
	if err != nil {
		t.Fatal(err)
	}
	all := requestDurations(fams, func(r string) bool { return r == "playbooks" })
	if len(all) != 2 {
		t.Fatalf("histograms of %d requests, want DELETE and GET", len(all))
	}
	// After before: 0 below 25 ms, 20 in (25, 50], 50 in (50, 100], 10 above.
	got := servedSince(map[string]buckets{"DELETE playbooks": before}, all)["DELETE playbooks"]
	// p50: the 40th of 80, the 20th of the 50 in (50, 100]: 70 ms. p99:
	// in +Inf, so the highest finite bound.
	if got.Count != 80 || math.Abs(got.P50-70) > 1e-9 || got.P99 != 100 {
		t.Fatalf("got %+v, want 80 requests, p50 70 ms, p99 100 ms", got)
	}
	if (buckets{}).stats() != (durationStats{}) {
		t.Fatal("an empty histogram has stats")
	}
	etcd := etcdDurations(fams, func(r string) bool { return r == "playbooks" })
	// 3 of 4 at or below 5 ms, the 4th in (5, 25]: p50 is 2/3 of 5 ms.
	if got := servedSince(nil, etcd); len(got) != 1 || got["delete playbooks"].Count != 4 || math.Abs(got["delete playbooks"].P50-5.0*2/3) > 1e-9 {
		t.Fatalf("etcd: %+v, want 4 deletes of playbooks, p50 3.3 ms", got)
	}
	if none := requestDurations(fams, func(string) bool { return false }); len(none) != 0 {
		t.Fatalf("histograms of no resource: %v", none)
	}
}

func TestParseCPUTicksCountsStealAndLeavesGuestsOut(t *testing.T) {
	for _, tc := range []struct {
		line         string
		total, steal uint64
	}{
		{"cpu  100 2 30 400 5 6 7 8 50 1", 558, 8},
		{"cpu  100 2 30 400 5 6 7 0", 550, 0},
		{"cpu0 100 2 30 400 5 6 7 8 0 0", 0, 0},
		{"cpu  1 2 3", 0, 0},
	} {
		if total, steal := parseCPUTicks(tc.line); total != tc.total || steal != tc.steal {
			t.Errorf("parseCPUTicks(%q) = %d, %d; want %d, %d", tc.line, total, steal, tc.total, tc.steal)
		}
	}
}
