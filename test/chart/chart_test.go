// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package chart renders the Helm chart with bin/helm and applies it to a real API server.
package chart

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata from the chart")

const (
	release   = "timeout-controller"
	namespace = "timeout-system"
)

var (
	root     = filepath.Join("..", "..")
	chartDir = filepath.Join(root, "charts", "timeout-controller")
)

// valueSet is one file of values under testdata and the golden file its
// rendering must equal.
type valueSet struct {
	name       string // test name
	file       string // testdata/<file>.values.yaml, testdata/<file>.golden.yaml
	secretRefs int    // Secrets the rendered TimeoutPolicy names
}

var valueSets = []valueSet{
	{"defaults", "defaults", 0},
	{"e-mail, Slack and two webhooks with their Secrets", "notifications", 4},
	{"archive, audit file, dry run, caps, links and a ServiceMonitor", "operations", 0},
	{"the admission policies: annotations, channel use and the author stamp", "admission", 0},
	{"the archive in an S3 bucket", "s3archive", 0},
	{"the alert rules and the Grafana dashboard", "monitoring", 0},
	{"the actions server with an Ingress and TLS", "actions", 0},
}

func (v valueSet) values() string { return filepath.Join("testdata", v.file+".values.yaml") }
func (v valueSet) golden() string { return filepath.Join("testdata", v.file+".golden.yaml") }

// helm runs bin/helm and returns its standard output; the error carries
// its standard error.
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join(root, "bin", "helm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s not found: run `make tools` (make test runs it first)", bin)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	// Keep helm away from the user's repositories, plugins and cache.
	home := t.TempDir()
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// render is `helm template` of the chart, as the release in namespace, with
// the given values file and further flags.
func render(t *testing.T, valuesFile string, flags ...string) ([]byte, error) {
	t.Helper()
	args := []string{"template", release, chartDir, "--namespace", namespace}
	if valuesFile != "" {
		args = append(args, "--values", valuesFile)
	}
	return helm(t, append(args, flags...)...)
}

