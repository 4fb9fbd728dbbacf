// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// The lease name main.go elects on.
const haLeaseName = "timeout-controller.timeout.amphitheatre.app"

// Leader election timings of the replicas, short so that a failover fits in
// the test.
const (
	haLease    = 4 * time.Second
	haRenew    = 3 * time.Second
	haRetry    = 500 * time.Millisecond
	haShutdown = 10 * time.Second
)

// haTakeoverBound is the longest a standby may take to acquire a Lease
// whose holder died: the standby sees the last renewal up to one jittered
// retry (client-go waits up to 2.2 retry periods) after it was written,
// waits out the lease duration from then, and tries again up to one more
// jittered retry later; plus a margin for a loaded machine.
const haTakeoverBound = haLease + 2*(22*haRetry/10) + 1500*time.Millisecond

// The policy's reminder leads: further apart than a failover takes, so that
// no object has two stages fall due while nobody leads.
var haLeads = []time.Duration{14 * time.Second, 7 * time.Second}

// haOnTime is how late a reminder or a deletion may be while a replica
// leads; haCatchUp is how long after taking over a new leader may take to
// send or delete what fell due while nobody led.
const (
	haOnTime  = 2 * time.Second
	haCatchUp = 3 * time.Second
)

// TestHAFailoverAndGracefulShutdown runs the controller binary twice
// against the suite's API server, kills the leader with SIGKILL while
// reminders are pending and objects are expiring, then stops the next
// leader with SIGTERM while it is sending, and checks that the standby
// takes over in time, acts only once it leads, deletes nothing early and
// sends every reminder, none twice except where a killed leader could not
// record it (then with the same id).
//
// It is not parallel: the replicas, like the suite's in-process
// controller, govern every TimeoutPolicy in the cluster, so the in-process
// controller is stopped meanwhile (it would act on these objects too), and
// no other test's policy may exist (the replicas would act on its objects).
// Tests that call t.Parallel wait until this one is done.
func TestHAFailoverAndGracefulShutdown(t *testing.T) {
	ctx := context.Background()
	suffix := rand.String(5)
	test := "ha-" + suffix
	ns := "timeout-ha-" + suffix

	var others v1alpha1.TimeoutPolicyList
	if err := k8s.List(ctx, &others); err != nil {
		t.Fatal(err)
	}
	for _, p := range others.Items {
		t.Fatalf("policy %s exists: the replicas would govern its objects as well; this test must run alone", p.Name)
	}
	standAlone(t)

	dir := t.TempDir()
	bin := buildController(t, dir)
	kubeconfig := writeKubeconfig(t, dir)

	// The Lease and the webhook's signing key live in a namespace of their
	// own, which the replicas read Secrets from and elect in.
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	key := []byte("whsec-ha-" + rand.String(24))
	secrets = append(secrets, string(key))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "webhook"}, Data: map[string][]byte{"key": key}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	rc := startReceiver(t, key)
	leases := watchLease(t, ns)

	start := func(name string) *replica {
		return startReplica(t, bin, dir, name, kubeconfig, ns)
	}
	a, b := start("a"), start("b")
	first, standby := waitLeader(t, leases, 20*time.Second, a, b)
	for _, r := range []*replica{first, standby} {
		r.waitReady(t, 20*time.Second)
	}
	t.Logf("%s leads as %s; %s stands by", first.name, first.identity, standby.name)

	spec := playbookPolicy(test, "1h")
	spec.Reminders = []v1alpha1.Duration{"14s", "7s"}
	spec.MinimumNotice = "0s"
	createChannel(t, test, v1alpha1.NotificationChannelSpec{Webhook: &v1alpha1.WebhookChannel{
		URL: rc.url, SecretRef: v1alpha1.SecretKeySelector{Namespace: ns, Name: "webhook", Key: "key"},
	}})
	spec.Notifications.Channels = []v1alpha1.ChannelReference{{Name: test}}
	createPolicy(t, test, spec)
	fixture.Eventually(t, 15*time.Second, "policy "+test+" ready", func() (bool, error) {
		p, err := getPolicy(test)
		if err != nil {
			return false, err
		}
		return apimeta.IsStatusConditionTrue(p.Status.Conditions, "Ready"), nil
	})

	// Lifetimes in seconds from creation. The kill comes 400ms after
	// killed's 7s reminder falls due (at 16s), while the receiver holds
	// that delivery; the SIGTERM 300ms after stopped's 7s reminder falls
	// due (at 30s), likewise. By the kill, some objects are gone and some
	// reminders sent; others fall due while nobody leads, or after.
	const killedTTL, stoppedTTL = 23, 37
	ttls := []int{5, 9, 12, 15, 17, 19, 21, killedTTL, 25, 27, 29, 31, 33, 35, stoppedTTL, 39, 41, 43, 46, 50}
	objs := make([]*haObject, 0, len(ttls))
	for _, ttl := range ttls {
		pb := create(t, playbooks, newPlaybook(test, fmt.Sprintf("ha %ds", ttl), map[string]string{expiry.AnnotationTTL: fmt.Sprintf("%ds", ttl)}))
		o := &haObject{tracked: pb, ttl: time.Duration(ttl) * time.Second}
		o.expiresAt = pb.after(o.ttl)
		for _, lead := range haLeads {
			if o.ttl >= lead {
				o.stages = append(o.stages, haStage{key: expiry.StageKey(lead), due: o.expiresAt.Add(-lead)})
			}
		}
		objs = append(objs, o)
	}
	killed, stopped := objs[slices.Index(ttls, killedTTL)], objs[slices.Index(ttls, stoppedTTL)]

	// Phase 1: SIGKILL the leader while it sends killed's reminder.
	const hold = 1500 * time.Millisecond
	killedDue := killed.stage(expiry.StageKey(haLeads[1])).due
	time.Sleep(time.Until(killedDue.Add(-time.Second)))
	rc.slowFor(killed.GetName(), hold)
	killed.slow = hold
	time.Sleep(time.Until(killedDue.Add(400 * time.Millisecond)))
	standby.mustRun(t)
	killAt := first.kill(t)
	rc.slowFor(killed.GetName(), 0)
	second := standby
	waitTakeover(t, leases, first, haTakeoverBound+5*time.Second, second)
	takeover1 := second.acquiredAt.Sub(killAt)
	lastRenew := leases.lastRenew(first.identity)
	t.Logf("SIGKILL: %s took over %s after the kill, %s after %s last renewed", second.name, takeover1, second.acquiredAt.Sub(lastRenew), first.name)
	// Both times are wall-clock times written into the Lease, while
	// client-go waits out the lease on the monotonic clock from when the
	// standby observed the renewal: allow for the two drifting apart on a
	// virtual machine (94 ms seen once in about ten runs).
	if gap := second.acquiredAt.Sub(lastRenew); gap < haLease-250*time.Millisecond {
		t.Errorf("%s acquired the Lease %s after %s last renewed it, before its %s ran out", second.name, gap, first.name, haLease)
	}
	if takeover1 > haTakeoverBound {
		t.Errorf("%s took over %s after the kill; want within %s", second.name, takeover1, haTakeoverBound)
	}
	if leases.released(first.identity) {
		t.Errorf("the Lease shows %s released it, but it was killed", first.name)
	}

	// A new standby, so that two replicas run again.
	third := start("c")
	third.waitReady(t, 20*time.Second)

	// Phase 2: SIGTERM the leader while it sends stopped's reminder.
	const hold2 = time.Second
	stoppedDue := stopped.stage(expiry.StageKey(haLeads[1])).due
	if wait := time.Until(stoppedDue.Add(-time.Second)); wait < 0 {
		t.Fatalf("the failover took too long: %s late for the graceful phase", -wait)
	}
	time.Sleep(time.Until(stoppedDue.Add(-time.Second)))
	rc.slowFor(stopped.GetName(), hold2)
	stopped.slow = hold2
	time.Sleep(time.Until(stoppedDue.Add(300 * time.Millisecond)))
	third.mustRun(t)
	termAt := second.terminate(t)
	rc.slowFor(stopped.GetName(), 0)
	second.expectCleanExit(t, termAt, haShutdown+3*time.Second)
	waitTakeover(t, leases, second, haLease+5*time.Second, third)
	takeover2 := third.acquiredAt.Sub(termAt)
	t.Logf("SIGTERM: %s exited %s after the signal; %s took over %s after the signal, %s after the exit",
		second.name, second.exitedAt.Sub(termAt), third.name, takeover2, third.acquiredAt.Sub(second.exitedAt))
	if !leases.released(second.identity) {
		t.Errorf("%s exited without releasing the Lease", second.name)
	}
	if d := third.acquiredAt.Sub(second.exitedAt); d > 22*haRetry/10+time.Second {
		t.Errorf("%s took over %s after %s released the Lease; want within one retry period (%s) and a margin", third.name, d, second.name, haRetry)
	}
	if takeover2 >= haLease {
		t.Errorf("%s took over %s after the SIGTERM; a released Lease must be taken well before its %s run out", third.name, takeover2, haLease)
	}

	// Everything expires, nothing early.
	last := objs[len(objs)-1].expiresAt
	fixture.Eventually(t, time.Until(last)+15*time.Second, "every Playbook deleted", func() (bool, error) {
		for _, o := range objs {
			select {
			case at := <-o.gone:
				o.goneAt = at
			default:
			}
			if o.goneAt.IsZero() {
				return false, fmt.Errorf("%s (ttl %s) still there", o.GetName(), o.ttl)
			}
		}
		return true, nil
	})
	// The one-off messages go out in the background.
	fixture.Eventually(t, 5*time.Second, "deleted messages", func() (bool, error) {
		for _, o := range objs {
			if len(rc.events(o.GetName(), "deleted")) == 0 && !inWindow(o.goneAt, killAt.Add(-time.Second), killAt.Add(time.Second)) {
				return false, nil
			}
		}
		return true, nil
	})

	terms := []haTerm{
		{kind: "SIGKILL", at: killAt, acquired: second.acquiredAt},
		{kind: "SIGTERM", at: termAt, acquired: third.acquiredAt},
	}
	var duplicates, superseded int
	for _, o := range objs {
		d, s := checkObject(t, rc, o, terms)
		duplicates += d
		superseded += s
	}
	// The leader that finished sending during its graceful shutdown said
	// so: its Events still go out.
	stoppedKey := expiry.StageKey(haLeads[1])
	fixture.Eventually(t, 5*time.Second, "the MessageSent Event of the reminder sent during the graceful shutdown", func() (bool, error) {
		for _, note := range eventNotes(t, eventNamespace, stopped.GetName(), "MessageSent") {
			if strings.Contains(note, "the "+stoppedKey+" reminder") {
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("reminders sent twice with the same id across the SIGKILL: %d (the held one included); stages superseded while nobody led: %d", duplicates, superseded)
	if bad := rc.rejected(); len(bad) > 0 {
		t.Errorf("the receiver rejected deliveries: %v", bad)
	}

	// Only the leader acts: nothing reaches the receiver while nobody
	// holds the Lease, except what the killed leader had sent already.
	for _, gap := range [][2]time.Time{{killAt.Add(500 * time.Millisecond), second.acquiredAt}, {second.exitedAt.Add(100 * time.Millisecond), third.acquiredAt}} {
		for _, o := range objs {
			for _, ev := range rc.all(o.GetName()) {
				if o.slow == 0 && inWindow(ev.arrived, gap[0], gap[1]) {
					t.Errorf("%s %v about %s arrived at %s, while nobody held the Lease", ev.Type, ev.Data["stage"], o.GetName(), ev.arrived.Format(time.RFC3339Nano))
				}
			}
		}
	}
	for _, r := range []*replica{first, second, third} {
		r.checkActedOnlyWhileLeading(t)
	}

	// The last leader stops cleanly too, and hands the Lease back.
	termAt = third.terminate(t)
	third.expectCleanExit(t, termAt, haShutdown+3*time.Second)
	fixture.Eventually(t, 5*time.Second, "the Lease released at the end", func() (bool, error) {
		return leases.released(third.identity), nil
	})
	for _, r := range []*replica{first, second, third} {
		data, err := os.ReadFile(r.logPath)
		if err != nil {
			t.Errorf("read %s's log to look for the signing key: %v", r.name, err)
		} else if strings.Contains(string(data), string(key)) {
			t.Errorf("the signing key is in %s's log", r.name)
		}
	}
}

// haObject is a Playbook of the test and what is expected of it.
type haObject struct {
	*tracked
	ttl       time.Duration
	expiresAt time.Time
	stages    []haStage
	// slow is how long the receiver held deliveries about it around a
	// leader's end.
	slow   time.Duration
	goneAt time.Time
}

type haStage struct {
	key string
	due time.Time
}

func (o *haObject) stage(key string) haStage {
	for _, s := range o.stages {
		if s.key == key {
			return s
		}
	}
	panic("no stage " + key)
}

// haTerm is the end of a leader's term: killed or terminated at at, and
// the next leader acquired the Lease at acquired.
type haTerm struct {
	kind         string
	at, acquired time.Time
}

// dark is the window around a term's end in which a reminder or deletion
// may fall to either leader, or wait for the next one.
func (h haTerm) dark(t time.Time) bool {
	return inWindow(t, h.at.Add(-haOnTime), h.acquired.Add(haCatchUp))
}

func inWindow(t, from, to time.Time) bool {
	return !t.Before(from) && !t.After(to)
}

// checkObject checks an object's reminders, deletion and one-off messages,
// and returns how many of its reminders went out twice across a SIGKILL and
// how many stages were superseded by a shorter one during a failover.
func checkObject(t *testing.T, rc *receiver, o *haObject, terms []haTerm) (duplicates, superseded int) {
	t.Helper()
	name := fmt.Sprintf("%s (ttl %s)", o.GetName(), o.ttl)
	termOf := func(at time.Time) *haTerm {
		for i := range terms {
			if terms[i].dark(at) {
				return &terms[i]
			}
		}
		return nil
	}
	reminders := rc.events(o.GetName(), "reminder")
	for _, ev := range reminders {
		if !slices.ContainsFunc(o.stages, func(s haStage) bool { return s.key == ev.Data["stage"] }) {
			t.Errorf("%s: reminder for stage %v, which does not apply", name, ev.Data["stage"])
		}
		if ev.Data["uid"] != string(o.GetUID()) {
			t.Errorf("%s: reminder about uid %v", name, ev.Data["uid"])
		}
	}
	for i, s := range o.stages {
		var got []cloudEvent
		for _, ev := range reminders {
			if ev.Data["stage"] == s.key {
				got = append(got, ev)
			}
		}
		term := termOf(s.due)
		late := haOnTime + o.slow
		latest := s.due.Add(late)
		if term != nil {
			latest = later(s.due, term.acquired).Add(haCatchUp + o.slow)
		}
		for _, ev := range got {
			switch {
			case ev.arrived.Before(s.due):
				t.Errorf("%s: %s reminder arrived %s before it was due", name, s.key, s.due.Sub(ev.arrived))
			case ev.arrived.After(o.expiresAt):
				t.Errorf("%s: %s reminder arrived %s after the expiry", name, s.key, ev.arrived.Sub(o.expiresAt))
			case ev.arrived.After(latest):
				t.Errorf("%s: %s reminder arrived %s after it was due; want by %s", name, s.key, ev.arrived.Sub(s.due), latest.Sub(s.due))
			}
		}
		switch {
		case len(got) == 1:
		case len(got) == 0:
			// Catch-up sends only the most urgent stage due: a shorter
			// one, due by the time the new leader looked, supersedes this.
			next := i + 1
			if term != nil && next < len(o.stages) && !o.stages[next].due.After(term.acquired.Add(haCatchUp)) &&
				len(rc.eventsOfStage(o.GetName(), o.stages[next].key)) > 0 {
				superseded++
				t.Logf("%s: %s reminder superseded by the %s one during the %s failover", name, s.key, o.stages[next].key, term.kind)
				continue
			}
			t.Errorf("%s: the %s reminder, due at %s, never arrived", name, s.key, s.due.Format(time.RFC3339Nano))
		case len(got) == 2 && term != nil && term.kind == "SIGKILL" && !s.due.After(term.at) && got[0].ID == got[1].ID:
			// The one window: the killed leader's delivery was accepted
			// and not yet recorded on the object.
			duplicates++
			t.Logf("%s: %s reminder sent by the killed leader and again by the next, both with id %s", name, s.key, got[0].ID)
		default:
			ids := make([]string, 0, len(got))
			for _, ev := range got {
				ids = append(ids, ev.ID+" at "+ev.arrived.Format(time.RFC3339Nano))
			}
			t.Errorf("%s: %s reminder, due at %s, arrived %d times: %v", name, s.key, s.due.Format(time.RFC3339Nano), len(got), ids)
		}
	}

	switch term := termOf(o.expiresAt); {
	case o.goneAt.Before(o.expiresAt):
		t.Errorf("%s: deleted %s before its expiry", name, o.expiresAt.Sub(o.goneAt))
	case term == nil && o.goneAt.After(o.expiresAt.Add(haOnTime)):
		t.Errorf("%s: deleted %s after its expiry; want within %s", name, o.goneAt.Sub(o.expiresAt), haOnTime)
	case term != nil && o.goneAt.After(later(o.expiresAt, term.acquired).Add(haCatchUp)):
		t.Errorf("%s: deleted %s after its expiry, %s after the %s failover", name, o.goneAt.Sub(o.expiresAt), o.goneAt.Sub(term.acquired), term.kind)
	}

	// The one-off messages wait in the outbox until accepted: a leader
	// killed between a send and removing the entry makes the next one send
	// again, with the same id, which receivers drop. One about a deletion
	// the killed leader made just before it died may come after the check
	// (the next leader resolves the entry it left 15 s after it was
	// written).
	for _, typ := range []string{"expired", "deleted"} {
		n := len(rc.ids(o.GetName(), typ))
		mayLose := inWindow(o.goneAt, terms[0].at.Add(-time.Second), terms[0].at.Add(time.Second))
		if n > 1 || (n == 0 && !mayLose) {
			t.Errorf("%s: %d %s messages, want one", name, n, typ)
		}
	}
	return duplicates, superseded
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// all returns every accepted event about subject.
func (rc *receiver) all(subject string) []cloudEvent {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []cloudEvent
	for _, e := range rc.got {
		if e.Subject == subject {
			out = append(out, e)
		}
	}
	return out
}

func (rc *receiver) eventsOfStage(subject, stage string) []cloudEvent {
	var out []cloudEvent
	for _, e := range rc.events(subject, "reminder") {
		if e.Data["stage"] == stage {
			out = append(out, e)
		}
	}
	return out
}

// buildController builds the controller binary from this module.
func buildController(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "timeout-controller")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/timeout-controller")
	cmd.Dir = filepath.Join("..", "..")
	began := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the controller: %v\n%s", err, out)
	}
	t.Logf("built the controller in %s", time.Since(began).Round(time.Millisecond))
	return bin
}

// writeKubeconfig writes a kubeconfig for the suite's API server, as the
// user the suite connects as.
func writeKubeconfig(t *testing.T, dir string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: restConfig.Host, CertificateAuthorityData: restConfig.CAData}
	cfg.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: restConfig.CertData, ClientKeyData: restConfig.KeyData, Token: restConfig.BearerToken,
	}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	cfg.CurrentContext = "envtest"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// replica is one controller process.
type replica struct {
	name      string
	cmd       *exec.Cmd
	logPath   string
	auditPath string
	probe     string
	// identity is its Lease holder identity, and acquiredAt the Lease's
	// acquireTime, once it leads.
	identity   string
	acquiredAt time.Time

	done     chan struct{}
	exitedAt time.Time
	state    *os.ProcessState
}

func startReplica(t *testing.T, bin, dir, name, kubeconfig, ns string, extra ...string) *replica {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	probe := l.Addr().String()
	_ = l.Close()
	r := &replica{
		name:      name,
		logPath:   filepath.Join(dir, name+".log"),
		auditPath: filepath.Join(dir, name+".audit.jsonl"),
		probe:     probe,
		done:      make(chan struct{}),
	}
	out, err := os.Create(r.logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect",
		"--leader-election-namespace=" + ns,
		"--leader-elect-lease-duration=" + haLease.String(),
		"--leader-elect-renew-deadline=" + haRenew.String(),
		"--leader-elect-retry-period=" + haRetry.String(),
		"--graceful-shutdown-timeout=" + haShutdown.String(),
		"--metrics-bind-address=0",
		// Two replicas on one host: the webhook would bind the same port.
		"--webhook-port=0",
		"--health-probe-bind-address=" + probe,
		"--cluster-event-namespace=" + eventNamespace,
		"--secret-namespace=" + ns,
		"--audit-log=" + r.auditPath,
		"--workers=4",
		"--zap-time-encoding=rfc3339nano",
	}
	r.cmd = exec.Command(bin, append(args, extra...)...)
	r.cmd.Stdout, r.cmd.Stderr = out, out
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start replica %s: %v", name, err)
	}
	go func() {
		_ = r.cmd.Wait()
		r.exitedAt = time.Now()
		r.state = r.cmd.ProcessState
		_ = out.Close()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = r.cmd.Process.Kill()
			<-r.done
		}
		if t.Failed() {
			t.Logf("replica %s (%s), last lines of its log:\n%s", r.name, r.identity, tail(r.logPath, 40))
		}
	})
	return r
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func (r *replica) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// mustRun fails the test if the replica has exited.
func (r *replica) mustRun(t *testing.T) {
	t.Helper()
	if r.exited() {
		t.Fatalf("replica %s exited unexpectedly (%s):\n%s", r.name, r.state, tail(r.logPath, 40))
	}
}

