// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/yaml"
)

const crdPath = "../../config/crd/bases/timeout.amphitheatre.app_timeoutpolicies.yaml"

// TestCRDPatternMatchesParser keeps the pattern the API server checks at
// admission and the one ParseDuration is documented against the same.
func TestCRDPatternMatchesParser(t *testing.T) {
	raw, err := os.ReadFile(crdPath)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("has the pattern line for every Duration field", func(t *testing.T) {
		want := "pattern: " + DurationPattern
		n := 0
		for line := range strings.Lines(string(raw)) {
			if strings.TrimSpace(line) == want {
				n++
			}
		}
		if n < 3 {
			t.Errorf("%s has %d lines %q, want at least 3 (defaultTTL, minimumNotice, reminders items)", crdPath, n, want)
		}
	})

	t.Run("puts the pattern on each Duration field of every served version", func(t *testing.T) {
		var crd struct {
			Spec struct {
				Versions []struct {
					Name   string `json:"name"`
					Schema struct {
						OpenAPIV3Schema struct {
							Properties map[string]schemaProps `json:"properties"`
						} `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096).Decode(&crd); err != nil {
			t.Fatalf("decode %s: %v", crdPath, err)
		}
		if len(crd.Spec.Versions) == 0 {
			t.Fatalf("%s has no versions", crdPath)
		}
		for _, v := range crd.Spec.Versions {
			spec := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties
			fields := map[string]string{
				"spec.defaultTTL":       spec["defaultTTL"].Pattern,
				"spec.minimumNotice":    spec["minimumNotice"].Pattern,
				"spec.reminders[items]": spec["reminders"].Items.Pattern,
			}
			for field, got := range fields {
				if got != DurationPattern {
					t.Errorf("version %s: %s has pattern %q, want DurationPattern %q", v.Name, field, got, DurationPattern)
				}
			}
		}
	})

	t.Run("has the pattern in the Duration type's kubebuilder marker", func(t *testing.T) {
		src, err := os.ReadFile("../../api/v1alpha1/timeoutpolicy_types.go")
		if err != nil {
			t.Fatal(err)
		}
		want := "// +kubebuilder:validation:Pattern=`" + DurationPattern + "`\n// +kubebuilder:validation:MaxLength=64\ntype Duration string"
		if !strings.Contains(string(src), want) {
			t.Errorf("api/v1alpha1/timeoutpolicy_types.go does not declare Duration with the marker %q", "Pattern=`"+DurationPattern+"`")
		}
	})
}

type schemaProps struct {
	Pattern    string                 `json:"pattern"`
	Properties map[string]schemaProps `json:"properties"`
	Items      *schemaProps           `json:"items"`
}
