// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
)

// externalFlags are the flags of other tools (kubectl, helm, go, the
// demo and bench) that the pages may name in inline code. A controller or
// plugin flag needs no entry: the code has it.
var externalFlags = []string{
	// kubectl
	"server-side", "force-conflicts", "overwrite", "field-selector", "dry-run", "for", "namespace", "from-literal", "from-file",
	"all-namespaces", "selector", "output", "kubeconfig", "context", "as", "request-timeout", "field-manager", "validate",
	// helm
	"values", "set", "create-namespace", "version", "verify", "keyring",
	// kube-controller-manager
	"concurrent-namespace-syncs",
	// the bench
	"plain-others", "owned", "touch", "idle-ttl", "series",
	// go test
	"update", "update-explain",
	// chromium
	"no-sandbox",
	// every Go and cobra program
	"help",
}

// markdownFiles are the pages the check reads, relative to root: every
// Markdown file outside hidden directories, bin, dist, third_party and
// test data.
func markdownFiles(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch n := d.Name(); {
			case p != root && strings.HasPrefix(n, "."), n == "bin", n == "dist", n == "third_party", n == "testdata", n == "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// page is a Markdown file as the check reads it.
type page struct {
	path  string // relative to the repository, with slashes
	lines []string
	prose []int // indexes of the lines outside fenced code
}

func readPage(root, p string) (*page, error) {
	b, err := os.ReadFile(filepath.Join(root, p))
	if err != nil {
		return nil, err
	}
	pg := &page{path: p, lines: strings.Split(string(b), "\n")}
	fence := ""
	for i, l := range pg.lines {
		t := strings.TrimSpace(l)
		if fence != "" {
			if strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fence = t[:3]
			continue
		}
		pg.prose = append(pg.prose, i)
	}
	return pg, nil
}

var (
	heading    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	inlineLink = regexp.MustCompile(`!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`^\s*\[[^\]]+\]:\s*(\S+)`)
	htmlLink   = regexp.MustCompile(`(?:href|src)="([^"]+)"`)
	codeSpan   = regexp.MustCompile("`([^`]+)`")
	linkText   = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag    = regexp.MustCompile(`<[^>]+>`)
)

