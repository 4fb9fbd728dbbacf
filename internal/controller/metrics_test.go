// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"testing"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Every job registers its metrics; the process that links them all
// exports these. An alert on increase(...{result="failed"}) cannot see a series born at
// 1; the series of every known label value must exist from the start.
func TestCountersOfKnownOutcomesAreExportedFromTheStart(t *testing.T) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				exported[f.GetName()+"/"+l.GetName()+"="+l.GetValue()] = true
			}
		}
	}
	for _, want := range []string{
		"timeout_controller_deletions_total/result=deleted",
		"timeout_controller_deletions_total/result=failed",
		"timeout_controller_deletions_total/result=conflict",
		"timeout_controller_deletions_total/result=would_delete",
		"timeout_controller_deletions_throttled_total/cap=policy",
		"timeout_controller_deletions_throttled_total/cap=global",
		"timeout_controller_archives_total/result=ok",
		"timeout_controller_archives_total/result=error",
		"timeout_controller_connect_uses_total/result=unverified",
	} {
		if !exported[want] {
			t.Errorf("%s is not exported before anything happened", want)
		}
	}
}
