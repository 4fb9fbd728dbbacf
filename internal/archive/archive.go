// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// This file is over 400 lines: it holds the Store interface with the
// directory store, whose current and legacy layouts are read together;
// the cluster and S3 stores have files of their own.

// Package archive keeps the manifests of objects the controller deleted,
// one file each, so that they can be found by name, title and UID and
// restored.
//
// The layout is
//
//	<dir>/<group>/<Kind>/<uid>.yaml
//
// with "core" for the group of the core API: every part of a path is
// bounded (a group is at most 253 characters, a UID 36), however long the
// object's name and namespace. A file is a YAML manifest preceded by a
// comment, the header, that says what the object was (kind, namespace,
// name, title) and when and why it was archived; listing reads the
// headers. Files of the layout before this one,
// <dir>/<Kind>.<group>/<namespace>/<name>_<uid>.yaml, are still read.
package archive

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// ClusterScope stands for the namespace of cluster-scoped objects in the
// earlier layout.
const ClusterScope = "_cluster"

const (
	ext        = ".yaml"
	headerLine = "# timeout-controller archive: "
)

// Header says what object was archived, when and why. It is written as
// the file's first comment line, in JSON, and read back by Read. Write
// fills in the object's identity; files of the earlier layout have none.
type Header struct {
	ArchivedAt time.Time `json:"archivedAt"`
	UID        types.UID `json:"uid"`
	ExpiresAt  time.Time `json:"expiresAt"`
	Policy     string    `json:"policy"`
	Group      string    `json:"group,omitempty"`
	Kind       string    `json:"kind,omitempty"`
	Namespace  string    `json:"namespace,omitempty"`
	Name       string    `json:"name,omitempty"`
	// Title is the object's spec.title, which people know Playbooks by.
	Title string `json:"title,omitempty"`
}

// Entry is one archived object.
type Entry struct {
	Path      string
	GroupKind schema.GroupKind
	Namespace string
	Name      string
	Title     string
	UID       types.UID
	// ModTime is when the file was written.
	ModTime time.Time
}

// Path returns where Write puts the object of kind gk with uid under dir.
func Path(dir string, gk schema.GroupKind, uid types.UID) string {
	group := gk.Group
	if group == "" {
		group = "core"
	}
	return filepath.Join(dir, group, gk.Kind, string(uid)+ext)
}

// Write stores obj under dir and returns the file's path. The manifest
// keeps everything needed to create the object again, less managedFields,
// resourceVersion, uid and status. The file is complete and on disk
// (fsynced, directory included) when Write returns, so a delete that
// follows cannot lose it; a file of the same object written earlier is
// replaced.
func Write(dir string, obj *unstructured.Unstructured, h Header) (string, error) {
	if dir == "" {
		return "", errors.New("no archive directory configured (--archive-dir)")
	}
	doc, h, err := encode(obj, h)
	if err != nil {
		return "", err
	}
	path := Path(dir, schema.GroupKind{Group: h.Group, Kind: h.Kind}, h.UID)
	if err := writeFileSync(dir, path, doc); err != nil {
		return "", fmt.Errorf("archive %s: %w", path, err)
	}
	return path, nil
}

