// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

var errAPI = apierrors.NewServiceUnavailable("etcd leader changed")

// intercepted is f's API server with the calls funcs sets answering
// instead.
func (f *fixture) intercepted(funcs interceptor.Funcs) client.WithWatch {
	return interceptor.NewClient(f.client.(client.WithWatch), funcs)
}

func TestListSkipsAnUnreadableEntryAndReadsTheOthers(t *testing.T) {
	f := newFixture(t)
	f.prepare(entry("u1", "email"))
	broken := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: Name("u2"), Labels: map[string]string{LabelManagedBy: ManagedBy, LabelEntry: "true"}},
		Data:       map[string]string{dataKey: "{"},
	}
	if err := f.client.Create(context.Background(), broken); err != nil {
		t.Fatal(err)
	}
	entries, errs, err := f.o.Store.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Object.UID != "u1" {
		t.Errorf("listed %d entries, want the readable one", len(entries))
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), Name("u2")) {
		t.Errorf("errs = %v, want one naming the unreadable entry", errs)
	}
}

// An entry is written before the delete: one that cannot be written must
// fail the write, or the object would go with no record of its messages.
func TestAnEntryThatCannotBeEncodedIsRefusedNotWrittenEmpty(t *testing.T) {
	f := newFixture(t)
	e := entry("u1", "email")
	e.Created = time.Date(10000, time.January, 1, 0, 0, 0, 0, time.UTC) // beyond what JSON times hold
	if _, err := f.o.Store.Create(context.Background(), e); err == nil {
		t.Error("Create accepted an entry it cannot encode")
	}
	if err := f.o.Store.Update(context.Background(), e); err == nil {
		t.Error("Update accepted an entry it cannot encode")
	}
	var list corev1.ConfigMapList
	if err := f.client.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("%d ConfigMaps written", len(list.Items))
	}
}

func TestTheStoreReturnsEveryAPIError(t *testing.T) {
	ctx := context.Background()
	create := func(_ context.Context, _ client.WithWatch, _ client.Object, _ ...client.CreateOption) error {
		return errAPI
	}
	exists := func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
		return apierrors.NewAlreadyExists(schema.GroupResource{Resource: "configmaps"}, obj.GetName())
	}
	get := func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return errAPI
	}
	update := func(context.Context, client.WithWatch, client.Object, ...client.UpdateOption) error {
		return errAPI
	}
	for _, tt := range []struct {
		name  string
		funcs interceptor.Funcs
		call  func(s *Store) error
	}{
		{"when the entry cannot be created", interceptor.Funcs{Create: create},
			func(s *Store) error { _, err := s.Create(ctx, entry("u1", "email")); return err }},
		{"when the entry there cannot be read", interceptor.Funcs{Create: exists, Get: get},
			func(s *Store) error { _, err := s.Create(ctx, entry("u1", "email")); return err }},
		{"when the entry there cannot be replaced", interceptor.Funcs{Create: exists, Update: update},
			func(s *Store) error { _, err := s.Create(ctx, entry("u1", "email")); return err }},
		{"when the entry cannot be updated", interceptor.Funcs{Update: update},
			func(s *Store) error { return s.Update(ctx, entry("u1", "email")) }},
		{"when the entry cannot be removed", interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
			return errAPI
		}}, func(s *Store) error { return s.Remove(ctx, entry("u1", "email")) }},
		{"when the entries cannot be listed", interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errAPI
		}}, func(s *Store) error { _, _, err := s.List(ctx); return err }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.prepare(entry("u1", "email"))
			c := f.intercepted(tt.funcs)
			if err := tt.call(&Store{Client: c, Reader: c, Namespace: namespace}); !errors.Is(err, errAPI) {
				t.Errorf("error %v, want the API server's", err)
			}
		})
	}
}

func TestRemovingAnEntryAlreadyGoneIsNoError(t *testing.T) {
	f := newFixture(t)
	e := entry("u1", "email")
	f.prepare(e)
	for i := range 2 {
		if err := f.o.Store.Remove(context.Background(), e); err != nil {
			t.Errorf("remove %d: %v", i+1, err)
		}
	}
	if f.stored("u1") != nil {
		t.Error("entry still stored")
	}
}
