// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package install

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestNetworkPolicyComponent renders config/default with the
// network-policy component and the patch its comment shows, as a user's
// overlay would: the webhook's port is open to the API server's address
// only, the metrics and probe ports to all, as without the policy.
func TestNetworkPolicyComponent(t *testing.T) {
	dir := t.TempDir()
	config, err := filepath.Abs(filepath.Join(root, "config"))
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, config)
	if err != nil {
		t.Fatal(err)
	}
	overlay := "resources:\n- " + rel + "/default\ncomponents:\n- " + rel + `/components/network-policy
patches:
- target:
    kind: NetworkPolicy
    name: timeout-controller-webhook
  patch: |-
    - op: replace
      path: /spec/ingress/1/from
      value:
      - ipBlock:
          cidr: 10.0.0.0/28
`
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := decode(t, kustomize(t, dir))
	np := convert[networkingv1.NetworkPolicy](t, find(t, objs, "NetworkPolicy", "timeout-controller-webhook"))
	if np.Namespace != namespace {
		t.Errorf("NetworkPolicy in %q, want %q", np.Namespace, namespace)
	}
	d := convert[appsv1.Deployment](t, find(t, objs, "Deployment", deployment))
	checkWebhookPolicy(t, np, d, []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/28"}}})
}

// checkWebhookPolicy checks that np selects d's Pods and lets in to them
// from, to the webhook's port, and anyone to the metrics and probe ports.
func checkWebhookPolicy(t *testing.T, np *networkingv1.NetworkPolicy, d *appsv1.Deployment, from []networkingv1.NetworkPolicyPeer) {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("the NetworkPolicy selects %v, not the controller's Pods %v", np.Spec.PodSelector, d.Spec.Template.Labels)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policy types %v, want Ingress alone", np.Spec.PolicyTypes)
	}
	declared := map[string]bool{}
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		declared[p.Name] = true
	}
	open := map[string][]networkingv1.NetworkPolicyPeer{}
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port == nil || !declared[p.Port.String()] {
				t.Errorf("port %v is none of the container's named ports", p.Port)
				continue
			}
			if rule.From == nil {
				open[p.Port.String()] = nil
				continue
			}
			open[p.Port.String()] = append(open[p.Port.String()], rule.From...)
		}
	}
	for _, port := range []string{"metrics", "probes"} {
		if from, ok := open[port]; !ok || from != nil {
			t.Errorf("port %s is open to %v (listed: %t), want everyone", port, from, ok)
		}
	}
	if got := open["webhook"]; !reflect.DeepEqual(got, from) {
		t.Errorf("the webhook's port is open to %+v, want %+v", got, from)
	}
}