func (r *replica) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	fixture.Eventually(t, timeout, "replica "+r.name+" ready", func() (bool, error) {
		if r.exited() {
			return false, fmt.Errorf("exited: %s", r.state)
		}
		resp, err := http.Get("http://" + r.probe + "/readyz")
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("readyz: %s", resp.Status)
	})
}

func (r *replica) kill(t *testing.T) time.Time {
	t.Helper()
	r.mustRun(t)
	at := time.Now()
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r.done
	return at
}

func (r *replica) terminate(t *testing.T) time.Time {
	t.Helper()
	r.mustRun(t)
	at := time.Now()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	return at
}

// expectCleanExit waits for the replica to exit after a SIGTERM sent at
// at, and checks that it exited 0 within timeout.
func (r *replica) expectCleanExit(t *testing.T, at time.Time, timeout time.Duration) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(time.Until(at.Add(timeout))):
		t.Fatalf("replica %s still running %s after SIGTERM", r.name, timeout)
	}
	if code := r.state.ExitCode(); code != 0 {
		t.Errorf("replica %s exited with %s after SIGTERM; want status 0:\n%s", r.name, r.state, tail(r.logPath, 20))
	}
	t.Logf("replica %s exited %s after SIGTERM: %s", r.name, r.exitedAt.Sub(at).Round(time.Millisecond), r.state)
}

