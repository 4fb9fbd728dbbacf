// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package release checks that a release publishes what the chart and the
// install name: the tag against their versions, and the release workflow.
package release

import (
	"cmp"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var (
	root     = filepath.Join("..", "..")
	chartDir = filepath.Join(root, "charts", "timeout-controller")
	// tagForm is a release tag: v and a semantic version, as krew wants the
	// plugin's version and Helm the chart's (without the v).
	tagForm = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$`)
	imgVar  = regexp.MustCompile(`(?m)^IMG \?= (\S+)$`)
)

// chart is what this package reads of the chart's Chart.yaml and values.yaml.
type chart struct {
	Version    string
	AppVersion string
	Image      struct {
		Repository string `json:"repository"`
		Tag        string `json:"tag"`
		Digest     string `json:"digest"`
	}
}

func readChart(t *testing.T) chart {
	t.Helper()
	var meta struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	readYAML(t, filepath.Join(chartDir, "Chart.yaml"), &meta)
	var c chart
	readYAML(t, filepath.Join(chartDir, "values.yaml"), &c)
	c.Version, c.AppVersion = meta.Version, meta.AppVersion
	if c.Image.Repository == "" {
		t.Fatal("values.yaml has no image.repository")
	}
	return c
}

// releaseTag is the tag being released: RELEASE_TAG, which the release
// workflow and `make release-check` set, else the chart's appVersion, the
// tag of the next release.
func releaseTag(c chart) string {
	return cmp.Or(os.Getenv("RELEASE_TAG"), c.AppVersion)
}

func readYAML(t *testing.T, name string, into any) {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func TestTheTagIsTheVersionOfTheChartItsImageAndTheInstall(t *testing.T) {
	c := readChart(t)
	tag := releaseTag(c)
	if !tagForm.MatchString(tag) {
		t.Fatalf("the tag %q is not v and a semantic version (vX.Y.Z or vX.Y.Z-pre)", tag)
	}

	var kustomization struct {
		Images []struct {
			Name    string `json:"name"`
			NewName string `json:"newName"`
			NewTag  string `json:"newTag"`
			Digest  string `json:"digest"`
		} `json:"images"`
	}
	readYAML(t, filepath.Join(root, "config", "manager", "kustomization.yaml"), &kustomization)
	installed := "no images entry for " + c.Image.Repository
	for _, img := range kustomization.Images {
		if img.Name == c.Image.Repository {
			installed = cmp.Or(img.NewName, img.Name) + ":" + img.NewTag + img.Digest
		}
	}

	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	built := "no IMG ?= line"
	if m := imgVar.FindSubmatch(makefile); m != nil {
		built = string(m[1])
	}

	for _, c := range []struct{ what, got, want string }{
		{"Chart.yaml appVersion", c.AppVersion, tag},
		{"Chart.yaml version, the chart's OCI tag", c.Version, strings.TrimPrefix(tag, "v")},
		{"the image tag the chart deploys (values.yaml image.tag, else appVersion)", cmp.Or(c.Image.Tag, c.AppVersion), tag},
		{"values.yaml image.digest, which would win over the tag", c.Image.Digest, ""},
		{"the image config/manager/kustomization.yaml installs", installed, c.Image.Repository + ":" + tag},
		{"the Makefile's IMG (make docker-build)", built, c.Image.Repository + ":" + tag},
	} {
		if c.got != c.want {
			t.Errorf("%s is %q, want %q for the tag %s", c.what, c.got, c.want, tag)
		}
	}
}
