// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// kube runs the cluster's kubectl as its administrator.
func kube(ctx context.Context, args ...string) (string, error) {
	return command(ctx, kubectl, args...)
}

// command runs a command against the cluster and returns its output.
func command(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "HELM_CACHE_HOME="+filepath.Join(c.Dir, "helm"), "HELM_CONFIG_HOME="+filepath.Join(c.Dir, "helm"), "HELM_DATA_HOME="+filepath.Join(c.Dir, "helm"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// eventually polls check every half second until it holds or timeout
// passes, then fails the test with check's last error.
func eventually(t *testing.T, timeout time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := c.Running(); err != nil {
			return false, err
		}
		last = check(ctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s: %v (last: %v)", what, timeout, err, last)
	}
}

// received lists the messages of event about the Playbook name.
func received(mb *fixture.Mailbox, event, name string) []fixture.Mail {
	var out []fixture.Mail
	for _, m := range mb.Received() {
		if m.Header.Get("X-Timeout-Event") == event && m.Header.Get("X-Timeout-Object") == "Playbook/"+name {
			out = append(out, m)
		}
	}
	return out
}

// noneTwice fails the test for every Playbook of names that received a
// message of one event and subject more than once.
func noneTwice(t *testing.T, mb *fixture.Mailbox, names []string) {
	t.Helper()
	seen := map[string]int{}
	for _, m := range mb.Received() {
		seen[m.Header.Get("X-Timeout-Object")+" "+m.Header.Get("X-Timeout-Event")+" "+m.Header.Get("Subject")]++
	}
	for _, n := range names {
		for key, count := range seen {
			if strings.HasPrefix(key, "Playbook/"+n+" ") && count > 1 {
				t.Errorf("received %d times: %s", count, key)
			}
		}
	}
}

// playbook is a test Playbook: a lifetime, and when it was deleted.
type playbook struct {
	name    string
	ttl     time.Duration
	created time.Time
	// deleted is the deletionTimestamp the API server gave it.
	deleted time.Time
}

// deletions records when each Playbook is deleted, from a watch of its
// own, to check against its expiry.
type deletions struct {
	mu   sync.Mutex
	when map[string]time.Time
}

func watchDeletions(t *testing.T) *deletions {
	t.Helper()
	dc, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	d := &deletions{when: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := dc.Resource(testenv.Playbooks).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || (ev.Type != watch.Modified && ev.Type != watch.Deleted) || u.GetDeletionTimestamp() == nil {
				continue
			}
			d.mu.Lock()
			if _, ok := d.when[u.GetName()]; !ok {
				d.when[u.GetName()] = u.GetDeletionTimestamp().Time
			}
			d.mu.Unlock()
		}
	}()
	return d
}

func (d *deletions) of(name string) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.when[name]
	return at, ok
}

// createPlaybook creates a Playbook that lives ttl, as Amphitheatre makes
// it (with its finalizer), and with actors, their namespace and workloads.
func createPlaybook(t *testing.T, name string, ttl time.Duration, actors []testenv.Actor) *playbook {
	t.Helper()
	pb := testenv.NewPlaybook(name, name, map[string]string{"timeout.amphitheatre.app/ttl": strconv.Itoa(int(ttl.Seconds())) + "s"})
	if err := testenv.Deploy(t.Context(), k8s, pb, actors); err != nil {
		t.Fatalf("create Playbook %s: %v", name, err)
	}
	return &playbook{name: name, ttl: ttl, created: pb.GetCreationTimestamp().Time}
}

// gone waits until the Playbook is gone, then fails the test if it was
// deleted before its expiry.
func (p *playbook) gone(t *testing.T, d *deletions, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, "Playbook "+p.name+" deleted", func(ctx context.Context) error {
		pb := testenv.NewPlaybook(p.name, "", nil)
		err := k8s.Get(ctx, client.ObjectKeyFromObject(pb), pb)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there (deletionTimestamp %v)", pb.GetDeletionTimestamp())
	})
	at, ok := d.of(p.name)
	if !ok {
		t.Fatalf("Playbook %s is gone but its deletion was not seen", p.name)
	}
	p.deleted = at
	// Both times are whole seconds, as the controller reads them.
	expiry := p.created.Add(p.ttl)
	if at.Before(expiry) {
		t.Errorf("Playbook %s was deleted at %s, before its expiry at %s", p.name, at.Format(time.RFC3339), expiry.Format(time.RFC3339))
	}
	t.Logf("Playbook %s deleted %s after its expiry", p.name, at.Sub(expiry))
}

// podsRunning waits until every Pod of the Playbook's namespace runs.
func podsRunning(t *testing.T, name string, want int) {
	t.Helper()
	eventually(t, 2*time.Minute, "Pods of Playbook "+name+" running", func(ctx context.Context) error {
		var pods corev1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace(testenv.Namespace(name))); err != nil {
			return err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running != want {
			return fmt.Errorf("%d of %d Pods running", running, want)
		}
		return nil
	})
}

// reclaimed waits until the Playbook's namespace and its Pods are gone.
func reclaimed(t *testing.T, name string) {
	t.Helper()
	eventually(t, 3*time.Minute, "namespace of Playbook "+name+" gone", func(ctx context.Context) error {
		var pods corev1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace(testenv.Namespace(name))); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d Pods left", len(pods.Items))
		}
		var ns corev1.Namespace
		err := k8s.Get(ctx, client.ObjectKey{Name: testenv.Namespace(name)}, &ns)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("namespace %s is %s", ns.Name, ns.Status.Phase)
	})
}

