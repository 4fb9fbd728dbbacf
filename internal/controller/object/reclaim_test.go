// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package object

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

func TestPodRequestsCountWhatTheSchedulerReserves(t *testing.T) {
	req := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	tests := []struct {
		name     string
		spec     corev1.PodSpec
		cpu, mem int64
	}{
		{"adds up the containers", corev1.PodSpec{Containers: []corev1.Container{{Resources: req("250m", "256Mi")}, {Resources: req("500m", "1Gi")}}}, 750, 1280 << 20},
		{"takes an init container that asks for more", corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: req("2", "64Mi")}},
			Containers:     []corev1.Container{{Resources: req("250m", "256Mi")}}}, 2000, 256 << 20},
		{"adds the overhead", corev1.PodSpec{
			Overhead:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Containers: []corev1.Container{{Resources: req("250m", "256Mi")}}}, 350, 288 << 20},
		{"counts nothing for a container without requests", corev1.PodSpec{Containers: []corev1.Container{{}}}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cpu, mem := kube.PodRequests(&corev1.Pod{Spec: tt.spec})
			if cpu != tt.cpu || mem != tt.mem {
				t.Errorf("requests %dm, %d B; want %dm, %d B", cpu, mem, tt.cpu, tt.mem)
			}
		})
	}
}

func TestCensusCountsWhatTheNamespacesHoldAndSkipsKindsNotServed(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range []schema.GroupVersionKind{
		corev1.SchemeGroupVersion.WithKind("Pod"), corev1.SchemeGroupVersion.WithKind("Service"),
		corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"),
		appsv1.SchemeGroupVersion.WithKind("Deployment"), appsv1.SchemeGroupVersion.WithKind("StatefulSet"),
		appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), {Group: "batch", Version: "v1", Kind: "Job"},
		// No Actor: Amphitheatre is not installed.
	} {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	pod := func(ns, name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")}},
		}}}}
	}
	c := fake.NewClientBuilder().WithScheme(fixture.Scheme(t)).WithRESTMapper(mapper).WithObjects(
		pod("amp-a", "web-1"), pod("amp-a", "web-2"), pod("amp-b", "db-0"), pod("elsewhere", "other"),
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "amp-a", Name: "web"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "amp-a", Name: "web"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "amp-b", Name: "db"}},
	).Build()

	got, err := census(context.Background(), c, []string{"amp-a", "amp-b"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Pods != 3 || got.Objects != 6 || got.CPUMillis != 750 || got.MemoryBytes != 768<<20 || len(got.Namespaces) != 2 {
		t.Errorf("census %+v; want 3 Pods, 6 objects, 750m CPU, 768Mi, 2 namespaces", got)
	}
	if rec, err := census(context.Background(), c, nil); rec != nil || err != nil {
		t.Errorf("census of no namespace = %+v, %v; want nothing", rec, err)
	}
}

func TestADeleteThatLeavesTheObjectInTerminatingIsAcceptedNotFailed(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook"}
	tests := []struct {
		name        string
		deleteErr   error
		finalizers  []string
		propagation metav1.DeletionPropagation
		wantRemains bool
		wantErr     bool
	}{
		// What controller-runtime's client says when the API server answers
		// with the object itself, for a kind its scheme does not know.
		{name: "the answer is the object, which the client cannot decode", deleteErr: runtime.NewNotRegisteredErrForKind("scheme", gvk), wantRemains: true},
		{name: "the object has finalizers", finalizers: []string{"playbooks.amphitheatre.app/finalizer"}, wantRemains: true},
		{name: "the deletion is in the foreground", propagation: metav1.DeletePropagationForeground, wantRemains: true},
		{name: "the object is gone at once"},
		{name: "the API server refuses", deleteErr: errors.New("boom"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(fixture.Scheme(t)).Build(), interceptor.Funcs{
				Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
					return tt.deleteErr
				},
			})
			r := &Reconciler{Client: c}
			obj := kube.NewMetadata(gvk)
			obj.Name, obj.UID, obj.ResourceVersion, obj.Finalizers = "pb", "uid", "1", tt.finalizers
			propagation := tt.propagation
			if propagation == "" {
				propagation = metav1.DeletePropagationBackground
			}
			remains, err := r.delete(context.Background(), obj, propagation)
			if remains != tt.wantRemains || (err != nil) != tt.wantErr {
				t.Errorf("remains %t, err %v; want remains %t, error %t", remains, err, tt.wantRemains, tt.wantErr)
			}
		})
	}
}
