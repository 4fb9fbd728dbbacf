// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package install

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite testdata/default.yaml from `kustomize build config/default`")

const (
	golden  = "testdata/default.yaml"
	crdName = "timeoutpolicies.timeout.amphitheatre.app"
	crdFile = "timeout.amphitheatre.app_timeoutpolicies.yaml"
)

// TestDefaultMatchesGolden keeps every change to what config/default
// installs visible in review. The CRD is left out of the golden file (it
// is config/crd/bases, which `make verify` keeps current) and compared
// with that file instead.
func TestDefaultMatchesGolden(t *testing.T) {
	out := kustomize(t, "config/default")
	var kept [][]byte
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		var head struct{ Kind string }
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatal(err)
		}
		if head.Kind == "CustomResourceDefinition" {
			kept = append(kept, []byte("# CustomResourceDefinition "+crdName+": config/crd/bases, compared separately"))
			continue
		}
		kept = append(kept, doc)
	}
	got := append(bytes.TrimRight(bytes.Join(kept, []byte("\n---\n")), "\n"), '\n')

	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v: run `go test ./test/install -run TestDefaultMatchesGolden -update`", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("kustomize build config/default differs from %s; if the change is intended, run "+
			"`go test ./test/install -run TestDefaultMatchesGolden -update` and review the diff.\n%s",
			golden, lineDiff(string(want), string(got)))
	}

	crd := find(t, decode(t, out), "CustomResourceDefinition", crdName)
	base, err := os.ReadFile(filepath.Join(root, "config", "crd", "bases", crdFile))
	if err != nil {
		t.Fatal(err)
	}
	wantCRD := decode(t, base)[0]
	crd.SetLabels(nil) // added by config/default
	if !reflect.DeepEqual(crd.Object, wantCRD.Object) {
		t.Errorf("the CRD config/default installs is not config/crd/bases/%s", crdFile)
	}
}

