// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

var (
	secretKey = types.NamespacedName{Namespace: "timeout-system", Name: "timeout-controller-webhook"}
	start     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func newRotator(t *testing.T, c client.Client, clk *clocktesting.FakeClock) *Rotator {
	t.Helper()
	return &Rotator{Reader: c, Writer: c, Secret: secretKey, Webhook: "timeout-controller",
		DNSNames: []string{"timeout-controller-webhook.timeout-system.svc", "127.0.0.1"}, Clock: clk, Validity: 30 * 24 * time.Hour}
}

func newClient(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := admissionregistrationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "timeout-controller"},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{{Name: "connect.timeout.amphitheatre.app"}, {Name: "other.timeout.amphitheatre.app"}},
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(cfg).Build()
}

// state is what the API holds: the Secret and the caBundles.
func state(t *testing.T, c client.Client) (*corev1.Secret, [][]byte) {
	t.Helper()
	s := &corev1.Secret{}
	if err := c.Get(context.Background(), secretKey, s); err != nil {
		t.Fatal(err)
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: "timeout-controller"}, cfg); err != nil {
		t.Fatal(err)
	}
	var bundles [][]byte
	for _, w := range cfg.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	return s, bundles
}

// verify checks that the served certificate is the Secret's, valid at
// now for the Service's name and chained to a CA in every caBundle.
func verify(t *testing.T, r *Rotator, s *corev1.Secret, bundles [][]byte, now time.Time) *x509.Certificate {
	t.Helper()
	served, err := r.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(s.Data[corev1.TLSCertKey])
	if block == nil || !bytes.Equal(block.Bytes, served.Certificate[0]) {
		t.Fatal("the served certificate is not the Secret's")
	}
	leaf, err := x509.ParseCertificate(served.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range bundles {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			t.Fatalf("webhook %d: caBundle holds no certificate", i)
		}
		for _, name := range []string{"timeout-controller-webhook.timeout-system.svc", "127.0.0.1"} {
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name, CurrentTime: now}); err != nil {
				t.Errorf("webhook %d, name %s: %v", i, name, err)
			}
		}
	}
	return leaf
}

func TestRotate(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	clk := clocktesting.NewFakeClock(start)
	r := newRotator(t, c, clk)

	t.Run("serves nothing before the first rotation", func(t *testing.T) {
		if _, err := r.GetCertificate(&tls.ClientHelloInfo{}); err == nil {
			t.Fatal("a certificate before any was made")
		}
	})
	if err := r.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	s, bundles := state(t, c)
	first := verify(t, r, s, bundles, clk.Now())
	firstRV := s.ResourceVersion

	t.Run("writes nothing while the certificate is fresh", func(t *testing.T) {
		clk.Step(10 * 24 * time.Hour)
		if err := r.Rotate(ctx); err != nil {
			t.Fatal(err)
		}
		s, _ := state(t, c)
		if s.ResourceVersion != firstRV {
			t.Errorf("the Secret was written again: resourceVersion %s, was %s", s.ResourceVersion, firstRV)
		}
	})

	t.Run("replaces a certificate within a third of its validity of expiry, under the same CA", func(t *testing.T) {
		clk.Step(11 * 24 * time.Hour) // 21 days of 30: 9 days left
		if err := r.Rotate(ctx); err != nil {
			t.Fatal(err)
		}
		s, b := state(t, c)
		second := verify(t, r, s, b, clk.Now())
		if second.SerialNumber.Cmp(first.SerialNumber) == 0 {
			t.Fatal("the expiring certificate was not replaced")
		}
		if !bytes.Equal(b[0], bundles[0]) {
			t.Error("the caBundle changed although the CA did not")
		}
		// Past the first one's expiry, the second still verifies.
		verify(t, r, s, b, first.NotAfter.Add(time.Hour))
	})

	t.Run("replaces an expiring CA, and the caBundle follows, trusting the old CA until it expires", func(t *testing.T) {
		s, _ := state(t, c)
		oldCA, err := parseCert(s.Data[CAKey])
		if err != nil {
			t.Fatal(err)
		}
		clk.SetTime(oldCA.NotAfter.Add(-24 * time.Hour))
		if err := r.Rotate(ctx); err != nil {
			t.Fatal(err)
		}
		s, b := state(t, c)
		verify(t, r, s, b, clk.Now())
		newCA, err := parseCert(s.Data[CAKey])
		if err != nil {
			t.Fatal(err)
		}
		if newCA.SerialNumber.Cmp(oldCA.SerialNumber) == 0 {
			t.Fatal("the expiring CA was not replaced")
		}
		if !bytes.Contains(b[0], pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: oldCA.Raw})) {
			t.Error("the caBundle no longer trusts the old CA, which has not expired")
		}
		if !bytes.Equal(b[0], b[1]) {
			t.Error("the two webhooks have different caBundles")
		}
	})

	t.Run("a second replica serves what the first wrote", func(t *testing.T) {
		other := newRotator(t, c, clk)
		before, _ := state(t, c)
		if err := other.Rotate(ctx); err != nil {
			t.Fatal(err)
		}
		s, b := state(t, c)
		if s.ResourceVersion != before.ResourceVersion {
			t.Error("the second replica wrote a certificate that was fresh")
		}
		verify(t, other, s, b, clk.Now())
	})

	t.Run("replaces a broken Secret", func(t *testing.T) {
		s, _ := state(t, c)
		s.Data[corev1.TLSPrivateKeyKey] = []byte("not a key")
		if err := c.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := r.Rotate(ctx); err != nil {
			t.Fatal(err)
		}
		s, b := state(t, c)
		verify(t, r, s, b, clk.Now())
	})

	t.Run("replaces a certificate for other names", func(t *testing.T) {
		r.DNSNames = []string{"renamed.timeout-system.svc"}
		if err := r.Rotate(ctx); err != nil {
			t.Fatal(err)
		}
		s, _ := state(t, c)
		leaf, err := parseCert(s.Data[corev1.TLSCertKey])
		if err != nil {
			t.Fatal(err)
		}
		if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "renamed.timeout-system.svc" || len(leaf.IPAddresses) != 0 {
			t.Errorf("names %v %v, want renamed.timeout-system.svc only", leaf.DNSNames, leaf.IPAddresses)
		}
	})
}

func TestRotateWithoutAWebhookConfigurationStillServes(t *testing.T) {
	c := newClient(t)
	if err := c.Delete(context.Background(), &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "timeout-controller"}}); err != nil {
		t.Fatal(err)
	}
	r := newRotator(t, c, clocktesting.NewFakeClock(start))
	if err := r.Rotate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetCertificate(&tls.ClientHelloInfo{}); err != nil {
		t.Error(err)
	}
}
