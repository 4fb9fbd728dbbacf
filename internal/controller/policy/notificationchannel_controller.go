// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/channelset"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// +kubebuilder:rbac:groups=timeout.amphitheatre.app,resources=notificationchannels,verbs=get;list;watch
// +kubebuilder:rbac:groups=timeout.amphitheatre.app,resources=notificationchannels/status,verbs=get;patch;update
//
// In its own namespace only (test/install checks that this is enough):
// the Secrets and the ConfigMaps of CA bundles that channels name, which
// --secret-namespace confines to that namespace.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get,namespace=timeout-system
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get,namespace=timeout-system

// ChannelReconciler tells a NotificationChannel's administrator whether the
// channel can be used: its Secrets and CA bundle read, and whether it
// verifies its server.
type ChannelReconciler struct {
	Client  client.Client
	Secrets notify.Secrets
}

// SetupWithManager adds the channel controller to mgr.
func (r *ChannelReconciler) SetupWithManager(mgr manager.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("channel").
		For(&v1alpha1.NotificationChannel{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// Reconcile brings one channel's status up to date.
func (r *ChannelReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ch := &v1alpha1.NotificationChannel{}
	if err := r.Client.Get(ctx, req.NamespacedName, ch); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := ch.DeepCopy()
	ch.Status.ObservedGeneration = ch.Generation
	set := func(t string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&ch.Status.Conditions, metav1.Condition{
			Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: ch.Generation,
		})
	}
	if ch.Spec.TLS != nil && ch.Spec.TLS.InsecureSkipVerify {
		set(v1alpha1.ConditionInsecure, metav1.ConditionTrue, v1alpha1.ReasonInsecureSkipVerify,
			"tls.insecureSkipVerify is set: the server's certificate is not verified, so anyone on the path can read what is sent, credentials included")
	} else {
		set(v1alpha1.ConditionInsecure, metav1.ConditionFalse, v1alpha1.ReasonVerified, "The server's certificate is verified")
	}
	var result ctrl.Result
	_, err := buildChannel(ctx, ch, r.Secrets)
	if err != nil {
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonChannelInvalid, err.Error())
		// Secrets and ConfigMaps are not watched: look again for a fix.
		result.RequeueAfter = channelset.ChannelsTTL
	} else {
		set(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChannelReady, "Secrets and CA bundle read")
	}
	if equality.Semantic.DeepEqual(orig.Status, ch.Status) {
		return result, nil
	}
	if err := r.Client.Status().Patch(ctx, ch, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("patch status of NotificationChannel %s: %w", ch.Name, err)
	}
	return result, nil
}

// buildChannel builds ch's notifier as a policy that takes every event
// and adds no recipients would use it.
func buildChannel(ctx context.Context, ch *v1alpha1.NotificationChannel, secrets notify.Secrets) (notify.Notifier, error) {
	tc, err := channelset.ChannelTLS(ctx, ch, secrets)
	if err != nil {
		return nil, err
	}
	ns, err := channelset.ChannelKinds.Build(ctx, []notify.Channel{{Name: ch.Name, Spec: ch.Spec, TLS: tc}}, secrets)
	if err != nil {
		return nil, err
	}
	return ns[0], nil
}
