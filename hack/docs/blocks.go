// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// A generated block sits between two markers in a page:
//
//	<!-- BEGIN GENERATED flags: … -->
//	…
//	<!-- END GENERATED flags -->
//
// Everything between them is written by Generate; the text after the
// name in the first marker is for the reader.
var (
	beginMarker = regexp.MustCompile(`^<!-- BEGIN GENERATED (\S+?):? .*-->$`)
	endMarker   = regexp.MustCompile(`^<!-- END GENERATED (\S+) -->$`)
)

// block is what a generated block holds and where it must be.
type block struct {
	page, source string
	render       func() string
}

// blocks are every generated block, by name.
func blocks(f *Facts) map[string]block {
	m := map[string]block{
		"flags": {
			page:   "docs/reference/flags.md",
			source: "`timeout-controller -help`",
			render: func() string { return renderFlags(f.Flags) },
		},
		"metrics": {
			page:   "docs/reference/metrics.md",
			source: "the metrics defined in internal/",
			render: func() string { return renderMetrics(f.Metrics) },
		},
		"rbac": {
			page:   "docs/reference/rbac.md",
			source: "config/rbac",
			render: func() string { return renderRoles(f.Roles) },
		},
		"templates": {
			page:   "docs/guides/notifications.md",
			source: "the default templates of internal/notify",
			render: func() string { return renderTemplates(f.MessageTypes) },
		},
	}
	for _, c := range f.CRDs {
		for _, top := range []string{"spec", "status"} {
			m["crd/"+c.Plural+"/"+top] = block{
				page:   filepath.ToSlash(c.Page()),
				source: "config/crd/bases/" + c.File,
				render: func() string { return renderFields(c, top) },
			}
		}
	}
	return m
}

// marker is the first line of a block, which says where it comes from.
func (b block) marker(name string) string {
	return fmt.Sprintf("<!-- BEGIN GENERATED %s: `make docs` writes this from %s; change that, not this -->", name, b.source)
}

// span is where a generated block lies in a page's lines: begin and end
// are the indexes of its markers.
type span struct {
	name       string
	begin, end int
}

// spans finds the generated blocks of a page.
func spans(lines []string) ([]span, error) {
	var out []span
	open := -1
	name := ""
	for i, l := range lines {
		if m := beginMarker.FindStringSubmatch(l); m != nil {
			if open >= 0 {
				return nil, fmt.Errorf("line %d: block %s begins inside block %s", i+1, m[1], name)
			}
			open, name = i, m[1]
			continue
		}
		if m := endMarker.FindStringSubmatch(l); m != nil {
			if open < 0 || m[1] != name {
				return nil, fmt.Errorf("line %d: END GENERATED %s without its BEGIN", i+1, m[1])
			}
			out = append(out, span{name: name, begin: open, end: i})
			open = -1
		}
	}
	if open >= 0 {
		return nil, fmt.Errorf("line %d: block %s has no END GENERATED", open+1, name)
	}
	return out, nil
}

// regenerate returns text with every generated block rewritten, and the
// names of the blocks it holds.
func regenerate(text string, all map[string]block) (string, []string, error) {
	lines := strings.Split(text, "\n")
	sp, err := spans(lines)
	if err != nil {
		return "", nil, err
	}
	var names []string
	var out []string
	last := 0
	for _, s := range sp {
		b, ok := all[s.name]
		if !ok {
			return "", nil, fmt.Errorf("line %d: no generated block is called %s", s.begin+1, s.name)
		}
		names = append(names, s.name)
		out = append(out, lines[last:s.begin]...)
		out = append(out, b.marker(s.name))
		out = append(out, strings.Split(strings.TrimRight(b.render(), "\n"), "\n")...)
		out = append(out, lines[s.end])
		last = s.end + 1
	}
	out = append(out, lines[last:]...)
	return strings.Join(out, "\n"), names, nil
}

