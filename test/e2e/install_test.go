// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
)

// actors are what each reclaimed Playbook runs on the node: small, so
// that a two-core machine schedules them all.
var actors = []testenv.Actor{
	{Name: "web", Replicas: 2, CPU: "10m", Memory: "16Mi"},
	{Name: "db", Replicas: 1, CPU: "10m", Memory: "16Mi"},
}

// The schedule of the suite's policy: one reminder 40s before expiry, and
// at least 20s between it and the deletion.
const (
	reminderLead  = "40s"
	minimumNotice = "20s"
)

// TestHelmChart installs the chart with two replicas under a release name
// and in a namespace that are not the defaults, then reclaims a Playbook
// that runs Pods, fails over, upgrades, and scrapes the metrics.
func TestHelmChart(t *testing.T) {
	const namespace, release = "platform-tc", "reclaimer"
	ctx := t.Context()
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, fmt.Appendf(nil, `image:
  tag: %s
replicaCount: 2
admissionPolicy:
  enabled: true
policy:
  defaultTTL: 1h
  reminders: [%s]
  minimumNotice: %s
  notifications:
    email:
      enabled: true
      host: %q
      port: %d
      security: None
      from: timeout@e2e.test
      to: [platform@e2e.test]
`, tagV1, reminderLead, minimumNotice, inbox.Host, inbox.Port), 0o600); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(root, "charts", "timeout-controller")
	if _, err := command(ctx, helm, "install", release, chart, "--namespace", namespace, "--create-namespace", "--values", values); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := command(context.Background(), helm, "uninstall", release, "--namespace", namespace, "--wait", "--timeout=2m"); err != nil {
			t.Error(err)
		}
	})

	pods := ready(t, namespace, 2, repository+":"+tagV1)
	first := leader(t, namespace, "")
	t.Logf("Ready: %s and %s; %s leads", pods[0].Name, pods[1].Name, first)
	secured(t, pods)

	d := watchDeletions(t)
	// Reclaimed: a Playbook whose namespace runs Pods on the node.
	reclaim := createPlaybook(t, "e2e-helm-reclaim", 75*time.Second, actors)
	// Failover: the leader stops right after this one's reminder went out.
	failover := createPlaybook(t, "e2e-helm-failover", 90*time.Second, nil)
	// Upgrade: these expire while the new image rolls out.
	var upgrade []*playbook
	for i, ttl := range []time.Duration{130, 145, 160, 175} {
		upgrade = append(upgrade, createPlaybook(t, fmt.Sprintf("e2e-helm-upgrade-%d", i), ttl*time.Second, nil))
	}
	podsRunning(t, reclaim.name, 3)

	eventually(t, 2*time.Minute, "the reminder of "+failover.name, func(context.Context) error {
		if n := len(received(inbox, "reminder", failover.name)); n == 0 {
			return fmt.Errorf("no reminder yet")
		}
		return nil
	})
	if _, err := kube(ctx, "-n", namespace, "delete", "pod", first, "--wait=false"); err != nil {
		t.Fatal(err)
	}
	second := leader(t, namespace, first)
	t.Logf("%s deleted; %s leads", first, second)

	reclaim.gone(t, d, 2*time.Minute)
	reclaimed(t, reclaim.name)
	failover.gone(t, d, 2*time.Minute)
	execIsUse(t)

	if _, err := command(ctx, helm, "upgrade", release, chart, "--namespace", namespace, "--values", values, "--set", "image.tag="+tagV2); err != nil {
		t.Fatal(err)
	}
	pods = ready(t, namespace, 2, repository+":"+tagV2)
	leader(t, namespace, "")
	for _, p := range upgrade {
		p.gone(t, d, 3*time.Minute)
	}

	all := append([]*playbook{reclaim, failover}, upgrade...)
	var names []string
	for _, p := range all {
		names = append(names, p.name)
		if n := len(received(inbox, "reminder", p.name)); n != 1 {
			t.Errorf("Playbook %s: %d reminders, want 1", p.name, n)
		}
		if l := received(inbox, "reminder", p.name); len(l) == 1 && !strings.Contains(strings.Join(l[0].To, ","), "platform@e2e.test") {
			t.Errorf("Playbook %s: its reminder went to %v", p.name, l[0].To)
		}
	}
	noneTwice(t, inbox, names)

	reader := token(t, namespace, "e2e-scraper", "timeout-controller-metrics-reader")
	if code, body := scrape(t, namespace, reader); code != 200 || !strings.Contains(body, "timeout_controller_") {
		t.Errorf("/metrics with a metrics-reader token: %d, want 200 with the controller's metrics", code)
	}
	stranger := token(t, namespace, "e2e-stranger", "")
	if code, _ := scrape(t, namespace, stranger); code != 403 {
		t.Errorf("/metrics with a token not allowed to read it: %d, want 403", code)
	}
	if code, _ := scrape(t, namespace, ""); code != 401 {
		t.Errorf("/metrics with no token: %d, want 401", code)
	}
	secured(t, pods)
	events(t, namespace)
}

