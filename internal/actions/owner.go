// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package actions

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/rules"
)

// OwnerIndex finds the objects of an owner, for the owner's page, without
// a LIST per request.
type OwnerIndex interface {
	// Objects returns the objects of the kinds policies target whose owner
	// annotation is owner; ok is false while the index is being filled.
	Objects(owner string) (objects []Owned, ok bool)
}

// Owned is an object of an owner, as metadata.
type Owned struct {
	GVK  schema.GroupVersionKind
	Meta *metav1.PartialObjectMetadata
}

// ownerIndexName is the name of the informers' index by owner.
const ownerIndexName = "owner"

func ownerOf(obj any) ([]string, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	if o := m.GetAnnotations()[notify.AnnotationOwner]; o != "" {
		return []string{o}, nil
	}
	return nil, nil
}

// NewOwnerIndexer returns an empty store indexed by owner, as each kind's
// informer keeps it.
func NewOwnerIndexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{ownerIndexName: ownerOf})
}

// slim keeps of an object's metadata only what the pages read: a cache of
// 100k objects then holds no managedFields and no annotations of others.
func slim(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp, Labels: m.Labels,
	}}
	for k, v := range m.Annotations {
		if k == expiry.AnnotationLegacyTTL || len(k) > len(expiry.Prefix) && k[:len(expiry.Prefix)] == expiry.Prefix {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	return out, nil
}

// Owners is the OwnerIndex of a running server: a metadata informer on
// every kind a TimeoutPolicy targets, indexed by owner, started and
// stopped as policies come and go.
type Owners struct {
	client  metadata.Interface
	resolve func(schema.GroupVersionKind) (schema.GroupVersionResource, error)

	mu    sync.Mutex
	kinds map[schema.GroupVersionKind]*kindIndex
}

// kindIndex is the store of one kind.
type kindIndex struct {
	gvk     schema.GroupVersionKind
	indexer cache.Indexer
	synced  func() bool
	stop    context.CancelFunc
}

// NewOwners returns the index of a running server; resolve maps a kind
// to its resource (a RESTMapper's).
func NewOwners(c metadata.Interface, resolve func(schema.GroupVersionKind) (schema.GroupVersionResource, error)) *Owners {
	return &Owners{client: c, resolve: resolve, kinds: map[schema.GroupVersionKind]*kindIndex{}}
}

// AddStore adds a kind whose store is filled by someone else (a test, a
// benchmark).
func (o *Owners) AddStore(gvk schema.GroupVersionKind, indexer cache.Indexer) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.kinds[gvk] = &kindIndex{gvk: gvk, indexer: indexer, synced: func() bool { return true }, stop: func() {}}
}

// Objects implements OwnerIndex.
func (o *Owners) Objects(owner string) ([]Owned, bool) {
	o.mu.Lock()
	kinds := make([]*kindIndex, 0, len(o.kinds))
	for _, k := range o.kinds {
		kinds = append(kinds, k)
	}
	o.mu.Unlock()
	var out []Owned
	for _, k := range kinds {
		if !k.synced() {
			return nil, false
		}
		items, err := k.indexer.ByIndex(ownerIndexName, owner)
		if err != nil {
			return nil, false
		}
		for _, it := range items {
			if m, ok := it.(*metav1.PartialObjectMetadata); ok {
				out = append(out, Owned{GVK: k.gvk, Meta: m})
			}
		}
	}
	return out, true
}

// Sync starts an informer for each kind in targets that has none, and
// stops those of kinds no longer targeted. A kind the API server does
// not serve is left out until it does.
func (o *Owners) Sync(ctx context.Context, targets []schema.GroupVersionKind) {
	o.mu.Lock()
	defer o.mu.Unlock()
	want := map[schema.GroupVersionKind]bool{}
	for _, gvk := range targets {
		want[gvk] = true
		if _, ok := o.kinds[gvk]; ok {
			continue
		}
		gvr, err := o.resolve(gvk)
		if err != nil {
			continue
		}
		inf := metadatainformer.NewFilteredMetadataInformer(o.client, gvr, metav1.NamespaceAll, 0,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, ownerIndexName: ownerOf}, nil).Informer()
		_ = inf.SetTransform(slim)
		kctx, stop := context.WithCancel(ctx)
		go inf.RunWithContext(kctx)
		o.kinds[gvk] = &kindIndex{gvk: gvk, indexer: inf.GetIndexer(), synced: inf.HasSynced, stop: stop}
	}
	for gvk, k := range o.kinds {
		if !want[gvk] {
			k.stop()
			delete(o.kinds, gvk)
		}
	}
}

