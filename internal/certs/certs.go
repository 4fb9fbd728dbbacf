// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package certs keeps the admission webhook's serving certificate when no
// cert-manager does: a self-signed CA and a serving certificate it signs,
// in a Secret in the controller's namespace, and the CA in the
// ValidatingWebhookConfiguration's caBundle.
package certs

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Keys of the Secret, beside corev1.TLSCertKey and corev1.TLSPrivateKeyKey.
const (
	// CAKey is the CA certificates the webhook's callers trust: the
	// current one, and the one before it until it expires, so that a
	// caller with the old caBundle still trusts a replica serving the new
	// certificate.
	CAKey = "ca.crt"
	// CAPrivateKey signs the serving certificates.
	CAPrivateKey = "ca.key"
)

// Defaults of a Rotator.
const (
	DefaultValidity = 365 * 24 * time.Hour
	DefaultInterval = time.Hour
	// caLifetimes is how many serving certificates' validity the CA
	// lives: it is replaced ten times less often.
	caLifetimes = 10
)

// The caBundle of the controller's own webhook configuration, by name;
// the Secret is in the controller's namespace, whose Role allows Secrets
// already (the outbox and the archive).
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;update,resourceNames=timeout-controller

// Rotator keeps the serving certificate. Every replica runs one: each
// reads the Secret, and the one whose resourceVersion-locked write wins
// replaces a certificate before it expires; the others read what it
// wrote.
type Rotator struct {
	// Reader reads the Secret and the webhook configuration from the API
	// server (uncached); Writer writes them.
	Reader client.Reader
	Writer client.Writer
	// Secret is the Secret the certificates are kept in; Webhook the
	// ValidatingWebhookConfiguration whose caBundle is kept.
	Secret  types.NamespacedName
	Webhook string
	// DNSNames the serving certificate is for (the Service's names); an
	// IP address is put in its IP addresses.
	DNSNames []string
	Clock    clock.PassiveClock
	// Validity of the serving certificate (DefaultValidity when 0); it is
	// replaced a third of it before it expires.
	Validity time.Duration
	// Interval between checks (DefaultInterval when 0).
	Interval time.Duration

	current atomic.Pointer[tls.Certificate]
}

// GetCertificate is the tls.Config callback: the serving certificate
// last read, or an error before the first one.
func (r *Rotator) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := r.current.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("no serving certificate yet")
}

// NeedLeaderElection is false: every replica serves the webhook.
func (r *Rotator) NeedLeaderElection() bool { return false }

