// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package archive

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Store is where archived manifests are kept: a directory, Secrets in the
// controller's namespace, or an S3 bucket. Every store keeps the same
// document per object (a header line, then the manifest) under a name
// derived from the object's UID, so one object has one archive, replaced
// when it is archived again.
type Store interface {
	// Write stores obj with its header and returns where it went. When
	// Write returns without an error the document is durable: a delete
	// that follows cannot lose it.
	Write(ctx context.Context, obj *unstructured.Unstructured, h Header) (string, error)
	// List returns every archived object, newest first.
	List(ctx context.Context) ([]Entry, error)
	// Read returns the object archived at where (an Entry's Path).
	Read(ctx context.Context, where string) (*unstructured.Unstructured, Header, error)
	// Prune removes what was archived before cutoff and returns how many
	// archives it removed.
	Prune(ctx context.Context, cutoff time.Time) (int, error)
	// String names the store in messages and logs; it holds no secret.
	String() string
}

// Dir is a Store in a local directory (on a volume, for the controller).
type Dir string

// Write implements Store.
func (d Dir) Write(_ context.Context, obj *unstructured.Unstructured, h Header) (string, error) {
	return Write(string(d), obj, h)
}

// List implements Store.
func (d Dir) List(context.Context) ([]Entry, error) { return List(string(d)) }

// Read implements Store. where is a path under the directory, or
// relative to it.
func (d Dir) Read(_ context.Context, where string) (*unstructured.Unstructured, Header, error) {
	if !filepath.IsAbs(where) {
		if _, err := os.Stat(where); err != nil {
			where = filepath.Join(string(d), where)
		}
	}
	return Read(where)
}

// Prune implements Store.
func (d Dir) Prune(_ context.Context, cutoff time.Time) (int, error) { return Prune(string(d), cutoff) }

func (d Dir) String() string { return string(d) }

// Filter selects archived objects. Zero fields select everything.
type Filter struct {
	// GroupKind selects a kind (case-insensitive), of any group when
	// Group is empty.
	GroupKind schema.GroupKind
	Namespace string
	// Name selects objects of that name or, when none has it, of that
	// title (a Playbook's spec.title, which people know them by).
	Name string
	// Since and Until bound when the object was archived.
	Since, Until time.Time
}

// Select returns the entries that f selects, in their order.
func (f Filter) Select(entries []Entry) []Entry {
	keep := func(byTitle bool) []Entry {
		var out []Entry
		for _, e := range entries {
			if f.GroupKind.Kind != "" && (!strings.EqualFold(f.GroupKind.Kind, e.GroupKind.Kind) || f.GroupKind.Group != "" && f.GroupKind.Group != e.GroupKind.Group) {
				continue
			}
			if f.Namespace != "" && f.Namespace != e.Namespace {
				continue
			}
			if !f.Since.IsZero() && e.ModTime.Before(f.Since) || !f.Until.IsZero() && e.ModTime.After(f.Until) {
				continue
			}
			if f.Name != "" && (!byTitle && e.Name != f.Name || byTitle && e.Title != f.Name) {
				continue
			}
			out = append(out, e)
		}
		return out
	}
	found := keep(false)
	if len(found) == 0 && f.Name != "" {
		found = keep(true)
	}
	return found
}

// sortNewestFirst orders entries by when they were archived, newest first.
func sortNewestFirst(entries []Entry) {
	slices.SortStableFunc(entries, func(a, b Entry) int { return b.ModTime.Compare(a.ModTime) })
}

// Config configures the stores Open returns.
type Config struct {
	// Namespace is where the cluster store keeps its Secrets: the
	// controller's own namespace.
	Namespace string
	// Kube reaches the API server, for the cluster store.
	Kube Kube
	// S3 configures the S3 store.
	S3 S3Options
}

// Open returns the store that spec names: "cluster" for Secrets in
// cfg.Namespace, "s3://bucket/prefix" for an S3 bucket, anything else
// for a local directory.
func Open(spec string, cfg Config) (Store, error) {
	switch {
	case spec == "":
		return nil, fmt.Errorf("no archive given")
	case spec == ClusterSpec:
		if cfg.Kube.Reader == nil || cfg.Kube.Writer == nil {
			return nil, fmt.Errorf("the cluster archive needs a connection to the API server")
		}
		if cfg.Namespace == "" {
			return nil, fmt.Errorf("the cluster archive needs a namespace")
		}
		return &Cluster{Kube: cfg.Kube, Namespace: cfg.Namespace}, nil
	case strings.HasPrefix(spec, s3Scheme):
		return OpenS3(spec, cfg.S3)
	default:
		return Dir(spec), nil
	}
}