// encode returns the document every store keeps for obj: the header line,
// then the manifest. The header it returns is h filled in with the
// object's identity.
func encode(obj *unstructured.Unstructured, h Header) ([]byte, Header, error) {
	gk := obj.GroupVersionKind().GroupKind()
	if gk.Kind == "" || obj.GetName() == "" || obj.GetUID() == "" {
		return nil, h, fmt.Errorf("archive: object needs a kind, a name and a UID")
	}
	// The UID names the file, the Secret and the object key.
	if strings.ContainsAny(string(obj.GetUID()), `/\`) || strings.HasPrefix(string(obj.GetUID()), ".") {
		return nil, h, fmt.Errorf("archive: UID %q cannot name a file", obj.GetUID())
	}
	h.UID = obj.GetUID()
	h.Group, h.Kind, h.Namespace, h.Name = gk.Group, gk.Kind, obj.GetNamespace(), obj.GetName()
	if h.Title == "" {
		h.Title, _, _ = unstructured.NestedString(obj.Object, "spec", "title")
	}
	manifest := obj.DeepCopy()
	stripServerFields(manifest)
	body, err := yaml.Marshal(manifest.Object)
	if err != nil {
		return nil, h, fmt.Errorf("archive %s/%s: %w", strings.ToLower(gk.Kind), obj.GetName(), err)
	}
	hj, err := json.Marshal(h)
	if err != nil {
		return nil, h, err
	}
	var buf bytes.Buffer
	buf.WriteString(headerLine)
	buf.Write(hj)
	buf.WriteByte('\n')
	buf.Write(body)
	return buf.Bytes(), h, nil
}

// Read returns the object archived at path and its header.
func Read(path string) (*unstructured.Unstructured, Header, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, Header{}, err
	}
	return decode(path, data)
}

// decode reads a document that encode wrote, or a bare manifest, kept at
// where.
func decode(where string, data []byte) (*unstructured.Unstructured, Header, error) {
	var h Header
	var err error
	if first, _, ok := bytes.Cut(data, []byte("\n")); ok {
		if h, err = parseHeader(first); err != nil {
			return nil, Header{}, fmt.Errorf("%s: %w", where, err)
		}
	}
	// Through JSON and the unstructured decoder, so that integers stay
	// int64 (yaml.Unmarshal would make them float64) and the object reads
	// back exactly as it was written.
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, Header{}, fmt.Errorf("%s: not a manifest: %w", where, err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(js); err != nil {
		return nil, Header{}, fmt.Errorf("%s: not a manifest: %w", where, err)
	}
	if obj.GetKind() == "" || obj.GetName() == "" {
		return nil, Header{}, fmt.Errorf("%s: not a manifest: no kind or name", where)
	}
	return obj, h, nil
}

// Find lists the archived objects of kind gk (any kind when empty) called
// name in namespace (any namespace when empty), newest first.
func Find(dir string, gk schema.GroupKind, namespace, name string) ([]Entry, error) {
	return find(dir, gk, namespace, func(e Entry) bool { return e.Name == name })
}

// FindTitle lists the archived objects of kind gk (any kind when empty)
// titled title in namespace (any namespace when empty), newest first.
func FindTitle(dir string, gk schema.GroupKind, namespace, title string) ([]Entry, error) {
	return find(dir, gk, namespace, func(e Entry) bool { return title != "" && e.Title == title })
}

func find(dir string, gk schema.GroupKind, namespace string, match func(Entry) bool) ([]Entry, error) {
	entries, err := List(dir)
	if err != nil {
		return nil, err
	}
	found := entries[:0]
	for _, e := range entries {
		if (gk.Kind == "" || strings.EqualFold(gk.Kind, e.GroupKind.Kind) && (gk.Group == "" || gk.Group == e.GroupKind.Group)) &&
			(namespace == "" || namespace == e.Namespace) && match(e) {
			found = append(found, e)
		}
	}
	return found, nil
}

// List returns every archived object under dir, newest first. It reads
// each file's header; a file whose header cannot be read is left out.
func List(dir string) ([]Entry, error) {
	var entries []Entry
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ext) || strings.HasPrefix(d.Name(), tmpPrefix) {
			return err
		}
		e, ok := entryOf(dir, path)
		if !ok {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e.ModTime = info.ModTime()
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(entries, func(a, b Entry) int { return b.ModTime.Compare(a.ModTime) })
	return entries, nil
}

// Prune removes the archived files written before cutoff and returns how
// many it removed. Temporary files a crash left behind go too.
func Prune(dir string, cutoff time.Time) (int, error) {
	removed := 0
	var errs []error
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		archived := false
		switch {
		case strings.HasPrefix(d.Name(), tmpPrefix):
		case strings.HasSuffix(path, ext) && inLayout(dir, path):
			archived = true
		default:
			return nil
		}
		info, err := d.Info()
		if err != nil || !info.ModTime().Before(cutoff) {
			return err
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		} else if archived {
			removed++
		}
		return nil
	})
	return removed, errors.Join(append(errs, err)...)
}

// ForRestore returns obj as it should be created again: without the fields
// the API server sets, and without what tied it to its old expiry (the
// expires-at annotation and the reminder record), so that it starts a new
// lifetime from its new creation time.
func ForRestore(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := obj.DeepCopy()
	stripServerFields(out)
	out.SetGeneration(0)
	out.SetDeletionTimestamp(nil)
	out.SetDeletionGracePeriodSeconds(nil)
	out.SetOwnerReferences(nil)
	unstructured.RemoveNestedField(out.Object, "metadata", "creationTimestamp")
	if a := out.GetAnnotations(); a != nil {
		delete(a, expiry.AnnotationExpiresAt)
		delete(a, expiry.AnnotationReminders)
		if len(a) == 0 {
			a = nil
		}
		out.SetAnnotations(a)
	}
	return out
}

// stripServerFields removes what the API server keeps about an object
// rather than what describes it: managedFields, resourceVersion, uid and
// status.
func stripServerFields(obj *unstructured.Unstructured) {
	obj.SetManagedFields(nil)
	obj.SetResourceVersion("")
	obj.SetSelfLink("")
	obj.SetUID("")
	unstructured.RemoveNestedField(obj.Object, "status")
}

// maxHeader bounds the header line read when listing: a name and a title
// of a few hundred bytes each, with room to spare.
const maxHeader = 64 << 10

func parseHeader(line []byte) (Header, error) {
	var h Header
	if !bytes.HasPrefix(line, []byte(headerLine)) {
		return h, nil
	}
	if err := json.Unmarshal(bytes.TrimPrefix(line, []byte(headerLine)), &h); err != nil {
		return Header{}, fmt.Errorf("unreadable archive header: %w", err)
	}
	return h, nil
}

// readHeader reads the header of the file at path.
func readHeader(path string) (Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return Header{}, err
	}
	defer func() { _ = f.Close() }()
	line, err := bufio.NewReaderSize(io.LimitReader(f, maxHeader), maxHeader).ReadSlice('\n')
	if err != nil {
		return Header{}, fmt.Errorf("no archive header: %w", err)
	}
	return parseHeader(line)
}

// inLayout reports whether path is where an archived file goes, in this
// layout (<group>/<Kind>/<uid>.yaml) or the earlier one.
func inLayout(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return false
	}
	return len(strings.Split(filepath.ToSlash(rel), "/")) == 3
}

// entryOf reads the entry of the file at path: from its header, or, for a
// file of the earlier layout, whose header does not name the object, from
// its path.
func entryOf(dir, path string) (Entry, bool) {
	if !inLayout(dir, path) {
		return Entry{}, false
	}
	h, err := readHeader(path)
	if err != nil {
		return Entry{}, false
	}
	if h.Name == "" {
		return parsePath(dir, path)
	}
	return Entry{Path: path, GroupKind: schema.GroupKind{Group: h.Group, Kind: h.Kind}, Namespace: h.Namespace, Name: h.Name, Title: h.Title, UID: h.UID}, true
}

// parsePath reads an entry from a path that follows the earlier layout.
func parsePath(dir, path string) (Entry, bool) {
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return Entry{}, false
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	if len(parts) != 3 {
		return Entry{}, false
	}
	kind, group, ok := strings.Cut(parts[0], ".")
	if !ok {
		return Entry{}, false
	}
	if group == "core" {
		group = ""
	}
	// UIDs cannot hold "_"; the names of some kinds (RBAC roles, for
	// one) can, so the UID is what follows the last one.
	base := strings.TrimSuffix(parts[2], ext)
	i := strings.LastIndex(base, "_")
	if i <= 0 || i == len(base)-1 {
		return Entry{}, false
	}
	name, uid := base[:i], base[i+1:]
	ns := parts[1]
	if ns == ClusterScope {
		ns = ""
	}
	return Entry{Path: path, GroupKind: schema.GroupKind{Group: group, Kind: kind}, Namespace: ns, Name: name, UID: types.UID(uid)}, true
}

// writeFileSync writes data to path through a temporary file in the same
// directory, fsyncs it, renames it into place and fsyncs the directory, and
// the parent of each directory it had to create under root, so that the
// file survives a crash once writeFileSync returns.
func writeFileSync(root, path string, data []byte) error {
	dir := filepath.Dir(path)
	var created []string
	for d := dir; d != root && len(d) > len(root); d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		created = append(created, d)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	for _, d := range created {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// tmpPrefix starts the names of files being written.
const tmpPrefix = ".tmp-"

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}