// lineDiff lists the lines only one side has, enough to see what moved.
func lineDiff(want, got string) string {
	var b strings.Builder
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for _, l := range wl {
		if !slices.Contains(gl, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range gl {
		if !slices.Contains(wl, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// clusterScoped are the kinds config/default installs that have no
// namespace; the cluster test checks this list against the API server.
var clusterScoped = map[string]bool{
	"Namespace":                true,
	"CustomResourceDefinition": true,
	"ClusterRole":              true,
	"ClusterRoleBinding":       true,
	"TimeoutPolicy":            true,
	// config/webhook's.
	"ValidatingWebhookConfiguration": true,
	// config/admission's.
	"ValidatingAdmissionPolicy":        true,
	"ValidatingAdmissionPolicyBinding": true,
	"MutatingAdmissionPolicy":          true,
	"MutatingAdmissionPolicyBinding":   true,
}

// kustomizeNamespaces are the cluster-scoped kinds that kustomize's
// namespace transformer gives a namespace all the same (it knows them as
// no built-in kind): an overlay with a namespace sets one on them.
var kustomizeNamespaces = map[string]bool{
	"MutatingAdmissionPolicy":        true,
	"MutatingAdmissionPolicyBinding": true,
}

func TestObjectsAreInTheControllerNamespace(t *testing.T) {
	for _, o := range decode(t, kustomize(t, "config/default")) {
		switch {
		case clusterScoped[o.GetKind()] && o.GetNamespace() != "":
			t.Errorf("%s %s is cluster-scoped but has namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
		case !clusterScoped[o.GetKind()] && o.GetNamespace() != namespace:
			t.Errorf("%s %s is in namespace %q, not %s", o.GetKind(), o.GetName(), o.GetNamespace(), namespace)
		}
	}
}

// verbOfItsOwn reports whether v is one of the two verbs of this project
// that no API serves: "record" on reminders, which the admission policy
// asks about before it lets a request write the reminders record, held by
// the controller; and "use" on NotificationChannels, which the controller
// asks about a policy's author before it sends through one, held by the
// roles that grant it.
func verbOfItsOwn(kind, name string, rule rbacv1.PolicyRule, v string) bool {
	ours := slices.Equal(rule.APIGroups, []string{"timeout.amphitheatre.app"})
	switch v {
	case "record":
		return ours && kind == "ClusterRole" && name == "timeout-controller" && slices.Equal(rule.Resources, []string{"reminders"})
	case "use":
		return ours && slices.Equal(rule.Resources, []string{"notificationchannels"}) &&
			(name == "timeout-controller-channel-user" || name == "timeout-controller-channel-admin")
	}
	return false
}

func TestRBACIsLeastPrivilege(t *testing.T) {
	objs := decode(t, kustomize(t, "config/default"))
	// Verbs a controller that reads, patches and deletes needs; never
	// escalate, bind, impersonate or deletecollection.
	allowedVerbs := []string{"get", "list", "watch", "create", "update", "patch", "delete"}

	type role struct {
		kind, namespace, name string
		rules                 []rbacv1.PolicyRule
	}
	var roles []role
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
			cr := convert[rbacv1.ClusterRole](t, o)
			if cr.AggregationRule != nil {
				t.Errorf("ClusterRole %s aggregates other roles", cr.Name)
			}
			roles = append(roles, role{"ClusterRole", "", cr.Name, cr.Rules})
		case "Role":
			r := convert[rbacv1.Role](t, o)
			roles = append(roles, role{"Role", r.Namespace, r.Name, r.Rules})
		}
	}
	if len(roles) == 0 {
		t.Fatal("config/default has no Role or ClusterRole")
	}

	for _, r := range roles {
		for i, rule := range r.rules {
			where := fmt.Sprintf("%s %s rule %d", r.kind, r.name, i)
			for field, values := range map[string][]string{
				"apiGroups": rule.APIGroups, "resources": rule.Resources, "verbs": rule.Verbs,
				"resourceNames": rule.ResourceNames, "nonResourceURLs": rule.NonResourceURLs,
			} {
				for _, v := range values {
					if strings.Contains(v, "*") {
						t.Errorf("%s: wildcard %q in %s", where, v, field)
					}
				}
			}
			for _, v := range rule.Verbs {
				if !slices.Contains(allowedVerbs, v) && !verbOfItsOwn(r.kind, r.name, rule, v) {
					t.Errorf("%s: verb %q", where, v)
				}
			}
			// The only non-resource URL: reading the metrics, for the role
			// scrapers are bound to.
			if len(rule.NonResourceURLs) > 0 && (r.name != "timeout-controller-metrics-reader" ||
				!slices.Equal(rule.NonResourceURLs, []string{"/metrics"}) || !slices.Equal(rule.Verbs, []string{"get"})) {
				t.Errorf("%s: non-resource URLs %v", where, rule.NonResourceURLs)
			}
			if !slices.Contains(rule.APIGroups, "") || !slices.Contains(rule.Resources, "secrets") {
				continue
			}
			// Secrets: in the controller's own namespace only, to read the
			// channels' credentials and keep the cluster archive; never
			// watched, so no Secret is cached.
			if r.kind != "Role" || r.namespace != namespace {
				t.Errorf("%s grants %v on secrets outside namespace %s", where, rule.Verbs, namespace)
			}
			if !slices.Equal(rule.Verbs, []string{"create", "delete", "get", "list", "update"}) {
				t.Errorf("%s grants %v on secrets; the archive needs create, delete, get, list and update", where, rule.Verbs)
			}
		}
	}

	// Each role is bound to the controller's service account and nothing else.
	for _, o := range objs {
		var ref rbacv1.RoleRef
		var subjects []rbacv1.Subject
		switch o.GetKind() {
		case "ClusterRoleBinding":
			b := convert[rbacv1.ClusterRoleBinding](t, o)
			ref, subjects = b.RoleRef, b.Subjects
		case "RoleBinding":
			b := convert[rbacv1.RoleBinding](t, o)
			ref, subjects = b.RoleRef, b.Subjects
			if ref.Kind == "ClusterRole" {
				t.Errorf("RoleBinding %s binds ClusterRole %s", b.Name, ref.Name)
			}
		default:
			continue
		}
		want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: serviceAccount, Namespace: namespace}}
		if !reflect.DeepEqual(subjects, want) {
			t.Errorf("%s %s binds %v, want only the controller's service account", o.GetKind(), o.GetName(), subjects)
		}
		if !slices.ContainsFunc(roles, func(r role) bool {
			return r.kind == ref.Kind && r.name == ref.Name && (r.kind == "ClusterRole" || r.namespace == o.GetNamespace())
		}) {
			t.Errorf("%s %s binds %s %s, which config/default does not define", o.GetKind(), o.GetName(), ref.Kind, ref.Name)
		}
	}
}

// TestDeploymentIsRestrictedAndSized checks the Deployment config/default
// installs, and the objects that go with it, one concern a subtest.
func TestDeploymentIsRestrictedAndSized(t *testing.T) {
	objs := decode(t, kustomize(t, "config/default"))
	d := convert[appsv1.Deployment](t, find(t, objs, "Deployment", deployment))
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	t.Run("runs two labelled replicas under its ServiceAccount", func(t *testing.T) { checkDeploymentMeta(t, d, pod) })
	t.Run("runs as non-root without privileges", func(t *testing.T) { checkPodSecurity(t, pod) })
	t.Run("runs the pinned image with the install's flags, ports and probes", func(t *testing.T) { checkContainer(t, c, env) })
	t.Run("limits memory below GOMEMLIMIT's reach and not CPU", func(t *testing.T) { checkResources(t, c, env) })
	t.Run("outlives its graceful shutdown and spreads across nodes", func(t *testing.T) { checkAvailability(t, pod, c) })
	t.Run("is selected by its PodDisruptionBudget and metrics Service", func(t *testing.T) { checkSelectors(t, objs, d) })
}

func checkDeploymentMeta(t *testing.T, d *appsv1.Deployment, pod corev1.PodSpec) {
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	if pod.ServiceAccountName != serviceAccount {
		t.Errorf("serviceAccountName %q", pod.ServiceAccountName)
	}
	for k, v := range map[string]string{"app.kubernetes.io/name": "timeout-controller", "app.kubernetes.io/part-of": "amphitheatre"} {
		if d.Labels[k] != v || d.Spec.Template.Labels[k] != v {
			t.Errorf("label %s=%s missing on the Deployment or its pods", k, v)
		}
	}
}

func checkPodSecurity(t *testing.T, pod corev1.PodSpec) {
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want runAsNonRoot, runAsUser 65532, seccomp RuntimeDefault", psc)
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 ||
		(sc.Privileged != nil && *sc.Privileged) {
		t.Errorf("container securityContext %+v: want no privilege escalation, read-only root, all capabilities dropped", sc)
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Error("the pod shares a host namespace")
	}
}

func checkContainer(t *testing.T, c corev1.Container, env map[string]corev1.EnvVar) {
	if c.Image != "ghcr.io/amphitheatre-app/timeout-controller:v0.1.0" {
		t.Errorf("image %q", c.Image)
	}
	for _, arg := range []string{"--leader-elect", "--metrics-bind-address=:8443", "--health-probe-bind-address=:8081",
		"--cluster-event-namespace=default", "--audit-log=-"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %v lack %s", c.Args, arg)
		}
	}
	if e := env["POD_NAMESPACE"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("POD_NAMESPACE is %+v, want the pod's metadata.namespace", e)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["metrics"] != 8443 || ports["probes"] != 8081 {
		t.Errorf("ports %v, want metrics 8443 and probes 8081", ports)
	}
	for name, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name || p.HTTPGet.Port.String() != "probes" {
			t.Errorf("probe %s: %+v", name, p)
		}
	}
}

func checkResources(t *testing.T, c corev1.Container, env map[string]corev1.EnvVar) {
	// Memory is limited, with GOMEMLIMIT below the limit so the garbage
	// collector works harder before the kernel kills; CPU is not.
	limit, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		t.Fatal("no memory limit")
	}
	if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Error("a CPU limit throttles bursts of expiries; the install sets none")
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("no %s request", r)
		}
	}
	gomem, err := resource.ParseQuantity(strings.TrimSuffix(env["GOMEMLIMIT"].Value, "B"))
	if err != nil {
		t.Fatalf("GOMEMLIMIT %q: %v", env["GOMEMLIMIT"].Value, err)
	}
	if gomem.Cmp(limit) >= 0 || gomem.Cmp(c.Resources.Requests[corev1.ResourceMemory]) <= 0 {
		t.Errorf("GOMEMLIMIT %s should lie between the memory request and limit %s", gomem.String(), limit.String())
	}
}

