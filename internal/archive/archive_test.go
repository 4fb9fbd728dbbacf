// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package archive

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

var t0 = time.Date(2026, time.March, 1, 9, 0, 0, 0, time.UTC)

// served is an object as the API server returns it.
func served(kind, apiVersion, namespace, name string, uid types.UID) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata": map[string]any{
			"name":              name,
			"uid":               string(uid),
			"resourceVersion":   "4711",
			"generation":        int64(3),
			"creationTimestamp": t0.Format(time.RFC3339),
			"labels":            map[string]any{"app": "demo"},
			"annotations": map[string]any{
				expiry.AnnotationTTL:       "7d",
				expiry.AnnotationExpiresAt: "2026-03-08T09:00:00Z",
				expiry.AnnotationReminders: `{"expiresAt":"2026-03-08T09:00:00Z"}`,
			},
			"managedFields": []any{map[string]any{"manager": "kubectl"}},
			"ownerReferences": []any{map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "gone",
			}},
		},
		"spec": map[string]any{
			"title":    "Weekend demo",
			"replicas": int64(9007199254740993), // not exact as a float64
			"ratio":    0.5,
		},
		"status": map[string]any{"phase": "Running"},
	}}
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	return u
}

func TestWriteThenRead(t *testing.T) {
	dir := t.TempDir()
	obj := served("Playbook", "amphitheatre.app/v1", "", "2b1e7c9e", "uid-1")
	h := Header{ArchivedAt: t0.Add(time.Hour), ExpiresAt: t0.Add(time.Minute), Policy: "playbooks"}
	path, err := Write(dir, obj, h)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "amphitheatre.app", "Playbook", "uid-1.yaml"); path != want {
		t.Errorf("path %s, want %s", path, want)
	}
	got, gotH, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	h.UID = "uid-1"
	if !gotH.ArchivedAt.Equal(h.ArchivedAt) || !gotH.ExpiresAt.Equal(h.ExpiresAt) || gotH.UID != h.UID || gotH.Policy != h.Policy {
		t.Errorf("header %+v, want %+v", gotH, h)
	}
	want := obj.DeepCopy()
	unstructured.RemoveNestedField(want.Object, "metadata", "uid")
	unstructured.RemoveNestedField(want.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(want.Object, "metadata", "managedFields")
	unstructured.RemoveNestedField(want.Object, "status")
	if !reflect.DeepEqual(got.Object, want.Object) {
		t.Errorf("read back\n%v\nwant\n%v", got.Object, want.Object)
	}
	if n, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); n != 9007199254740993 {
		t.Errorf("an integer came back as %d", n)
	}
}

func TestReadsAFileWithoutItsHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "copied.yaml")
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: scratch\n  namespace: dev\ndata:\n  a: b\n"
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	obj, h, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if obj.GetName() != "scratch" || obj.GetNamespace() != "dev" || !h.ArchivedAt.IsZero() {
		t.Errorf("read %v %+v", obj.Object, h)
	}
}

