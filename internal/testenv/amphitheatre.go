// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Finalizer is the finalizer Amphitheatre's controller puts on every
// Playbook; it removes it once it has cleaned up (a NATS stream).
const Finalizer = "playbooks.amphitheatre.app/finalizer"

// Playbooks is the Playbook resource; PlaybookKind and ActorKind their kinds.
var (
	Playbooks    = schema.GroupVersionResource{Group: "amphitheatre.app", Version: "v1", Resource: "playbooks"}
	PlaybookKind = schema.GroupVersionKind{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook"}
	ActorKind    = schema.GroupVersionKind{Group: "amphitheatre.app", Version: "v1", Kind: "Actor"}
)

// Actor is one character of a Playbook and the workload Amphitheatre
// deploys for it.
type Actor struct {
	Name     string
	Replicas int32
	// CPU and Memory are each container's requests ("250m", "256Mi").
	CPU, Memory string
}

// DefaultActors are what a small web application's Playbook runs: an app
// and its database.
var DefaultActors = []Actor{
	{Name: "web", Replicas: 2, CPU: "250m", Memory: "256Mi"},
	{Name: "db", Replicas: 1, CPU: "500m", Memory: "512Mi"},
}

// Namespace is the namespace Amphitheatre runs a Playbook's actors in.
func Namespace(id string) string { return "amp-" + id }

// NewPlaybook returns a Playbook as the Amphitheatre API server creates
// it, with the finalizer its controller adds, and with annotations (nil
// for none, as Amphitheatre creates them).
func NewPlaybook(id, title string, annotations map[string]string) *unstructured.Unstructured {
	pb := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"id":    id,
			"title": title,
			"preface": map[string]any{
				"repository": map[string]any{"repo": "https://github.com/amphitheatre-app/amp-example-go"},
			},
		},
	}}
	pb.SetGroupVersionKind(PlaybookKind)
	pb.SetName(id)
	pb.SetAnnotations(annotations)
	pb.SetFinalizers([]string{Finalizer})
	return pb
}

// Deploy creates pb and what Amphitheatre's controller creates for it:
// the namespace amp-<id> and one Actor per actor, both owned by the
// Playbook, and for each Actor a Deployment and a Service owned by the
// Actor. Garbage collection of the Playbook removes it all. pb is updated
// with what the API server returned.
func Deploy(ctx context.Context, c client.Client, pb *unstructured.Unstructured, actors []Actor) error {
	if err := c.Create(ctx, pb); err != nil {
		return fmt.Errorf("create playbook %s: %w", pb.GetName(), err)
	}
	owner := metav1.OwnerReference{
		APIVersion: PlaybookKind.GroupVersion().String(), Kind: PlaybookKind.Kind,
		Name: pb.GetName(), UID: pb.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
	ns := Namespace(pb.GetName())
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, OwnerReferences: []metav1.OwnerReference{owner},
		Labels: map[string]string{"app.kubernetes.io/managed-by": "amphitheatre"},
	}}); err != nil {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	for _, a := range actors {
		if err := deployActor(ctx, c, ns, owner, a); err != nil {
			return err
		}
	}
	return nil
}

func deployActor(ctx context.Context, c client.Client, ns string, owner metav1.OwnerReference, a Actor) error {
	actor := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"name": a.Name, "image": "registry.k8s.io/pause:3.10", "live": false, "once": false,
			"character": map[string]any{
				"meta": map[string]any{"name": a.Name, "repository": "https://github.com/amphitheatre-app/amp-example-go"},
				"live": false, "once": false,
			},
		},
	}}
	actor.SetGroupVersionKind(ActorKind)
	actor.SetNamespace(ns)
	actor.SetName(a.Name)
	actor.SetOwnerReferences([]metav1.OwnerReference{owner})
	if err := c.Create(ctx, actor); err != nil {
		return fmt.Errorf("create actor %s/%s: %w", ns, a.Name, err)
	}
	byActor := []metav1.OwnerReference{{
		APIVersion: ActorKind.GroupVersion().String(), Kind: ActorKind.Kind,
		Name: a.Name, UID: actor.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	labels := map[string]string{"app.kubernetes.io/name": a.Name, "app.kubernetes.io/managed-by": "amphitheatre"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: a.Name, Labels: labels, OwnerReferences: byActor},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(a.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: a.Name, Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse(a.CPU),
						corev1.ResourceMemory: resource.MustParse(a.Memory),
					}},
				}}},
			},
		},
	}
	if err := c.Create(ctx, deploy); err != nil {
		return fmt.Errorf("create deployment %s/%s: %w", ns, a.Name, err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: a.Name, Labels: labels, OwnerReferences: byActor},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if err := c.Create(ctx, svc); err != nil {
		return fmt.Errorf("create service %s/%s: %w", ns, a.Name, err)
	}
	return nil
}

// RunFinalizer does what Amphitheatre's controller does when a Playbook is
// deleted: it removes its finalizer, and leaves any other. It runs until
// ctx ends; the returned function waits for it to have stopped.
func RunFinalizer(ctx context.Context, cfg *rest.Config) (wait func(), err error) {
	// A controller of its own, not held back by client-go's default limit
	// of 5 requests a second: a burst of deletions would wait on it.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	informer := metadatainformer.NewFilteredMetadataInformer(mc, Playbooks, "", 0, cache.Indexers{}, nil).Informer()
	release := func(obj any) {
		pb, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok || pb.DeletionTimestamp == nil || !slices.Contains(pb.Finalizers, Finalizer) {
			return
		}
		go removeFinalizer(ctx, mc, pb)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    release,
		UpdateFunc: func(_, obj any) { release(obj) },
	}); err != nil {
		return nil, err
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		informer.Run(ctx.Done())
	}()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return nil, fmt.Errorf("the Playbook informer did not sync")
	}
	return func() { <-stopped }, nil
}

// removeFinalizer takes Amphitheatre's finalizer off pb, on the condition
// that the finalizers are still the ones it read; a conflict is followed
// by the update that caused it, which brings another try.
func removeFinalizer(ctx context.Context, mc metadata.Interface, pb *metav1.PartialObjectMetadata) {
	others := slices.DeleteFunc(slices.Clone(pb.Finalizers), func(f string) bool { return f == Finalizer })
	patch, _ := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/finalizers", "value": pb.Finalizers},
		{"op": "replace", "path": "/metadata/finalizers", "value": others},
	})
	for attempt := 0; attempt < 5 && ctx.Err() == nil; attempt++ {
		_, err := mc.Resource(Playbooks).Patch(ctx, pb.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
			return
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
}
