// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OwnerIndex indexes cached namespaces by the UIDs of their owners, so that
// the namespaces a deleted object owns (a Playbook's amp-<id>) are found
// without listing every namespace.
const OwnerIndex = "timeout.amphitheatre.app/owner-uid"

// NamespaceKind is the kind namespaces are cached as: metadata only.
var NamespaceKind = corev1.SchemeGroupVersion.WithKind("Namespace")

// OwnedNamespaces returns the names of the cached namespaces that uid
// owns, sorted.
func OwnedNamespaces(ctx context.Context, c client.Reader, uid types.UID) ([]string, error) {
	list := NewMetadataList(NamespaceKind)
	if err := c.List(ctx, list, client.MatchingFields{OwnerIndex: string(uid)}); err != nil {
		return nil, fmt.Errorf("list the namespaces %s owns: %w", uid, err)
	}
	names := make([]string, 0, len(list.Items))
	for _, ns := range list.Items {
		names = append(names, ns.Name)
	}
	slices.Sort(names)
	return names, nil
}

// IndexOwners is the ownerIndex's function.
func IndexOwners(o client.Object) []string {
	refs := o.GetOwnerReferences()
	uids := make([]string, 0, len(refs))
	for _, ref := range refs {
		uids = append(uids, string(ref.UID))
	}
	return uids
}

// PodRequests returns a Pod's CPU (millicores) and memory (bytes)
// requests: the sum of its containers', or its largest init container's
// when that is larger, plus its overhead.
func PodRequests(p *corev1.Pod) (cpuMillis, memBytes int64) {
	sum := func(cs []corev1.Container) (cpu, mem int64) {
		for _, c := range cs {
			cpu += c.Resources.Requests.Cpu().MilliValue()
			mem += c.Resources.Requests.Memory().Value()
		}
		return cpu, mem
	}
	cpuMillis, memBytes = sum(p.Spec.Containers)
	for _, c := range p.Spec.InitContainers {
		cpuMillis = max(cpuMillis, c.Resources.Requests.Cpu().MilliValue())
		memBytes = max(memBytes, c.Resources.Requests.Memory().Value())
	}
	if q, ok := p.Spec.Overhead[corev1.ResourceCPU]; ok {
		cpuMillis += q.MilliValue()
	}
	if q, ok := p.Spec.Overhead[corev1.ResourceMemory]; ok {
		memBytes += q.Value()
	}
	return cpuMillis, memBytes
}
