// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package sleep

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/utils/ptr"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

var (
	playbookGVK = fixture.PlaybookGVK
	deployRes   = deployments.GroupVersion().WithResource("deployments")
	setRes      = statefulSets.GroupVersion().WithResource("statefulsets")
)

// watches are the object controller's watches as the watch of marked
// workloads sees them: Playbooks and PersistentVolumes (cluster-scoped)
// and ConfigMaps are watched; the looks it asks for are recorded.
type watches struct {
	md  metadata.Interface
	ctx context.Context
	// watchErr, when set, fails adding a source.
	watchErr error

	mu      sync.Mutex
	sources int
	looks   []string
}

func (w *watches) MetadataClient() metadata.Interface { return w.md }

func (w *watches) Watch(src source.TypedSource[wakeup.Key]) error {
	if w.watchErr != nil {
		return w.watchErr
	}
	w.mu.Lock()
	w.sources++
	w.mu.Unlock()
	return src.Start(w.ctx, nil)
}

func (w *watches) WatchedKind(gk schema.GroupKind) (schema.GroupVersionKind, bool, bool) {
	switch gk {
	case playbookGVK.GroupKind():
		return playbookGVK, false, true
	case fixture.ConfigMapGVK.GroupKind():
		return fixture.ConfigMapGVK, true, true
	case schema.GroupKind{Kind: "PersistentVolume"}:
		return schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolume"}, false, true
	}
	return schema.GroupVersionKind{}, false, false
}

func (w *watches) LookNow(key wakeup.Key) {
	w.mu.Lock()
	w.looks = append(w.looks, key.Name)
	w.mu.Unlock()
}

// looked returns the names of the objects looked at so far.
func (w *watches) looked() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.looks)
}

// marked is the metadata of a workload labelled by the sleep of owner.
func marked(gvk schema.GroupVersionKind, ns, name string, owner types.UID) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name), Generation: 1,
			Labels: map[string]string{expiry.LabelAsleep: string(owner)}},
	}
}

// ownedBy is the metadata of namespace ns, owned by the Playbooks named
// (their UIDs are uid-<name>) and by refs.
func ownedBy(ns string, playbooks []string, refs ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	for _, pb := range playbooks {
		refs = append(refs, metav1.OwnerReference{APIVersion: playbookGVK.GroupVersion().String(), Kind: "Playbook", Name: pb, UID: types.UID("uid-" + pb)})
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: ns, OwnerReferences: refs},
	}
}

// startWatch returns the watch of marked workloads over a metadata client
// that holds objs, started and synced.
func startWatch(t *testing.T, objs ...*metav1.PartialObjectMetadata) (*MarkedWatch, *watches, *metadatafake.FakeMetadataClient) {
	t.Helper()
	md, w := newWatches(t, objs...)
	m := NewMarkedWatch(w)
	if err := m.EnsureWorkloads(); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 10*time.Second, "the watch lists what it holds", func() (bool, error) {
		return m.watchedCount() == countLabelled(objs), nil
	})
	return m, w, md
}

func newWatches(t *testing.T, objs ...*metav1.PartialObjectMetadata) (*metadatafake.FakeMetadataClient, *watches) {
	t.Helper()
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	in := make([]runtime.Object, 0, len(objs))
	for _, o := range objs {
		in = append(in, o)
	}
	md := metadatafake.NewSimpleMetadataClient(scheme, in...)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return md, &watches{md: md, ctx: ctx}
}

func countLabelled(objs []*metav1.PartialObjectMetadata) int {
	n := 0
	for _, o := range objs {
		if _, ok := o.Labels[expiry.LabelAsleep]; ok {
			n++
		}
	}
	return n
}