func mustRender(t *testing.T, v valueSet) []byte {
	t.Helper()
	out, err := render(t, v.values())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// objects splits rendered YAML into objects, leaving out empty documents.
func objects(t *testing.T, manifest []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("rendered YAML does not parse: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func TestEveryValuesFileHasACase(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, v := range valueSets {
		listed = append(listed, v.values())
	}
	slices.Sort(files)
	slices.Sort(listed)
	if !slices.Equal(files, listed) {
		t.Fatalf("testdata has %v, the test lists %v: add the new file to valueSets", files, listed)
	}
}

func TestRenderMatchesGolden(t *testing.T) {
	for _, v := range valueSets {
		t.Run(v.name, func(t *testing.T) {
			got := mustRender(t, v)
			if *update {
				if err := os.WriteFile(v.golden(), got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(v.golden())
			if err != nil {
				t.Fatalf("%v: run `go test ./test/chart -run TestRenderMatchesGolden -update` to write it", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("the chart renders %s differently from %s:\n%s\nIf the change is intended, run `go test ./test/chart -run TestRenderMatchesGolden -update` and review the diff",
					v.values(), v.golden(), firstDifference(string(want), string(got)))
			}
		})
	}
}

// firstDifference shows the first line where want and got differ, with
// a little context.
func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl || i >= len(w) || i >= len(g) {
			from := max(0, i-3)
			return fmt.Sprintf("line %d:\n  context: %s\n  want:    %q\n  got:     %q",
				i+1, strings.Join(g[from:i], "\n           "), wl, gl)
		}
	}
	return "(equal)"
}

func TestLintStrict(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		if out, err := helm(t, "lint", "--strict", chartDir); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	})
	for _, v := range valueSets {
		t.Run(v.name, func(t *testing.T) {
			if out, err := helm(t, "lint", "--strict", "--namespace", namespace, "--values", v.values(), chartDir); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

func TestBadValuesAreRefusedReadably(t *testing.T) {
	tests := []struct {
		name  string
		flags []string
		want  []string // each in the error
	}{
		{
			"refuses a lifetime in words",
			[]string{"--set", "policy.defaultTTL=14 days"},
			[]string{"values don't meet the specifications of the schema", "/policy/defaultTTL", "'14 days' does not match pattern"},
		},
		{
			"refuses a reminder with an unknown unit",
			[]string{"--set-json", `policy.reminders=["3d","1y"]`},
			[]string{"/policy/reminders/1", "'1y' does not match pattern"},
		},
		{
			"refuses days in the archive retention, which is a Go duration",
			[]string{"--set", "archive.retention=30d"},
			[]string{"/archive/retention", "'30d' does not match pattern"},
		},
		{
			"refuses a misspelt key",
			[]string{"--set", "polcy.enabled=false"},
			[]string{"additional properties 'polcy' not allowed"},
		},
		{
			"refuses an SMTP security mode that does not exist",
			[]string{"--set", "policy.notifications.email.security=SSL"},
			[]string{"/policy/notifications/email/security", "value must be one of 'StartTLS', 'TLS', 'None'"},
		},
		{
			"refuses links over plain HTTP to another host",
			[]string{"--set", "actionsURL=http://timeout.example.com"},
			[]string{"/actionsURL", "does not match pattern"},
		},
		{
			"refuses a replica count that is not a number",
			[]string{"--set", "replicaCount=two"},
			[]string{"/replicaCount", "got string, want integer"},
		},
		{
			"refuses a webhook with an upper-case name and an ftp URL",
			[]string{"--set-json", `policy.notifications.webhooks=[{"name":"Audit","url":"ftp://example.com","signingKey":{"secretName":"audit"}}]`},
			[]string{"/policy/notifications/webhooks/0/name", "/policy/notifications/webhooks/0/url"},
		},
		{
			"refuses an event type that does not exist",
			[]string{"--set-json", `policy.notifications.slack.events=["deleted","gone"]`},
			[]string{"/policy/notifications/slack/events/1", "value must be one of"},
		},
		{
			"refuses e-mail without a server",
			[]string{"--set", "policy.notifications.email.enabled=true", "--set", "policy.notifications.email.from=bot@example.com"},
			[]string{"policy.notifications.email.host is required with email.enabled"},
		},
		{
			"refuses a created Slack Secret without its URL",
			[]string{"--set", "policy.notifications.slack.enabled=true", "--set", "policy.notifications.slack.webhookURL.create=true"},
			[]string{"policy.notifications.slack.webhookURL.value is required with webhookURL.create"},
		},
		{
			"refuses an archiving policy without an archive",
			[]string{"--set", "policy.archive=true", "--set", "archive.enabled=false"},
			[]string{"policy.archive needs archive.enabled"},
		},
		{
			"refuses the S3 archive without a bucket",
			[]string{"--set", "archive.backend=s3"},
			[]string{"archive.backend s3 needs archive.s3.bucket"},
		},
		{
			"refuses a Prometheus token without a Prometheus",
			[]string{"--set", "traffic.prometheus.tokenSecret=prometheus-token"},
			[]string{"traffic.prometheus.tokenSecret and caConfigMap need traffic.prometheus.url"},
		},
		{
			"refuses a Prometheus URL that is not http or https",
			[]string{"--set", "traffic.prometheus.url=prometheus:9090"},
			[]string{"/traffic/prometheus/url", "does not match pattern"},
		},
		{
			"refuses an archive backend it does not know",
			[]string{"--set", "archive.backend=nfs"},
			[]string{"/archive/backend", "value must be one of"},
		},
		{
			"refuses a webhook NetworkPolicy without the API server's addresses",
			[]string{"--set", "webhook.networkPolicy.enabled=true"},
			[]string{"webhook.networkPolicy.enabled needs webhook.networkPolicy.apiServerCIDRs or webhook.networkPolicy.from"},
		},
		{
			"refuses an API server address that is not a CIDR",
			[]string{"--set-json", `webhook.networkPolicy.apiServerCIDRs=["10.0.0.1"]`},
			[]string{"/webhook/networkPolicy/apiServerCIDRs/0", "does not match pattern"},
		},
		{
			"refuses a grace period shorter than the controller's shutdown",
			[]string{"--set", "terminationGracePeriodSeconds=30"},
			[]string{"/terminationGracePeriodSeconds", "minimum"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render(t, "", tt.flags...)
			if err == nil {
				t.Fatalf("helm template %v succeeded; want an error with %q. Output:\n%s", tt.flags, tt.want, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%s", w, err)
				}
			}
		})
	}
}

// generatedRules reads the rules of the ClusterRole and the Role that
// controller-gen writes to config/rbac/role.yaml.
func generatedRules(t *testing.T) (clusterRole, role []rbacv1.PolicyRule) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatalf("%v: run `make manifests`", err)
	}
	var foundCluster, foundRole bool
	for _, o := range objects(t, data) {
		switch o.GetKind() {
		case "ClusterRole":
			clusterRole, foundCluster = rules(t, o), true
		case "Role":
			role, foundRole = rules(t, o), true
		}
	}
	if !foundCluster || !foundRole {
		t.Fatalf("config/rbac/role.yaml has ClusterRole: %v, Role: %v; want both: run `make manifests`", foundCluster, foundRole)
	}
	return clusterRole, role
}

func rules(t *testing.T, o *unstructured.Unstructured) []rbacv1.PolicyRule {
	t.Helper()
	data, err := json.Marshal(o.Object["rules"])
	if err != nil {
		t.Fatal(err)
	}
	var r []rbacv1.PolicyRule
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("rules of %s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return r
}

func TestRBACEqualsTheGeneratedRoles(t *testing.T) {
	wantCluster, wantRole := generatedRules(t)
	objs := objects(t, mustRender(t, valueSets[0]))
	for _, c := range []struct {
		kind string
		want []rbacv1.PolicyRule
	}{
		{"ClusterRole", wantCluster},
		{"Role", wantRole},
	} {
		t.Run(c.kind, func(t *testing.T) {
			o := find(objs, c.kind, "timeout-controller")
			if o == nil {
				t.Fatalf("the chart renders no %s timeout-controller", c.kind)
			}
			if c.kind == "Role" && o.GetNamespace() != namespace {
				t.Errorf("the Role is in namespace %q, want the release namespace %q", o.GetNamespace(), namespace)
			}
			got := rules(t, o)
			if !reflect.DeepEqual(got, c.want) {
				g, _ := yaml.Marshal(got)
				w, _ := yaml.Marshal(c.want)
				t.Fatalf("the chart's %s rules differ from config/rbac/role.yaml (generated from the RBAC markers): update charts/timeout-controller/templates/rbac.yaml.\nchart:\n%s\ngenerated:\n%s", c.kind, g, w)
			}
			for _, r := range got {
				for _, s := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames} {
					if slices.Contains(s, "*") {
						t.Errorf("rule %+v has a wildcard", r)
					}
				}
			}
		})
	}
}

func TestTheClusterRolesForPeopleAndPrometheusAreThoseOfConfig(t *testing.T) {
	objs := objects(t, mustRender(t, valueSets[0]))
	for _, file := range []string{"policy_author_role.yaml", "channel_admin_role.yaml", "channel_user_role.yaml", "metrics_reader_role.yaml"} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(root, "config", "rbac", file))
			if err != nil {
				t.Fatal(err)
			}
			want := objects(t, data)
			if len(want) != 1 || want[0].GetKind() != "ClusterRole" {
				t.Fatalf("config/rbac/%s holds %d objects, want one ClusterRole", file, len(want))
			}
			// The default release is called timeout-controller, so the
			// chart's names are config's.
			o := find(objs, "ClusterRole", want[0].GetName())
			if o == nil {
				t.Fatalf("the chart renders no ClusterRole %s (config/rbac/%s has it)", want[0].GetName(), file)
			}
			if got, w := rules(t, o), rules(t, want[0]); !reflect.DeepEqual(got, w) {
				g, _ := yaml.Marshal(got)
				wy, _ := yaml.Marshal(w)
				t.Errorf("the chart's ClusterRole %s differs from config/rbac/%s:\nchart:\n%s\nconfig:\n%s", o.GetName(), file, g, wy)
			}
		})
	}
}

