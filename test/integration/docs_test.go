// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// yamlBlock is a fenced ```yaml block of a Markdown file.
var yamlBlock = regexp.MustCompile("(?ms)^```yaml\\n(.*?)^```")

// docExample is one object of a ```yaml block in the docs.
type docExample struct {
	where string
	obj   *unstructured.Unstructured
}

// docExamples returns the TimeoutPolicies and NotificationChannels that the
// ```yaml blocks of README.md and every page under docs/ show whole (with
// apiVersion and kind); fragments and other kinds are left out.
func docExamples(t *testing.T) []docExample {
	t.Helper()
	docs := filepath.Join("..", "..", "docs")
	var files []string
	err := filepath.WalkDir(docs, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "..", "README.md"))
	var out []docExample
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range yamlBlock.FindAllSubmatch(text, -1) {
			for j, doc := range strings.Split(string(m[1]), "\n---\n") {
				var u unstructured.Unstructured
				if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil || u.Object == nil {
					continue // a fragment, not an object
				}
				if u.GetAPIVersion() != v1alpha1.GroupVersion.String() ||
					(u.GetKind() != "TimeoutPolicy" && u.GetKind() != "NotificationChannel") {
					continue
				}
				page, _ := filepath.Rel(docs, f)
				where := fmt.Sprintf("%s block %d object %d (%s %s)", filepath.ToSlash(page), i+1, j+1, u.GetKind(), u.GetName())
				out = append(out, docExample{where: where, obj: &u})
			}
		}
	}
	return out
}

func TestTheDocsExamplesAreAcceptedByTheAPIServer(t *testing.T) {
	examples := docExamples(t)
	// The pages that explain each kind of channel must each show a channel
	// and a policy; a regexp that stopped matching would pass vacuously.
	for _, page := range []string{"guides/email.md", "guides/slack.md", "guides/webhooks.md", "guides/notifications.md", "guides/upgrade.md"} {
		kinds := map[string]bool{}
		for _, e := range examples {
			if strings.HasPrefix(e.where, page+" ") {
				kinds[e.obj.GetKind()] = true
			}
		}
		if !kinds["TimeoutPolicy"] || !kinds["NotificationChannel"] {
			t.Errorf("%s shows no whole TimeoutPolicy and NotificationChannel in a ```yaml block (found %v)", page, kinds)
		}
	}
	for _, e := range examples {
		t.Run(e.where, func(t *testing.T) {
			obj := e.obj.DeepCopy()
			// A fresh name, so that an object of the same name that another
			// test made does not stand in the way; dry run, so nothing is
			// stored and the controller sees nothing.
			obj.SetGenerateName("docs-")
			obj.SetName("")
			err := k8s.Create(context.Background(), obj, client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict))
			if err != nil {
				t.Errorf("the API server refuses the example: %v", err)
			}
		})
	}
}