// watchedCount is the gauge of the workloads watched, as the metrics
// endpoint serves it.
func (m *MarkedWatch) watchedCount() int {
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return -1
	}
	for _, mf := range mfs {
		if mf.GetName() == "timeout_controller_sleep_watched_workloads" {
			return int(mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	return -1
}

// A change to a marked workload's spec (its generation), or its leaving
// the watch, brings a look at the object whose sleep marked it, or at
// every watched cluster-scoped owner of its namespace when the label
// names none of them; a change to its metadata alone does not.
func TestTheWatchLooksAtTheOwnerOfAMarkedWorkloadThatChanged(t *testing.T) {
	ns := func() []*metav1.PartialObjectMetadata {
		return []*metav1.PartialObjectMetadata{
			ownedBy("amp-a", []string{"pb-1", "pb-2"},
				metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "cm", UID: "uid-cm"},
				metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "w", UID: "uid-w"},
				metav1.OwnerReference{APIVersion: "v1/what/else", Kind: "PersistentVolume", Name: "bad", UID: "uid-bad"}),
			ownedBy("amp-b", []string{"pb-3"}),
		}
	}
	for _, tt := range []struct {
		name string
		// change changes the workloads, through the metadata client.
		change func(t *testing.T, md *metadatafake.FakeMetadataClient)
		want   []string
	}{
		{"a workload scaled up brings a look at the object its label names", func(t *testing.T, md *metadatafake.FakeMetadataClient) {
			update(t, md, deployRes, marked(deployments, "amp-a", "web", "uid-pb-2"), 2)
		}, []string{"pb-2"}},
		{"a label that names no owner of the namespace brings a look at each watched cluster-scoped one", func(t *testing.T, md *metadatafake.FakeMetadataClient) {
			update(t, md, setRes, marked(statefulSets, "amp-a", "db", "uid-gone"), 2)
		}, []string{"pb-1", "pb-2"}},
		{"a change of metadata alone brings none", func(t *testing.T, md *metadatafake.FakeMetadataClient) {
			web := marked(deployments, "amp-a", "web", "uid-pb-2")
			web.Annotations = map[string]string{"a": "b"}
			update(t, md, deployRes, web, 1)
			update(t, md, deployRes, marked(deployments, "amp-b", "api", "uid-pb-3"), 2)
		}, []string{"pb-3"}},
		{"a workload that leaves the watch brings a look", func(t *testing.T, md *metadatafake.FakeMetadataClient) {
			remove(t, md, deployRes, "amp-b", "api")
		}, []string{"pb-3"}},
		{"a workload in a namespace not known brings none", func(t *testing.T, md *metadatafake.FakeMetadataClient) {
			update(t, md, deployRes, marked(deployments, "amp-x", "lost", "uid-pb-1"), 2)
			update(t, md, deployRes, marked(deployments, "amp-b", "api", "uid-pb-3"), 2)
		}, []string{"pb-3"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, w, md := startWatch(t, append(ns(),
				marked(deployments, "amp-a", "web", "uid-pb-2"),
				marked(statefulSets, "amp-a", "db", "uid-gone"),
				marked(deployments, "amp-b", "api", "uid-pb-3"),
				marked(deployments, "amp-x", "lost", "uid-pb-1"))...)
			tt.change(t, md)
			fixture.Eventually(t, 10*time.Second, "the looks", func() (bool, error) {
				return len(w.looked()) >= len(tt.want), nil
			})
			if got := w.looked(); !slices.Equal(got, tt.want) {
				t.Errorf("looked at %q, want %q", got, tt.want)
			}
		})
	}
}

