// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestAlertRulesAndDashboardAreThoseOfConfig keeps the three homes of the
// rules (the rules file, the kustomize component, the chart) and the two of
// the dashboard from drifting apart: config/ is the source, `make
// manifests` copies.
func TestAlertRulesAndDashboardAreThoseOfConfig(t *testing.T) {
	read := func(parts ...string) []byte {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(parts...))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	rulesFile := read(root, "config", "prometheus", "rules.yaml")
	var rules map[string]any
	if err := yaml.Unmarshal(rulesFile, &rules); err != nil {
		t.Fatalf("config/prometheus/rules.yaml: %v", err)
	}
	dashboardFile := read(root, "config", "grafana", "timeout-controller.json")
	var dashboard map[string]any
	if err := json.Unmarshal(dashboardFile, &dashboard); err != nil {
		t.Fatalf("config/grafana/timeout-controller.json: %v", err)
	}

	copies := []struct{ copy, source []byte }{
		{read(chartDir, "files", "prometheus", "rules.yaml"), rulesFile},
		{read(chartDir, "files", "grafana", "timeout-controller.json"), dashboardFile},
	}
	for _, c := range copies {
		if !bytes.Equal(c.copy, c.source) {
			t.Error("the chart's copies of config/prometheus/rules.yaml or config/grafana/timeout-controller.json are stale: run make manifests")
		}
	}

	component := objects(t, read(root, "config", "components", "prometheus", "prometheusrule.yaml"))
	rendered := objects(t, mustRender(t, valueSet{file: "monitoring"}))
	for where, o := range map[string]map[string]any{
		"config/components/prometheus": objectNamed(t, component, "PrometheusRule", "timeout-controller"),
		"the chart":                    objectNamed(t, rendered, "PrometheusRule", "timeout-controller"),
	} {
		if !reflect.DeepEqual(o["spec"], rules) {
			g, _ := yaml.Marshal(o["spec"])
			w, _ := yaml.Marshal(rules)
			t.Errorf("the PrometheusRule of %s differs from config/prometheus/rules.yaml at %s: run make manifests", where, firstDifference(string(w), string(g)))
		}
	}

	cm := objectNamed(t, rendered, "ConfigMap", "timeout-controller-dashboard")
	meta := cm["metadata"].(map[string]any)
	if labels, _ := meta["labels"].(map[string]any); labels["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard ConfigMap's labels %v lack grafana_dashboard: \"1\", which the Grafana sidecar looks for", labels)
	}
	data, _ := cm["data"].(map[string]any)
	var got map[string]any
	if err := json.Unmarshal([]byte(data["timeout-controller.json"].(string)), &got); err != nil {
		t.Fatalf("the dashboard ConfigMap's JSON: %v", err)
	}
	if !reflect.DeepEqual(got, dashboard) {
		t.Error("the dashboard ConfigMap differs from config/grafana/timeout-controller.json")
	}

	for _, o := range objects(t, mustRender(t, valueSet{file: "defaults"})) {
		if k := o.GetKind(); k == "PrometheusRule" || o.GetName() == "timeout-controller-dashboard" {
			t.Errorf("the defaults render %s %s; the rules and the dashboard are opt-in", k, o.GetName())
		}
	}
}

func objectNamed(t *testing.T, objs []*unstructured.Unstructured, kind, name string) map[string]any {
	t.Helper()
	o := find(objs, kind, name)
	if o == nil {
		t.Fatalf("no %s %s", kind, name)
	}
	return o.Object
}