// The actions server's roles are config/actions's, and hold no right to
// delete.
func TestTheActionsRolesAreThoseOfConfig(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "config", "actions", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var actions valueSet
	for _, v := range valueSets {
		if v.file == "actions" {
			actions = v
		}
	}
	objs := objects(t, mustRender(t, actions))
	if find(objects(t, mustRender(t, valueSets[0])), "Deployment", "timeout-controller-actions") != nil {
		t.Error("the defaults install the actions server; want it off unless actions.enabled")
	}
	for _, want := range objects(t, data) {
		t.Run(want.GetKind(), func(t *testing.T) {
			o := find(objs, want.GetKind(), want.GetName())
			if o == nil {
				t.Fatalf("the chart renders no %s %s", want.GetKind(), want.GetName())
			}
			got, w := rules(t, o), rules(t, want)
			if want.GetKind() == "Role" {
				// The chart adds the Slack channels' Secrets it is given.
				if len(got) != 1 || !slices.Contains(got[0].ResourceNames, "slack-webhook") {
					t.Errorf("the chart's Role does not name actions.slackSecrets: %+v", got)
				} else {
					got[0].ResourceNames = slices.DeleteFunc(got[0].ResourceNames, func(n string) bool { return n == "slack-webhook" })
				}
			}
			if !reflect.DeepEqual(got, w) {
				g, _ := yaml.Marshal(got)
				wy, _ := yaml.Marshal(w)
				t.Errorf("the chart's %s %s differs from config/actions/role.yaml:\nchart:\n%s\nconfig:\n%s", o.GetKind(), o.GetName(), g, wy)
			}
			for _, r := range got {
				if slices.Contains(r.Verbs, "delete") || slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") {
					t.Errorf("rule %+v lets the actions server delete, or has a wildcard", r)
				}
			}
		})
	}
}

