// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package dist checks what `make dist` builds: the plugin's archives and
// its krew manifest.
package dist

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// plugin is the part of krew's Plugin (krew.googlecontainertools.github.com/v1alpha2)
// that krew requires or that this test checks.
type plugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string     `json:"version"`
		Homepage         string     `json:"homepage"`
		ShortDescription string     `json:"shortDescription"`
		Description      string     `json:"description"`
		Caveats          string     `json:"caveats"`
		Platforms        []platform `json:"platforms"`
	} `json:"spec"`
}

type platform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string `json:"uri"`
	SHA256 string `json:"sha256"`
	Bin    string `json:"bin"`
	Files  []struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"files"`
}

var (
	dist = filepath.Join("..", "..", "dist")
	// semver is krew's rule for spec.version: a v and a semantic version.
	semver = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	hexSum = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

func TestTheKrewManifestNamesEveryPlatformsArchiveWithItsChecksum(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(dist, "timeout.yaml"))
	if errors.Is(err, os.ErrNotExist) {
		t.Fatal("dist/timeout.yaml does not exist: run `make test-dist`")
	}
	if err != nil {
		t.Fatal(err)
	}
	var p plugin
	if err := yaml.UnmarshalStrict(data, &p, yaml.DisallowUnknownFields); err != nil {
		t.Fatalf("dist/timeout.yaml: %v", err)
	}
	for _, c := range []struct {
		what string
		ok   bool
	}{
		{"apiVersion is krew.googlecontainertools.github.com/v1alpha2", p.APIVersion == "krew.googlecontainertools.github.com/v1alpha2"},
		{"kind is Plugin", p.Kind == "Plugin"},
		{"metadata.name is timeout, the plugin's name after kubectl-", p.Metadata.Name == "timeout"},
		{"spec.version is v and a semantic version", semver.MatchString(p.Spec.Version)},
		{"spec.shortDescription is set and short", p.Spec.ShortDescription != "" && len(p.Spec.ShortDescription) <= 70},
		{"spec.homepage is set", p.Spec.Homepage != ""},
	} {
		if !c.ok {
			t.Errorf("dist/timeout.yaml: want %s", c.what)
		}
	}

	var seen []string
	for _, pl := range p.Spec.Platforms {
		goos, goarch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		seen = append(seen, goos+"/"+goarch)
		t.Run(goos+"/"+goarch, func(t *testing.T) {
			archive := path.Base(pl.URI)
			if !strings.HasPrefix(pl.URI, "https://") || !strings.Contains(pl.URI, "/"+p.Spec.Version+"/") {
				t.Errorf("uri %s is not an https address of version %s", pl.URI, p.Spec.Version)
			}
			if !hexSum.MatchString(pl.SHA256) {
				t.Errorf("sha256 %q is not 64 hex digits", pl.SHA256)
			}
			wantBin := "kubectl-timeout"
			if goos == "windows" {
				wantBin += ".exe"
			}
			if pl.Bin != wantBin {
				t.Errorf("bin = %q, want %q", pl.Bin, wantBin)
			}
			if len(pl.Files) == 0 {
				t.Error("no files to install")
			}
			data, err := os.ReadFile(filepath.Join(dist, archive))
			if err != nil {
				t.Fatalf("the archive of %s: %v", pl.URI, err)
			}
			sum := sha256.Sum256(data)
			if got := hex.EncodeToString(sum[:]); got != pl.SHA256 {
				t.Errorf("dist/%s has sha256 %s, the manifest says %s", archive, got, pl.SHA256)
			}
			names, err := tarNames(data)
			if err != nil {
				t.Fatalf("dist/%s: %v", archive, err)
			}
			for _, f := range pl.Files {
				if !slices.Contains(names, f.From) {
					t.Errorf("dist/%s holds %v, not %s that files names", archive, names, f.From)
				}
			}
			if !slices.Contains(names, pl.Bin) {
				t.Errorf("dist/%s holds %v, not the bin %s", archive, names, pl.Bin)
			}
		})
	}
	want := []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64", "windows/amd64", "windows/arm64"}
	slices.Sort(seen)
	if !slices.Equal(seen, want) {
		t.Errorf("platforms %v, want %v", seen, want)
	}
}

func TestChecksumsTxtMatchesTheArchives(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(dist, "checksums.txt"))
	if err != nil {
		t.Fatalf("%v: run `make dist`", err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 6 {
		t.Errorf("checksums.txt has %d lines, want one per platform (6)", len(lines))
	}
	for _, line := range lines {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("checksums.txt line %q is not sha256sum's format", line)
		}
		archive, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(archive); hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: sha256 differs from checksums.txt", name)
		}
	}
}

// tarNames lists the regular files of a tar.gz archive.
func tarNames(data []byte) ([]string, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			names = append(names, h.Name)
		}
	}
}