// anchors are the anchors GitHub gives the page's headings, and those of
// its HTML anchors.
func (pg *page) anchors() map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, i := range pg.prose {
		l := pg.lines[i]
		for _, m := range htmlAnchor.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := Slug(m[2])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// Slug is the anchor GitHub makes of a heading: its text as rendered,
// lower case, without punctuation but hyphens and underscores, spaces
// made hyphens.
func Slug(h string) string {
	h = linkText.ReplaceAllString(h, "$1")
	h = htmlTag.ReplaceAllString(h, "")
	h = strings.NewReplacer("`", "", "*", "").Replace(h)
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r), unicode.IsNumber(r), unicode.IsMark(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// withoutCode is a prose line with its code spans blanked out, so that a
// link written as code is not taken for one.
func withoutCode(l string) string {
	return codeSpan.ReplaceAllStringFunc(l, func(s string) string { return strings.Repeat(" ", len(s)) })
}

// links are the link targets of a page, by line number.
func (pg *page) links() map[int][]string {
	out := map[int][]string{}
	for _, i := range pg.prose {
		l := withoutCode(pg.lines[i])
		for _, re := range []*regexp.Regexp{inlineLink, refLink, htmlLink} {
			for _, m := range re.FindAllStringSubmatch(l, -1) {
				out[i+1] = append(out[i+1], strings.Trim(m[1], "<>"))
			}
		}
	}
	return out
}

// inlineCode are the code spans of the page's prose, with their lines.
func (pg *page) inlineCode() []struct {
	line int
	code string
} {
	var out []struct {
		line int
		code string
	}
	for _, i := range pg.prose {
		for _, m := range codeSpan.FindAllStringSubmatch(pg.lines[i], -1) {
			out = append(out, struct {
				line int
				code string
			}{i + 1, m[1]})
		}
	}
	return out
}

// row is a row of a table of a page: its cells and its line.
type row struct {
	line  int
	cells []string
}

// tableRows returns the rows, after the header and its delimiter, of
// every table of the page whose header's first cell is header.
func (pg *page) tableRows(header string) []row {
	var out []row
	inTable := false
	for n, i := range pg.prose {
		l := strings.TrimSpace(pg.lines[i])
		if !strings.HasPrefix(l, "|") {
			inTable = false
			continue
		}
		cells := splitRow(l)
		if !inTable {
			// A header row is followed by the delimiter row.
			if n+1 < len(pg.prose) && strings.HasPrefix(strings.TrimSpace(pg.lines[pg.prose[n+1]]), "| ---") &&
				len(cells) > 0 && strings.EqualFold(strings.TrimSpace(cells[0]), header) {
				inTable = true
			}
			continue
		}
		if strings.HasPrefix(l, "| ---") {
			continue
		}
		out = append(out, row{line: i + 1, cells: cells})
	}
	return out
}

// tableColumn returns, for every table of the page whose header's first
// cell is header, the code spans of the cells of column col, with their
// lines.
func (pg *page) tableColumn(header string, col int) map[string]int {
	out := map[string]int{}
	for _, r := range pg.tableRows(header) {
		if col >= len(r.cells) {
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(r.cells[col], -1) {
			out[m[1]] = r.line
		}
	}
	return out
}

// splitRow splits a table row on the pipes that are not escaped.
func splitRow(l string) []string {
	l = strings.TrimSpace(l)
	l = strings.TrimPrefix(l, "|")
	l = strings.TrimSuffix(l, "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(l); i++ {
		if l[i] == '\\' && i+1 < len(l) && l[i+1] == '|' {
			cur.WriteByte('|')
			i++
			continue
		}
		if l[i] == '|' {
			cells = append(cells, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteByte(l[i])
	}
	return append(cells, cur.String())
}

// Check returns every problem of the pages of the repository at root.
func Check(root string, f *Facts) ([]string, error) {
	paths, err := markdownFiles(root)
	if err != nil {
		return nil, err
	}
	pages := map[string]*page{}
	for _, p := range paths {
		if pages[p], err = readPage(root, p); err != nil {
			return nil, err
		}
	}
	var problems []string
	report := func(where string, line int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: %s", where, line, fmt.Sprintf(format, args...)))
	}
	checkBlocks(pages, f, report)
	checkLinks(root, pages, report)
	if err := checkCodeReferences(root, report); err != nil {
		return nil, err
	}
	checkNames(pages, f, report)
	sort.Strings(problems)
	return problems, nil
}

type reporter func(where string, line int, format string, args ...any)

// checkBlocks reports generated blocks that are stale, unknown, missing
// from their page or found elsewhere.
func checkBlocks(pages map[string]*page, f *Facts, report reporter) {
	all := blocks(f)
	found := map[string][]string{}
	for _, p := range slices.Sorted(keys(pages)) {
		pg := pages[p]
		old := strings.Join(pg.lines, "\n")
		text, names, err := regenerate(old, all)
		if err != nil {
			report(p, 0, "%v", err)
			continue
		}
		for _, n := range names {
			found[n] = append(found[n], p)
		}
		if text != old {
			line := firstDifference(old, text)
			report(p, line, "a generated table is stale: run `make docs`")
		}
	}
	for _, name := range slices.Sorted(keys(all)) {
		b := all[name]
		switch where := found[name]; {
		case len(where) == 0:
			report(b.page, 0, "the generated block %s is missing: add `<!-- BEGIN GENERATED %s -->` and `<!-- END GENERATED %s -->` and run `make docs`", name, name, name)
		case len(where) > 1 || where[0] != b.page:
			report(where[0], 0, "the generated block %s belongs in %s, once (found in %s)", name, b.page, strings.Join(where, ", "))
		}
	}
}

func firstDifference(a, b string) int {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

// checkLinks reports relative links to files that do not exist, and
// anchors that the target page does not have.
func checkLinks(root string, pages map[string]*page, report reporter) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(p string) map[string]bool {
		if a, ok := anchors[p]; ok {
			return a
		}
		pg := pages[p]
		if pg == nil {
			var err error
			if pg, err = readPage(root, p); err != nil {
				return nil
			}
		}
		anchors[p] = pg.anchors()
		return anchors[p]
	}
	for _, p := range slices.Sorted(keys(pages)) {
		pg := pages[p]
		links := pg.links()
		for _, line := range slices.Sorted(keys2(links)) {
			for _, target := range links[line] {
				if u, err := url.Parse(target); err != nil || u.Scheme != "" {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				file, _ = url.PathUnescape(file)
				dest := p
				if file != "" {
					if strings.HasPrefix(file, "/") {
						dest = path.Clean(strings.TrimPrefix(file, "/"))
					} else {
						dest = path.Clean(path.Join(path.Dir(p), file))
					}
					if strings.HasPrefix(dest, "../") {
						report(p, line, "link %s leaves the repository", target)
						continue
					}
					if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
						report(p, line, "link %s: %s does not exist", target, dest)
						continue
					}
				}
				if frag == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				if a := anchorsOf(dest); !a[frag] {
					report(p, line, "link %s: %s has no heading with the anchor #%s", target, dest, frag)
				}
			}
		}
	}
}

func keys2[V any](m map[int]V) func(func(int) bool) {
	return func(yield func(int) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// docReference is a page of docs/ named in code, comments or manifests.
var docReference = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-]|\.\./)(docs/[A-Za-z0-9_./-]+\.md)(?:#([A-Za-z0-9_-]+))?`)

// checkCodeReferences reports the pages of docs/ that code, comments,
// manifests and the other pages name but that do not exist.
func checkCodeReferences(root string, report reporter) error {
	texts := []string{".go", ".yaml", ".yml", ".json", ".txt", ".tpl", ".sh", ".md", "Makefile", "Dockerfile"}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch n := d.Name(); {
			case p != root && strings.HasPrefix(n, "."), n == "bin", n == "dist", n == "third_party", n == "testdata":
				return filepath.SkipDir
			}
			if rel == "hack/docs" {
				return filepath.SkipDir // its tests name pages that do not exist on purpose
			}
			return nil
		}
		// The changelog keeps history, which may name pages since moved.
		if rel == "CHANGELOG.md" || !slices.ContainsFunc(texts, func(s string) bool { return strings.HasSuffix(p, s) }) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for n, l := range strings.Split(string(b), "\n") {
			for _, m := range docReference.FindAllStringSubmatch(l, -1) {
				file := filepath.Join(root, filepath.FromSlash(m[1]))
				if _, err := os.Stat(file); err != nil {
					report(rel, n+1, "names %s, which does not exist", m[1])
					continue
				}
				if m[2] != "" {
					pg, err := readPage(root, m[1])
					if err == nil && !pg.anchors()[m[2]] {
						report(rel, n+1, "names %s#%s, which has no such heading", m[1], m[2])
					}
				}
			}
		}
		return nil
	})
}

var (
	metricName = regexp.MustCompile(`timeout_controller_[a-z0-9_]*[a-z0-9]`)
	flagSpan   = regexp.MustCompile(`^--([a-z0-9][a-z0-9-]*)(?:[= ]|$)`)
)

// names checks the names the code and the reference pages disagree on:
// each name the code has must be in its reference page, and no page may
// name a flag or metric, nor a reference table an Event or condition
// reason, an alert or a permission, that the code does not have.
type names struct {
	pages  map[string]*page
	facts  *Facts
	report reporter
}

func checkNames(pages map[string]*page, f *Facts, report reporter) {
	n := names{pages: pages, facts: f, report: report}
	n.flags()
	n.flagDefaults()
	n.metrics()
	n.events()
	n.messageTypes()
	n.cloudEventTypes()
	n.eventTypeLists()
	n.eventTypeCounts()
	n.meanings()
	n.conditions()
	n.fields()
	n.annotations()
	n.alerts()
	n.rbac()
}

// ref is the reference page p, or nil, reported, when it is missing.
func (n names) ref(p string) *page {
	if pg := n.pages[p]; pg != nil {
		return pg
	}
	n.report(p, 0, "the reference page is missing")
	return nil
}

// codeIn is the set of the code spans of a page.
func codeIn(pg *page) map[string]bool {
	out := map[string]bool{}
	for _, c := range pg.inlineCode() {
		out[c.code] = true
	}
	return out
}

// flagsIn is the set of the flags the code spans of a page begin with.
func flagsIn(pg *page) map[string]bool {
	out := map[string]bool{}
	for _, c := range pg.inlineCode() {
		if m := flagSpan.FindStringSubmatch(c.code); m != nil {
			out[m[1]] = true
		}
	}
	return out
}

// sortedPages are the pages' paths, the changelog left out: it keeps
// names since changed.
func (n names) sortedPages() []string {
	var out []string
	for _, p := range slices.Sorted(keys(n.pages)) {
		if p != "CHANGELOG.md" {
			out = append(out, p)
		}
	}
	return out
}

func (n names) flags() {
	flags := map[string]bool{}
	for _, fl := range n.facts.Flags {
		flags[fl.Name] = true
	}
	if pg := n.ref("docs/reference/flags.md"); pg != nil {
		shown := flagsIn(pg)
		for _, fl := range n.facts.Flags {
			if !shown[fl.Name] {
				n.report(pg.path, 0, "the controller's flag --%s is not in the reference", fl.Name)
			}
		}
	}
	plugin := map[string]bool{}
	for _, fl := range n.facts.PluginGlobalFlags {
		plugin[fl.Name] = true
	}
	if pg := n.ref("docs/reference/plugin.md"); pg != nil {
		shown := flagsIn(pg)
		for _, cmd := range slices.Sorted(keys(n.facts.PluginFlags)) {
			for _, fl := range n.facts.PluginFlags[cmd] {
				plugin[fl.Name] = true
				if !shown[fl.Name] {
					n.report(pg.path, 0, "the plugin's flag %s --%s is not in the reference", cmd, fl.Name)
				}
			}
		}
	}
	for _, p := range n.sortedPages() {
		for _, c := range n.pages[p].inlineCode() {
			m := flagSpan.FindStringSubmatch(c.code)
			if m == nil {
				continue
			}
			if name := m[1]; !flags[name] && !plugin[name] && !slices.Contains(externalFlags, name) {
				n.report(p, c.line, "names the flag --%s, which neither the controller, the plugin nor a tool the docs use has", name)
			}
		}
	}
}

// flagDefaults: each row of the table of flags shows the default that
// `timeout-controller -help` prints. It reads the default back from the
// page, not from what the generator meant to write, so that a generator
// that mangles one (30s written 3) fails the check too. Durations are
// compared as durations: 720h is 720h0m0s.
func (n names) flagDefaults() {
	pg := n.pages["docs/reference/flags.md"]
	if pg == nil {
		return // flags reports it
	}
	help := map[string]Flag{}
	for _, fl := range n.facts.Flags {
		help[fl.Name] = fl
	}
	for _, r := range pg.tableRows("flag") {
		if len(r.cells) < 3 {
			continue
		}
		m := flagSpan.FindStringSubmatch(strings.Trim(strings.TrimSpace(r.cells[0]), "`"))
		if m == nil {
			continue
		}
		fl, ok := help[m[1]]
		if !ok {
			continue // flags reports it
		}
		shown := strings.TrimSpace(r.cells[2])
		if c := codeSpan.FindStringSubmatch(shown); c != nil {
			shown = c[1]
		}
		if !sameDefault(fl.Type, shown, fl.Default) {
			n.report(pg.path, r.line, "the default of --%s is %q (`timeout-controller -help`), not %q", fl.Name, fl.Default, shown)
		}
	}
}

// sameDefault reports whether a default shown in the docs is the one the
// flag package prints, for a flag of type typ. The flag package prints no
// default for a zero value.
func sameDefault(typ, shown, printed string) bool {
	if typ != "duration" {
		return shown == printed
	}
	dur := func(s string) (time.Duration, error) {
		if s == "" {
			return 0, nil
		}
		return time.ParseDuration(s)
	}
	a, errA := dur(shown)
	b, errB := dur(printed)
	return errA == nil && errB == nil && a == b
}

func (n names) metrics() {
	metrics := map[string]bool{}
	for _, m := range n.facts.Metrics {
		metrics[m.Name] = true
		if m.Type == "histogram" || m.Type == "summary" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				metrics[m.Name+s] = true
			}
		}
	}
	if pg := n.ref("docs/reference/metrics.md"); pg != nil {
		shown := codeIn(pg)
		for _, m := range n.facts.Metrics {
			if !shown[m.Name] {
				n.report(pg.path, 0, "the metric %s is not in the reference", m.Name)
			}
		}
	}
	for _, p := range n.sortedPages() {
		for i, l := range n.pages[p].lines {
			for _, name := range metricName.FindAllString(l, -1) {
				if !metrics[name] {
					n.report(p, i+1, "names the metric %s, which the controller does not export", name)
				}
			}
		}
	}
}

// bothWays reports what the code has and the rows of a table do not, and
// the rows that name what the code does not have.
func (n names) bothWays(pg *page, rows map[string]int, code []string, missing, unknown string) {
	for _, c := range code {
		if _, ok := rows[c]; !ok {
			n.report(pg.path, 0, missing, c)
		}
	}
	for _, r := range slices.Sorted(keys(rows)) {
		if !slices.Contains(code, r) {
			n.report(pg.path, rows[r], unknown, r)
		}
	}
}

// events: the tables of events.md whose first column is the reason.
func (n names) events() {
	if pg := n.ref("docs/reference/events.md"); pg != nil {
		n.bothWays(pg, pg.tableColumn("reason", 0), n.facts.Reasons,
			"the Event reason %s is not in a table of the reference",
			"the Event reason %s is not one the controller records")
	}
}

// messageTypes: the table of the notifications guide whose first column
// is the event type of a message.
func (n names) messageTypes() {
	if pg := n.ref("docs/guides/notifications.md"); pg != nil {
		n.bothWays(pg, pg.tableColumn("event type", 0), n.facts.MessageTypes,
			"the message type %s is not in the table of event types",
			"the message type %s is not one the API has")
	}
}

// conditions: each condition reason of the API in a conditions table of a
// kind's reference page, and each reason there one the API has.
func (n names) conditions() {
	kindPages := []string{"docs/reference/timeoutpolicy.md", "docs/reference/notificationchannel.md"}
	shown := map[string]bool{}
	for _, p := range kindPages {
		pg := n.ref(p)
		if pg == nil {
			continue
		}
		for _, rows := range []map[string]int{pg.tableColumn("type", 2), pg.tableColumn("reason", 0)} {
			for r, line := range rows {
				shown[r] = true
				if !slices.Contains(n.facts.Conditions, r) {
					n.report(p, line, "the condition reason %s is not one api/v1alpha1 has", r)
				}
			}
		}
	}
	for _, r := range n.facts.Conditions {
		if !shown[r] {
			n.report(kindPages[0], 0, "the condition reason %s is not in a conditions table of %s", r, strings.Join(kindPages, " or "))
		}
	}
}

func (n names) fields() {
	for _, c := range n.facts.CRDs {
		p := filepath.ToSlash(c.Page())
		pg := n.ref(p)
		if pg == nil {
			continue
		}
		shown := codeIn(pg)
		for _, fp := range c.fieldPaths() {
			if !shown[fp] {
				n.report(p, 0, "the field %s of %s is not in its reference", fp, c.Kind)
			}
		}
	}
}

func (n names) annotations() {
	if pg := n.ref("docs/reference/annotations.md"); pg != nil {
		shown := codeIn(pg)
		for _, a := range n.facts.Annotations {
			if !shown[a] {
				n.report(pg.path, 0, "the annotation %s is not in the reference", a)
			}
		}
	}
}

// alerts: the table of the monitoring guide, both ways.
func (n names) alerts() {
	if pg := n.ref("docs/guides/monitoring.md"); pg != nil {
		n.bothWays(pg, pg.tableColumn("alert", 0), n.facts.Alerts,
			"the alert %s is not in the table of alerts",
			"the alert %s is not in config/prometheus/rules.yaml")
	}
}

// rbac: the table that says why, keyed by resource, names exactly the
// resources of the controller's own roles.
func (n names) rbac() {
	pg := n.ref("docs/reference/rbac.md")
	if pg == nil {
		return
	}
	var granted []string
	for _, r := range n.facts.Roles {
		if r.File != "role.yaml" {
			continue
		}
		for _, rule := range r.Rules {
			for _, res := range rule.Resources {
				if !slices.Contains(granted, res) {
					granted = append(granted, res)
				}
			}
		}
	}
	sort.Strings(granted)
	n.bothWays(pg, pg.tableColumn("resource", 0), granted,
		"the controller's role grants %s, which no row of the table of reasons explains",
		"explains %s, which the controller's roles do not grant")
}
