// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// Facts are the names the code has, which the reference pages must show:
// each gathered from where it is defined, never from the docs.
type Facts struct {
	// Flags are the controller's, as `timeout-controller -help` prints
	// them: a duration's default as the flag package writes it (720h0m0s).
	Flags []Flag
	// PluginFlags are the flags of each kubectl-timeout command, less
	// kubectl's own (PluginGlobalFlags), as `<command> --help` prints them.
	PluginFlags map[string][]Flag
	// PluginGlobalFlags are kubectl's flags, which every command takes.
	PluginGlobalFlags []Flag
	// Reasons are the reasons of the Events the controller records.
	Reasons []string
	// Metrics are the controller's own metrics.
	Metrics []Metric
	// Conditions are the condition reasons of api/v1alpha1.
	Conditions []string
	// Annotations are the annotation keys the controller reads or writes.
	Annotations []string
	// CRDs are the CustomResourceDefinitions of config/crd/bases.
	CRDs []CRD
	// Roles are the roles of config/rbac.
	Roles []Role
	// Alerts are the alert rules of config/prometheus/rules.yaml.
	Alerts []string
	// MessageTypes are the event types of the messages (api/v1alpha1).
	MessageTypes []string
}

// Flag is one command-line flag.
type Flag struct {
	Name, Type, Default, Usage string
}

// Metric is one metric the controller exports.
type Metric struct {
	Name, Type, Help string
	Labels           []string
}

// Role is a ClusterRole or Role of config/rbac.
type Role struct {
	Kind      string `json:"kind"`
	Metadata  struct{ Name, Namespace string }
	Rules     []Rule `json:"rules"`
	Aggregate bool   `json:"-"`
	File      string `json:"-"`
}

// Rule is one rule of a Role.
type Rule struct {
	APIGroups       []string `json:"apiGroups"`
	Resources       []string `json:"resources"`
	ResourceNames   []string `json:"resourceNames"`
	NonResourceURLs []string `json:"nonResourceURLs"`
	Verbs           []string `json:"verbs"`
}

// Gather reads the facts of the repository at root. It builds the
// controller and the plugin to ask them for their flags.
func Gather(root string) (*Facts, error) {
	f := &Facts{}
	bin, err := os.MkdirTemp("", "docs-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(bin)
	if f.Flags, err = controllerFlags(root, bin); err != nil {
		return nil, err
	}
	if f.PluginFlags, f.PluginGlobalFlags, err = pluginFlags(root, bin); err != nil {
		return nil, err
	}
	if f.Reasons, f.Metrics, err = eventsAndMetrics(filepath.Join(root, "internal")); err != nil {
		return nil, err
	}
	if f.Conditions, err = conditionReasons(filepath.Join(root, "api", "v1alpha1")); err != nil {
		return nil, err
	}
	for _, t := range v1alpha1.EventTypes {
		f.MessageTypes = append(f.MessageTypes, string(t))
	}
	f.Annotations = append(slices.Clone(expiry.KnownAnnotations), expiry.AnnotationLegacyTTL)
	sort.Strings(f.Annotations)
	if f.CRDs, err = readCRDs(filepath.Join(root, "config", "crd", "bases")); err != nil {
		return nil, err
	}
	if f.Roles, err = readRoles(filepath.Join(root, "config", "rbac")); err != nil {
		return nil, err
	}
	if f.Alerts, err = readAlerts(filepath.Join(root, "config", "prometheus", "rules.yaml")); err != nil {
		return nil, err
	}
	return f, nil
}

// readAlerts reads the names of the alert rules of a Prometheus rules file.
func readAlerts(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r.Alert)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// build builds the command pkg of the repository into dir.
func build(root, dir, pkg string) (string, error) {
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// cleanEnv is the environment without what the flags take their defaults
// from, so that the table shows the defaults of a bare process.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "POD_NAMESPACE", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "KUBECTL_TIMEOUT_ARCHIVE", "KUBECONFIG":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME=/home/user")
}

func controllerFlags(root, dir string) ([]Flag, error) {
	bin, err := build(root, dir, "./cmd/timeout-controller")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-help")
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("timeout-controller -help: %w\n%s", err, out)
	}
	return ParseGoHelp(string(out))
}

var (
	goFlagLine   = regexp.MustCompile(`^  -(\S+)(?: (\S+))?$`)
	goDefault    = regexp.MustCompile(` \(default (.*)\)$`)
	cobraFlag    = regexp.MustCompile(`^\s+(?:-\w, )?--([\w-]+)(?: (\w+))?\s{2,}(.*)$`)
	cobraDefault = regexp.MustCompile(` \(default (.*)\)$`)
)

