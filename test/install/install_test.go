// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package install checks that config/default is a working, least-privilege install.
package install

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The names the install promises; the Helm chart uses the same.
const (
	namespace      = "timeout-system"
	serviceAccount = "timeout-controller"
	deployment     = "timeout-controller"
	leaseName      = "timeout-controller.timeout.amphitheatre.app"
)

// root is the repository root, relative to this package.
var root = filepath.Join("..", "..")

// kustomize renders dir (absolute, or relative to the repository root)
// with the pinned kustomize that `make tools` builds.
func kustomize(t *testing.T, dir string) []byte {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join(root, "bin", "kustomize"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run `make tools` (make test does): %v", bin, err)
	}
	checkKustomizeVersion(t, bin)
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "build", dir)
	cmd.Dir = root
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kustomize build %s: %v\n%s", dir, err, stderr.String())
	}
	return out
}

var pinnedKustomize = regexp.MustCompile(`(?m)^\s*sigs\.k8s\.io/kustomize/kustomize/v5 (v\S+)`)

// checkKustomizeVersion fails when bin/kustomize is not the version
// hack/tools pins, since the golden file depends on it.
func checkKustomizeVersion(t *testing.T, bin string) {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join(root, "hack", "tools", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := pinnedKustomize.FindSubmatch(mod)
	if m == nil {
		t.Fatal("hack/tools/go.mod does not require sigs.k8s.io/kustomize/kustomize/v5")
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	if got := strings.TrimSpace(string(out)); got != string(m[1]) {
		t.Fatalf("%s is %s, hack/tools pins %s: run `make tools` after deleting it", bin, got, m[1])
	}
}

// decode splits a multi-document YAML stream into objects.
func decode(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("read YAML: %v", err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatalf("decode YAML: %v\n%s", err, doc)
		}
		objs = append(objs, obj)
	}
}

// find returns the one object of kind and name in objs.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var found *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			if found != nil {
				t.Fatalf("two %s objects named %s", kind, name)
			}
			found = o
		}
	}
	if found == nil {
		t.Fatalf("no %s named %s", kind, name)
	}
	return found
}

// convert fills typed from the unstructured obj.
func convert[T any](t *testing.T, obj *unstructured.Unstructured) *T {
	t.Helper()
	var typed T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &typed, true); err != nil {
		t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	return &typed
}

// must is for errors a test cannot go on after.
func must(t *testing.T, err error, format string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(format, args...), err)
	}
}