func checkAvailability(t *testing.T, pod corev1.PodSpec, c corev1.Container) {
	var err error
	shutdown := 30 * time.Second // --graceful-shutdown-timeout's default
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--graceful-shutdown-timeout="); ok {
			if shutdown, err = time.ParseDuration(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= shutdown {
		t.Errorf("terminationGracePeriodSeconds %v is not above the %s graceful shutdown", g, shutdown)
	}
	if len(pod.TopologySpreadConstraints) == 0 && (pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil) {
		t.Error("nothing spreads the replicas across nodes")
	}
}

func checkSelectors(t *testing.T, objs []*unstructured.Unstructured, d *appsv1.Deployment) {
	podLabels := labels.Set(d.Spec.Template.Labels)
	pdb := convert[policyv1.PodDisruptionBudget](t, find(t, objs, "PodDisruptionBudget", deployment))
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
	}
	// Readiness fails while a CRD is missing: two unready replicas must not
	// block a node drain.
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
		t.Errorf("PodDisruptionBudget unhealthyPodEvictionPolicy %v, want AlwaysAllow", p)
	}
	if pdb.Spec.Selector == nil || !labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(podLabels) {
		t.Error("the PodDisruptionBudget does not select the controller's pods")
	}
	svc := convert[corev1.Service](t, find(t, objs, "Service", "timeout-controller-metrics"))
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
		t.Error("the metrics Service does not select the controller's pods")
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8443 || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("metrics Service ports %+v", svc.Spec.Ports)
	}
}

