// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package objectstore

import (
	"context"
	"fmt"
	"maps"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

func playbookMeta(name, uid, rv string, annotations map[string]string) *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: name, UID: types.UID(uid), ResourceVersion: rv, Generation: 1,
		CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)),
		Annotations:       annotations,
	}}
	o.SetGroupVersionKind(fixture.PlaybookGVK)
	return o
}

func TestARecordKeepsWhatDecisionsRead(t *testing.T) {
	deleting := metav1.NewTime(time.Date(2026, 11, 26, 4, 0, 0, 500, time.UTC))
	tests := []struct {
		name string
		in   *metav1.PartialObjectMetadata
		// want is in as a decision reads it; in when nil.
		want *metav1.PartialObjectMetadata
	}{
		{name: "keeps a plain object's identity and times", in: playbookMeta("a", "u-1", "7", nil)},
		{
			name: "keeps the controller's annotations and drops kubectl's last-applied-configuration",
			in: playbookMeta("b", "u-2", "8", map[string]string{
				expiry.AnnotationTTL: "1h", expiry.AnnotationLegacyTTL: "7200", expiry.Prefix + "notify": "dev@example.com",
				lastAppliedKey: strings.Repeat("x", 8192), "example.com/owner": "team-a",
			}),
			want: playbookMeta("b", "u-2", "8", map[string]string{
				expiry.AnnotationTTL: "1h", expiry.AnnotationLegacyTTL: "7200", expiry.Prefix + "notify": "dev@example.com",
			}),
		},
		{
			name: "keeps a namespaced object's labels, generation and deletion, to the nanosecond",
			in: func() *metav1.PartialObjectMetadata {
				o := playbookMeta("c", "u-3", "9", nil)
				o.Namespace, o.Labels, o.Generation, o.DeletionTimestamp = "team-a", map[string]string{"app": "x"}, 4, &deleting
				return o
			}(),
		},
		{name: "keeps a name of 253 characters", in: playbookMeta(strings.Repeat("n", 253), "u-4", "10", nil)},
		{
			name: "keeps a key of its own it does not know, empty, long and odd values",
			in: playbookMeta("e", "u-5", "11", map[string]string{
				expiry.Prefix + "tll": "1h", expiry.AnnotationKeep: "", expiry.AnnotationTTL: strings.Repeat("9", 300),
				expiry.Prefix + "notify": "a\x00b\nc é",
			}),
		},
		{name: "keeps an empty UID and resourceVersion", in: playbookMeta("d", "", "", nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			if want == nil {
				want = tt.in.DeepCopy()
			}
			got := &metav1.PartialObjectMetadata{}
			got.SetGroupVersionKind(fixture.PlaybookGVK)
			newRecord(tt.in).into(fixture.PlaybookGVK, got)
			if !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestARecordsLabelsAreSharedButNeverChangedByAReader(t *testing.T) {
	a, b := playbookMeta("a", "u-1", "1", nil), playbookMeta("b", "u-2", "1", nil)
	a.Labels, b.Labels = map[string]string{"team": "a", "tier": "dev"}, map[string]string{"tier": "dev", "team": "a"}
	ra, rb := newRecord(a), newRecord(b)
	if fmt.Sprintf("%p", ra.labels) != fmt.Sprintf("%p", rb.labels) {
		t.Errorf("equal labels kept in two maps")
	}
	got := &metav1.PartialObjectMetadata{}
	ra.into(fixture.PlaybookGVK, got)
	got.Labels["team"] = "b"
	if rb.labels["team"] != "a" {
		t.Errorf("a reader's change reached the shared labels: %v", rb.labels)
	}
}

const lastAppliedKey = "kubectl.kubernetes.io/last-applied-configuration"

// fakeServer lists and watches Playbooks' metadata as an API server would,
// with watches the test drives.
type fakeServer struct {
	mu      sync.Mutex
	objects map[string]*metav1.PartialObjectMetadata
	rv      int
	lists   int
	watches chan *watch.FakeWatcher
}

func newFakeServer(n int) *fakeServer {
	s := &fakeServer{objects: map[string]*metav1.PartialObjectMetadata{}, watches: make(chan *watch.FakeWatcher, 10)}
	for i := range n {
		s.put(playbookMeta(fmt.Sprintf("pb-%03d", i), fmt.Sprintf("uid-%03d", i), "", map[string]string{
			expiry.AnnotationExpiresAt: time.Date(2026, 11, 26, 4, 0, i, 0, time.UTC).Format(time.RFC3339),
			lastAppliedKey:             `{"kind":"Playbook"}`,
		}))
	}
	return s
}

// put stores o at a new resourceVersion, and returns it.
func (s *fakeServer) put(o *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	o = o.DeepCopy()
	o.ResourceVersion = strconv.Itoa(s.rv)
	s.objects[o.Name] = o
	return o.DeepCopy()
}

func (s *fakeServer) remove(name string) *metav1.PartialObjectMetadata {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	o := s.objects[name]
	delete(s.objects, name)
	return o
}

func (s *fakeServer) get(name string) *metav1.PartialObjectMetadata {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objects[name].DeepCopy()
}

func (s *fakeServer) listWatch() toolscache.ListerWatcher {
	return listOnly{&toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.lists++
			list := &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(s.rv)}}
			for _, o := range s.objects {
				list.Items = append(list.Items, *o.DeepCopy())
			}
			return list, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			w := watch.NewFakeWithChanSize(100, false)
			s.watches <- w
			return w, nil
		},
	}}
}

