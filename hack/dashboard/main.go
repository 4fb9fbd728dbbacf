// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Command dashboard renders the panels of config/grafana/timeout-controller.json
// as one PNG from the metrics a bench run recorded (hack/bench -series), for
// the README: the same queries, computed here over the recorded scrapes.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

type sample struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
	Value  float64           `json:"value"`
}

type point struct {
	At      float64  `json:"at"`
	Samples []sample `json:"samples"`
}

func main() {
	in := flag.String("series", "", "The file hack/bench -series wrote.")
	out := flag.String("out", "docs/dashboard.png", "The PNG to write.")
	window := flag.Float64("window", 30, "The rate window, in seconds ($__rate_interval).")
	title := flag.String("title", "", "A line under the panels naming the run.")
	flag.Parse()
	if err := run(*in, *out, *window, *title); err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}

func run(in, out string, window float64, title string) error {
	points, err := read(in)
	if err != nil {
		return err
	}
	if len(points) < 2 {
		return fmt.Errorf("%s: %d scrapes, want at least 2", in, len(points))
	}
	s := series{points: points, window: window}
	panels := []*plot.Plot{
		s.lines("Objects tracked", "objects", map[string]func(point) (float64, bool){
			"tracked": s.sum("timeout_controller_objects_tracked", nil),
			"kept":    s.sum("timeout_controller_objects_kept", nil),
		}),
		s.expiriesAhead(),
		s.lines("Deletions by result", "per second", s.rateBy("timeout_controller_deletions_total", "result", nil)),
		s.lines("Reminders by result", "per second", s.rateBy("timeout_controller_notifications_total", "result", map[string]string{"type": "reminder"})),
		s.lines("Deletion lag", "seconds", s.quantiles("timeout_controller_deletion_lag_seconds")),
		s.lines("Reminder lag", "seconds", s.quantiles("timeout_controller_reminder_lag_seconds")),
		s.lines("Throttled deletions", "per second", s.rateBy("timeout_controller_deletions_throttled_total", "cap", nil)),
		s.lines("Failing channels", "per second", s.rateBy("timeout_controller_notifications_total", "channel", map[string]string{"result": "failed"})),
	}
	const cols, rows = 2, 4
	img := vgimg.New(vg.Points(1200), vg.Points(1300))
	dc := draw.New(img)
	top := dc
	if title != "" {
		top.Max.Y -= vg.Points(24)
		style := draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, vg.Points(11)), Handler: plot.DefaultTextHandler, XAlign: draw.XCenter}
		dc.FillText(style, vg.Point{X: (dc.Min.X + dc.Max.X) / 2, Y: dc.Max.Y - vg.Points(16)}, title)
	}
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{panels[0:2], panels[2:4], panels[4:6], panels[6:8]}, tiles, top)
	for r := range canvases {
		for c := range canvases[r] {
			panels[r*cols+c].Draw(canvases[r][c])
		}
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func read(path string) ([]point, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var points []point
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var p point
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		points = append(points, p)
	}
	return points, sc.Err()
}

type series struct {
	points []point
	window float64
}

func matches(s sample, name string, want map[string]string) bool {
	if s.Name != name {
		return false
	}
	for k, v := range want {
		if s.Labels[k] != v {
			return false
		}
	}
	return true
}

// sum is sum(name{want}) at one scrape.
func (s series) sum(name string, want map[string]string) func(point) (float64, bool) {
	return func(p point) (float64, bool) {
		var total float64
		found := false
		for _, x := range p.Samples {
			if matches(x, name, want) {
				total += x.Value
				found = true
			}
		}
		return total, found
	}
}

// at returns the scrape window seconds before i, or false.
func (s series) before(i int) (int, bool) {
	for j := i - 1; j >= 0; j-- {
		if s.points[i].At-s.points[j].At >= s.window {
			return j, true
		}
	}
	return 0, false
}

// rateBy is sum by (label) (rate(name{want}[window])), per value of label;
// counters here never reset (one controller process).
func (s series) rateBy(name, label string, want map[string]string) map[string]func(point) (float64, bool) {
	values := map[string]bool{}
	for _, p := range s.points {
		for _, x := range p.Samples {
			if matches(x, name, want) {
				values[x.Labels[label]] = true
			}
		}
	}
	out := map[string]func(point) (float64, bool){}
	for v := range values {
		w := map[string]string{label: v}
		for k, val := range want {
			w[k] = val
		}
		now := s.sum(name, w)
		out[v] = s.rate(now)
	}
	return out
}