// ParseGoHelp reads the flags the flag package prints for -help.
func ParseGoHelp(help string) ([]Flag, error) {
	var flags []Flag
	for line := range strings.Lines(help) {
		line = strings.TrimRight(line, "\n")
		if m := goFlagLine.FindStringSubmatch(line); m != nil {
			typ := m[2]
			if typ == "" {
				typ = "bool"
			}
			flags = append(flags, Flag{Name: m[1], Type: typ})
			continue
		}
		if rest, ok := strings.CutPrefix(line, "    \t"); ok && len(flags) > 0 {
			f := &flags[len(flags)-1]
			if f.Usage != "" {
				f.Usage += " "
			}
			f.Usage += rest
		}
	}
	if len(flags) == 0 {
		return nil, fmt.Errorf("no flags in the help text:\n%s", help)
	}
	for i := range flags {
		f := &flags[i]
		if m := goDefault.FindStringSubmatchIndex(f.Usage); m != nil {
			f.Default = unquote(f.Usage[m[2]:m[3]])
			f.Usage = f.Usage[:m[0]]
		}
	}
	return flags, nil
}

// shortDuration writes a duration as time.Duration prints it without its
// zero minutes and seconds: 720h0m0s as 720h, 1m0s as 1m; 30s stays 30s.
func shortDuration(d string) string {
	if t, ok := strings.CutSuffix(d, "m0s"); ok {
		d = t + "m"
	}
	if t, ok := strings.CutSuffix(d, "h0m"); ok {
		d = t + "h"
	}
	return d
}

func unquote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

// ParseCobraHelp reads the Flags section (local) and the Global Flags
// section of a cobra command's --help.
func ParseCobraHelp(help string) (local, global []Flag) {
	var section *[]Flag
	for line := range strings.Lines(help) {
		line = strings.TrimRight(line, "\n")
		switch line {
		case "Flags:":
			section = &local
			continue
		case "Global Flags:":
			section = &global
			continue
		case "":
			section = nil
			continue
		}
		if section == nil {
			continue
		}
		m := cobraFlag.FindStringSubmatch(line)
		if m == nil || m[1] == "help" {
			continue
		}
		f := Flag{Name: m[1], Type: m[2], Usage: m[3]}
		if d := cobraDefault.FindStringSubmatchIndex(f.Usage); d != nil {
			f.Default = unquote(f.Usage[d[2]:d[3]])
			f.Usage = f.Usage[:d[0]]
		}
		*section = append(*section, f)
	}
	return local, global
}

func pluginFlags(root, dir string) (map[string][]Flag, []Flag, error) {
	bin, err := build(root, dir, "./cmd/kubectl-timeout")
	if err != nil {
		return nil, nil, err
	}
	help := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append(args, "--help")...)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("kubectl-timeout %s --help: %w\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	top, err := help()
	if err != nil {
		return nil, nil, err
	}
	var commands []string
	in := false
	for line := range strings.Lines(top) {
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "Available Commands:":
			in = true
		case line == "":
			in = false
		case in:
			if name := strings.Fields(line)[0]; name != "help" && name != "completion" {
				commands = append(commands, name)
			}
		}
	}
	if len(commands) == 0 {
		return nil, nil, fmt.Errorf("kubectl-timeout --help lists no commands:\n%s", top)
	}
	_, global := ParseCobraHelp(top)
	// The top command's own flags are kubectl's; a command lists them as
	// Global Flags.
	local := map[string][]Flag{}
	for _, c := range commands {
		h, err := help(c)
		if err != nil {
			return nil, nil, err
		}
		l, g := ParseCobraHelp(h)
		local[c] = l
		if len(g) > len(global) {
			global = g
		}
	}
	return local, global, nil
}

// goFiles parses the Go files under dir, tests left out.
func goFiles(dir string) ([]*ast.File, error) {
	fset := token.NewFileSet()
	var files []*ast.File
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, f)
		return nil
	})
	return files, err
}

// stringConsts returns the string constants of files whose names match.
func stringConsts(files []*ast.File, name *regexp.Regexp) map[string]string {
	out := map[string]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				for i, n := range v.Names {
					if !name.MatchString(n.Name) || i >= len(v.Values) {
						continue
					}
					if lit, ok := v.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[n.Name] = unquote(lit.Value)
					}
				}
			}
		}
	}
	return out
}

var reasonConst = regexp.MustCompile(`^Reason[A-Z]`)