func TestCRDsAreCopiesOfConfig(t *testing.T) {
	want, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := filepath.Glob(filepath.Join(chartDir, "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	names := func(paths []string) []string {
		var n []string
		for _, p := range paths {
			n = append(n, filepath.Base(p))
		}
		return n
	}
	if len(want) == 0 || !slices.Equal(names(got), names(want)) {
		t.Fatalf("charts/timeout-controller/crds has %v, config/crd/bases has %v: run `make manifests`", names(got), names(want))
	}
	for _, p := range want {
		w, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		g, err := os.ReadFile(filepath.Join(chartDir, "crds", filepath.Base(p)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(g, w) {
			t.Errorf("charts/timeout-controller/crds/%s differs from config/crd/bases: run `make manifests`", filepath.Base(p))
		}
	}
}

func TestSecretsAndReferencesStayInTheReleaseNamespace(t *testing.T) {
	for _, v := range valueSets {
		t.Run(v.name, func(t *testing.T) {
			objs := objects(t, mustRender(t, v))
			for _, o := range objs {
				if o.GetKind() == "Secret" && o.GetNamespace() != namespace {
					t.Errorf("Secret %s is in namespace %q, want %q", o.GetName(), o.GetNamespace(), namespace)
				}
			}
			p := find(objs, "TimeoutPolicy", "playbooks")
			if p == nil {
				t.Fatal("no TimeoutPolicy playbooks rendered")
			}
			// The Secrets are named by the NotificationChannels the chart
			// renders (cluster-scoped, so the reference carries the
			// namespace) and by nothing else; the policy names none.
			refs := 0
			for _, o := range objs {
				if o.GetKind() != "TimeoutPolicy" && o.GetKind() != "NotificationChannel" {
					continue
				}
				walk(o.Object["spec"], func(path string, m map[string]any) {
					if strings.HasSuffix(path, "SecretRef") || strings.HasSuffix(path, "secretRef") {
						refs++
						if m["namespace"] != namespace {
							t.Errorf("%s %s: %s names namespace %v, want the release namespace %q", o.GetKind(), o.GetName(), path, m["namespace"], namespace)
						}
					}
				})
			}
			if refs != v.secretRefs {
				t.Errorf("the policy and its channels name %d Secrets, want %d", refs, v.secretRefs)
			}
		})
	}
}

func TestTheEmailPortFollowsTheSecurity(t *testing.T) {
	for _, tc := range []struct {
		name     string
		flags    []string
		wantPort int64
	}{
		{"uses 465 for implicit TLS", []string{"--set", "policy.notifications.email.security=TLS"}, 465},
		{"uses 587 for STARTTLS", []string{"--set", "policy.notifications.email.security=StartTLS"}, 587},
		{"uses 587 for a plain relay", []string{"--set", "policy.notifications.email.security=None"}, 587},
		{"keeps a port given with TLS", []string{"--set", "policy.notifications.email.security=TLS", "--set", "policy.notifications.email.port=2465"}, 2465},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render(t, "", append([]string{
				"--set", "policy.notifications.email.enabled=true",
				"--set", "policy.notifications.email.host=smtp.example.com",
				"--set", "policy.notifications.email.from=bot@example.com",
			}, tc.flags...)...)
			if err != nil {
				t.Fatal(err)
			}
			ch := find(objects(t, out), "NotificationChannel", release+"-email")
			if ch == nil {
				t.Fatal("no e-mail NotificationChannel rendered")
			}
			port, _, _ := unstructured.NestedFieldNoCopy(ch.Object, "spec", "email", "port")
			if fmt.Sprint(port) != fmt.Sprint(tc.wantPort) {
				t.Errorf("spec.email.port = %v, want %d", port, tc.wantPort)
			}
		})
	}
}

// walk calls f with every object under v and its path.
func walk(v any, f func(path string, m map[string]any)) {
	var rec func(path string, v any)
	rec = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			f(path, v)
			for k, c := range v {
				rec(path+"."+k, c)
			}
		case []any:
			for i, c := range v {
				rec(fmt.Sprintf("%s[%d]", path, i), c)
			}
		}
	}
	rec("spec", v)
}