func TestReadRefusesWhatIsNotAManifest(t *testing.T) {
	for name, content := range map[string]string{
		"no kind":     "metadata:\n  name: x\n",
		"no name":     "apiVersion: v1\nkind: ConfigMap\n",
		"not YAML":    "{{{",
		"bad header":  headerLine + "{not json\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
		"just a list": "- a\n- b\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.yaml")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, _, err := Read(path); err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestFindAndList(t *testing.T) {
	dir := t.TempDir()
	write := func(obj *unstructured.Unstructured, at time.Time) string {
		t.Helper()
		path, err := Write(dir, obj, Header{ArchivedAt: at})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
		return path
	}
	older := write(served("Playbook", "amphitheatre.app/v1", "", "demo", "uid-1"), t0)
	newer := write(served("Playbook", "amphitheatre.app/v1", "", "demo", "uid-2"), t0.Add(time.Hour))
	cm := write(served("ConfigMap", "v1", "dev", "demo", "uid-3"), t0.Add(2*time.Hour))
	// Some kinds (RBAC roles) allow "_" in names: the UID follows the last one.
	role := write(served("Role", "rbac.authorization.k8s.io/v1", "dev", "system_reader", "uid-4"), t0.Add(3*time.Hour))
	// Files that do not follow the layout are ignored.
	if err := os.WriteFile(filepath.Join(dir, "README.yaml"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	all, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range all {
		paths = append(paths, e.Path)
	}
	if want := []string{role, cm, newer, older}; !slices.Equal(paths, want) {
		t.Fatalf("List = %v, want newest first %v", paths, want)
	}
	if e := all[0]; e.Name != "system_reader" || e.UID != "uid-4" || e.Namespace != "dev" || e.GroupKind != (schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "Role"}) {
		t.Errorf("role entry %+v", e)
	}
	if e := all[1]; e.GroupKind != (schema.GroupKind{Kind: "ConfigMap"}) || e.Namespace != "dev" {
		t.Errorf("configmap entry %+v", e)
	}

	tests := []struct {
		name      string
		gk        schema.GroupKind
		namespace string
		objName   string
		want      []string
	}{
		{"any kind, newest first", schema.GroupKind{}, "", "demo", []string{cm, newer, older}},
		{"by kind, in any case", schema.GroupKind{Kind: "playbook"}, "", "demo", []string{newer, older}},
		{"by kind and group", schema.GroupKind{Group: "amphitheatre.app", Kind: "Playbook"}, "", "demo", []string{newer, older}},
		{"by kind in another group", schema.GroupKind{Group: "example.com", Kind: "Playbook"}, "", "demo", nil},
		{"by namespace", schema.GroupKind{}, "dev", "demo", []string{cm}},
		{"a name with an underscore", schema.GroupKind{}, "", "system_reader", []string{role}},
		{"no such name", schema.GroupKind{}, "", "nothing", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			found, err := Find(dir, tt.gk, tt.namespace, tt.objName)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range found {
				got = append(got, e.Path)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Find = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPrune(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i, at := range []time.Time{t0, t0.Add(time.Hour), t0.Add(2 * time.Hour)} {
		path, err := Write(dir, served("ConfigMap", "v1", "dev", "cm", types.UID("uid-"+string(rune('a'+i)))), Header{})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	n, err := Prune(dir, t0.Add(90*time.Minute))
	if err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want 2", n, err)
	}
	left, _ := List(dir)
	if len(left) != 1 || left[0].Path != paths[2] {
		t.Errorf("left %+v", left)
	}

	// A temporary file a crash left behind goes too, once old enough.
	stale := filepath.Join(filepath.Dir(paths[2]), tmpPrefix+"123")
	if err := os.WriteFile(stale, []byte("half a manifest"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(stale, t0, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := Prune(dir, t0.Add(90*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the stale temporary file is still there: %v", err)
	}
}

func TestForRestore(t *testing.T) {
	obj := served("Playbook", "amphitheatre.app/v1", "", "2b1e7c9e", "uid-1")
	obj.SetDeletionTimestamp(&metav1.Time{Time: t0})
	got := ForRestore(obj)

	for _, field := range [][]string{
		{"metadata", "uid"}, {"metadata", "resourceVersion"}, {"metadata", "generation"}, {"metadata", "creationTimestamp"},
		{"metadata", "deletionTimestamp"}, {"metadata", "managedFields"}, {"metadata", "ownerReferences"}, {"status"},
	} {
		if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, field...); found {
			t.Errorf("keeps %v", field)
		}
	}
	want := map[string]string{expiry.AnnotationTTL: "7d"}
	if !reflect.DeepEqual(got.GetAnnotations(), want) {
		t.Errorf("annotations %v, want %v: a ttl counts again from the new creation, an expires-at and the record go", got.GetAnnotations(), want)
	}
	if !reflect.DeepEqual(got.Object["spec"], obj.Object["spec"]) || !reflect.DeepEqual(got.GetLabels(), obj.GetLabels()) || got.GetName() != obj.GetName() {
		t.Errorf("restored %v", got.Object)
	}
	if obj.GetUID() != "uid-1" || obj.GetAnnotations()[expiry.AnnotationExpiresAt] == "" {
		t.Error("ForRestore changed its argument")
	}

	t.Run("drops an annotations map left empty", func(t *testing.T) {
		o := served("Playbook", "amphitheatre.app/v1", "", "x", "uid")
		o.SetAnnotations(map[string]string{expiry.AnnotationExpiresAt: "2026-03-08T09:00:00Z"})
		if _, found, _ := unstructured.NestedFieldNoCopy(ForRestore(o).Object, "metadata", "annotations"); found {
			t.Error("an empty annotations map is kept")
		}
	})
}

func TestWriteRefusesWhatItCannotName(t *testing.T) {
	if _, err := Write("", served("ConfigMap", "v1", "dev", "cm", "uid"), Header{}); err == nil {
		t.Error("no error without a directory")
	}
	if _, err := Write(t.TempDir(), served("ConfigMap", "v1", "dev", "cm", ""), Header{}); err == nil {
		t.Error("no error without a UID")
	}
}

// longName returns a DNS-1123 subdomain of n characters, dots included.
func longName(n int) string {
	b := []byte(strings.Repeat("abcdefghi.", n/10+1)[:n])
	b[n-1] = 'z' // a subdomain does not end with a dot
	return string(b)
}

func TestArchivesEveryLegalName(t *testing.T) {
	tests := []struct {
		name           string
		kind, apiVer   string
		namespace, obj string
	}{
		{"a cluster-scoped Playbook named with 253 characters", "Playbook", "amphitheatre.app/v1", "", longName(253)},
		{"a ConfigMap of 253 characters in a namespace of 63", "ConfigMap", "v1", strings.Repeat("n", 63), longName(253)},
		{"a name of dots and dashes", "Playbook", "amphitheatre.app/v1", "", "a.b-c.d-e.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			obj := served(tt.kind, tt.apiVer, tt.namespace, tt.obj, "0a4e3c1b-8f5d-4d8e-9a6b-2c7f1e0d9b31")
			path, err := Write(dir, obj, Header{ArchivedAt: t0, Policy: "p"})
			if err != nil {
				t.Fatalf("Write: %v", err)
			}
			got, h, err := Read(path)
			if err != nil || got.GetName() != tt.obj || got.GetNamespace() != tt.namespace {
				t.Fatalf("Read = %v %v, %v", got.GetNamespace(), got.GetName(), err)
			}
			if h.Name != tt.obj || h.Namespace != tt.namespace || h.Kind != tt.kind || h.Title != "Weekend demo" {
				t.Errorf("header %+v", h)
			}
			gk := obj.GroupVersionKind().GroupKind()
			found, err := Find(dir, gk, tt.namespace, tt.obj)
			if err != nil || len(found) != 1 || found[0].Path != path || found[0].Name != tt.obj || found[0].GroupKind != gk {
				t.Fatalf("Find = %+v, %v", found, err)
			}
			byTitle, err := FindTitle(dir, schema.GroupKind{}, "", "Weekend demo")
			if err != nil || len(byTitle) != 1 || byTitle[0].Path != path {
				t.Fatalf("FindTitle = %+v, %v", byTitle, err)
			}
		})
	}
}

// Archives written before the layout named files by UID are still found
// by name, and pruned.
func TestReadsTheEarlierLayout(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "Playbook.amphitheatre.app", ClusterScope, "old-demo_uid-9.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	manifest := headerLine + `{"archivedAt":"2026-03-01T09:00:00Z","uid":"uid-9","expiresAt":"2026-03-01T08:00:00Z","policy":"p"}` + "\n" +
		"apiVersion: amphitheatre.app/v1\nkind: Playbook\nmetadata:\n  name: old-demo\n"
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	found, err := Find(dir, schema.GroupKind{Kind: "Playbook"}, "", "old-demo")
	if err != nil || len(found) != 1 || found[0].Path != path || found[0].UID != "uid-9" {
		t.Fatalf("Find = %+v, %v", found, err)
	}
	if err := os.Chtimes(path, t0, t0); err != nil {
		t.Fatal(err)
	}
	if n, err := Prune(dir, t0.Add(time.Hour)); n != 1 || err != nil {
		t.Fatalf("Prune = %d, %v", n, err)
	}
}
