// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// sleepingLabel selects the Playbooks of the sleeping policy
// (-sleeping-policy): none carries it.
const sleepingLabel = "bench.timeout.amphitheatre.app/sleeps"

// othersPerNamespace is how many of the -other-deployments share a
// namespace.
const othersPerNamespace = 100

// createSleepingPolicy creates a policy that puts the Playbooks labelled
// sleepingLabel to sleep: none is, but the controller then watches the
// workloads a sleep scaled down, as in a cluster whose Playbooks sleep.
func (cl *cluster) createSleepingPolicy(ctx context.Context) error {
	policy := &v1alpha1.TimeoutPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-sleeping", Annotations: benchAuthor},
		Spec: v1alpha1.TimeoutPolicySpec{
			Target:     v1alpha1.Target{APIVersion: "amphitheatre.app/v1", Kind: "Playbook"},
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{sleepingLabel: "true"}},
			DefaultTTL: "14d",
			Reminders:  []v1alpha1.Duration{},
			Sleep:      &v1alpha1.Sleep{AfterIdle: "3h", DeleteAfter: "14d"},
		},
	}
	if err := cl.client.Create(ctx, policy); err != nil {
		return fmt.Errorf("create the sleeping TimeoutPolicy: %w", err)
	}
	return nil
}

// createOtherDeployments creates n Deployments of no Playbook, at 0
// replicas (kube-controller-manager makes a ReplicaSet of each, and no
// Pod), othersPerNamespace to a namespace of their own.
func (cl *cluster) createOtherDeployments(ctx context.Context, n, creators int) error {
	for k := 0; k*othersPerNamespace < n; k++ {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("others-%d", k)}}
		if err := cl.client.Create(ctx, ns); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns.Name, err)
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	labels := map[string]string{"app": "other"}
	for range creators {
		wg.Go(func() {
			for i := range next {
				d := &appsv1.Deployment{
					ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("others-%d", i/othersPerNamespace), Name: fmt.Sprintf("other-%d", i)},
					Spec: appsv1.DeploymentSpec{
						Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
						Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
							Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}},
					},
				}
				var err error
				for attempt := range 5 {
					if err = cl.client.Create(ctx, d); err == nil || !apierrors.IsTooManyRequests(err) && !apierrors.IsServerTimeout(err) && !apierrors.IsTimeout(err) {
						break
					}
					d.ResourceVersion = ""
					time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
				}
				if err != nil {
					cancel(fmt.Errorf("create Deployment %d: %w", i, err))
					return
				}
			}
		})
	}
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}
