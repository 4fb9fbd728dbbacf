// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package v1alpha1 holds the TimeoutPolicy API of the timeout.amphitheatre.app group.
// +kubebuilder:object:generate=true
// +groupName=timeout.amphitheatre.app
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "timeout.amphitheatre.app", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = &schemeBuilder{}

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// schemeBuilder collects the types of this package as their files register
// them. It stands for controller-runtime's scheme.Builder, which is
// deprecated for API packages: importing this package costs only
// apimachinery.
type schemeBuilder struct {
	objects []runtime.Object
}

// Register adds objects to those AddToScheme registers.
func (b *schemeBuilder) Register(objects ...runtime.Object) {
	b.objects = append(b.objects, objects...)
}

// AddToScheme registers the collected types, with the meta types every
// group version needs (ListOptions, WatchEvent), in s.
func (b *schemeBuilder) AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, b.objects...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
