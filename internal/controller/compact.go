// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// record is what the controller keeps of a governed object between
// looks: what decisions, the wake-ups and the plugin's answers read, and
// nothing else. It is about 100 bytes and one string, where the
// object's metadata as the API server sends it (PartialObjectMetadata)
// costs several hundred, and kubectl's last-applied-configuration alone
// several thousand.
//
// Nothing a record holds decides a deletion alone: before each one the
// controller reads the object again from the API server (expire.go).
type record struct {
	// id is the name, the UID and the resourceVersion in one string: one
	// allocation, not three.
	id              string
	nameEnd, uidEnd uint16
	namespace       string
	generation      int64
	// created and deleting are Unix nanoseconds; 0 when unset.
	created, deleting int64
	// labels is shared by every record with the same labels (internLabels):
	// read only.
	labels map[string]string
	// annotations are the kept annotations (kept), as key, value pairs,
	// sorted by key; nil for an object without any, the common case.
	annotations []string
}

// newRecord keeps of o what decisions read. An object whose name and UID
// are longer than a record can say (the API server allows neither) is
// kept whole in its name, so that it is still looked at and read fresh.
func newRecord(o *metav1.PartialObjectMetadata) *record {
	name, uid := o.Name, string(o.UID)
	if len(name)+len(uid) > 1<<16-1 {
		uid = ""
	}
	r := &record{
		id:          name + uid + o.ResourceVersion,
		nameEnd:     uint16(len(name)),            //nolint:gosec // bounded above
		uidEnd:      uint16(len(name) + len(uid)), //nolint:gosec // bounded above
		namespace:   internNamespace(o.Namespace),
		generation:  o.Generation,
		created:     unixNano(o.CreationTimestamp.Time),
		labels:      internLabels(o.Labels),
		annotations: keptPairs(o.Annotations),
	}
	if o.DeletionTimestamp != nil {
		r.deleting = unixNano(o.DeletionTimestamp.Time)
	}
	return r
}

func (r *record) name() string            { return r.id[:r.nameEnd] }
func (r *record) uid() types.UID          { return types.UID(r.id[r.nameEnd:r.uidEnd]) }
func (r *record) resourceVersion() string { return r.id[r.uidEnd:] }

func (r *record) key() types.NamespacedName {
	return types.NamespacedName{Namespace: r.namespace, Name: r.name()}
}

// GetObjectMeta lets client-go's own stores key a record (the reflector's
// store of the objects it streams at start): it answers the name and the
// namespace, and nothing else.
func (r *record) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: r.name(), Namespace: r.namespace}
}

// into writes the record into out as the metadata it was made from, but
// what it does not keep. The labels are out's own copy.
func (r *record) into(gvk schema.GroupVersionKind, out *metav1.PartialObjectMetadata) {
	r.view(gvk, out)
	out.Labels = maps.Clone(r.labels)
}

// view is into with the record's shared labels: for readers that change
// nothing.
func (r *record) view(gvk schema.GroupVersionKind, out *metav1.PartialObjectMetadata) {
	*out = metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name:              r.name(),
		Namespace:         r.namespace,
		UID:               r.uid(),
		ResourceVersion:   r.resourceVersion(),
		Generation:        r.generation,
		CreationTimestamp: metav1.NewTime(fromUnixNano(r.created)),
		Labels:            r.labels,
	}}
	out.SetGroupVersionKind(gvk)
	if r.deleting != 0 {
		t := metav1.NewTime(fromUnixNano(r.deleting))
		out.DeletionTimestamp = &t
	}
	if len(r.annotations) > 0 {
		out.Annotations = make(map[string]string, len(r.annotations)/2)
		for i := 0; i < len(r.annotations); i += 2 {
			out.Annotations[r.annotations[i]] = r.annotations[i+1]
		}
	}
}

// changed reports whether b differs from a in what can change a plan: its
// identity, a new generation (a spec edit: use, under an idle clock),
// labels, annotations or deletion. A status write changes none of them.
func changed(a, b *record) bool {
	return a.uid() != b.uid() || a.generation != b.generation || a.deleting != b.deleting ||
		!maps.Equal(a.labels, b.labels) || !slices.Equal(a.annotations, b.annotations)
}

// keptPairs returns the kept annotations of in as sorted key, value pairs
// with the keys the controller knows as its constants; nil when none is
// kept.
func keptPairs(in map[string]string) []string {
	var keys []string
	for k := range in {
		if kept(k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	sort.Strings(keys)
	out := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		out = append(out, knownKey(k), strings.Clone(in[k]))
	}
	return out
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// maxInterned bounds each table of shared values, so that objects whose
// labels are all different cannot grow it without end; past it, a record
// keeps its own copy.
const maxInterned = 4096

var (
	sharedMu         sync.Mutex
	sharedNamespaces = map[string]string{}
	sharedLabels     = map[string]map[string]string{}
)

// internNamespace returns one copy of a namespace's name for every record
// in it.
func internNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if v, ok := sharedNamespaces[ns]; ok {
		return v
	}
	ns = strings.Clone(ns)
	if len(sharedNamespaces) < maxInterned {
		sharedNamespaces[ns] = ns
	}
	return ns
}

// internLabels returns one map for every record with the same labels: a
// map costs a few hundred bytes, and objects made alike are labelled
// alike. Nobody changes a shared map (into copies it).
func internLabels(labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return nil
	}
	// Label keys and values cannot hold a NUL: it separates them.
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(labels[k])
		b.WriteByte(0)
	}
	id := b.String()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if m, ok := sharedLabels[id]; ok {
		return m
	}
	m := make(map[string]string, len(labels))
	for k, v := range labels {
		m[strings.Clone(k)] = strings.Clone(v)
	}
	if len(sharedLabels) < maxInterned {
		sharedLabels[id] = m
	}
	return m
}