func (s series) rate(f func(point) (float64, bool)) func(point) (float64, bool) {
	return func(p point) (float64, bool) {
		i := slices.IndexFunc(s.points, func(q point) bool { return q.At == p.At })
		j, ok := s.before(i)
		if !ok {
			return 0, false
		}
		a, okA := f(s.points[j])
		b, okB := f(p)
		if !okB {
			return 0, false
		}
		if !okA {
			a = 0
		}
		return (b - a) / (p.At - s.points[j].At), true
	}
}

// quantiles are histogram_quantile(q, sum by (le) (rate(name_bucket[window])))
// for the 50th, 90th and 99th percentiles.
func (s series) quantiles(name string) map[string]func(point) (float64, bool) {
	out := map[string]func(point) (float64, bool){}
	for _, q := range []float64{0.5, 0.9, 0.99} {
		out[fmt.Sprintf("p%g", q*100)] = func(p point) (float64, bool) {
			i := slices.IndexFunc(s.points, func(x point) bool { return x.At == p.At })
			j, ok := s.before(i)
			if !ok {
				return 0, false
			}
			return quantile(q, buckets(s.points[j], name), buckets(p, name))
		}
	}
	return out
}

type bucket struct{ le, count float64 }

func buckets(p point, name string) []bucket {
	byLE := map[float64]float64{}
	for _, x := range p.Samples {
		if x.Name != name+"_bucket" {
			continue
		}
		le, err := strconv.ParseFloat(x.Labels["le"], 64)
		if err != nil {
			continue
		}
		byLE[le] += x.Value
	}
	var out []bucket
	for le, c := range byLE {
		out = append(out, bucket{le, c})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].le < out[b].le })
	return out
}

// quantile interpolates linearly within the bucket the rank falls in, as
// Prometheus's histogram_quantile does.
func quantile(q float64, from, to []bucket) (float64, bool) {
	if len(to) == 0 || len(from) != len(to) {
		return 0, false
	}
	inc := make([]bucket, len(to))
	for i := range to {
		inc[i] = bucket{to[i].le, to[i].count - from[i].count}
	}
	total := inc[len(inc)-1].count
	if total <= 0 {
		return 0, false
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range inc {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return lower, true
			}
			if b.count == below {
				return b.le, true
			}
			return lower + (b.le-lower)*(rank-below)/(b.count-below), true
		}
		lower, below = b.le, b.count
	}
	return lower, true
}

func (s series) lines(title, unit string, byName map[string]func(point) (float64, bool)) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds into the run"
	p.Y.Label.Text = unit
	p.Y.Min = 0
	p.Legend.Top = true
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		var xys plotter.XYs
		for _, pt := range s.points {
			if v, ok := byName[n](pt); ok && !math.IsNaN(v) {
				xys = append(xys, plotter.XY{X: pt.At, Y: v})
			}
		}
		if len(xys) == 0 {
			xys = plotter.XYs{{X: s.points[0].At, Y: 0}, {X: s.points[len(s.points)-1].At, Y: 0}}
			n += " (none)"
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			continue
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(n, l)
	}
	return p
}

// expiriesAhead draws the bars of sum by (within) (timeout_controller_objects_expiring)
// at the scrape where the most objects were due within the hour.
func (s series) expiriesAhead() *plot.Plot {
	horizons := []string{"1h", "1d", "1w"}
	best, bestAt := -1.0, 0
	for i, pt := range s.points {
		if v, ok := s.sum("timeout_controller_objects_expiring", map[string]string{"within": "1h"})(pt); ok && v > best {
			best, bestAt = v, i
		}
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Expiries ahead (at %.0f s)", s.points[bestAt].At)
	p.Y.Label.Text = "objects"
	var vals plotter.Values
	for _, h := range horizons {
		v, _ := s.sum("timeout_controller_objects_expiring", map[string]string{"within": h})(s.points[bestAt])
		vals = append(vals, v)
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(50))
	if err == nil {
		bars.Color = plotutil.Color(0)
		p.Add(bars)
	}
	p.NominalX("within 1 hour", "within 1 day", "within 1 week")
	return p
}
