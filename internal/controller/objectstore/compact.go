// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package objectstore

import (
	"encoding/binary"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// record is what the controller keeps of a governed object between
// looks: what decisions, the wake-ups and the plugin's answers read, and
// nothing else. It is 64 bytes and one string, where the object's
// metadata as the API server sends it (PartialObjectMetadata) costs
// several hundred, and kubectl's last-applied-configuration alone
// several thousand.
//
// Nothing a record holds decides a deletion alone: before each one the
// controller reads the object again from the API server (expire.go).
type record struct {
	// id is the namespace and a slash when there is one, the name, the
	// UID, the resourceVersion and the kept annotations (kept) in one
	// string: one allocation, not one for each and a map. Its start, up
	// to the name's end, is the object's key in the store (storeKey). The
	// annotations are encoded by appendAnnotations. The offsets fit 16
	// bits: a namespace has at most 63 bytes, a name 253, and the API
	// server makes UIDs and resourceVersions of a few dozen.
	id                                string
	nameStart, nameEnd, uidEnd, rvEnd uint16
	generation                        int64
	// created and deleting are Unix nanoseconds; 0 when unset.
	created, deleting int64
	// labels is shared by every record with the same labels (internLabels):
	// read only.
	labels map[string]string
	// wake is the object's next look, made by the first one asked for
	// and handed from each version of the record to the next (objectStore
	// sets it, under its lock): the wake-up queue keeps no map of its own.
	wake *wakeup.Wake
}

// newRecord keeps of o what decisions read.
func newRecord(o *metav1.PartialObjectMetadata) *record {
	id := make([]byte, 0, len(o.Namespace)+1+len(o.Name)+len(o.UID)+len(o.ResourceVersion)+keptSize(o.Annotations))
	if o.Namespace != "" {
		id = append(append(id, o.Namespace...), '/')
	}
	nameStart := len(id)
	id = append(id, o.Name...)
	nameEnd := len(id)
	id = append(id, o.UID...)
	uidEnd := len(id)
	id = append(id, o.ResourceVersion...)
	rvEnd := len(id)
	id = appendAnnotations(id, o.Annotations)
	r := &record{
		id:         string(id),
		nameStart:  uint16(nameStart), //nolint:gosec // see id
		nameEnd:    uint16(nameEnd),   //nolint:gosec // idem
		uidEnd:     uint16(uidEnd),    //nolint:gosec // idem
		rvEnd:      uint16(rvEnd),     //nolint:gosec // idem
		generation: o.Generation,
		created:    unixNano(o.CreationTimestamp.Time),
		labels:     internLabels(o.Labels),
	}
	if o.DeletionTimestamp != nil {
		r.deleting = unixNano(o.DeletionTimestamp.Time)
	}
	return r
}

func (r *record) name() string            { return r.id[r.nameStart:r.nameEnd] }
func (r *record) uid() types.UID          { return types.UID(r.id[r.nameEnd:r.uidEnd]) }
func (r *record) resourceVersion() string { return r.id[r.uidEnd:r.rvEnd] }
func (r *record) annotations() string     { return r.id[r.rvEnd:] }

func (r *record) namespace() string {
	if r.nameStart == 0 {
		return ""
	}
	return r.id[:r.nameStart-1]
}

func (r *record) key() types.NamespacedName {
	return types.NamespacedName{Namespace: r.namespace(), Name: r.name()}
}

// storeKey is the record's key in the store's map: the start of its id.
func (r *record) storeKey() string { return r.id[:r.nameEnd] }

// storeKey is the key in a store's map of the object under key: its name,
// or its namespace, a slash and its name. Neither can hold a slash.
func storeKey(key types.NamespacedName) string {
	if key.Namespace == "" {
		return key.Name
	}
	return key.Namespace + "/" + key.Name
}

// GetObjectMeta lets client-go's own stores key a record (the reflector's
// store of the objects it streams at start): it answers the name and the
// namespace, and nothing else.
func (r *record) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: r.name(), Namespace: r.namespace()}
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
		Namespace:         r.namespace(),
		UID:               r.uid(),
		ResourceVersion:   r.resourceVersion(),
		Generation:        r.generation,
		CreationTimestamp: metav1.NewTime(fromUnixNano(r.created)),
		Labels:            r.labels,
		Annotations:       readAnnotations(r.annotations()),
	}}
	out.SetGroupVersionKind(gvk)
	if r.deleting != 0 {
		t := metav1.NewTime(fromUnixNano(r.deleting))
		out.DeletionTimestamp = &t
	}
}

// changed reports whether b differs from a in what can change a plan: its
// identity, a new generation (a spec edit: use, under an idle clock),
// labels, annotations or deletion. A status write changes none of them.
func changed(a, b *record) bool {
	return a.uid() != b.uid() || a.generation != b.generation || a.deleting != b.deleting ||
		!maps.Equal(a.labels, b.labels) || a.annotations() != b.annotations()
}

// keyCodes numbers the annotation keys the controller knows, so that a
// record says each in a byte; 0 says the key follows in full.
var keyCodes, codedKeys = func() (map[string]byte, []string) {
	keys := append([]string{"", expiry.AnnotationLegacyTTL}, expiry.KnownAnnotations...)
	if len(keys) > 256 {
		panic("more known annotation keys than a byte can number")
	}
	codes := make(map[string]byte, len(keys))
	for i, k := range keys[1:] {
		codes[k] = byte(i + 1)
	}
	return codes, keys
}()

// keptSize is about how many bytes appendAnnotations adds for in.
func keptSize(in map[string]string) int {
	n := 0
	for k, v := range in {
		if kept(k) {
			n += 2*binary.MaxVarintLen32 + 1 + len(v)
			if keyCodes[k] == 0 {
				n += len(k)
			}
		}
	}
	return n
}

// appendAnnotations appends the kept annotations of in, sorted by key:
// each as its key's code (keyCodes), the key itself when it has none,
// and the value, each string after its length.
func appendAnnotations(b []byte, in map[string]string) []byte {
	var keys []string
	for k := range in {
		if kept(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		code := keyCodes[k]
		b = append(b, code)
		if code == 0 {
			b = binary.AppendUvarint(b, uint64(len(k)))
			b = append(b, k...)
		}
		b = binary.AppendUvarint(b, uint64(len(in[k])))
		b = append(b, in[k]...)
	}
	return b
}

// readAnnotations returns the annotations appendAnnotations wrote in s;
// nil when there are none.
func readAnnotations(s string) map[string]string {
	if s == "" {
		return nil
	}
	out := map[string]string{}
	str := func() string {
		n, w := binary.Uvarint([]byte(s[:min(len(s), binary.MaxVarintLen64)]))
		v := s[w : w+int(n)] //nolint:gosec // written by appendAnnotations
		s = s[w+int(n):]     //nolint:gosec // idem
		return v
	}
	for s != "" {
		code := s[0]
		s = s[1:]
		k := codedKeys[code]
		if code == 0 {
			k = str()
		}
		out[k] = str()
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
	sharedMu     sync.Mutex
	sharedLabels = map[string]map[string]string{}
)

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