type logLine struct {
	TS  time.Time `json:"ts"`
	Msg string    `json:"msg"`
	Raw string    `json:"-"`
}

// logLines returns the structured lines of the replica's log.
func (r *replica) logLines() []logLine {
	f, err := os.Open(r.logPath)
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	var out []logLine
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for s.Scan() {
		var l logLine
		if json.Unmarshal(s.Bytes(), &l) == nil && !l.TS.IsZero() {
			l.Raw = s.Text()
			out = append(out, l)
		}
	}
	return out
}

// loggedAcquire reports whether the replica logged that it acquired the
// Lease.
func (r *replica) loggedAcquire() bool {
	for _, l := range r.logLines() {
		if l.Msg == "Successfully acquired lease" {
			return true
		}
	}
	return false
}

// checkActedOnlyWhileLeading checks that the replica sent and deleted
// nothing, by its log and its audit trail, outside its term.
func (r *replica) checkActedOnlyWhileLeading(t *testing.T) {
	t.Helper()
	end := r.exitedAt
	if end.IsZero() {
		end = time.Now()
	}
	var actions, audited int
	defer func() {
		t.Logf("replica %s: %d sends and deletions logged, %d audit records, checked against its term", r.name, actions, audited)
	}()
	for _, l := range r.logLines() {
		if l.Msg != "notified" && l.Msg != "deleted" {
			continue
		}
		actions++
		if r.acquiredAt.IsZero() || l.TS.Before(r.acquiredAt) || l.TS.After(end) {
			t.Errorf("replica %s acted while it did not lead (term %s to %s): %s",
				r.name, r.acquiredAt.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano), l.Raw)
		}
	}
	// The audit trail, where it exists, says the same.
	f, err := os.Open(r.auditPath)
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for s.Scan() {
		var rec struct {
			Time time.Time `json:"time"`
			Type string    `json:"type"`
		}
		audited++
		if err := json.Unmarshal(s.Bytes(), &rec); err != nil {
			t.Errorf("replica %s: unreadable audit record %q: %v", r.name, s.Text(), err)
			continue
		}
		if r.acquiredAt.IsZero() || rec.Time.Before(r.acquiredAt) || rec.Time.After(end) {
			t.Errorf("replica %s audited %q outside its term: %s", r.name, rec.Type, s.Text())
		}
	}
}