func TestDefaultPolicy(t *testing.T) {
	p := find(t, decode(t, kustomize(t, "config/default")), "TimeoutPolicy", "playbooks")
	want := map[string]any{
		"target":        map[string]any{"apiVersion": "amphitheatre.app/v1", "kind": "Playbook"},
		"defaultTTL":    "14d",
		"reminders":     []any{"3d", "2d"},
		"minimumNotice": "24h",
	}
	if got := p.Object["spec"]; !reflect.DeepEqual(got, want) {
		t.Errorf("spec %v, want %v", got, want)
	}
}

// TestArchiveComponent renders config/default with the archive component,
// as a user's overlay would.
func TestArchiveComponent(t *testing.T) {
	dir := t.TempDir()
	config, err := filepath.Abs(filepath.Join(root, "config"))
	if err != nil {
		t.Fatal(err)
	}
	// kustomize takes only relative paths to other kustomizations.
	rel, err := filepath.Rel(dir, config)
	if err != nil {
		t.Fatal(err)
	}
	overlay := "resources:\n- " + rel + "/default\ncomponents:\n- " + rel + "/components/archive\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := decode(t, kustomize(t, dir))

	pvc := find(t, objs, "PersistentVolumeClaim", "timeout-controller-archive")
	if pvc.GetNamespace() != namespace {
		t.Errorf("PersistentVolumeClaim in %q", pvc.GetNamespace())
	}
	d := convert[appsv1.Deployment](t, find(t, objs, "Deployment", deployment))
	c := d.Spec.Template.Spec.Containers[0]
	// The last --archive wins: the volume, over the default's cluster.
	if c.Args[len(c.Args)-1] != "--archive=/var/lib/timeout-controller/archive" {
		t.Errorf("args %v do not end with --archive=/var/lib/timeout-controller/archive", c.Args)
	}
	if !slices.Contains(c.Args, "--leader-elect") {
		t.Errorf("the component dropped the base args: %v", c.Args)
	}
	mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == "archive" && m.MountPath == "/var/lib/timeout-controller/archive" && !m.ReadOnly
	})
	claimed := slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Name == "archive" && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.GetName()
	})
	if !mounted || !claimed {
		t.Errorf("the archive volume is not mounted from the claim: mounts %+v, volumes %+v", c.VolumeMounts, d.Spec.Template.Spec.Volumes)
	}
	if sc := d.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("the component replaced the pod securityContext")
	}
}

// TestActionsURLComponent renders config/default with the component that
// gives the controller --actions-url, as a user's overlay would.
func TestActionsURLComponent(t *testing.T) {
	dir := t.TempDir()
	config, err := filepath.Abs(filepath.Join(root, "config"))
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, config)
	if err != nil {
		t.Fatal(err)
	}
	overlay := "resources:\n- " + rel + "/default\ncomponents:\n- " + rel + "/components/actions-url\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	d := convert[appsv1.Deployment](t, find(t, decode(t, kustomize(t, dir)), "Deployment", deployment))
	args := d.Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--actions-url=https://timeout.example.com") || !slices.Contains(args, "--leader-elect") {
		t.Errorf("args %v: want --actions-url added to the base args", args)
	}
}