// execIsUse runs a real kubectl exec into a Pod of a Playbook under an
// idle policy, through the chart's webhook (its Service, its self-signed
// certificate), and waits for the Playbook's last-use to name it.
func execIsUse(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	const policy = `apiVersion: timeout.amphitheatre.app/v1alpha1
kind: TimeoutPolicy
metadata:
  name: e2e-connect
spec:
  priority: 10
  selector: {matchLabels: {e2e-connect: "true"}}
  defaultTTL: 1h
  idleTTL: 1h
  reminders: []
  minimumNotice: 0s
`
	file := filepath.Join(t.TempDir(), "connect-policy.yaml")
	if err := os.WriteFile(file, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := kube(ctx, "apply", "-f", file); err != nil {
		t.Fatal(err)
	}
	name := createPlaybookLabelled(t, "e2e-helm-connect", map[string]string{"e2e-connect": "true"}, actors[:1])
	t.Cleanup(func() {
		for _, what := range [][]string{{"-f", file}, {"playbooks.amphitheatre.app/" + name}} {
			if _, err := kube(context.Background(), append([]string{"delete", "--ignore-not-found"}, what...)...); err != nil {
				t.Error(err)
			}
		}
	})
	podsRunning(t, name, int(actors[0].Replicas))
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(testenv.Namespace(name))); err != nil || len(pods.Items) == 0 {
		t.Fatalf("the Pods of %s: %v", name, err)
	}
	// The pause image has no shell: the exec itself fails in the
	// container, after admission let it through.
	out, err := kube(ctx, "exec", "-n", testenv.Namespace(name), pods.Items[0].Name, "--", "true")
	t.Logf("kubectl exec: %v %s", err, out)
	eventually(t, time.Minute, "the exec recorded on "+name, func(ctx context.Context) error {
		pb := testenv.NewPlaybook(name, "", nil)
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pb), pb); err != nil {
			return err
		}
		u, ok := expiry.LastUse(pb.GetAnnotations())
		if !ok || u.Via != expiry.ViaExec || u.By == "" {
			return fmt.Errorf("last-use %q", pb.GetAnnotations()[expiry.AnnotationLastUse])
		}
		t.Logf("Playbook %s: last use %s at %s", name, u, u.At)
		return nil
	})
}

