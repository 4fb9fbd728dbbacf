// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// seriesPoint is one scrape of the controller's own metrics
// (timeout_controller_*), one line of the -series file: what a Prometheus
// scraping the controller would have stored. hack/dashboard renders the
// dashboard's panels from it.
type seriesPoint struct {
	// At is the scrape's time, in seconds since the run's start.
	At      float64        `json:"at"`
	Samples []seriesSample `json:"samples"`
}

// seriesSample is one sample, histograms flattened into their _bucket
// (with le), _sum and _count series as the text format has them.
type seriesSample struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Value  float64           `json:"value"`
}

// recordSeries scrapes the controller every interval until ctx ends and
// writes each scrape as a line of path. It returns when ctx is done, with
// the first error that stopped it.
func recordSeries(ctx context.Context, addr, path string, interval time.Duration) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("series file: %w", err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	start := time.Now()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		body, err := httpGet(ctx, "http://"+addr+"/metrics")
		if err == nil {
			var p seriesPoint
			if p.Samples, err = flatten(body, "timeout_controller_"); err != nil {
				return err
			}
			p.At = math.Round(time.Since(start).Seconds()*1000) / 1000
			line, err := json.Marshal(p)
			if err != nil {
				return err
			}
			if _, err := w.Write(append(line, '\n')); err != nil {
				return fmt.Errorf("series file: %w", err)
			}
		}
		// A scrape that failed (the controller starting or stopping)
		// is a gap in the series, as it would be in Prometheus.
		select {
		case <-ctx.Done():
			if err := w.Flush(); err != nil {
				return fmt.Errorf("series file: %w", err)
			}
			return f.Close()
		case <-tick.C:
		}
	}
}

// flatten returns the samples of the families whose names start with
// prefix.
func flatten(text []byte, prefix string) ([]seriesSample, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	var out []seriesSample
	for name, f := range families {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out = append(out, samplesOf(name, labels, m)...)
		}
	}
	return out, nil
}

func samplesOf(name string, labels map[string]string, m *dto.Metric) []seriesSample {
	switch {
	case m.Histogram != nil:
		h := m.GetHistogram()
		out := []seriesSample{
			{Name: name + "_sum", Labels: labels, Value: h.GetSampleSum()},
			{Name: name + "_count", Labels: labels, Value: float64(h.GetSampleCount())},
		}
		for _, b := range h.GetBucket() {
			if math.IsInf(b.GetUpperBound(), 1) {
				continue
			}
			out = append(out, seriesSample{Name: name + "_bucket", Labels: with(labels, "le", fmt.Sprint(b.GetUpperBound())), Value: float64(b.GetCumulativeCount())})
		}
		return append(out, seriesSample{Name: name + "_bucket", Labels: with(labels, "le", "+Inf"), Value: float64(h.GetSampleCount())})
	case m.Counter != nil:
		return []seriesSample{{Name: name, Labels: labels, Value: m.GetCounter().GetValue()}}
	case m.Gauge != nil:
		return []seriesSample{{Name: name, Labels: labels, Value: m.GetGauge().GetValue()}}
	default:
		return []seriesSample{{Name: name, Labels: labels, Value: m.GetUntyped().GetValue()}}
	}
}

func with(labels map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	for key, val := range labels {
		out[key] = val
	}
	out[k] = v
	return out
}