// leaseRecord is one version of the Lease.
type leaseRecord struct {
	holder          string
	acquire, renew  time.Time
	durationSeconds int32
	transitions     int32
	resourceVersion string
}

// leaseHistory keeps every version of the Lease, from a watch.
type leaseHistory struct {
	mu   sync.Mutex
	recs []leaseRecord
}

func watchLease(t *testing.T, ns string) *leaseHistory {
	t.Helper()
	h := &leaseHistory{}
	ctx, cancel := context.WithCancel(context.Background())
	leases := clients.CoordinationV1().Leases(ns)
	w, err := leases.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			for ev := range w.ResultChan() {
				if l, ok := ev.Object.(*coordinationv1.Lease); ok && l.Name == haLeaseName &&
					(ev.Type == watch.Added || ev.Type == watch.Modified) {
					h.add(l)
				}
			}
			// A watch the API server ended: go on from the last version.
			if ctx.Err() != nil {
				return
			}
			w, err = leases.Watch(ctx, metav1.ListOptions{ResourceVersion: h.lastVersion()})
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return h
}

func (h *leaseHistory) add(l *coordinationv1.Lease) {
	rec := leaseRecord{resourceVersion: l.ResourceVersion}
	if l.Spec.HolderIdentity != nil {
		rec.holder = *l.Spec.HolderIdentity
	}
	if l.Spec.AcquireTime != nil {
		rec.acquire = l.Spec.AcquireTime.Time
	}
	if l.Spec.RenewTime != nil {
		rec.renew = l.Spec.RenewTime.Time
	}
	if l.Spec.LeaseDurationSeconds != nil {
		rec.durationSeconds = *l.Spec.LeaseDurationSeconds
	}
	if l.Spec.LeaseTransitions != nil {
		rec.transitions = *l.Spec.LeaseTransitions
	}
	h.mu.Lock()
	h.recs = append(h.recs, rec)
	h.mu.Unlock()
}