// events logs the Warning Events of the controller's namespace, which
// say what went wrong when a check above failed.
func events(t *testing.T, namespace string) {
	t.Helper()
	var list corev1.EventList
	if err := k8s.List(t.Context(), &list, client.InNamespace(namespace)); err != nil {
		t.Log(err)
		return
	}
	for _, e := range list.Items {
		if e.Type == corev1.EventTypeWarning && e.Reason != "MissingClusterDNS" {
			t.Logf("Warning %s %s/%s: %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		}
	}
}

// TestKustomize installs config/default, with config/admission, as
// `kubectl apply -k` users do, changing only the image tag, the policy's
// schedule and its mail channel; then reclaims a Playbook that runs Pods.
func TestKustomize(t *testing.T) {
	const namespace = "timeout-system"
	ctx := t.Context()
	overlay := t.TempDir()
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
- channel.yaml
components:
- %s
images:
- name: %s
  newTag: %s
patches:
- target: {kind: TimeoutPolicy, name: playbooks}
  patch: |
    apiVersion: timeout.amphitheatre.app/v1alpha1
    kind: TimeoutPolicy
    metadata:
      name: playbooks
    spec:
      defaultTTL: 1h
      reminders: [%s]
      minimumNotice: %s
      notifications:
        channels:
        - name: e2e-mail
          to: [platform@e2e.test]
`, relative(t, overlay, "config", "default"), relative(t, overlay, "config", "admission", "component"), repository, tagV1, reminderLead, minimumNotice)
	channel := fmt.Sprintf(`apiVersion: timeout.amphitheatre.app/v1alpha1
kind: NotificationChannel
metadata:
  name: e2e-mail
spec:
  email:
    host: %q
    port: %d
    security: None
    from: timeout@e2e.test
`, inbox.Host, inbox.Port)
	for name, body := range map[string]string{"kustomization.yaml": kustomization, "channel.yaml": channel} {
		if err := os.WriteFile(filepath.Join(overlay, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	manifests, err := command(ctx, kustomize, "build", overlay)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(overlay, "manifests.yaml")
	if err := os.WriteFile(file, []byte(manifests), 0o600); err != nil {
		t.Fatal(err)
	}
	// As docs/guides/install-kustomize.md says: the CRDs first (taking
	// over those the chart installed, when it ran before), then the rest.
	if _, err := kube(ctx, "apply", "--server-side", "--force-conflicts", "-k", filepath.Join(root, "config", "crd")); err != nil {
		t.Fatal(err)
	}
	if _, err := kube(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd/timeoutpolicies.timeout.amphitheatre.app", "crd/notificationchannels.timeout.amphitheatre.app"); err != nil {
		t.Fatal(err)
	}
	if _, err := kube(ctx, "apply", "--server-side", "--force-conflicts", "-f", file); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := kube(context.Background(), "delete", "--ignore-not-found", "--wait", "--timeout=2m", "-f", file); err != nil {
			t.Error(err)
		}
	})

	// The policy was applied together with the admission policies, before
	// they were in force: as the admission guide says, it is written again
	// once they are, and then carries its author's stamp.
	eventually(t, time.Minute, "the policy stamped with its author", func(ctx context.Context) error {
		if _, err := kube(ctx, "annotate", "timeoutpolicy", "playbooks", "--overwrite", "e2e.test/written="+time.Now().Format("150405.000")); err != nil {
			return err
		}
		out, err := kube(ctx, "get", "timeoutpolicy", "playbooks", "-o", `jsonpath={.metadata.annotations.timeout\.amphitheatre\.app/author}`)
		if err != nil || !strings.Contains(out, "username") {
			return fmt.Errorf("no author stamp yet (%q, %v)", out, err)
		}
		return nil
	})

	pods := ready(t, namespace, 2, repository+":"+tagV1)
	first := leader(t, namespace, "")
	t.Logf("Ready: %s and %s; %s leads", pods[0].Name, pods[1].Name, first)
	secured(t, pods)

	d := watchDeletions(t)
	reclaim := createPlaybook(t, "e2e-kustomize-reclaim", 75*time.Second, actors)
	// Sleep: a second policy puts the Playbooks labelled e2e-sleep to
	// sleep 45 s after their last use, with the permissions config/rbac
	// grants; its Pods go, and come back on use.
	const sleepPolicy = `apiVersion: timeout.amphitheatre.app/v1alpha1
kind: TimeoutPolicy
metadata:
  name: e2e-sleep
spec:
  priority: 10
  selector: {matchLabels: {e2e-sleep: "true"}}
  defaultTTL: 1h
  reminders: []
  minimumNotice: 0s
  sleep: {afterIdle: 45s, deleteAfter: 1h}
`
	sleepFile := filepath.Join(overlay, "sleep-policy.yaml")
	if err := os.WriteFile(sleepFile, []byte(sleepPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := kube(ctx, "apply", "-f", sleepFile); err != nil {
		t.Fatal(err)
	}
	sleepy := createPlaybookLabelled(t, "e2e-kustomize-sleep", map[string]string{"e2e-sleep": "true"}, actors)
	t.Cleanup(func() {
		for _, what := range [][]string{{"-f", sleepFile}, {"playbooks.amphitheatre.app/" + sleepy}} {
			if _, err := kube(context.Background(), append([]string{"delete", "--ignore-not-found"}, what...)...); err != nil {
				t.Error(err)
			}
		}
	})
	podsRunning(t, reclaim.name, 3)
	podsRunning(t, sleepy, 3)
	reclaim.gone(t, d, 2*time.Minute)
	reclaimed(t, reclaim.name)

	podsGone(t, sleepy)
	t.Logf("Playbook %s asleep: %s", sleepy, sleepState(t, sleepy))
	if _, err := kube(ctx, "annotate", "playbooks.amphitheatre.app", sleepy, "--overwrite",
		"timeout.amphitheatre.app/last-active="+time.Now().UTC().Format(time.RFC3339)); err != nil {
		t.Fatal(err)
	}
	podsRunning(t, sleepy, 3)
	t.Logf("Playbook %s woke: %s", sleepy, sleepState(t, sleepy))
	if n := len(received(inbox, "reminder", reclaim.name)); n != 1 {
		t.Errorf("Playbook %s: %d reminders, want 1", reclaim.name, n)
	}
	noneTwice(t, inbox, []string{reclaim.name})

	reader := token(t, namespace, "e2e-scraper", "timeout-controller-metrics-reader")
	if code, body := scrape(t, namespace, reader); code != 200 || !strings.Contains(body, "timeout_controller_") {
		t.Errorf("/metrics with a metrics-reader token: %d, want 200 with the controller's metrics", code)
	}
	events(t, namespace)
}

// relative is the path of the repository's elem from dir: kustomize takes
// no absolute path.
func relative(t *testing.T, dir string, elem ...string) string {
	t.Helper()
	rel, err := filepath.Rel(dir, filepath.Join(append([]string{root}, elem...)...))
	if err != nil {
		t.Fatal(err)
	}
	return rel
}
