// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// t0 is when the test objects are created; creation timestamps have
// whole seconds, as they do on the API server.
var t0 = time.Date(2026, time.March, 1, 9, 0, 0, 0, time.UTC)

var (
	configMapGVK = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	namespaceGVK = corev1.SchemeGroupVersion.WithKind("Namespace")
)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func dryRun(p *v1alpha1.TimeoutPolicy) { p.Spec.Deletion.DryRun = true }

func archiving(p *v1alpha1.TimeoutPolicy) { p.Spec.Deletion.Archive = true }

func propagation(d metav1.DeletionPropagation) func(*v1alpha1.TimeoutPolicy) {
	return func(p *v1alpha1.TimeoutPolicy) { p.Spec.Deletion.PropagationPolicy = d }
}

// newConfigMap returns a ConfigMap in namespace team-a created at t0,
// changed by opts.
func newConfigMap(name string, opts ...func(*corev1.ConfigMap)) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         "team-a",
			Name:              name,
			UID:               types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(t0),
		},
	}
	for _, o := range opts {
		o(cm)
	}
	return cm
}

func annotated(kv ...string) func(*corev1.ConfigMap) {
	return func(cm *corev1.ConfigMap) {
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			cm.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func ttl(v string) func(*corev1.ConfigMap) { return annotated(expiry.AnnotationTTL, v) }

func expiresAt(at time.Time) func(*corev1.ConfigMap) {
	return annotated(expiry.AnnotationExpiresAt, at.Format(time.RFC3339))
}

func labelled(l map[string]string) func(*corev1.ConfigMap) {
	return func(cm *corev1.ConfigMap) { cm.Labels = l }
}

func inNamespace(ns string) func(*corev1.ConfigMap) {
	return func(cm *corev1.ConfigMap) { cm.Namespace = ns }
}

func newNamespace(name string, l map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

// drain returns the Events recorded so far. FakeRecorder writes to its
// channel before Eventf returns, so nothing is missed by not waiting.
func drain(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func bogusSelector(p *v1alpha1.TimeoutPolicy) {
	p.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "app", Operator: "Bogus", Values: []string{"x"}},
	}}
}

func bogusNamespaceSelector(p *v1alpha1.TimeoutPolicy) {
	p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "env", Operator: "Bogus"},
	}}
}

var playbookGVK = schema.GroupVersionKind{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook"}

// kinds returns the "Type Reason" of each Event.
func kinds(evs []string) []string {
	out := []string{}
	for _, e := range evs {
		f := strings.Fields(e)
		if len(f) >= 2 {
			e = f[0] + " " + f[1]
		}
		out = append(out, e)
	}
	return out
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

func idle(d v1alpha1.Duration) func(*v1alpha1.TimeoutPolicy) {
	return func(p *v1alpha1.TimeoutPolicy) { p.Spec.IdleTTL = d }
}

func sample(v float64, labels ...string) *model.Sample {
	m := model.Metric{}
	for i := 0; i+1 < len(labels); i += 2 {
		m[model.LabelName(labels[i])] = model.LabelValue(labels[i+1])
	}
	return &model.Sample{Metric: m, Value: model.SampleValue(v)}
}

// fakeAPI is a Prometheus client that answers every query with vector,
// or err.
type fakeAPI struct {
	promv1.API
	vector model.Vector
	err    error
}

func (f fakeAPI) Query(context.Context, string, time.Time, ...promv1.Option) (model.Value, promv1.Warnings, error) {
	if f.err != nil {
		return nil, nil, f.err
	}
	return f.vector, nil, nil
}

func channel(name string, spec v1alpha1.NotificationChannelSpec) *v1alpha1.NotificationChannel {
	return &v1alpha1.NotificationChannel{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

var hookSpec = v1alpha1.NotificationChannelSpec{Webhook: &v1alpha1.WebhookChannel{
	URL:       "https://hooks.example.com/timeout",
	SecretRef: v1alpha1.SecretKeySelector{Namespace: "timeout-system", Name: "hooks", Key: "key"},
}}

// secretsByKey returns each Secret key's value from a map.
type secretsByKey map[string]string

func (s secretsByKey) Get(_ context.Context, _, _, key string) ([]byte, error) {
	return []byte(s[key]), nil
}

var mailSpec = v1alpha1.NotificationChannelSpec{Email: &v1alpha1.EmailChannel{Host: "smtp.example.com", From: "timeout@example.com"}}

// teamMailSpec sends only to team-a.example.com.
var teamMailSpec = v1alpha1.NotificationChannelSpec{
	Email:               &v1alpha1.EmailChannel{Host: "smtp.example.com", From: "timeout@example.com"},
	AllowedEmailDomains: []string{"team-a.example.com"},
}

var slackSpec = v1alpha1.NotificationChannelSpec{Slack: &v1alpha1.SlackChannel{
	WebhookURLSecretRef: v1alpha1.SecretKeySelector{Namespace: "timeout-system", Name: "slack", Key: "url"},
}}
