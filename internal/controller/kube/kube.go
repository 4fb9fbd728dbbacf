// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

// Name is the controller's name in Events and logs.
const Name = "timeout-controller"

// ConflictRetry is how soon an object is looked at again after a delete
// lost a race with a write to it.
const ConflictRetry = 100 * time.Millisecond

// FreshRead reads the whole object from the API server through reader,
// and its metadata from the same response.
func FreshRead(ctx context.Context, reader client.Reader, key wakeup.Key) (*metav1.PartialObjectMetadata, *unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(key.GVK)
	if err := reader.Get(ctx, key.NamespacedName, u); err != nil {
		return nil, nil, err
	}
	obj := NewMetadata(key.GVK)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return nil, nil, fmt.Errorf("read the metadata of %s: %w", key, err)
	}
	return obj, u, nil
}

func NewMetadata(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	return obj
}

func NewMetadataList(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadataList {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return list
}

func Reference(gvk schema.GroupVersionKind, obj metav1.Object) *corev1.ObjectReference {
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	return &corev1.ObjectReference{
		APIVersion:      apiVersion,
		Kind:            kind,
		Namespace:       obj.GetNamespace(),
		Name:            obj.GetName(),
		UID:             obj.GetUID(),
		ResourceVersion: obj.GetResourceVersion(),
	}
}

func NamespaceLabels(ctx context.Context, c client.Reader, name string) (map[string]string, error) {
	ns := NewMetadata(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := c.Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
		return nil, fmt.Errorf("get namespace %s: %w", name, err)
	}
	return ns.Labels, nil
}

// WriteTimeout bounds a write of the controller's annotations on a
// governed object: short, so that a write under way at SIGTERM is done
// before the Lease is released (deliver.go's sendTimeout).
const WriteTimeout = 5 * time.Second

// ReviewTimeout bounds each review request.
const ReviewTimeout = 10 * time.Second
