// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// notExportedByTheController are the metrics the rules may name that
// Prometheus makes itself.
var notExportedByTheController = map[string]bool{"up": true}

// TestTheDashboardAndAlertsNameOnlyMetricsTheControllerExports scrapes the
// running controller after it reminded, deleted and queued messages in the
// outbox, so that the series with a policy or channel label exist, and
// checks every metric the alert rules and the dashboard name against what
// it serves.
func TestTheDashboardAndAlertsNameOnlyMetricsTheControllerExports(t *testing.T) {
	t.Parallel()
	rc := startReceiver(t, []byte("whsec-not-a-real-key-5e91c0"))
	createPolicy(t, "monitoring", reminderPolicy(t, "monitoring", []v1alpha1.Duration{"2s"}, "0s", nil, rc))
	create(t, playbooks, newPlaybook("monitoring", "", map[string]string{expiry.AnnotationTTL: "not-a-duration"}))
	pb := create(t, playbooks, newPlaybook("monitoring", "", map[string]string{expiry.AnnotationTTL: "5s"}))
	// Only that it happens matters here; on-time deletion has its own tests.
	select {
	case <-pb.gone:
	case <-time.After(time.Minute):
		t.Fatalf("%s not deleted a minute after it was created with a ttl of 5s", pb.GetName())
	}
	rc.expectOneID(t, pb.GetName(), "deleted", 10*time.Second)

	addr := serveMetrics(t)
	token := scraperToken(t, "dashboard", true)
	var body []byte
	fixture.Eventually(t, 15*time.Second, "a scrape of the controller", func() (bool, error) {
		code, b, err := scrapeMetrics(addr, token)
		body = b
		return err == nil && code == http.StatusOK, err
	})
	exported := exportedNames(t, body)

	named := map[string][]string{}
	for _, expr := range ruleExprs(t) {
		for _, m := range metricNames(expr) {
			named[m] = append(named[m], "config/prometheus/rules.yaml")
		}
	}
	for _, expr := range dashboardExprs(t) {
		for _, m := range metricNames(expr) {
			named[m] = append(named[m], "config/grafana/timeout-controller.json")
		}
	}
	if len(named) < 10 {
		t.Fatalf("found only %d metric names in the rules and the dashboard: %v", len(named), named)
	}
	for m, where := range named {
		if !exported[m] && !notExportedByTheController[m] {
			t.Errorf("%v name %s, which the controller does not export", slices.Compact(where), m)
		}
	}
}

// exportedNames are the names a Prometheus scraping the text stores:
// a histogram's _bucket, _sum and _count.
func exportedNames(t *testing.T, text []byte) map[string]bool {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("parse the scrape: %v", err)
	}
	names := map[string]bool{}
	for name, f := range families {
		names[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		}
	}
	return names
}

func ruleExprs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Expr string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatalf("config/prometheus/rules.yaml: %v", err)
	}
	var exprs []string
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	return exprs
}

func dashboardExprs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "grafana", "timeout-controller.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("config/grafana/timeout-controller.json: %v", err)
	}
	var exprs []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

var (
	// What in PromQL is not a metric name: strings, label matchers,
	// ranges, the labels of by/without/on/ignoring/group_left/group_right.
	promqlStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlToken    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promqlKeywords = map[string]bool{"and": true, "or": true, "unless": true, "offset": true, "bool": true, "by": true, "without": true, "inf": true, "nan": true}
)

// metricNames returns the metric names of a PromQL expression: the
// identifiers that are not functions, keywords, labels or durations.
func metricNames(expr string) []string {
	expr = promqlStrings.ReplaceAllString(expr, `""`)
	expr = promqlMatchers.ReplaceAllString(expr, " ")
	expr = promqlGrouping.ReplaceAllString(expr, " ")
	var names []string
	for _, at := range promqlToken.FindAllStringIndex(expr, -1) {
		tok := expr[at[0]:at[1]]
		if at[0] > 0 && strings.ContainsAny(expr[at[0]-1:at[0]], "0123456789.$") {
			continue // the unit of a duration, the exponent of a number
		}
		if strings.HasPrefix(strings.TrimLeft(expr[at[1]:], " \t\n"), "(") {
			continue // a function or an aggregation
		}
		if !promqlKeywords[strings.ToLower(tok)] {
			names = append(names, tok)
		}
	}
	return names
}

func TestMetricNamesFindsTheMetricsOfAnExpression(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`sum by (result) (rate(a_total{type="reminder"}[5m]))`, []string{"a_total"}},
		{`histogram_quantile(0.99, sum by (le) (rate(lag_bucket[$__rate_interval]))) > 60`, []string{"lag_bucket"}},
		{`x unless x offset 1h`, []string{"x", "x"}},
		{"sum by (channel) (increase(f{result=\"failed\"}[1h])) > 0\nunless sum by (channel) (increase(s[1h])) > 0", []string{"f", "s"}},
		{`absent(up{job="a-b"} == 1)`, []string{"up"}},
	}
	for _, tt := range tests {
		if got := metricNames(tt.expr); !slices.Equal(got, tt.want) {
			t.Errorf("metricNames(%q) = %v, want %v", tt.expr, got, tt.want)
		}
	}
}
