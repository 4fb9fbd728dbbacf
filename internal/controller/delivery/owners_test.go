// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

func TestOwnersReadTheMappingAndKeepItThroughAFailedRead(t *testing.T) {
	ctx := context.Background()
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC))
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "timeout-system", Name: "owners"},
		Data:       map[string]string{notify.OwnerAddressesKey: `"oidc:bob": bob@example.com`},
	}
	var failing atomic.Bool
	var reads atomic.Int32
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(fixture.Scheme(t)).WithObjects(cm).Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			reads.Add(1)
			if failing.Load() {
				return errors.New("the API server is away")
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	o := &Owners{Reader: c, Namespace: "timeout-system", Name: "owners", Clock: clock}
	address := func(owner string) (string, error) { return o.Address(ctx, owner, nil) }

	if got, err := address("oidc:bob"); err != nil || got != "bob@example.com" {
		t.Fatalf("oidc:bob = %q, %v; want the mapped address", got, err)
	}
	// An edit is seen once the mapping is a minute old, not before.
	cm.Data[notify.OwnerAddressesKey] = `"oidc:bob": robert@example.com`
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	reads.Store(0)
	clock.SetTime(clock.Now().Add(ownersTTL - time.Second))
	if got, _ := address("oidc:bob"); got != "bob@example.com" || reads.Load() != 0 {
		t.Fatalf("oidc:bob = %q after %d reads within the minute; want the mapping read before, not read again", got, reads.Load())
	}
	clock.SetTime(clock.Now().Add(time.Second))
	if got, _ := address("oidc:bob"); got != "robert@example.com" {
		t.Fatalf("oidc:bob = %q a minute after the edit, want robert@example.com", got)
	}
	// A failed read keeps what was read last.
	failing.Store(true)
	clock.SetTime(clock.Now().Add(ownersTTL))
	if got, err := address("oidc:bob"); err != nil || got != "robert@example.com" {
		t.Fatalf("oidc:bob = %q, %v while the API server fails; want the mapping read before", got, err)
	}
	// A mapping that is gone maps nobody, and says where it was looked for.
	failing.Store(false)
	if err := c.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	clock.SetTime(clock.Now().Add(ownersTTL))
	_, err := address("oidc:bob")
	if err == nil || !strings.Contains(err.Error(), "the owner addresses ConfigMap timeout-system/owners do not exist") {
		t.Fatalf("oidc:bob with the ConfigMap gone: %v, want an error naming it", err)
	}
	// An owner whose username is an address needs no mapping.
	if got, err := address("alice@example.com"); err != nil || got != "alice@example.com" {
		t.Fatalf("alice@example.com = %q, %v with the ConfigMap gone", got, err)
	}
}

func TestOwnersWithoutAMappingMailAddressesOnly(t *testing.T) {
	var o *Owners
	if got, err := o.Address(context.Background(), "alice@example.com", nil); err != nil || got != "alice@example.com" {
		t.Errorf("alice@example.com = %q, %v", got, err)
	}
	if _, err := (&Owners{}).Address(context.Background(), "oidc:bob", nil); err == nil || !strings.Contains(err.Error(), "the owner addresses do not map it") {
		t.Errorf("oidc:bob without a mapping: %v", err)
	}
}

func TestOwnersReportAMappingThatDoesNotParse(t *testing.T) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "timeout-system", Name: "owners"},
		Data:       map[string]string{notify.OwnerAddressesKey: "- alice@example.com"},
	}
	o := &Owners{Reader: fake.NewClientBuilder().WithScheme(fixture.Scheme(t)).WithObjects(cm).Build(),
		Namespace: "timeout-system", Name: "owners", Clock: clocktesting.NewFakePassiveClock(time.Now())}
	_, err := o.Address(context.Background(), "oidc:bob", nil)
	if err == nil || !strings.Contains(err.Error(), "the owner addresses ConfigMap timeout-system/owners, key addresses: expected a YAML map") {
		t.Fatalf("oidc:bob under a list: %v, want an error naming the ConfigMap and what is expected", err)
	}
}
