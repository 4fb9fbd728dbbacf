// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func typed[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	data, err := json.Marshal(o.Object)
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

// The webhook's NetworkPolicy opens its port to the API server's
// addresses and peers only, and the metrics and probe ports to all, as
// they are without it; the client CA is mounted where the flag reads it.
func TestOnlyTheAPIServerReachesTheWebhook(t *testing.T) {
	if np := find(objects(t, mustRender(t, valueSets[0])), "NetworkPolicy", release+"-webhook"); np != nil {
		t.Error("the defaults render a NetworkPolicy: the chart cannot know where the API server calls from")
	}

	objs := objects(t, mustRender(t, valueSet{file: "operations"}))
	o := find(objs, "NetworkPolicy", release+"-webhook")
	if o == nil {
		t.Fatal("no NetworkPolicy with webhook.networkPolicy.enabled")
	}
	np := typed[networkingv1.NetworkPolicy](t, o)
	d := typed[appsv1.Deployment](t, find(objs, "Deployment", release))
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("the NetworkPolicy selects %v (%v), not the controller's Pods %v", np.Spec.PodSelector, err, d.Spec.Template.Labels)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policy types %v, want Ingress alone", np.Spec.PolicyTypes)
	}
	c := d.Spec.Template.Spec.Containers[0]
	open := map[string][]networkingv1.NetworkPolicyPeer{}
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port == nil || p.Port.Type != intstr.String || !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == p.Port.StrVal }) {
				t.Errorf("port %v is none of the container's named ports", p.Port)
				continue
			}
			open[p.Port.StrVal] = append(open[p.Port.StrVal], rule.From...)
			if rule.From == nil {
				open[p.Port.StrVal] = nil
			}
		}
	}
	for _, port := range []string{"metrics", "probes"} {
		if from, ok := open[port]; !ok || from != nil {
			t.Errorf("port %s is open to %v (listed: %t), want everyone", port, from, ok)
		}
	}
	want := []networkingv1.NetworkPolicyPeer{
		{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/28"}},
		{IPBlock: &networkingv1.IPBlock{CIDR: "fd00:10::/120"}},
		{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "konnectivity-agent"}},
		},
	}
	if got := open["webhook"]; !reflect.DeepEqual(got, want) {
		t.Errorf("the webhook's port is open to %+v, want %+v", got, want)
	}

	const caFile = "/etc/timeout-controller/webhook-client-ca/ca.crt"
	if !slices.Contains(c.Args, "--webhook-client-ca="+caFile) {
		t.Errorf("args %v lack --webhook-client-ca=%s", c.Args, caFile)
	}
	mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == "webhook-client-ca" && m.MountPath+"/ca.crt" == caFile && m.ReadOnly
	})
	fromConfigMap := slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Name == "webhook-client-ca" && v.ConfigMap != nil && v.ConfigMap.Name == "apiserver-webhook-client-ca" &&
			len(v.ConfigMap.Items) == 1 && v.ConfigMap.Items[0] == corev1.KeyToPath{Key: "ca.crt", Path: "ca.crt"}
	})
	if !mounted || !fromConfigMap {
		t.Errorf("the client CA is not mounted from its ConfigMap: mounts %+v, volumes %+v", c.VolumeMounts, d.Spec.Template.Spec.Volumes)
	}
}
