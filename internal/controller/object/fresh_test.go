// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/amphitheatre-app/timeout-controller/internal/controller/delivery"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

func TestFreshRead(t *testing.T) {
	gvk := fixture.PlaybookGVK
	pb := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"title": "hello-go"}}}
	pb.SetGroupVersionKind(gvk)
	pb.SetName("2b1e7c9e")
	pb.SetUID("uid-2b1e7c9e")
	pb.SetAnnotations(map[string]string{"timeout.amphitheatre.app/ttl": "1h"})
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(gvk, meta.RESTScopeRoot)
	gets := 0
	reader := interceptor.NewClient(fake.NewClientBuilder().WithScheme(fixture.Scheme(t)).WithRESTMapper(mapper).WithObjects(pb).Build(),
		interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets++
			return c.Get(ctx, key, obj, opts...)
		}})
	key := wakeup.Key{GVK: gvk, NamespacedName: types.NamespacedName{Name: "2b1e7c9e"}}

	obj, u, err := kube.FreshRead(context.Background(), reader, key)
	if err != nil {
		t.Fatal(err)
	}
	if gets != 1 {
		t.Errorf("%d reads, want the metadata and the title in one", gets)
	}
	if title := delivery.TitleOf(u); title != "hello-go" {
		t.Errorf("title %q, want %q", title, "hello-go")
	}
	if obj.UID != pb.GetUID() || obj.ResourceVersion == "" || obj.Annotations["timeout.amphitheatre.app/ttl"] != "1h" {
		t.Errorf("metadata %+v lacks the UID, resourceVersion or annotations the delete preconditions and plan need", obj.ObjectMeta)
	}
}

func TestTitleOfCutsOnACharacterBoundary(t *testing.T) {
	for _, tt := range []struct{ name, title, want string }{
		{"keeps a title of exactly the limit", strings.Repeat("a", delivery.MaxTitle), strings.Repeat("a", delivery.MaxTitle)},
		{"does not split an é at the limit", strings.Repeat("a", delivery.MaxTitle-1) + "é", strings.Repeat("a", delivery.MaxTitle-1)},
		{"does not split an emoji at the limit", strings.Repeat("a", delivery.MaxTitle-3) + "🎭", strings.Repeat("a", delivery.MaxTitle-3)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"title": tt.title}}}
			u.SetGroupVersionKind(fixture.PlaybookGVK)
			if got := delivery.TitleOf(u); got != tt.want {
				t.Errorf("titleOf = %q (%d bytes, valid UTF-8 %t), want %d bytes", got, len(got), utf8.ValidString(got), len(tt.want))
			}
		})
	}
}
