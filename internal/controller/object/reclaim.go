// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// censusKinds are the kinds counted, besides Pods, in the namespaces a
// deleted object owns: what holds capacity or is a developer's workload.
// A kind the cluster does not serve is left out. Secrets and ConfigMaps
// are not counted: reading them is not the controller's to ask for.
var censusKinds = []schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "apps", Version: "v1", Kind: "StatefulSet"},
	{Group: "apps", Version: "v1", Kind: "ReplicaSet"},
	{Group: "batch", Version: "v1", Kind: "Job"},
	{Version: "v1", Kind: "Service"},
	{Version: "v1", Kind: "PersistentVolumeClaim"},
	{Group: "amphitheatre.app", Version: "v1", Kind: "Actor"},
}

// Census RBAC: pods are read whole (their requests); the other kinds are
// only counted, from their metadata.
// +kubebuilder:rbac:groups="",resources=pods;services;persistentvolumeclaims,verbs=list
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;replicasets,verbs=list
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=list
// +kubebuilder:rbac:groups=amphitheatre.app,resources=actors,verbs=list

// census counts what the namespaces hold, read from the API server just
// before the object that owns them is deleted: the objects of censusKinds
// and the Pods, and the Pods' CPU and memory requests. The reads go out
// together, so that the census costs the delete one round trip, not one
// per kind. A kind the cluster does not serve is skipped; what cannot be
// read is left out, and the first such error returned.
func census(ctx context.Context, c client.Reader, namespaces []string) (*notify.Reclaimed, error) {
	if len(namespaces) == 0 {
		return nil, nil
	}
	rec := &notify.Reclaimed{Namespaces: namespaces}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, ns := range namespaces {
		wg.Go(func() {
			pods := &corev1.PodList{}
			err := c.List(ctx, pods, client.InNamespace(ns))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("list the pods in %s: %w", ns, err))
				return
			}
			rec.Pods += len(pods.Items)
			rec.Objects += len(pods.Items)
			for i := range pods.Items {
				cpu, mem := kube.PodRequests(&pods.Items[i])
				rec.CPUMillis += cpu
				rec.MemoryBytes += mem
			}
		})
		for _, gvk := range censusKinds {
			wg.Go(func() {
				n, err := count(ctx, c, gvk, ns)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case meta.IsNoMatchError(err):
				case err != nil:
					errs = append(errs, fmt.Errorf("count the %ss in %s: %w", gvk.Kind, ns, err))
				default:
					rec.Objects += n
				}
			})
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		return rec, errs[0]
	}
	return rec, nil
}

// count counts the objects of gvk in namespace with one metadata read of
// one item: the API server says how many remain.
func count(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, namespace string) (int, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, list, client.InNamespace(namespace), client.Limit(1)); err != nil {
		return 0, err
	}
	n := len(list.Items)
	if r := list.GetRemainingItemCount(); r != nil {
		n += int(*r)
	}
	return n, nil
}
