// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
)

// The -sleepers: Playbooks as Amphitheatre makes them, each with its
// namespace amp-<id> of two Deployments and a StatefulSet at one replica,
// governed by a policy of their own that puts them to sleep. Their
// creations are paced over -window, and the policy's afterIdle is chosen
// once the expiring Playbooks are made, so that the sleeps fall due over
// the same minute as the expiries the run measures.
const (
	sleeperLabel      = "bench.timeout.amphitheatre.app/sleeper"
	sleeperPolicyName = "bench-sleepers"
	// webhookName is the ValidatingWebhookConfiguration through which the
	// API server asks the controller about execs into the sleepers'
	// namespaces.
	webhookName = "bench-connect"
)

// sleeperWorkloads are each sleeper's workloads, by kind and name.
var sleeperWorkloads = []struct{ kind, name string }{{"Deployment", "web"}, {"Deployment", "worker"}, {"StatefulSet", "db"}}

// sleeperPop is the sleepers made and when each falls asleep.
type sleeperPop struct {
	// names are in the order they were created.
	names   []string
	created map[string]time.Time
	// afterIdle is the policy's; due is each one's sleep, created +
	// afterIdle.
	afterIdle time.Duration
	due       map[string]time.Time
	took      time.Duration
}

// createSleepers makes n sleepers, the i-th at i*window/n from the start
// (later when the API server cannot keep up), creators at a time.
func (cl *cluster) createSleepers(ctx context.Context, n, creators int, window time.Duration) (*sleeperPop, error) {
	sp := &sleeperPop{created: make(map[string]time.Time, n), due: make(map[string]time.Time, n)}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range creators {
		wg.Go(func() {
			for range next {
				name, created, err := cl.createSleeper(ctx)
				if err != nil {
					cancel(err)
					return
				}
				mu.Lock()
				sp.names = append(sp.names, name)
				sp.created[name] = created
				mu.Unlock()
			}
		})
	}
	start := time.Now()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(int64(window) * int64(i) / int64(n)))); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
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
	sp.took = time.Since(start)
	sort.SliceStable(sp.names, func(i, j int) bool { return sp.created[sp.names[i]].Before(sp.created[sp.names[j]]) })
	return sp, context.Cause(ctx)
}

// createSleeper creates one sleeper, its namespace and its workloads, and
// returns its name and creation time.
func (cl *cluster) createSleeper(ctx context.Context) (string, time.Time, error) {
	id := string(uuid.NewUUID())
	pb := testenv.NewPlaybook(id, "sleeper "+id[:8], nil)
	pb.SetLabels(map[string]string{sleeperLabel: "true"})
	if err := cl.client.Create(ctx, pb); err != nil {
		return "", time.Time{}, fmt.Errorf("create sleeper %s: %w", id, err)
	}
	owner := metav1.OwnerReference{
		APIVersion: testenv.PlaybookKind.GroupVersion().String(), Kind: testenv.PlaybookKind.Kind,
		Name: id, UID: pb.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
	ns := testenv.Namespace(id)
	labels := map[string]string{sleeperLabel: id}
	if err := cl.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, OwnerReferences: []metav1.OwnerReference{owner}, Labels: labels,
	}}); err != nil {
		return "", time.Time{}, fmt.Errorf("create namespace %s: %w", ns, err)
	}
	for _, w := range sleeperWorkloads {
		if err := cl.client.Create(ctx, sleeperWorkload(ns, w.kind, w.name, labels)); err != nil {
			return "", time.Time{}, fmt.Errorf("create %s %s/%s: %w", w.kind, ns, w.name, err)
		}
	}
	return id, pb.GetCreationTimestamp().Time, nil
}

func sleeperWorkload(ns, kind, name string, labels map[string]string) client.Object {
	selector := map[string]string{"app.kubernetes.io/name": name}
	podLabels := map[string]string{"app.kubernetes.io/name": name, sleeperLabel: labels[sleeperLabel]}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: name, Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
			}},
		}}},
	}
	meta := metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}
	if kind == "StatefulSet" {
		return &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1), ServiceName: name, Selector: &metav1.LabelSelector{MatchLabels: selector}, Template: template,
		}}
	}
	return &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: selector}, Template: template,
	}}
}

