// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package usage

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/decide"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
)

// resolve finds the governed object a connection to pod is use of: the
// first object a TimeoutPolicy governs among the Pod and its controller
// owners (Pod, ReplicaSet, Deployment, ...), then the Pod's namespace and
// its owners (Amphitheatre's namespace amp-<id> and its Playbook). Each
// chain is followed at most maxOwnerDepth owners up; an owner the
// controller may not read, or that is gone, ends its chain. It returns
// no object (an empty UID) when none is governed; else the object as it
// read it too, which a write can start from.
func (c *Connections) resolve(ctx context.Context, pod types.NamespacedName) (governedObject, *metav1.PartialObjectMetadata, error) {
	var policies v1alpha1.TimeoutPolicyList
	if err := c.Policies.List(ctx, &policies, client.UnsafeDisableDeepCopy); err != nil {
		return governedObject{}, nil, fmt.Errorf("list policies: %w", err)
	}
	if len(policies.Items) == 0 {
		return governedObject{}, nil, nil
	}
	nsLabels := sync.OnceValues(func() (map[string]string, error) {
		return kube.NamespaceLabels(ctx, c.Reader, pod.Namespace)
	})
	starts := []struct {
		gvk schema.GroupVersionKind
		key types.NamespacedName
	}{
		{corev1.SchemeGroupVersion.WithKind("Pod"), pod},
		{kube.NamespaceKind, types.NamespacedName{Name: pod.Namespace}},
	}
	for _, s := range starts {
		g, obj, err := c.governedOwner(ctx, policies.Items, s.gvk, s.key, nsLabels)
		if err != nil || obj != nil {
			return g, obj, err
		}
	}
	return governedObject{}, nil, nil
}

// governedOwner follows the chain from the object key of kind gvk through
// its controller owners (or, for an object with owners but no controller,
// its first owner) and returns the first one governed, and that object as
// read; none (nil) when no object of the chain is governed.
func (c *Connections) governedOwner(ctx context.Context, policies []v1alpha1.TimeoutPolicy, gvk schema.GroupVersionKind, key types.NamespacedName,
	nsLabels func() (map[string]string, error)) (governedObject, *metav1.PartialObjectMetadata, error) {
	for range maxOwnerDepth + 1 {
		obj := kube.NewMetadata(gvk)
		if err := c.Reader.Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
				logf.FromContext(ctx).V(1).Info("owner chain ends", "kind", gvk.Kind, "object", key, "reason", apierrors.ReasonForError(err))
				return governedObject{}, nil, nil
			}
			return governedObject{}, nil, fmt.Errorf("get %s %s: %w", gvk.Kind, key, err)
		}
		labels := nsLabels
		if obj.Namespace == "" {
			labels = nil
		}
		cand, err := decide.Governing(policies, gvk, match.Object{Labels: obj.Labels, Namespaced: obj.Namespace != "", NamespaceLabels: labels})
		if err != nil {
			return governedObject{}, nil, err
		}
		if cand != nil {
			g := governedObject{gvk: gvk, key: key, uid: obj.UID, policy: cand.Name}
			if cand.SpecErr == nil {
				g.window = cand.Schedule.ActivityWindow()
			}
			return g, obj, nil
		}
		owner := ownerOf(obj)
		if owner == nil {
			break
		}
		gv, err := schema.ParseGroupVersion(owner.APIVersion)
		if err != nil {
			break
		}
		// An owner is in its dependent's namespace, or cluster-scoped: the
		// client drops the namespace of a cluster-scoped kind.
		gvk, key = gv.WithKind(owner.Kind), types.NamespacedName{Namespace: obj.Namespace, Name: owner.Name}
	}
	return governedObject{}, nil, nil
}

// ownerOf is obj's controller owner, or its first owner when none
// controls it.
func ownerOf(obj metav1.Object) *metav1.OwnerReference {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return ref
	}
	if refs := obj.GetOwnerReferences(); len(refs) > 0 {
		return &refs[0]
	}
	return nil
}