// eventsAndMetrics reads, from the Go files under dir, the reasons of the
// Events recorded (the Reason constants, and literal reasons passed to
// Eventf) and the metrics defined (prometheus.New* with their options,
// and prometheus.NewDesc for a collector of its own).
func eventsAndMetrics(dir string) ([]string, []Metric, error) {
	files, err := goFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	reasons := map[string]bool{}
	for _, v := range stringConsts(files, reasonConst) {
		reasons[v] = true
	}
	var metrics []Metric
	for _, f := range files {
		// Which Desc a field or variable holds, and which value type the
		// collector sends with it.
		descs := map[string]*Metric{}
		descTypes := map[string]string{}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok {
					if m := newDesc(n.Value); m != nil {
						descs[k.Name] = m
					}
				}
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if i < len(n.Values) {
						if m := newDesc(n.Values[i]); m != nil {
							descs[name.Name] = m
						}
					}
				}
			case *ast.CallExpr:
				fn := selector(n.Fun)
				switch {
				case fn == "Eventf" && len(n.Args) >= 4:
					if lit, ok := n.Args[3].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						reasons[unquote(lit.Value)] = true
					}
				case (fn == "MustNewConstMetric" || fn == "NewConstMetric") && len(n.Args) >= 2:
					if d := lastName(n.Args[0]); d != "" {
						descTypes[d] = strings.ToLower(strings.TrimSuffix(selector(n.Args[1]), "Value"))
					}
				case strings.HasPrefix(fn, "New") && len(n.Args) >= 1 && isPrometheus(n.Fun):
					if m := metricOf(fn, n.Args); m != nil {
						metrics = append(metrics, *m)
					}
				}
			}
			return true
		})
		for name, m := range descs {
			m.Type = descTypes[name]
			if m.Type == "" {
				m.Type = "untyped"
			}
			metrics = append(metrics, *m)
		}
	}
	sort.Slice(metrics, func(i, j int) bool { return metrics[i].Name < metrics[j].Name })
	return slices.Sorted(func(yield func(string) bool) {
		for r := range reasons {
			if !yield(r) {
				return
			}
		}
	}), metrics, nil
}

func isPrometheus(fun ast.Expr) bool {
	s, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := s.X.(*ast.Ident)
	return ok && x.Name == "prometheus"
}

func selector(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

func lastName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// newDesc is the metric of a prometheus.NewDesc call, its type unknown.
func newDesc(e ast.Expr) *Metric {
	c, ok := e.(*ast.CallExpr)
	if !ok || selector(c.Fun) != "NewDesc" || !isPrometheus(c.Fun) || len(c.Args) < 3 {
		return nil
	}
	m := &Metric{Name: stringLit(c.Args[0]), Help: stringLit(c.Args[1]), Labels: stringList(c.Args[2])}
	if m.Name == "" {
		return nil
	}
	return m
}

// metricOf is the metric a prometheus.NewCounterVec (or the like) call
// defines, from its options' Name and Help and its label names.
func metricOf(fn string, args []ast.Expr) *Metric {
	types := map[string]string{"Counter": "counter", "Gauge": "gauge", "Histogram": "histogram", "Summary": "summary"}
	kind := strings.TrimPrefix(fn, "New")
	kind = strings.TrimSuffix(strings.TrimSuffix(kind, "Vec"), "Func")
	typ, ok := types[kind]
	if !ok {
		return nil
	}
	opts, ok := args[0].(*ast.CompositeLit)
	if !ok {
		return nil
	}
	m := &Metric{Type: typ}
	var namespace, subsystem string
	for _, el := range opts.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		switch selector(kv.Key) {
		case "Name":
			m.Name = stringLit(kv.Value)
		case "Help":
			m.Help = stringLit(kv.Value)
		case "Namespace":
			namespace = stringLit(kv.Value)
		case "Subsystem":
			subsystem = stringLit(kv.Value)
		}
	}
	if m.Name == "" {
		return nil
	}
	for _, p := range []string{subsystem, namespace} {
		if p != "" {
			m.Name = p + "_" + m.Name
		}
	}
	if strings.HasSuffix(fn, "Vec") && len(args) >= 2 {
		m.Labels = stringList(args[1])
	}
	return m
}

func stringLit(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			return unquote(e.Value)
		}
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			return stringLit(e.X) + stringLit(e.Y)
		}
	}
	return ""
}

func stringList(e ast.Expr) []string {
	c, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	var out []string
	for _, el := range c.Elts {
		if s := stringLit(el); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// conditionReasons reads the Reason constants of the API package.
func conditionReasons(dir string) ([]string, error) {
	files, err := goFiles(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, v := range stringConsts(files, reasonConst) {
		out = append(out, v)
	}
	sort.Strings(out)
	return slices.Compact(out), nil
}

func readRoles(dir string) ([]Role, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var roles []Role
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		for _, doc := range splitYAML(b) {
			var r Role
			if err := yaml.Unmarshal(doc, &r); err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			if r.Kind != "ClusterRole" && r.Kind != "Role" {
				continue
			}
			var meta struct {
				AggregationRule any `json:"aggregationRule"`
			}
			_ = yaml.Unmarshal(doc, &meta)
			r.Aggregate = meta.AggregationRule != nil
			r.File = filepath.Base(p)
			roles = append(roles, r)
		}
	}
	// The controller's own roles first, then the ones for people.
	sort.SliceStable(roles, func(i, j int) bool {
		return (roles[i].File == "role.yaml") && roles[j].File != "role.yaml"
	})
	return roles, nil
}

// splitYAML splits a multi-document YAML file.
func splitYAML(b []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "---" {
			docs = append(docs, slices.Clone(cur.Bytes()))
			cur.Reset()
			continue
		}
		cur.Write(sc.Bytes())
		cur.WriteByte('\n')
	}
	docs = append(docs, cur.Bytes())
	var out [][]byte
	for _, d := range docs {
		if len(bytes.TrimSpace(d)) > 0 {
			out = append(out, d)
		}
	}
	return out
}