func (h *leaseHistory) lastVersion() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.recs) == 0 {
		return ""
	}
	return h.recs[len(h.recs)-1].resourceVersion
}

func (h *leaseHistory) current() (leaseRecord, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.recs) == 0 {
		return leaseRecord{}, false
	}
	return h.recs[len(h.recs)-1], true
}

// lastRenew is the last renewal the holder wrote.
func (h *leaseHistory) lastRenew(holder string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	var last time.Time
	for _, r := range h.recs {
		if r.holder == holder && r.renew.After(last) {
			last = r.renew
		}
	}
	return last
}

// released reports whether a version in which holder held the Lease was
// followed by one without a holder: client-go's release on cancel.
func (h *leaseHistory) released(holder string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := 1; i < len(h.recs); i++ {
		if h.recs[i-1].holder == holder && h.recs[i].holder == "" {
			return true
		}
	}
	return false
}

// waitLeader waits until one of the replicas leads and returns it and the
// other one.
func waitLeader(t *testing.T, h *leaseHistory, timeout time.Duration, a, b *replica) (leader, standby *replica) {
	t.Helper()
	fixture.Eventually(t, timeout, "a leader", func() (bool, error) {
		a.mustRun(t)
		b.mustRun(t)
		rec, ok := h.current()
		if !ok || rec.holder == "" {
			return false, errors.New("the Lease has no holder")
		}
		la, lb := a.loggedAcquire(), b.loggedAcquire()
		switch {
		case la && lb:
			return false, errors.New("both replicas say they acquired the Lease")
		case la:
			leader, standby = a, b
		case lb:
			leader, standby = b, a
		default:
			return false, errors.New("no replica says it acquired the Lease")
		}
		leader.identity, leader.acquiredAt = rec.holder, rec.acquire
		return true, nil
	})
	return leader, standby
}

// waitTakeover waits until candidate holds the Lease after old.
func waitTakeover(t *testing.T, h *leaseHistory, old *replica, timeout time.Duration, candidate *replica) {
	t.Helper()
	fixture.Eventually(t, timeout, candidate.name+" takes over from "+old.name, func() (bool, error) {
		candidate.mustRun(t)
		rec, ok := h.current()
		if !ok || rec.holder == "" || rec.holder == old.identity {
			return false, fmt.Errorf("holder %q", rec.holder)
		}
		if !candidate.loggedAcquire() {
			return false, fmt.Errorf("%s holds the Lease, but %s has not said it acquired it", rec.holder, candidate.name)
		}
		candidate.identity, candidate.acquiredAt = rec.holder, rec.acquire
		return true, nil
	})
}

// standAlone stops the suite's in-process controller for the rest of t,
// so that only the test's own controller processes govern its objects,
// and starts it again when t ends.
func standAlone(t *testing.T) {
	t.Helper()
	if err := stopController(); err != nil {
		t.Fatalf("stop the in-process controller: %v", err)
	}
	t.Cleanup(func() {
		if _, err := startController(restConfig, testScheme); err != nil {
			t.Errorf("restart the in-process controller: %v", err)
		}
	})
}