// Run keeps the informers in step with the policies' targets until ctx
// ends.
func (o *Owners) Run(ctx context.Context, p *policies, every time.Duration) {
	for {
		if pl, err := p.list(ctx); err == nil {
			o.Sync(ctx, targets(pl))
		}
		select {
		case <-ctx.Done():
			o.mu.Lock()
			for gvk, k := range o.kinds {
				k.stop()
				delete(o.kinds, gvk)
			}
			o.mu.Unlock()
			return
		case <-time.After(every):
		}
	}
}

// targets are the kinds the policies target.
func targets(pl policyList) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, p := range pl.items {
		gv, err := schema.ParseGroupVersion(p.Spec.Target.APIVersion)
		if err != nil {
			continue
		}
		if gvk := gv.WithKind(p.Spec.Target.Kind); !slices.Contains(out, gvk) {
			out = append(out, gvk)
		}
	}
	return out
}

// asObject is the object of metadata m, as the rules read it.
func asObject(gvk schema.GroupVersionKind, m *metav1.PartialObjectMetadata) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	u.SetName(m.Name)
	u.SetNamespace(m.Namespace)
	u.SetUID(m.UID)
	u.SetResourceVersion(m.ResourceVersion)
	u.SetCreationTimestamp(m.CreationTimestamp)
	u.SetDeletionTimestamp(m.DeletionTimestamp)
	u.SetLabels(m.Labels)
	u.SetAnnotations(m.Annotations)
	return u
}

// ownerPage lists an owner's governed objects, soonest to expire first,
// each with its clocks and buttons. changed, when set, is an object just
// changed, shown as it is now rather than as the cache has it.
func (s *Server) ownerPage(ctx context.Context, v visit, now time.Time, changed *rules.Evaluation) page {
	owner := v.claims.Owner
	if s.o.Owners == nil {
		return problem(http.StatusServiceUnavailable, "Try again", "This server does not list owners' objects.")
	}
	owned, ok := s.o.Owners.Objects(owner)
	if !ok {
		if changed == nil {
			count(View, resultError)
		}
		return problem(http.StatusServiceUnavailable, "Try again", "The server is still reading the objects it lists. Try again in a moment.")
	}
	pl, err := s.policies.list(ctx)
	if err != nil {
		if changed == nil {
			count(View, resultError)
		}
		return problem(http.StatusServiceUnavailable, "Try again", "The server cannot read the policies right now. Try again in a moment.")
	}
	type item struct {
		ev  *rules.Evaluation
		key string
	}
	var items []item
	for _, o := range owned {
		var ev *rules.Evaluation
		if changed != nil && changed.Object.GetUID() == o.Meta.UID {
			ev = changed
		} else {
			u := asObject(o.GVK, o.Meta)
			e, err := rules.Evaluate(u, o.GVK, u.GetNamespace() != "", pl.items, namespaceLabels(ctx, s.o.Cache, u.GetNamespace()), now)
			if err != nil || e.Governing == nil || e.Governing.SpecErr != nil {
				continue
			}
			ev = e
		}
		items = append(items, item{ev, objectKey(ev)})
	}
	slices.SortFunc(items, func(a, b item) int {
		if a.ev.Life.Keep != b.ev.Life.Keep {
			if a.ev.Life.Keep {
				return 1
			}
			return -1
		}
		if c := a.ev.Life.ExpiresAt.Compare(b.ev.Life.ExpiresAt); c != 0 {
			return c
		}
		return compareStrings(a.key, b.key)
	})
	p := page{Title: "Objects of " + owner, Owner: owner, Form: v.form}
	for _, it := range items {
		p.Objects = append(p.Objects, s.objectView(v, it.ev, linkRulesFor(it.ev.Governing.Schedule), it.key, now))
	}
	if changed == nil {
		count(View, resultShown)
	}
	return p
}

// ownerClick carries out a click on an owner's page: the token allows its
// actions on every object of that owner, checked on the object as the API
// server has it.
func (s *Server) ownerClick(ctx context.Context, v visit, a Action, object string, now time.Time) page {
	ref, ok := parseObjectKey(object)
	if !ok {
		count(a, resultInvalid)
		return problem(http.StatusBadRequest, "Unknown object", "The page named no object this server knows. Open the link again.")
	}
	if !v.claims.Allows(a) {
		count(a, resultInvalid)
		return problem(http.StatusForbidden, "Not allowed", "This link does not allow that. Nothing was done.")
	}
	o := s.act(ctx, v, ref, v.claims.Owner, a, now)
	count(a, o.result)
	if o.ev == nil {
		return s.outcomePage(v, o, now)
	}
	p := s.ownerPage(ctx, v, now, o.ev)
	if p.status != 0 && p.status != http.StatusOK {
		return s.outcomePage(v, o, now)
	}
	title, _ := heading(o.ev)
	p.Message, p.Details, p.Tone, p.status = title+": "+o.message, o.details, o.tone, o.status
	return p
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