// createSleeperPolicy creates the sleepers' policy, with the afterIdle
// that puts the first sleeper to sleep at sleepStart, and sets when each
// falls due. Nothing else is asked of it: no reminder, no message.
func (cl *cluster) createSleeperPolicy(ctx context.Context, sp *sleeperPop, sleepStart time.Time) error {
	first := sp.created[sp.names[0]]
	sp.afterIdle = sleepStart.Sub(first).Truncate(time.Second)
	for name, created := range sp.created {
		sp.due[name] = created.Add(sp.afterIdle)
	}
	return cl.setSleeperPolicy(ctx, sp.afterIdle)
}

// setSleeperPolicy creates the sleepers' policy, or sets its afterIdle.
func (cl *cluster) setSleeperPolicy(ctx context.Context, afterIdle time.Duration) error {
	policy := &v1alpha1.TimeoutPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: sleeperPolicyName, Annotations: benchAuthor},
		Spec: v1alpha1.TimeoutPolicySpec{
			Target:        v1alpha1.Target{APIVersion: "amphitheatre.app/v1", Kind: "Playbook"},
			Selector:      &metav1.LabelSelector{MatchLabels: map[string]string{sleeperLabel: "true"}},
			DefaultTTL:    "14d",
			Reminders:     []v1alpha1.Duration{},
			MinimumNotice: "0s",
			Sleep:         &v1alpha1.Sleep{AfterIdle: v1alpha1.Duration(expiry.FormatDuration(afterIdle)), DeleteAfter: "14d"},
		},
	}
	var cur v1alpha1.TimeoutPolicy
	if err := cl.client.Get(ctx, client.ObjectKeyFromObject(policy), &cur); err == nil {
		patch := fmt.Appendf(nil, `{"spec":{"sleep":{"afterIdle":%q}}}`, policy.Spec.Sleep.AfterIdle)
		if err := cl.client.Patch(ctx, &cur, client.RawPatch("application/merge-patch+json", patch)); err != nil {
			return fmt.Errorf("set the afterIdle of TimeoutPolicy %s: %w", sleeperPolicyName, err)
		}
		return nil
	}
	if err := cl.client.Create(ctx, policy); err != nil {
		return fmt.Errorf("create TimeoutPolicy %s: %w", sleeperPolicyName, err)
	}
	return nil
}

// connectWebhook writes a self-signed serving certificate for 127.0.0.1
// into dir (tls.crt, tls.key, as --webhook-cert-dir reads them) and
// registers config/webhook's ValidatingWebhookConfiguration at port,
// for the sleepers' namespaces only.
func (cl *cluster) connectWebhook(ctx context.Context, root, dir string, port int) error {
	certPEM, keyPEM, err := selfSigned()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "webhook", "validatingwebhookconfiguration.yaml"))
	if err != nil {
		return err
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := yaml.Unmarshal(raw, cfg); err != nil {
		return err
	}
	cfg.Name = webhookName
	for i := range cfg.Webhooks {
		w := &cfg.Webhooks[i]
		w.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d/connect", port)), CABundle: certPEM}
		w.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: sleeperLabel, Operator: metav1.LabelSelectorOpExists}}}
	}
	if err := cl.client.Create(ctx, cfg); err != nil {
		return fmt.Errorf("create ValidatingWebhookConfiguration %s: %w", webhookName, err)
	}
	return nil
}

// freePort is a loopback port nothing listens on right now.
func freePort() (int, error) {
	addr, err := testenv.FreeAddr()
	if err != nil {
		return 0, err
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(port)
}

func selfSigned() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: "bench-connect"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	k, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k}), nil
}

// sleeperObject is a sleeper as the client patches it.
func sleeperObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(testenv.PlaybookKind)
	u.SetName(name)
	return u
}