// Generate rewrites the generated blocks of every page and returns the
// pages it changed.
func Generate(root string, f *Facts) ([]string, error) {
	pages, err := markdownFiles(root)
	if err != nil {
		return nil, err
	}
	all := blocks(f)
	var changed []string
	for _, p := range pages {
		old, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return changed, err
		}
		text, _, err := regenerate(string(old), all)
		if err != nil {
			return changed, fmt.Errorf("%s: %w", p, err)
		}
		if text != string(old) {
			if err := os.WriteFile(filepath.Join(root, p), []byte(text), 0o644); err != nil {
				return changed, err
			}
			changed = append(changed, p)
		}
	}
	return changed, nil
}

func renderFlags(flags []Flag) string {
	var b strings.Builder
	b.WriteString("| flag | type | default | meaning |\n| --- | --- | --- | --- |\n")
	for _, f := range flags {
		def := ""
		if d := f.Default; d != "" {
			if f.Type == "duration" {
				d = shortDuration(d)
			}
			def = "`" + codeCell(d) + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.Name, f.Type, def, cell(f.Usage))
	}
	return b.String()
}

func renderMetrics(metrics []Metric) string {
	var b strings.Builder
	b.WriteString("| metric | type | labels | meaning |\n| --- | --- | --- | --- |\n")
	for _, m := range metrics {
		var labels []string
		for _, l := range m.Labels {
			labels = append(labels, "`"+l+"`")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.Name, m.Type, strings.Join(labels, ", "), cell(m.Help))
	}
	return b.String()
}

func renderRoles(roles []Role) string {
	var b strings.Builder
	for i, r := range roles {
		if i > 0 {
			b.WriteString("\n")
		}
		where := "cluster-wide"
		if r.Metadata.Namespace != "" {
			where = "in namespace `" + r.Metadata.Namespace + "`"
		}
		fmt.Fprintf(&b, "%s `%s` (`config/rbac/%s`), %s:\n\n", r.Kind, r.Metadata.Name, r.File, where)
		if r.Aggregate {
			b.WriteString("aggregated from other roles.\n")
			continue
		}
		b.WriteString("| API group | resources | resource names | verbs |\n| --- | --- | --- | --- |\n")
		for _, rule := range r.Rules {
			groups := make([]string, len(rule.APIGroups))
			for i, g := range rule.APIGroups {
				if g == "" {
					g = `""`
				}
				groups[i] = "`" + g + "`"
			}
			res := rule.Resources
			if len(rule.NonResourceURLs) > 0 {
				res = rule.NonResourceURLs
				groups = []string{"(non-resource URLs)"}
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", strings.Join(groups, ", "), codeList(res), codeList(rule.ResourceNames), strings.Join(rule.Verbs, ", "))
		}
	}
	return b.String()
}

func codeList(xs []string) string {
	xs = slices.Clone(xs)
	for i, x := range xs {
		xs[i] = "`" + x + "`"
	}
	return strings.Join(xs, ", ")
}

// renderTemplates is the table of the default subject and text of each
// message type; a blank line in a text shows as such.
func renderTemplates(types []string) string {
	var b strings.Builder
	b.WriteString("| event | subject | text |\n| --- | --- | --- |\n")
	cell := func(s string) string { return "`" + strings.ReplaceAll(s, "|", "\\|") + "`" }
	for _, t := range types {
		subject, text, ok := notify.DefaultTemplate(v1alpha1.EventType(t))
		if !ok {
			continue
		}
		var parts []string
		for _, p := range strings.Split(text, "\n\n") {
			parts = append(parts, cell(p))
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", t, cell(subject), strings.Join(parts, ", a blank line, "))
	}
	// The owner's digest has its own, which policies cannot override.
	subject, text := notify.DefaultDigestTemplate()
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		lines = append(lines, cell(l))
	}
	fmt.Fprintf(&b, "| owner's digest | %s | %s |\n", cell(subject), strings.Join(lines, ", a new line, "))
	return strings.TrimSuffix(b.String(), "\n")
}