// Start checks the certificate at once and every Interval until ctx is
// done.
func (r *Rotator) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithValues("secret", r.Secret, "webhook", r.Webhook)
	interval := r.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	for {
		// A failed check is tried again sooner than a good one.
		wait := interval
		if err := r.Rotate(ctx); err != nil {
			log.Error(err, "webhook serving certificate")
			wait = min(interval, 10*time.Second)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

func (r *Rotator) validity() time.Duration {
	if r.Validity > 0 {
		return r.Validity
	}
	return DefaultValidity
}

// Rotate reads the Secret, replaces what expires within a third of the
// validity (or is missing, unreadable, or for other names), serves the
// result, and puts its CA in the webhook configuration's caBundle.
func (r *Rotator) Rotate(ctx context.Context) error {
	var secret *corev1.Secret
	for range 3 {
		s := &corev1.Secret{}
		err := r.Reader.Get(ctx, r.Secret, s)
		missing := apierrors.IsNotFound(err)
		if err != nil && !missing {
			return fmt.Errorf("get secret %s: %w", r.Secret, err)
		}
		if missing {
			s = &corev1.Secret{}
			s.Namespace, s.Name = r.Secret.Namespace, r.Secret.Name
		}
		if !r.refresh(s) {
			secret = s
			break
		}
		if missing {
			err = r.Writer.Create(ctx, s)
		} else {
			// Locked on the resourceVersion read: of two replicas
			// rotating at once, one wins and the other reads its result.
			err = r.Writer.Update(ctx, s)
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("write secret %s: %w", r.Secret, err)
		}
		logf.FromContext(ctx).Info("webhook serving certificate written", "secret", r.Secret, "notAfter", notAfter(s.Data[corev1.TLSCertKey]))
		secret = s
		break
	}
	if secret == nil {
		return fmt.Errorf("write secret %s: it kept changing", r.Secret)
	}
	pair, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return fmt.Errorf("secret %s: %w", r.Secret, err)
	}
	r.current.Store(&pair)
	return r.inject(ctx, secret.Data[CAKey])
}

// inject writes bundle into every webhook of the configuration whose
// caBundle differs.
func (r *Rotator) inject(ctx context.Context, bundle []byte) error {
	if r.Webhook == "" {
		return nil
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := r.Reader.Get(ctx, types.NamespacedName{Name: r.Webhook}, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			// Not installed (the controller run out of a cluster, or the
			// webhook left out): nobody calls it, nothing to trust.
			logf.FromContext(ctx).Info("no webhook configuration to write the caBundle into", "webhook", r.Webhook)
			return nil
		}
		return fmt.Errorf("get validatingwebhookconfiguration %s: %w", r.Webhook, err)
	}
	changed := false
	for i := range cfg.Webhooks {
		if !bytes.Equal(cfg.Webhooks[i].ClientConfig.CABundle, bundle) {
			cfg.Webhooks[i].ClientConfig.CABundle, changed = bundle, true
		}
	}
	if !changed {
		return nil
	}
	if err := r.Writer.Update(ctx, cfg); err != nil {
		return fmt.Errorf("write the caBundle of validatingwebhookconfiguration %s: %w", r.Webhook, err)
	}
	return nil
}

// refresh replaces in s what needs replacing, and says whether it did.
func (r *Rotator) refresh(s *corev1.Secret) bool {
	now := r.Clock.Now()
	renew := now.Add(r.validity() / 3)
	ca, caKey, caErr := parseCA(s.Data)
	serving, servErr := parseCert(s.Data[corev1.TLSCertKey])
	_, pairErr := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	newCA := caErr != nil || ca.NotAfter.Before(renew)
	fresh := !newCA && servErr == nil && pairErr == nil && !serving.NotAfter.Before(renew) &&
		serving.CheckSignatureFrom(ca) == nil && slices.Equal(serving.DNSNames, r.dnsNames()) && len(serving.IPAddresses) == len(r.ips())
	if fresh {
		return false
	}
	var previous []byte
	if newCA {
		// The old CA stays trusted until it expires.
		if caErr == nil && now.Before(ca.NotAfter) {
			previous = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
		}
		var caPEM, keyPEM []byte
		ca, caKey, caPEM, keyPEM = mustNewCA(now, r.validity()*caLifetimes)
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[CAKey], s.Data[CAPrivateKey] = append(caPEM, previous...), keyPEM
	}
	cert, key := mustNewServing(now, r.validity(), ca, caKey, r.dnsNames(), r.ips())
	s.Type = corev1.SecretTypeTLS
	s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey] = cert, key
	return true
}

func (r *Rotator) dnsNames() []string {
	var out []string
	for _, n := range r.DNSNames {
		if net.ParseIP(n) == nil {
			out = append(out, n)
		}
	}
	return out
}

func (r *Rotator) ips() []net.IP {
	var out []net.IP
	for _, n := range r.DNSNames {
		if ip := net.ParseIP(n); ip != nil {
			out = append(out, ip)
		}
	}
	return out
}

func parseCert(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

// parseCA reads the current CA, the first certificate of the bundle, and
// its key.
func parseCA(data map[string][]byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	ca, err := parseCert(data[CAKey])
	if err != nil {
		return nil, nil, err
	}
	block, _ := pem.Decode(data[CAPrivateKey])
	if block == nil {
		return nil, nil, errors.New("no PEM key")
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, err
	}
	if pub, ok := ca.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(key.Public()) {
		return nil, nil, errors.New("the CA key does not match its certificate")
	}
	return ca, key, nil
}

func notAfter(certPEM []byte) time.Time {
	c, err := parseCert(certPEM)
	if err != nil {
		return time.Time{}
	}
	return c.NotAfter
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err)
	}
	return n
}

func newKey() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		// crypto/rand does not fail on the platforms Go supports.
		panic(err)
	}
	return k
}

func encodeKey(k *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// mustNewCA makes a self-signed CA valid from an hour before now (clock
// skew) for validity.
func mustNewCA(now time.Time, validity time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, []byte, []byte) {
	key := newKey()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "timeout-controller webhook CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		panic(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		panic(err)
	}
	return ca, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), encodeKey(key)
}

// mustNewServing makes a serving certificate for names and ips, signed by
// ca, valid no longer than ca.
func mustNewServing(now time.Time, validity time.Duration, ca *x509.Certificate, caKey *ecdsa.PrivateKey, names []string, ips []net.IP) ([]byte, []byte) {
	key := newKey()
	end := now.Add(validity)
	if end.After(ca.NotAfter) {
		end = ca.NotAfter
	}
	cn := "timeout-controller webhook"
	if len(names) > 0 {
		cn = names[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     names,
		IPAddresses:  ips,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     end,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), encodeKey(key)
}