// listOnly makes the Reflector list, then watch: the stream of a list
// that the API server sends instead is the integration tests' to check.
type listOnly struct{ *toolscache.ListWatch }

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

// looks counts the looks a store asks for, by name.
type looks struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *looks) look(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[key.Name]++
}

// take returns the looks so far and starts counting again.
func (l *looks) take() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.n
	l.n = map[string]int{}
	return n
}

func nextWatch(t *testing.T, s *fakeServer) *watch.FakeWatcher {
	t.Helper()
	select {
	case w := <-s.watches:
		return w
	case <-time.After(30 * time.Second):
		t.Fatal("the reflector opened no watch")
		return nil
	}
}

func TestARelistAmidABurstOfExpiriesNeitherLosesNorRepeatsALook(t *testing.T) {
	const n = 50
	server := newFakeServer(n)
	l := &looks{n: map[string]int{}}
	store := newObjectStore(fixture.PlaybookGVK, schema.GroupResource{Group: "amphitheatre.app", Resource: "playbooks"}, l.look)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go store.reflector(server.listWatch()).RunWithContext(ctx)

	// The first list: every object once.
	w := nextWatch(t, server)
	first := l.take()
	if len(first) != n {
		t.Fatalf("the first list looked at %d objects, want %d", len(first), n)
	}
	for name, k := range first {
		if k != 1 {
			t.Errorf("the first list looked at %s %d times, want once", name, k)
		}
	}

	// Each object's wake-up lives with its record, and stays the same
	// across the burst and the relist for what the store still holds.
	wakes := map[string]*wakeup.Wake{}
	for _, name := range []string{"pb-005", "pb-015", "pb-030", "pb-031", "pb-040", "pb-045"} {
		if wakes[name] = store.wakeOf(types.NamespacedName{Name: name}); wakes[name] == nil {
			t.Fatalf("no Wake for %s, which the store holds", name)
		}
	}

	// The burst: the first ten are deleted, their DELETED events come
	// through the watch; a status write to pb-045 changes nothing that
	// decides.
	for i := range 10 {
		w.Delete(server.remove(fmt.Sprintf("pb-%03d", i)))
	}
	w.Modify(server.put(server.get("pb-045")))
	// Then the watch breaks (410 Gone), and while the reflector relists
	// ten more are deleted, pb-030 is extended, and pb-031 is deleted and
	// made again under the same name.
	for i := 10; i < 20; i++ {
		server.remove(fmt.Sprintf("pb-%03d", i))
	}
	extended := server.get("pb-030")
	extended.Annotations[expiry.AnnotationExpiresAt] = "2026-11-27T04:00:00Z"
	server.put(extended)
	again := server.get("pb-031")
	again.UID = "uid-031-again"
	server.remove("pb-031")
	server.put(again)
	w.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)

	// The relist is in once the reflector watches again.
	nextWatch(t, server)
	got := l.take()
	want := map[string]int{"pb-030": 1, "pb-031": 1}
	for i := range 20 {
		want[fmt.Sprintf("pb-%03d", i)] = 1
	}
	if !maps.Equal(got, want) {
		t.Errorf("looks from the burst and the relist:\n got %v\nwant %v (each deleted or changed object once, no other)", got, want)
	}

	for name, before := range wakes {
		got := store.wakeOf(types.NamespacedName{Name: name})
		switch gone := name == "pb-005" || name == "pb-015"; {
		case gone && got != nil:
			t.Errorf("%s is deleted, and still has a Wake", name)
		case !gone && got != before:
			t.Errorf("%s has a new Wake after the burst and the relist: two looks pending for one object", name)
		}
	}

	// The store holds what the server holds.
	for name, o := range server.objects {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(fixture.PlaybookGVK)
		if err := store.get(ctx, types.NamespacedName{Name: name}, m); err != nil {
			t.Errorf("get %s: %v", name, err)
			continue
		}
		if m.UID != o.UID || m.ResourceVersion != o.ResourceVersion || m.Annotations[expiry.AnnotationExpiresAt] != o.Annotations[expiry.AnnotationExpiresAt] {
			t.Errorf("%s: got uid %s rv %s expires-at %s, want %s %s %s", name, m.UID, m.ResourceVersion,
				m.Annotations[expiry.AnnotationExpiresAt], o.UID, o.ResourceVersion, o.Annotations[expiry.AnnotationExpiresAt])
		}
	}
	var count int
	if err := store.each(ctx, "", func(*metav1.PartialObjectMetadata) error { count++; return nil }); err != nil {
		t.Fatal(err)
	}
	if count != n-20 {
		t.Errorf("the store holds %d objects, want %d", count, n-20)
	}
	err := store.get(ctx, types.NamespacedName{Name: "pb-005"}, &metav1.PartialObjectMetadata{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("get a deleted object: got %v, want NotFound", err)
	}
	if server.lists != 2 {
		t.Errorf("the reflector listed %d times, want 2", server.lists)
	}
}