// update writes obj, at generation gen, through the metadata client.
func update(t *testing.T, md *metadatafake.FakeMetadataClient, res schema.GroupVersionResource, obj *metav1.PartialObjectMetadata, gen int64) {
	t.Helper()
	obj.Generation = gen
	if _, err := md.Resource(res).Namespace(obj.Namespace).(metadatafake.MetadataClient).UpdateFake(obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// remove deletes a workload through the metadata client: as the watch
// sees it, it left the label selector.
func remove(t *testing.T, md *metadatafake.FakeMetadataClient, res schema.GroupVersionResource, ns, name string) {
	t.Helper()
	if err := md.Resource(res).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// News of a marked workload (labelled, changed, gone) makes the next look
// at its owner read the workloads again.
func TestNewsOfAMarkedWorkloadMakesTheNextLookReadTheWorkloads(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(t *testing.T, md *metadatafake.FakeMetadataClient)
	}{
		{"a workload labelled", func(t *testing.T, md *metadatafake.FakeMetadataClient) {
			if _, err := md.Resource(deployRes).Namespace("amp-a").(metadatafake.MetadataClient).CreateFake(marked(deployments, "amp-a", "new", "uid-pb-1"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
		{"a workload scaled", func(t *testing.T, md *metadatafake.FakeMetadataClient) {
			update(t, md, deployRes, marked(deployments, "amp-a", "web", "uid-pb-1"), 2)
		}},
		{"a workload gone", func(t *testing.T, md *metadatafake.FakeMetadataClient) {
			remove(t, md, deployRes, "amp-a", "web")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, _, md := startWatch(t, ownedBy("amp-a", []string{"pb-1"}), marked(deployments, "amp-a", "web", "uid-pb-1"))
			m.reading("uid-pb-1")()
			if !m.unchanged("uid-pb-1") {
				t.Fatal("a look after a read that found nothing reads the workloads again, with no news")
			}
			tt.change(t, md)
			fixture.Eventually(t, 10*time.Second, "the news", func() (bool, error) {
				return !m.unchanged("uid-pb-1"), nil
			})
		})
	}
}

// The watch is started once, the first time a policy puts objects to
// sleep, and only by a process that reads metadata.
func TestTheWatchOfMarkedWorkloadsStartsOnce(t *testing.T) {
	var none *MarkedWatch
	if err := none.EnsureWorkloads(); err != nil {
		t.Errorf("no watch: %v", err)
	}

	_, w := newWatches(t)
	w.md = nil
	m := NewMarkedWatch(w)
	if err := m.EnsureWorkloads(); err != nil || w.sources != 0 {
		t.Errorf("without a metadata client: %v, %d sources; want none", err, w.sources)
	}
	m.reading("uid")()
	if m.unchanged("uid") {
		t.Error("a watch that does not run lets a look skip the workloads")
	}

	m, w, _ = startWatch(t, marked(deployments, "amp-a", "web", "uid"), marked(statefulSets, "amp-a", "db", "uid"))
	if err := m.EnsureWorkloads(); err != nil || w.sources != 2 {
		t.Errorf("started again: %v, %d sources; want the 2 of the first start", err, w.sources)
	}
	m.reading("uid")()
	if !m.unchanged("uid") {
		t.Error("a running watch does not let a look skip the workloads it read")
	}

	_, w = newWatches(t)
	w.watchErr = errors.New("boom")
	if err := NewMarkedWatch(w).EnsureWorkloads(); err == nil || err.Error() != "watch the deployments a sleep scaled down: boom" {
		t.Errorf("error %v, want the deployments' watch failed", err)
	}
}

// A wake removes the label of each workload it restores: the watch sees
// those leave, which is no news; a label a failed wake left, that someone
// else removes, is.
func TestAWakeDoesNotTakeItsOwnRemovalOfALabelForNews(t *testing.T) {
	cm := env()
	web := marked(deployments, "amp-a", "web", cm.UID)
	worker := marked(deployments, "amp-b", "worker", cm.UID)
	// As the watch sees them, the namespaces' owners say which workload
	// a look is for.
	m, w, md := startWatch(t, web, worker, ownedBy("amp-a", []string{"pb-a"}), ownedBy("amp-b", []string{"pb-b"}))

	saved := []string{expiry.AnnotationReplicas, "1", expiry.LabelAsleep, string(cm.UID)}
	h := newHarness(t, cm, owned("amp-a", cm), owned("amp-b", cm),
		deployment("amp-a", "web", ptr.To[int32](0), saved...), deployment("amp-b", "worker", ptr.To[int32](0), saved...))
	h.failing("patch Deployment amp-b/worker", errors.New("boom"))
	h.s.Marked = m
	st := expiry.SleepState{Phase: expiry.PhaseAsleep, Since: since, Generation: 1}
	ev := h.ev(fixture.ConfigMapGVK, "env")
	ev.Life.Sleep, ev.Life.Asleep = st, true
	if _, err := h.s.Wake(h.ctx(), ev, "use"); err == nil {
		t.Fatal("the wake wrote worker")
	}
	if got := h.replicas(deployments, "amp-a", "web"); got.label != "" {
		t.Fatalf("web: %s; want the label removed", got)
	}

	// The label leaves web, which the wake removed, then worker.
	remove(t, md, deployRes, "amp-a", "web")
	remove(t, md, deployRes, "amp-b", "worker")
	fixture.Eventually(t, 10*time.Second, "the look at worker's owner", func() (bool, error) {
		return slices.Contains(w.looked(), "pb-b"), nil
	})
	if got := w.looked(); !slices.Equal(got, []string{"pb-b"}) {
		t.Errorf("looked at %q, want one look, for worker", got)
	}
}

// A removal noted while the watch does not run is forgotten: the watch,
// once started, takes the label leaving for news.
func TestARemovalNotedBeforeTheWatchRunsIsNotKept(t *testing.T) {
	md, w := newWatches(t, marked(deployments, "amp-a", "web", "uid-pb"), ownedBy("amp-a", []string{"pb"}))
	m := NewMarkedWatch(w)
	m.unmark("uid-amp-a-web")(true)
	if err := m.EnsureWorkloads(); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 10*time.Second, "the watch lists web", func() (bool, error) { return m.watchedCount() == 1, nil })
	remove(t, md, deployRes, "amp-a", "web")
	fixture.Eventually(t, 10*time.Second, "the look at web's owner", func() (bool, error) {
		return slices.Equal(w.looked(), []string{"pb"}), nil
	})
}

// A wake forgets what the watch noted of the object: asleep again, its
// workloads are read at the next look.
func TestAWakeForgetsThatTheWorkloadsWereRead(t *testing.T) {
	cm := env(fixture.Annotated(expiry.AnnotationSleep, expiry.SleepState{Phase: expiry.PhaseAsleep, Since: since, Generation: 1}.String()))
	h := newHarness(t, cm)
	h.s.Marked = &MarkedWatch{}
	h.s.Marked.running.Store(true)
	h.s.Marked.reading(cm.UID)()
	if _, err := h.s.Wake(h.ctx(), h.ev(fixture.ConfigMapGVK, "env"), "use"); err != nil {
		t.Fatal(err)
	}
	if h.s.Marked.unchanged(cm.UID) {
		t.Error("a look after the wake may skip the workloads")
	}
}
