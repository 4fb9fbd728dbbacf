// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// privateCA makes a CA and a certificate it signs for 127.0.0.1: the CA's
// PEM, and a server configuration with the certificate.
func privateCA(t *testing.T) ([]byte, *tls.Config) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test private CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), &tls.Config{Certificates: []tls.Certificate{cert}}
}

// SMTP relays and receivers inside companies use private CAs: a channel
// trusts its own CA bundle, and without it the same server is refused.
func TestChannelsTrustTheirOwnPrivateCA(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	caPEM, serverTLS := privateCA(t)
	mb := fixture.NewMailbox(t, serverTLS)
	rc := startReceiverTLS(t, []byte("whsec-private-ca-1b7d"), serverTLS)
	host, port := mb.Host, mb.Port

	_ = k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secretNamespace}})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: "private-ca"}, Data: map[string]string{"ca.crt": string(caPEM)}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: "private-ca"}, Data: map[string][]byte{"ca.crt": caPEM}}
	for _, o := range []client.Object{cm, sec} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
	}
	hookKey := webhookSecret(t, "private-ca-hook", rc.key)
	mail := func(tlsSpec *v1alpha1.ChannelTLS) v1alpha1.NotificationChannelSpec {
		return v1alpha1.NotificationChannelSpec{Email: &v1alpha1.EmailChannel{Host: host, Port: port, Security: "TLS", From: "timeout@example.com"}, TLS: tlsSpec}
	}
	hook := func(tlsSpec *v1alpha1.ChannelTLS) v1alpha1.NotificationChannelSpec {
		return v1alpha1.NotificationChannelSpec{Webhook: &v1alpha1.WebhookChannel{URL: rc.url, SecretRef: hookKey}, TLS: tlsSpec}
	}
	fromConfigMap := &v1alpha1.ChannelTLS{CABundle: &v1alpha1.CABundleSource{ConfigMapRef: &v1alpha1.KeySelector{Namespace: secretNamespace, Name: "private-ca", Key: "ca.crt"}}}
	fromSecret := &v1alpha1.ChannelTLS{CABundle: &v1alpha1.CABundleSource{SecretRef: &v1alpha1.SecretKeySelector{Namespace: secretNamespace, Name: "private-ca", Key: "ca.crt"}}}
	createChannel(t, "pca-mail", mail(fromConfigMap))
	createChannel(t, "pca-hook", hook(fromSecret))
	createChannel(t, "pca-mail-no-ca", mail(nil))
	createChannel(t, "pca-hook-no-ca", hook(nil))

	policy := func(test string, channels ...string) {
		spec := playbookPolicy(test, "1h")
		spec.Reminders = []v1alpha1.Duration{"2s"}
		spec.MinimumNotice = "0s"
		for _, c := range channels {
			ref := v1alpha1.ChannelReference{Name: c}
			if c == "pca-mail" || c == "pca-mail-no-ca" {
				ref.To = []string{"ops@example.com"}
			}
			spec.Notifications.Channels = append(spec.Notifications.Channels, ref)
		}
		createPolicy(t, test, spec)
	}
	policy("pca-trusted", "pca-mail", "pca-hook")
	policy("pca-untrusted", "pca-mail-no-ca", "pca-hook-no-ca")

	trusted := create(t, playbooks, newPlaybook("pca-trusted", "trusted", map[string]string{expiry.AnnotationTTL: "4s"}))
	untrusted := create(t, playbooks, newPlaybook("pca-untrusted", "untrusted", map[string]string{expiry.AnnotationTTL: "4s"}))

	t.Run("delivers with the CA bundle", func(t *testing.T) {
		rc.expectEvents(t, trusted.GetName(), "reminder", 1, 10*time.Second)
		fixture.Eventually(t, 10*time.Second, "the reminder in the mailbox", func() (bool, error) {
			return len(mb.WithHeader("X-Timeout-Object", trusted.GetName())) == 1, nil
		})
	})
	t.Run("refuses the same servers without it", func(t *testing.T) {
		failed := findEvent(t, eventNamespace, untrusted.GetName(), "MessageFailed")
		mustContain(t, failed.Note, "via pca-mail-no-ca", "via pca-hook-no-ca", "certificate signed by unknown authority")
		if n := len(mb.WithHeader("X-Timeout-Object", untrusted.GetName())) + len(rc.events(untrusted.GetName(), "reminder")); n != 0 {
			t.Errorf("%d reminders reached servers the channel does not trust", n)
		}
	})
}

// A channel tells its administrator whether it can be used, and says so
// loudly when it does not verify its server.
func TestAChannelReportsWhetherItIsUsableAndVerified(t *testing.T) {
	t.Parallel()
	key := webhookSecret(t, "status-hook", []byte("whsec-status-4e1a"))
	hook := func(tlsSpec *v1alpha1.ChannelTLS, ref v1alpha1.SecretKeySelector) v1alpha1.NotificationChannelSpec {
		return v1alpha1.NotificationChannelSpec{Webhook: &v1alpha1.WebhookChannel{URL: "https://hooks.example.com/in", SecretRef: ref}, TLS: tlsSpec}
	}
	missing := key
	missing.Name = "status-nowhere"
	for _, tc := range []struct {
		name            string
		spec            v1alpha1.NotificationChannelSpec
		ready, insecure metav1.ConditionStatus
		readyReason     string
		message         string
	}{
		{name: "status-verified", spec: hook(nil, key), ready: metav1.ConditionTrue, insecure: metav1.ConditionFalse, readyReason: v1alpha1.ReasonChannelReady},
		{name: "status-insecure", spec: hook(&v1alpha1.ChannelTLS{InsecureSkipVerify: true}, key), ready: metav1.ConditionTrue, insecure: metav1.ConditionTrue,
			readyReason: v1alpha1.ReasonChannelReady, message: "not verified"},
		{name: "status-no-secret", spec: hook(nil, missing), ready: metav1.ConditionFalse, insecure: metav1.ConditionFalse,
			readyReason: v1alpha1.ReasonChannelInvalid, message: "status-nowhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			createChannel(t, tc.name, tc.spec)
			var got *v1alpha1.NotificationChannel
			fixture.Eventually(t, 10*time.Second, "channel status", func() (bool, error) {
				got = &v1alpha1.NotificationChannel{}
				if err := k8s.Get(context.Background(), client.ObjectKey{Name: tc.name}, got); err != nil {
					return false, err
				}
				r := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
				i := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionInsecure)
				return r != nil && i != nil && r.Status == tc.ready && r.Reason == tc.readyReason && i.Status == tc.insecure, nil
			})
			all := fmt.Sprintf("%+v", got.Status.Conditions)
			mustContain(t, all, tc.message)
		})
	}
}