// leaseName is the controller's leader-election Lease.
const leaseName = "timeout-controller.timeout.amphitheatre.app"

// leader waits until a Pod of the controller in namespace holds the Lease,
// other than not, and returns its name.
func leader(t *testing.T, namespace, not string) string {
	t.Helper()
	var holder string
	eventually(t, 2*time.Minute, "a leader in "+namespace, func(ctx context.Context) error {
		var lease coordinationv1.Lease
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: leaseName}, &lease); err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return fmt.Errorf("the Lease has no holder")
		}
		// controller-runtime's identity is the Pod's name and a suffix.
		id := *lease.Spec.HolderIdentity
		pods := controllerPods(ctx, t, namespace)
		for _, p := range pods {
			if strings.HasPrefix(id, p.Name+"_") && p.Name != not {
				holder = p.Name
				return nil
			}
		}
		return fmt.Errorf("the Lease is held by %s, not by a running Pod other than %q", id, not)
	})
	return holder
}

func controllerPods(ctx context.Context, t *testing.T, namespace string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/name": "timeout-controller"}); err != nil {
		t.Fatal(err)
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

// ready waits until want Pods of the controller in namespace are Ready,
// through their probes, each running image.
func ready(t *testing.T, namespace string, want int, image string) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, 3*time.Minute, fmt.Sprintf("%d controller Pods Ready with %s", want, image), func(ctx context.Context) error {
		pods = controllerPods(ctx, t, namespace)
		n := 0
		for _, p := range pods {
			if p.Spec.Containers[0].Image != image {
				continue
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					n++
				}
			}
		}
		if n != want || len(pods) != want {
			return fmt.Errorf("%d Pods, %d Ready with %s", len(pods), n, image)
		}
		return nil
	})
	return pods
}

// secured checks, from the kernel's side, that each Pod's container runs
// as the nonroot user on a read-only root filesystem, with no shell.
func secured(t *testing.T, pods []corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
		pid, err := c.TaskPID(t.Context(), id)
		if err != nil {
			t.Fatalf("Pod %s: %v", p.Name, err)
		}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) == 5 && (f[0] == "Uid:" || f[0] == "Gid:") {
				for _, id := range f[1:] {
					if id != "65532" {
						t.Errorf("Pod %s runs with %s, want 65532 throughout", p.Name, line)
						break
					}
				}
			}
		}
		mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
		if err != nil {
			t.Fatal(err)
		}
		rootRO := false
		for _, line := range strings.Split(string(mounts), "\n") {
			if f := strings.Fields(line); len(f) > 5 && f[4] == "/" {
				rootRO = strings.HasPrefix(f[5], "ro,") || f[5] == "ro"
			}
		}
		if !rootRO {
			t.Errorf("Pod %s: its root filesystem is not mounted read-only", p.Name)
		}
		for _, sh := range []string{"/bin/sh", "/bin/bash", "/busybox"} {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d/root%s", pid, sh)); err == nil {
				t.Errorf("Pod %s: its image has %s", p.Name, sh)
			}
		}
	}
}

// scrape GETs /metrics through the controller's metrics Service with
// token, and returns the status and body.
func scrape(t *testing.T, namespace, token string) (int, string) {
	t.Helper()
	var svc corev1.Service
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: "timeout-controller-metrics"}, &svc); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// Its serving certificate is self-signed by the controller.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the test reaches a Pod it runs
	}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+net.JoinHostPort(svc.Spec.ClusterIP, "8443")+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("scrape through the Service: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// token is a token of a new ServiceAccount in namespace, bound to
// clusterRole when it is not empty.
func token(t *testing.T, namespace, name, clusterRole string) string {
	t.Helper()
	ctx := t.Context()
	if _, err := kube(ctx, "-n", namespace, "create", "serviceaccount", name); err != nil {
		t.Fatal(err)
	}
	if clusterRole != "" {
		if _, err := kube(ctx, "create", "clusterrolebinding", name, "--clusterrole="+clusterRole, "--serviceaccount="+namespace+":"+name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = kube(context.Background(), "delete", "clusterrolebinding", name) })
	}
	out, err := kube(ctx, "-n", namespace, "create", "token", name, "--duration=10m")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// createPlaybookLabelled creates a Playbook that lives an hour, with
// labels, as Amphitheatre makes it, and with actors.
func createPlaybookLabelled(t *testing.T, name string, labels map[string]string, actors []testenv.Actor) string {
	t.Helper()
	pb := testenv.NewPlaybook(name, name, nil)
	pb.SetLabels(labels)
	if err := testenv.Deploy(t.Context(), k8s, pb, actors); err != nil {
		t.Fatalf("create Playbook %s: %v", name, err)
	}
	return name
}

// podsGone waits until the Playbook's namespace holds no Pod, its
// namespace still there.
func podsGone(t *testing.T, name string) {
	t.Helper()
	eventually(t, 2*time.Minute, "Pods of Playbook "+name+" gone", func(ctx context.Context) error {
		var pods corev1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace(testenv.Namespace(name))); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d Pods left", len(pods.Items))
		}
		var ns corev1.Namespace
		return k8s.Get(ctx, client.ObjectKey{Name: testenv.Namespace(name)}, &ns)
	})
}

// sleepState is the sleep annotation of the Playbook.
func sleepState(t *testing.T, name string) string {
	t.Helper()
	pb := testenv.NewPlaybook(name, "", nil)
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(pb), pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetAnnotations()["timeout.amphitheatre.app/sleep"]
}