func TestAStoreNotListedYetSaysSoInsteadOfNotFound(t *testing.T) {
	store := newObjectStore(fixture.PlaybookGVK, schema.GroupResource{Group: "amphitheatre.app", Resource: "playbooks"}, func(types.NamespacedName) {})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := store.get(ctx, types.NamespacedName{Name: "a"}, &metav1.PartialObjectMetadata{})
	if err == nil || apierrors.IsNotFound(err) {
		t.Errorf("got %v, want an error that is not NotFound", err)
	}
	if store.hasSynced() {
		t.Error("synced before any list")
	}
}

func FuzzARecordsAnnotationsReadBackAsWritten(f *testing.F) {
	f.Add("tll", "1h", "")
	f.Add("", "\x00\xff", "x")
	f.Fuzz(func(t *testing.T, key, value, other string) {
		in := map[string]string{expiry.Prefix + key: value, expiry.AnnotationTTL: other, "example.com/" + key: value}
		want := map[string]string{expiry.Prefix + key: value, expiry.AnnotationTTL: other}
		if got := readAnnotations(string(appendAnnotations(nil, in))); !maps.Equal(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
}

func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// The collector works harder while any store takes its first list, and as
// before once every one has; not at all when GOGC says otherwise.
func TestTheCollectorWorksHarderOnlyWhileTheStoresList(t *testing.T) {
	if v, set := os.LookupEnv("GOGC"); set {
		t.Cleanup(func() { _ = os.Setenv("GOGC", v) })
		_ = os.Unsetenv("GOGC")
	}
	before := gcPercent()
	t.Cleanup(func() { debug.SetGCPercent(before) })
	SetGCPercent()
	if p := gcPercent(); p != runningGCPercent {
		t.Fatalf("GOGC %d after SetGCPercent, want %d", p, runningGCPercent)
	}
	before = runningGCPercent
	var g gcWhileListing
	first, second := make(chan struct{}), make(chan struct{})
	g.during(func() { <-first })
	g.during(func() { <-second })
	if p := gcPercent(); p != listingGCPercent {
		t.Fatalf("GOGC %d while two stores list, want %d", p, listingGCPercent)
	}
	close(first)
	time.Sleep(50 * time.Millisecond)
	if p := gcPercent(); p != listingGCPercent {
		t.Fatalf("GOGC %d while one store still lists, want %d", p, listingGCPercent)
	}
	close(second)
	fixture.Eventually(t, 5*time.Second, "GOGC back once every store listed", func() (bool, error) {
		return gcPercent() == before, nil
	})

	t.Setenv("GOGC", "80")
	debug.SetGCPercent(80)
	before = 80
	SetGCPercent()
	never := make(chan struct{})
	defer close(never)
	g.during(func() { <-never })
	if p := gcPercent(); p != before {
		t.Fatalf("GOGC %d with GOGC set in the environment, want it left at %d", p, before)
	}
}

// BenchmarkBytesPerObject reports what the controller holds for each
// governed object between looks, as the heap sees it after a collection:
// its record, its slot in the store's map and its wake-up, pending in the
// queue. Each object is a Playbook as the bench makes it: a UUID for name
// and UID, an expires-at annotation, half of them with kubectl's
// last-applied-configuration (dropped).
func BenchmarkBytesPerObject(b *testing.B) {
	const n = 100_000
	for range b.N {
		objects := make([]*metav1.PartialObjectMetadata, n)
		for i := range objects {
			annotations := map[string]string{expiry.AnnotationExpiresAt: "2026-11-27T04:00:00Z"}
			if i%2 == 0 {
				annotations[lastAppliedKey] = strings.Repeat("x", 2300)
			}
			objects[i] = playbookMeta(fmt.Sprintf("%08x-9b1c-4c9e-8e1a-%012x", i, i), fmt.Sprintf("%08x-2f0d-4a57-9c3e-%012x", i, i),
				strconv.Itoa(1_000_000+i), annotations)
		}
		wakes := wakeup.New(clocktesting.NewFakeClock(time.Unix(0, 0)), 1)
		store := newObjectStore(fixture.PlaybookGVK, schema.GroupResource{Group: "amphitheatre.app", Resource: "playbooks"}, func(name types.NamespacedName) {
			wakes.After(wakeup.Key{GVK: fixture.PlaybookGVK, NamespacedName: name}, time.Hour)
		})
		wakes.Locate(fixture.PlaybookGVK, store.wakeOf)
		before := heapInUse()
		for _, o := range objects {
			r, err := toRecord(o)
			if err != nil {
				b.Fatal(err)
			}
			if err := store.Add(r); err != nil {
				b.Fatal(err)
			}
		}
		after := heapInUse()
		goruntime.KeepAlive(objects)
		if wakes.Scheduled() != n {
			b.Fatalf("%d wake-ups pending, want %d", wakes.Scheduled(), n)
		}
		b.ReportMetric(float64(after-before)/n, "B/object")
		goruntime.KeepAlive(store)
		goruntime.KeepAlive(wakes)
	}
}

func heapInUse() uint64 {
	goruntime.GC()
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A namespaced kind's objects are kept by namespace and name: the same
// name in two namespaces is two objects.
func TestAStoreKeepsTheSameNameInTwoNamespacesApart(t *testing.T) {
	store := newObjectStore(fixture.PlaybookGVK, schema.GroupResource{Group: "amphitheatre.app", Resource: "playbooks"}, func(types.NamespacedName) {})
	store.syncOnce.Do(func() { close(store.synced) })
	ctx := context.Background()
	for _, ns := range []string{"team-a", "team-b"} {
		o := playbookMeta("web", "uid-"+ns, "1", nil)
		o.Namespace = ns
		if err := store.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	gone := playbookMeta("web", "uid-team-a", "2", nil)
	gone.Namespace = "team-a"
	if err := store.Delete(gone); err != nil {
		t.Fatal(err)
	}
	got := &metav1.PartialObjectMetadata{}
	if err := store.get(ctx, types.NamespacedName{Namespace: "team-b", Name: "web"}, got); err != nil || got.UID != "uid-team-b" || got.Namespace != "team-b" {
		t.Fatalf("team-b/web: %+v, %v; want the one in team-b", got.ObjectMeta, err)
	}
	if err := store.get(ctx, types.NamespacedName{Namespace: "team-a", Name: "web"}, got); !apierrors.IsNotFound(err) {
		t.Fatalf("team-a/web after its deletion: %v, want NotFound", err)
	}
	var names []string
	if err := store.each(ctx, "team-b", func(o *metav1.PartialObjectMetadata) error {
		names = append(names, o.Namespace+"/"+o.Name)
		return nil
	}); err != nil || len(names) != 1 || names[0] != "team-b/web" {
		t.Fatalf("each in team-b: %v, %v; want [team-b/web]", names, err)
	}
}
