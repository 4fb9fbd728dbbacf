// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// CRD is what the reference pages show of a CustomResourceDefinition: its
// kind, its plural and the schema of its one served version.
type CRD struct {
	File   string
	Kind   string
	Plural string
	Schema *Schema
}

// Schema is the part of an OpenAPI v3 schema that a reference page shows.
type Schema struct {
	Type                 string             `json:"type"`
	Format               string             `json:"format"`
	Description          string             `json:"description"`
	Properties           map[string]*Schema `json:"properties"`
	AdditionalProperties *Schema            `json:"additionalProperties"`
	Items                *Schema            `json:"items"`
	Required             []string           `json:"required"`
	Enum                 []json.RawMessage  `json:"enum"`
	Default              json.RawMessage    `json:"default"`
	Pattern              string             `json:"pattern"`
	MinLength            *int64             `json:"minLength"`
	MaxLength            *int64             `json:"maxLength"`
	Minimum              *float64           `json:"minimum"`
	Maximum              *float64           `json:"maximum"`
	MaxItems             *int64             `json:"maxItems"`
	PreserveUnknown      bool               `json:"x-kubernetes-preserve-unknown-fields"`
	ListType             string             `json:"x-kubernetes-list-type"`
	ListMapKeys          []string           `json:"x-kubernetes-list-map-keys"`
	Validations          []struct {
		Rule    string `json:"rule"`
		Message string `json:"message"`
	} `json:"x-kubernetes-validations"`
}

type crdFile struct {
	Spec struct {
		Names struct {
			Kind, Plural string
		}
		Versions []struct {
			Name   string
			Schema struct {
				OpenAPIV3Schema *Schema `json:"openAPIV3Schema"`
			}
		}
	}
}

func readCRDs(dir string) ([]CRD, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var crds []CRD
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var c crdFile
		if err := yaml.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if len(c.Spec.Versions) != 1 || c.Spec.Versions[0].Schema.OpenAPIV3Schema == nil {
			return nil, fmt.Errorf("%s: want one version with a schema", p)
		}
		crds = append(crds, CRD{File: filepath.Base(p), Kind: c.Spec.Names.Kind, Plural: c.Spec.Names.Plural, Schema: c.Spec.Versions[0].Schema.OpenAPIV3Schema})
	}
	return crds, nil
}

// Page is the reference page of the kind, relative to the repository.
func (c CRD) Page() string {
	return filepath.Join("docs", "reference", strings.ToLower(c.Kind)+".md")
}

// Field is one field of a schema, by its path from the object's root.
type Field struct {
	Path     string
	Required bool
	Schema   *Schema
}

// Fields lists every field under top (spec or status), depth first in
// the order of their names.
func (c CRD) Fields(top string) []Field {
	s := c.Schema.Properties[top]
	if s == nil {
		return nil
	}
	var out []Field
	var walk func(path string, s *Schema)
	walk = func(path string, s *Schema) {
		for _, name := range slices.Sorted(keys(s.Properties)) {
			p := s.Properties[name]
			fp := path + "." + name
			out = append(out, Field{Path: fp, Required: slices.Contains(s.Required, name), Schema: p})
			switch {
			case p.Items != nil && len(p.Items.Properties) > 0:
				walk(fp+"[]", p.Items)
			case len(p.Properties) > 0:
				walk(fp, p)
			}
		}
	}
	walk(top, s)
	return out
}

func keys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// typeOf says what a field holds: string, integer, []string, map[string]string…
func typeOf(s *Schema) string {
	switch {
	case s.PreserveUnknown && len(s.Properties) == 0:
		return "any"
	case s.Type == "array" && s.Items != nil:
		return "[]" + typeOf(s.Items)
	case s.Type == "object" && s.AdditionalProperties != nil:
		return "map[string]" + typeOf(s.AdditionalProperties)
	case s.Format == "date-time":
		return "time (RFC 3339)"
	case s.Type == "":
		return "any"
	}
	return s.Type
}

// constraints are what the schema refuses, in words.
func constraints(s *Schema) []string {
	var out []string
	if len(s.Enum) > 0 {
		var vs []string
		for _, e := range s.Enum {
			vs = append(vs, "`"+strings.Trim(string(e), `"`)+"`")
		}
		out = append(out, "one of "+strings.Join(vs, ", "))
	}
	if s.Pattern != "" {
		out = append(out, "matches `"+s.Pattern+"`")
	}
	switch {
	case s.MinLength != nil && s.MaxLength != nil:
		out = append(out, fmt.Sprintf("%d to %d characters", *s.MinLength, *s.MaxLength))
	case s.MinLength != nil && *s.MinLength == 1:
		out = append(out, "not empty")
	case s.MinLength != nil:
		out = append(out, fmt.Sprintf("at least %d characters", *s.MinLength))
	case s.MaxLength != nil:
		out = append(out, fmt.Sprintf("at most %d characters", *s.MaxLength))
	}
	switch {
	case s.Minimum != nil && s.Maximum != nil:
		out = append(out, fmt.Sprintf("%g to %g", *s.Minimum, *s.Maximum))
	case s.Minimum != nil:
		out = append(out, fmt.Sprintf("at least %g", *s.Minimum))
	case s.Maximum != nil:
		out = append(out, fmt.Sprintf("at most %g", *s.Maximum))
	}
	if s.MaxItems != nil {
		out = append(out, fmt.Sprintf("at most %d items", *s.MaxItems))
	}
	if s.Items != nil {
		for _, c := range constraints(s.Items) {
			out = append(out, "each item: "+c)
		}
	}
	switch s.ListType {
	case "map":
		out = append(out, "one item per "+strings.Join(s.ListMapKeys, ", "))
	case "set":
		out = append(out, "no item twice")
	}
	for _, v := range s.Validations {
		out = append(out, "rule: "+v.Message)
	}
	return out
}

// prose is a schema description on one line, safe in a table cell.
func prose(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return cell(s)
}

// cell escapes what would end a table cell or start HTML.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "<", "&lt;")
	return s
}

// codeCell escapes a code span for a table cell: only the pipe.
func codeCell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

// renderFields writes the table of the fields under top.
func renderFields(c CRD, top string) string {
	var b strings.Builder
	b.WriteString("| field | type | default | description |\n| --- | --- | --- | --- |\n")
	for _, f := range c.Fields(top) {
		typ := typeOf(f.Schema)
		if f.Required {
			typ += ", required"
		}
		def := ""
		if len(f.Schema.Default) > 0 {
			def = "`" + codeCell(compactJSON(f.Schema.Default)) + "`"
		}
		desc := prose(f.Schema.Description)
		var cs []string
		for _, c := range constraints(f.Schema) {
			cs = append(cs, codeCellsIn(c))
		}
		if len(cs) > 0 {
			if desc != "" {
				desc += " "
			}
			desc += "Validation: " + strings.Join(cs, "; ") + "."
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.Path, typ, def, desc)
	}
	return b.String()
}

// codeCellsIn escapes a constraint that mixes words and code spans.
func codeCellsIn(s string) string {
	parts := strings.Split(s, "`")
	for i := range parts {
		if i%2 == 1 {
			parts[i] = codeCell(parts[i])
		} else {
			parts[i] = cell(parts[i])
		}
	}
	return strings.Join(parts, "`")
}

func compactJSON(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(b)
}

// fieldPaths are the paths of every field of the CRD, spec and status.
func (c CRD) fieldPaths() []string {
	var out []string
	for _, top := range []string{"spec", "status"} {
		for _, f := range c.Fields(top) {
			out = append(out, f.Path)
		}
	}
	sort.Strings(out)
	return out
}
