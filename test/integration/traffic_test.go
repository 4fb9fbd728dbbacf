// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// prometheusAddr is where the controller's --prometheus-url points: a
// port nothing listens on until a test starts Prometheus there.
var prometheusAddr string

// requestsTarget serves /metrics with a counter of requests by namespace,
// as an ingress controller does, and returns it with the target's address.
func requestsTarget(t *testing.T) (*prometheus.CounterVec, string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "requests_total", Help: "Requests by namespace."}, []string{"namespace"})
	reg.MustRegister(requests)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return requests, l.Addr().String()
}

// startPrometheus runs the real Prometheus (TIMEOUT_PROMETHEUS, built by
// hack/prometheus.sh) on prometheusAddr, scraping target every second,
// and returns a function that stops it.
func startPrometheus(t *testing.T, target string) (stop func()) {
	t.Helper()
	bin := os.Getenv("TIMEOUT_PROMETHEUS")
	if bin == "" {
		t.Fatal("TIMEOUT_PROMETHEUS is not set: run `make test`, which builds Prometheus (hack/prometheus.sh) and sets it")
	}
	dir := t.TempDir()
	config := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: target\n    static_configs:\n      - targets: [%q]\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+prometheusAddr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop = func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	t.Cleanup(stop)
	fixture.Eventually(t, 30*time.Second, "Prometheus ready", func() (bool, error) {
		select {
		case <-exited:
			return false, errors.New("prometheus exited")
		default:
		}
		resp, err := http.Get("http://" + prometheusAddr + "/-/ready")
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return stop
}

// ownNamespace creates the namespace amp-<id> owned by the Playbook, as
// Amphitheatre does, and returns its name.
func ownNamespace(t *testing.T, pb *tracked) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: testenv.Namespace(pb.GetName()),
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: testenv.PlaybookKind.GroupVersion().String(), Kind: testenv.PlaybookKind.Kind,
			Name: pb.GetName(), UID: pb.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}},
	}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return ns.Name
}

// lastUse reads the Playbook's last-active annotation and the use it names.
func lastUse(t *testing.T, name string) (string, expiry.Use, bool) {
	t.Helper()
	pb, err := dyn.Resource(playbooks).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u, ok := expiry.LastUse(pb.GetAnnotations())
	return pb.GetAnnotations()[expiry.AnnotationLastActive], u, ok
}

func trafficCondition(p *v1alpha1.TimeoutPolicy) *metav1.Condition {
	return meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionTraffic)
}

func TestTrafficThroughAPlaybooksNamespaceMovesItsIdleClockAndAFailingPrometheusMovesNothing(t *testing.T) {
	t.Parallel()
	const idleTTL = 40 * time.Second
	requests, target := requestsTarget(t)
	stopPrometheus := startPrometheus(t, target)

	spec := idlePolicy("traffic", "1s", v1alpha1.Duration(idleTTL.String()))
	spec.Traffic = &v1alpha1.Traffic{Query: `sum by (namespace) (rate(requests_total[10s]))`, Threshold: "0", Interval: "15s"}
	createPolicy(t, "traffic", spec)
	busy := create(t, playbooks, newPlaybook("traffic", "busy", nil))
	busyNS := ownNamespace(t, busy)
	idle := create(t, playbooks, newPlaybook("traffic", "idle", nil))
	idleNS := ownNamespace(t, idle)
	// The idle one's series exists, flat: a namespace with no requests.
	requests.WithLabelValues(idleNS).Add(0)

	driving := make(chan struct{})
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-driving:
				return
			case <-tick.C:
				requests.WithLabelValues(busyNS).Inc()
			}
		}
	}()
	defer close(driving)

	idle.expectDeletedOnTime(t, idle.after(idleTTL))
	at, use, ok := lastUse(t, busy.GetName())
	if !ok || use.Via != expiry.ViaTraffic || use.By != "" {
		t.Fatalf("busy Playbook's last use: %+v (found: %v, last-active %q); want one via %s", use, ok, at, expiry.ViaTraffic)
	}
	if !use.At.After(busy.GetCreationTimestamp().Time) {
		t.Fatalf("busy Playbook's last use at %s, not after its creation", use.At)
	}
	awaitPolicy(t, "traffic", "the Traffic condition True", func(p *v1alpha1.TimeoutPolicy) bool {
		c := trafficCondition(p)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonQueried
	})

	// Prometheus goes away while the traffic goes on: the query fails,
	// which is neither use nor its lack.
	stopPrometheus()
	// Within one interval of the query.
	fixture.Eventually(t, 20*time.Second, "the Traffic condition QueryFailed", func() (bool, error) {
		p, err := getPolicy("traffic")
		c := trafficCondition(p)
		return err == nil && c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonQueryFailed &&
			strings.Contains(c.Message, "connection refused"), err
	})
	frozen, _, _ := lastUse(t, busy.GetName())
	last, err := time.Parse(time.RFC3339, frozen)
	if err != nil {
		t.Fatal(err)
	}
	// Kept until its last use plus idleTTL, with its idle clock where
	// it was, then deleted on time.
	busy.expectKept(t, time.Until(last.Add(idleTTL))-time.Second)
	if now, _, _ := lastUse(t, busy.GetName()); now != frozen {
		t.Fatalf("last-active moved from %s to %s while Prometheus was down", frozen, now)
	}
	busy.expectDeletedOnTime(t, last.Add(idleTTL))
}