// admissionFiles are the manifests of config/admission/component, which
// the chart copies to files/admission.
var admissionFiles = []string{"policy.yaml", "binding.yaml", "channel-use-policy.yaml", "channel-use-binding.yaml", "author-policy.yaml", "author-binding.yaml"}

func TestAdmissionPolicyEqualsConfig(t *testing.T) {
	dir := filepath.Join(root, "config", "admission", "component")
	for _, f := range admissionFiles {
		want, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(chartDir, "files", "admission", f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("charts/timeout-controller/files/admission/%s differs from config/admission/component/%s: copy it over", f, f)
		}
	}

	rendered := objects(t, mustRender(t, valueSet{file: "admission"}))
	for _, f := range admissionFiles {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range objects(t, data) {
			t.Run(want.GetKind(), func(t *testing.T) {
				got := find(rendered, want.GetKind(), want.GetName())
				if got == nil {
					t.Fatalf("the chart renders no %s %s", want.GetKind(), want.GetName())
				}
				got = got.DeepCopy()
				if got.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
					t.Errorf("%s %s lacks the chart's labels", got.GetKind(), got.GetName())
				}
				got.SetLabels(want.GetLabels())
				if !reflect.DeepEqual(got.Object, want.Object) {
					g, _ := yaml.Marshal(got.Object)
					w, _ := yaml.Marshal(want.Object)
					t.Fatalf("the chart's %s differs from config/admission/component/%s at %s", want.GetKind(), f, firstDifference(string(w), string(g)))
				}
			})
		}
	}
}
