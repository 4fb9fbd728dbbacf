// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/archive"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/plugin"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

var (
	pluginConfigOnce sync.Once
	pluginKubeconfig string
	pluginCacheDir   string
	pluginConfigErr  error
)

// pluginFlags are the kubeconfig flags that point the plugin at the
// suite's API server, through a kubeconfig file as a person would.
func pluginFlags(t *testing.T) []string {
	t.Helper()
	pluginConfigOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kubectl-timeout-*")
		if err != nil {
			pluginConfigErr = err
			return
		}
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: restConfig.Host, CertificateAuthorityData: restConfig.CAData}
		cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{
			ClientCertificateData: restConfig.CertData, ClientKeyData: restConfig.KeyData, Token: restConfig.BearerToken,
		}
		cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: "default"}
		cfg.CurrentContext = "envtest"
		pluginKubeconfig, pluginCacheDir = filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "cache")
		pluginConfigErr = clientcmd.WriteToFile(*cfg, pluginKubeconfig)
	})
	if pluginConfigErr != nil {
		t.Fatal(pluginConfigErr)
	}
	return []string{"--kubeconfig", pluginKubeconfig, "--cache-dir", pluginCacheDir}
}

type pluginResult struct {
	code        int
	out, errOut string
}

// kubectlTimeout runs the plugin in this process, as `kubectl timeout args…`.
func kubectlTimeout(t *testing.T, args ...string) pluginResult {
	t.Helper()
	var out, errOut bytes.Buffer
	code := plugin.Run(context.Background(), append(args, pluginFlags(t)...), plugin.Options{
		IOStreams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
	})
	return pluginResult{code: code, out: out.String(), errOut: errOut.String()}
}

func (r pluginResult) expect(t *testing.T, code int) pluginResult {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.out, r.errOut)
	}
	return r
}

func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, s)
	}
	return v
}

func getPlaybook(t *testing.T, name string) (*unstructured.Unstructured, error) {
	t.Helper()
	return dyn.Resource(playbooks).Get(context.Background(), name, metav1.GetOptions{})
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func TestPluginList(t *testing.T) {
	t.Parallel()
	const test = "plugin-list"
	createPolicy(t, test, playbookPolicy(test, "1h"))
	selector := testLabel + "=" + test

	alpha := create(t, playbooks, newPlaybook(test, "alpha", map[string]string{expiry.AnnotationTTL: "3h"}))
	bravo := create(t, playbooks, newPlaybook(test, "bravo", map[string]string{expiry.AnnotationTTL: "50m"}))
	charlie := create(t, playbooks, newPlaybook(test, "charlie", map[string]string{expiry.AnnotationKeep: "true"}))
	delta := create(t, playbooks, newPlaybook(test, "delta", map[string]string{expiry.AnnotationTTL: "3 days"}))
	// Not governed: no policy selects it.
	create(t, playbooks, newPlaybook(test+"-nobody", "echo", nil))

	t.Run("JSON, soonest deletion first, kept last", func(t *testing.T) {
		res := kubectlTimeout(t, "list", "playbooks", "-l", selector, "-o", "json").expect(t, plugin.ExitOK)
		list := decodeJSON[plugin.ItemList](t, res.out)
		var names []string
		for _, it := range list.Items {
			names = append(names, it.Title)
		}
		if want := []string{"bravo", "delta", "alpha", "charlie"}; !reflect.DeepEqual(names, want) {
			t.Fatalf("order %v, want %v", names, want)
		}
		b := list.Items[0]
		if b.Name != bravo.GetName() || b.Kind != "Playbook" || b.APIVersion != "amphitheatre.app/v1" || b.Policy != test ||
			b.Source != expiry.AnnotationTTL || b.UID != string(bravo.GetUID()) {
			t.Errorf("bravo: %+v", b)
		}
		if b.ExpiresAt == nil || !time.Time(*b.ExpiresAt).Equal(bravo.after(50*time.Minute)) {
			t.Errorf("bravo expires at %v, want %s", b.ExpiresAt, bravo.after(50*time.Minute))
		}
		if b.SecondsLeft == nil || *b.SecondsLeft > 50*60 || *b.SecondsLeft < 45*60 {
			t.Errorf("bravo has %v seconds left, want about 3000", b.SecondsLeft)
		}
		if len(b.RemindersSent) != 0 || len(b.Flags) != 0 {
			t.Errorf("bravo: reminders %v, flags %v", b.RemindersSent, b.Flags)
		}
		if d := list.Items[1]; d.Name != delta.GetName() || !reflect.DeepEqual(d.Flags, []string{"invalid"}) || d.Source != expiry.SourceDefault {
			t.Errorf("delta: %+v", d)
		}
		if c := list.Items[3]; c.Name != charlie.GetName() || !reflect.DeepEqual(c.Flags, []string{"keep"}) || c.ExpiresAt != nil || c.SecondsLeft != nil {
			t.Errorf("charlie: %+v", c)
		}
		// Times are UTC, RFC 3339.
		mustContain(t, res.out, `"created": "`+rfc3339(alpha.GetCreationTimestamp().Time)+`"`,
			`"expiresAt": "`+rfc3339(alpha.after(3*time.Hour))+`"`)
	})

	t.Run("table", func(t *testing.T) {
		res := kubectlTimeout(t, "list", "-l", selector).expect(t, plugin.ExitOK)
		lines := strings.Split(strings.TrimRight(res.out, "\n"), "\n")
		if len(lines) != 5 {
			t.Fatalf("%d lines, want a header and 4 rows:\n%s", len(lines), res.out)
		}
		header := strings.Fields(lines[0])
		if want := []string{"NAME", "TITLE", "CREATED", "EXPIRES", "(UTC)", "LEFT", "REMINDERS", "POLICY", "FLAGS"}; !reflect.DeepEqual(header, want) {
			t.Errorf("header %v, want %v", header, want)
		}
		mustContain(t, lines[1], "playbook/"+bravo.GetName(), "bravo", bravo.after(50*time.Minute).UTC().Format("2006-01-02 15:04"), test)
		if !regexp.MustCompile(`\s4\dm \d+s\s`).MatchString(lines[1]) {
			t.Errorf("bravo's row does not show about 49m left: %q", lines[1])
		}
		mustContain(t, lines[2], "delta", "invalid")
		mustContain(t, lines[3], "alpha", "2h 5")
		mustContain(t, lines[4], "charlie", "keep")
		if strings.Contains(res.out, "echo") {
			t.Errorf("lists an object no policy governs:\n%s", res.out)
		}
	})

	t.Run("wide shows RFC 3339 times and the next step", func(t *testing.T) {
		res := kubectlTimeout(t, "list", "-l", selector, "-o", "wide").expect(t, plugin.ExitOK)
		mustContain(t, res.out, "SOURCE", "DELETE AT", "NEXT", rfc3339(bravo.after(50*time.Minute)),
			rfc3339(bravo.GetCreationTimestamp().Time), "delete "+rfc3339(alpha.after(3*time.Hour)))
	})

	t.Run("YAML", func(t *testing.T) {
		res := kubectlTimeout(t, "list", "-l", selector, "-o", "yaml").expect(t, plugin.ExitOK)
		var list plugin.ItemList
		if err := yaml.Unmarshal([]byte(res.out), &list); err != nil || len(list.Items) != 4 {
			t.Fatalf("YAML with 4 items: %v\n%s", err, res.out)
		}
	})

	t.Run("filters", func(t *testing.T) {
		res := kubectlTimeout(t, "list", "-l", selector, "--expiring-within", "55m", "-o", "json").expect(t, plugin.ExitOK)
		if items := decodeJSON[plugin.ItemList](t, res.out).Items; len(items) != 1 || items[0].Name != bravo.GetName() {
			t.Errorf("--expiring-within 55m lists %+v, want bravo only", items)
		}
		res = kubectlTimeout(t, "list", "-l", selector, "--policy", test, "-o", "json").expect(t, plugin.ExitOK)
		if items := decodeJSON[plugin.ItemList](t, res.out).Items; len(items) != 4 {
			t.Errorf("--policy %s lists %d objects, want 4", test, len(items))
		}
		res = kubectlTimeout(t, "list", "-l", testLabel+"=nothing-has-this").expect(t, plugin.ExitOK)
		mustContain(t, res.errOut, "No governed objects found.")
	})

	t.Run("errors", func(t *testing.T) {
		mustContain(t, kubectlTimeout(t, "list", "--policy", "no-such-policy").expect(t, plugin.ExitNotFound).errOut, `no TimeoutPolicy called "no-such-policy"`)
		mustContain(t, kubectlTimeout(t, "list", "-o", "xml").expect(t, plugin.ExitUsage).errOut, `unknown output format "xml"`)
		mustContain(t, kubectlTimeout(t, "list", "--expiring-within", "3 days").expect(t, plugin.ExitUsage).errOut, "--expiring-within")
		mustContain(t, kubectlTimeout(t, "list", "nosuchkinds").expect(t, plugin.ExitUsage).errOut, `unknown kind "nosuchkinds"`)
		mustContain(t, kubectlTimeout(t, "list", "secrets").expect(t, plugin.ExitNotGoverned).errOut, "no TimeoutPolicy targets Secret")
		mustContain(t, kubectlTimeout(t, "list", "--bogus").expect(t, plugin.ExitUsage).errOut, "unknown flag: --bogus")
		mustContain(t, kubectlTimeout(t, "list", "--as", "nobody").expect(t, plugin.ExitForbidden).errOut, "forbidden", "RBAC")
	})
}

func TestPluginExplain(t *testing.T) {
	t.Parallel()
	const test = "plugin-explain"
	spec := playbookPolicy(test, "1h")
	spec.Reminders = []v1alpha1.Duration{"1h"}
	spec.MinimumNotice = "2h"
	createPolicy(t, test, spec)
	createPolicy(t, test+"-low", playbookPolicy(test, "5m"))
	other := playbookPolicy(test, "5m")
	other.Selector.MatchLabels = map[string]string{testLabel: test, "app": "nothing"}
	other.Priority = 50
	createPolicy(t, test+"-other", other)

	title := fmt.Sprintf("explained %d", time.Now().UnixNano())
	pb := create(t, playbooks, newPlaybook(test, title, map[string]string{expiry.AnnotationTTL: "3h"}))
	created := pb.GetCreationTimestamp().Time

	t.Run("JSON", func(t *testing.T) {
		res := kubectlTimeout(t, "explain", pb.GetName(), "-o", "json").expect(t, plugin.ExitOK)
		x := decodeJSON[plugin.Explanation](t, res.out)
		if x.Policy != test || x.Object.Name != pb.GetName() || x.Object.Title != title {
			t.Fatalf("explanation of %+v under %q", x.Object, x.Policy)
		}
		verdicts := map[string]plugin.PolicyVerdict{}
		for _, v := range x.Policies {
			verdicts[v.Name] = v
		}
		if v := verdicts[test]; !v.Governs {
			t.Errorf("%s: %+v", test, v)
		}
		if v := verdicts[test+"-low"]; v.Governs || v.Reason != "Outranked" || !strings.Contains(v.Detail, "policy "+test+" has the same priority (0) and a name that sorts first") {
			t.Errorf("%s-low: %+v", test, v)
		}
		if v := verdicts[test+"-other"]; v.Governs || v.Reason != "LabelsNotSelected" || !strings.Contains(v.Detail, "app=nothing") {
			t.Errorf("%s-other: %+v", test, v)
		}
		if l := x.Lifetime; l == nil || l.Source != expiry.AnnotationTTL || l.Value != "3h" || !time.Time(*l.ExpiresAt).Equal(created.Add(3*time.Hour)) {
			t.Errorf("lifetime %+v", x.Lifetime)
		}
		// The 1h reminder falls due at +2h; the 2h notice then holds the
		// deletion until +4h, an hour past the expiry.
		if n := x.Notice; n == nil || !n.Owed || n.MinimumNotice != "2h" || n.GivenAt != nil {
			t.Errorf("notice %+v", x.Notice)
		}
		if len(x.Reminders) != 1 || x.Reminders[0].State != "upcoming" || !time.Time(x.Reminders[0].DueAt).Equal(created.Add(2*time.Hour)) ||
			!reflect.DeepEqual(x.Reminders[0].Channels, []string{"events"}) {
			t.Errorf("reminders %+v", x.Reminders)
		}
		var steps []string
		for _, s := range x.Next {
			steps = append(steps, fmt.Sprintf("%s %s", s.Action, time.Time(s.At).Sub(created)))
		}
		if want := []string{"reminder 2h0m0s", "postponed 3h0m0s", "delete 4h0m0s"}; !reflect.DeepEqual(steps, want) {
			t.Errorf("next steps %v, want %v", steps, want)
		}
		if x.DeleteAt == nil || !time.Time(*x.DeleteAt).Equal(created.Add(4*time.Hour)) {
			t.Errorf("deleteAt %v", x.DeleteAt)
		}
	})

	t.Run("text, by title", func(t *testing.T) {
		res := kubectlTimeout(t, "explain", title).expect(t, plugin.ExitOK)
		mustContain(t, res.out,
			"playbook/"+pb.GetName()+fmt.Sprintf(" %q", title),
			test+"  ", "governs it (priority 0)",
			"selects it, but policy "+test+" has the same priority",
			"does not select it: the object's labels do not satisfy spec.selector",
			"expires "+rfc3339(created.Add(3*time.Hour)),
			`set by the annotation timeout.amphitheatre.app/ttl="3h", counted from creation`,
			"2h, owed: no reminder has reached anyone yet",
			"1h  due "+rfc3339(created.Add(2*time.Hour)),
			"What happens next",
			"1h reminder via events, announcing deletion at "+rfc3339(created.Add(4*time.Hour)),
			"postponed message via events",
			rfc3339(created.Add(4*time.Hour)),
			"deleted")
	})

	t.Run("an object no policy governs", func(t *testing.T) {
		loner := create(t, playbooks, newPlaybook(test+"-alone", "alone", nil))
		res := kubectlTimeout(t, "explain", "playbook/"+loner.GetName()).expect(t, plugin.ExitNotGoverned)
		mustContain(t, res.out, "does not select it", "No policy governs it")
		mustContain(t, res.errOut, "is not governed by any TimeoutPolicy")
	})

	t.Run("errors", func(t *testing.T) {
		mustContain(t, kubectlTimeout(t, "explain", "playbook/no-such-playbook").expect(t, plugin.ExitNotFound).errOut,
			`no playbook called "no-such-playbook"`)
		twin := fmt.Sprintf("twin %d", time.Now().UnixNano())
		a := create(t, playbooks, newPlaybook(test, twin, nil))
		b := create(t, playbooks, newPlaybook(test, twin, nil))
		mustContain(t, kubectlTimeout(t, "explain", twin).expect(t, plugin.ExitAmbiguous).errOut,
			fmt.Sprintf("%q names 2 objects", twin), a.GetName(), b.GetName())
		mustContain(t, kubectlTimeout(t, "explain").expect(t, plugin.ExitUsage).errOut, "explain takes [KIND/]NAME")
		mustContain(t, kubectlTimeout(t, "explain", pb.GetName(), "--as", "nobody").expect(t, plugin.ExitForbidden).errOut,
			`cannot list resource "timeoutpolicies"`)
	})
}

func TestPluginExtendKeepAndUnkeep(t *testing.T) {
	t.Parallel()
	const test = "plugin-extend"
	createPolicy(t, test, playbookPolicy(test, "1h"))
	pb := create(t, playbooks, newPlaybook(test, "to extend", map[string]string{expiry.AnnotationTTL: "1h"}))
	created := pb.GetCreationTimestamp().Time
	annotation := func(key string) (string, bool) {
		t.Helper()
		obj, err := getPlaybook(t, pb.GetName())
		if err != nil {
			t.Fatal(err)
		}
		v, ok := obj.GetAnnotations()[key]
		return v, ok
	}

	res := kubectlTimeout(t, "extend", pb.GetName(), "2h").expect(t, plugin.ExitOK)
	mustContain(t, res.out, "extended from "+rfc3339(created.Add(time.Hour)), "expires "+rfc3339(created.Add(3*time.Hour)))
	if v, _ := annotation(expiry.AnnotationExpiresAt); v != rfc3339(created.Add(3*time.Hour)) {
		t.Errorf("expires-at = %q, want %s", v, rfc3339(created.Add(3*time.Hour)))
	}

	res = kubectlTimeout(t, "extend", pb.GetName(), "--until", rfc3339(created.Add(30*time.Minute))).expect(t, plugin.ExitRefused)
	mustContain(t, res.errOut, "would shorten", "--allow-shorten")
	if v, _ := annotation(expiry.AnnotationExpiresAt); v != rfc3339(created.Add(3*time.Hour)) {
		t.Errorf("a refused shortening changed expires-at to %q", v)
	}
	res = kubectlTimeout(t, "extend", "playbook/"+pb.GetName(), "--until", rfc3339(created.Add(30*time.Minute)), "--allow-shorten", "-o", "json").expect(t, plugin.ExitOK)
	if it := decodeJSON[plugin.Item](t, res.out); it.ExpiresAt == nil || !time.Time(*it.ExpiresAt).Equal(created.Add(30*time.Minute)) {
		t.Errorf("after shortening: %+v", it)
	}

	mustContain(t, kubectlTimeout(t, "keep", pb.GetName()).expect(t, plugin.ExitOK).out, "kept", "it never expires")
	if v, _ := annotation(expiry.AnnotationKeep); v != "true" {
		t.Errorf("keep = %q", v)
	}
	mustContain(t, kubectlTimeout(t, "keep", pb.GetName()).expect(t, plugin.ExitOK).out, "is already kept")
	list := decodeJSON[plugin.ItemList](t, kubectlTimeout(t, "list", "-l", testLabel+"="+test, "-o", "json").expect(t, plugin.ExitOK).out)
	if len(list.Items) != 1 || !reflect.DeepEqual(list.Items[0].Flags, []string{"keep"}) {
		t.Errorf("list after keep: %+v", list.Items)
	}

	mustContain(t, kubectlTimeout(t, "unkeep", pb.GetName()).expect(t, plugin.ExitOK).out, "no longer kept", "expires "+rfc3339(created.Add(30*time.Minute)))
	if _, ok := annotation(expiry.AnnotationKeep); ok {
		t.Error("unkeep left the keep annotation")
	}
	mustContain(t, kubectlTimeout(t, "unkeep", pb.GetName()).expect(t, plugin.ExitOK).out, "is not kept")
	if _, ok := annotation(expiry.AnnotationReminders); ok {
		t.Error("the plugin wrote the controller's record")
	}

	t.Run("errors", func(t *testing.T) {
		loner := create(t, playbooks, newPlaybook(test+"-alone", "alone", nil))
		mustContain(t, kubectlTimeout(t, "extend", loner.GetName(), "1d").expect(t, plugin.ExitNotGoverned).errOut, "not governed by any TimeoutPolicy")
		mustContain(t, kubectlTimeout(t, "keep", "playbook/no-such-playbook").expect(t, plugin.ExitNotFound).errOut, `no playbook called "no-such-playbook"`)
		mustContain(t, kubectlTimeout(t, "extend", pb.GetName(), "3 days").expect(t, plugin.ExitUsage).errOut, `DURATION "3 days"`)
		mustContain(t, kubectlTimeout(t, "extend", pb.GetName()).expect(t, plugin.ExitUsage).errOut, "either DURATION or --until")
		mustContain(t, kubectlTimeout(t, "extend", pb.GetName(), "1d", "--as", "nobody").expect(t, plugin.ExitForbidden).errOut, "forbidden")
	})
}

// TestPluginExtendRacesExpiry extends objects around the moment the
// running controller deletes them. Whatever the timing, the plugin either
// extends the object, which then survives with the new expiry, or says it
// is gone, and it is: never "extended" followed by a deletion.
func TestPluginExtendRacesExpiry(t *testing.T) {
	t.Parallel()
	const test = "plugin-race"
	spec := playbookPolicy(test, "1h")
	spec.Reminders = []v1alpha1.Duration{}
	spec.MinimumNotice = "0s"
	createPolicy(t, test, spec)
	// Runs first, so that the discovery cache is warm, and to learn how
	// long a command takes here: the commands below are started that much
	// ahead, so that their writes land around the deletion.
	anchor := create(t, playbooks, newPlaybook(test, "anchor", map[string]string{expiry.AnnotationKeep: "true"}))
	var latency time.Duration
	for range 3 {
		start := time.Now()
		kubectlTimeout(t, "keep", anchor.GetName()).expect(t, plugin.ExitOK)
		latency = time.Since(start)
	}
	t.Logf("a command takes %s", latency)

	// Offsets from the expiry at which the write is expected to land: from
	// well before to just after.
	offsets := []time.Duration{-300, -100, -50, -30, -20, -10, -5, 0, 5, 10, 20, 50}
	var mu sync.Mutex
	outcomes := map[string]int{}
	var wg sync.WaitGroup
	for i, off := range offsets {
		off *= time.Millisecond
		verb := "extend"
		args := []string{"3m"}
		if i%3 == 2 {
			verb, args = "keep", nil
		}
		// Four expiries a second apart, so that few commands run at once.
		ttl := time.Duration(3+i%4) * time.Second
		pb := create(t, playbooks, newPlaybook(test, fmt.Sprintf("race %d", i), map[string]string{expiry.AnnotationTTL: ttl.String()}))
		wg.Add(1)
		go func() {
			defer wg.Done()
			expiresAt := pb.after(ttl)
			time.Sleep(time.Until(expiresAt.Add(off - latency)))
			res := kubectlTimeout(t, append([]string{verb, pb.GetName()}, args...)...)
			mu.Lock()
			outcomes[fmt.Sprintf("%s exit %d", verb, res.code)]++
			mu.Unlock()
			switch res.code {
			case plugin.ExitOK:
				// It won: the object must outlive its old expiry by far.
				select {
				case at := <-pb.gone:
					t.Errorf("%s at expiry%+v said %q, and the object was deleted at %s", verb, off, strings.TrimSpace(res.out), at.Format(time.RFC3339Nano))
					return
				case <-time.After(time.Until(expiresAt.Add(3 * time.Second))):
				}
				obj, err := getPlaybook(t, pb.GetName())
				if err != nil {
					t.Errorf("%s at expiry%+v succeeded, then: %v", verb, off, err)
					return
				}
				a := obj.GetAnnotations()
				if verb == "keep" && a[expiry.AnnotationKeep] != "true" {
					t.Errorf("kept, but keep = %q", a[expiry.AnnotationKeep])
				}
				if verb == "extend" {
					at, err := time.Parse(time.RFC3339, a[expiry.AnnotationExpiresAt])
					if err != nil || at.Before(expiresAt.Add(3*time.Minute)) {
						t.Errorf("extended, but expires-at = %q", a[expiry.AnnotationExpiresAt])
					}
				}
			case plugin.ExitGone, plugin.ExitNotFound:
				// It lost: the object is gone, or going (in Terminating until
				// Amphitheatre's finalizer is removed), as the command said.
				mustContain(t, res.errOut, pb.GetName())
				select {
				case <-pb.gone:
				case <-time.After(10 * time.Second):
					_, err := getPlaybook(t, pb.GetName())
					t.Errorf("%s at expiry%+v said %q, but the object is still there 10s later (%v)", verb, off, strings.TrimSpace(res.errOut), err)
				}
			default:
				t.Errorf("%s at expiry%+v: exit %d\n%s%s", verb, off, res.code, res.out, res.errOut)
			}
		}()
	}
	wg.Wait()
	t.Logf("outcomes: %v", outcomes)
}

func TestPluginRestoreRoundTrip(t *testing.T) {
	t.Parallel()
	const test = "plugin-restore"
	spec := playbookPolicy(test, "1h")
	spec.Reminders = []v1alpha1.Duration{}
	spec.Deletion.Archive = true
	createPolicy(t, test, spec)

	pb := newPlaybook(test, "archived and back", map[string]string{
		expiry.AnnotationTTL:       "2h",
		expiry.AnnotationExpiresAt: rfc3339(time.Now().Add(3 * time.Second)),
		"example.com/note":         "kept across the round trip",
	})
	pb.SetLabels(map[string]string{testLabel: test, "tier": "dev"})
	created := create(t, playbooks, pb)
	select {
	case <-created.gone:
	case <-time.After(15 * time.Second):
		t.Fatal("the controller did not delete the Playbook")
	}

	path := archive.Path(archiveDir, playbookKind, created.GetUID())
	fixture.Eventually(t, 5*time.Second, "archive file "+path, func() (bool, error) {
		_, err := os.Stat(path)
		return err == nil, nil
	})

	// A copy of the file, as kubectl cp would make, restores too; first
	// by name from the archive directory.
	res := kubectlTimeout(t, "restore", "playbook/"+created.GetName(), "--archive-dir", archiveDir).expect(t, plugin.ExitOK)
	mustContain(t, res.out, "restored from "+path, "policy "+test)
	restored, err := getPlaybook(t, created.GetName())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(playbooks).Delete(context.Background(), created.GetName(), metav1.DeleteOptions{})
	})

	if restored.GetUID() == created.GetUID() {
		t.Error("the restored object has the old UID")
	}
	// Equal but for the fields the server sets, and a fresh lifetime: the
	// expires-at that made it expire is gone; its ttl counts from now.
	wantAnnotations := map[string]string{expiry.AnnotationTTL: "2h", "example.com/note": "kept across the round trip"}
	if !reflect.DeepEqual(restored.GetAnnotations(), wantAnnotations) {
		t.Errorf("annotations %v, want %v", restored.GetAnnotations(), wantAnnotations)
	}
	if !reflect.DeepEqual(restored.GetLabels(), created.GetLabels()) {
		t.Errorf("labels %v, want %v", restored.GetLabels(), created.GetLabels())
	}
	if !reflect.DeepEqual(restored.Object["spec"], created.Object["spec"]) {
		t.Errorf("spec %v, want %v", restored.Object["spec"], created.Object["spec"])
	}
	if restored.GetName() != created.GetName() || restored.GetKind() != "Playbook" || restored.GetAPIVersion() != "amphitheatre.app/v1" {
		t.Errorf("restored %s %s %s", restored.GetAPIVersion(), restored.GetKind(), restored.GetName())
	}
	x := decodeJSON[plugin.Explanation](t, kubectlTimeout(t, "explain", created.GetName(), "-o", "json").expect(t, plugin.ExitOK).out)
	if x.Lifetime == nil || x.Lifetime.Source != expiry.AnnotationTTL ||
		!time.Time(*x.Lifetime.ExpiresAt).Equal(restored.GetCreationTimestamp().Add(2*time.Hour)) {
		t.Errorf("restored lifetime %+v, want 2h from its new creation", x.Lifetime)
	}

	t.Run("refuses to replace an object that exists", func(t *testing.T) {
		mustContain(t, kubectlTimeout(t, "restore", path).expect(t, plugin.ExitRefused).errOut, "exists already")
	})
	t.Run("from a copied file", func(t *testing.T) {
		if err := dyn.Resource(playbooks).Delete(context.Background(), created.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		copied := filepath.Join(t.TempDir(), "pb.yaml")
		if err := os.WriteFile(copied, data, 0o600); err != nil {
			t.Fatal(err)
		}
		fixture.Eventually(t, 5*time.Second, "restore from "+copied, func() (bool, error) {
			res := kubectlTimeout(t, "restore", copied)
			return res.code == plugin.ExitOK, fmt.Errorf("exit %d: %s", res.code, res.errOut)
		})
		if _, err := getPlaybook(t, created.GetName()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("errors", func(t *testing.T) {
		mustContain(t, kubectlTimeout(t, "restore", "playbook/never-archived", "--archive-dir", archiveDir).expect(t, plugin.ExitNotFound).errOut,
			`no archive of "playbook/never-archived"`)
		mustContain(t, kubectlTimeout(t, "restore", "never-archived").expect(t, plugin.ExitUsage).errOut, "--from")
		mustContain(t, kubectlTimeout(t, "restore", "/no/such/file.yaml").expect(t, plugin.ExitNotFound).errOut, "no archive file")
	})
}

// A cluster-scoped Playbook may be named with up to 253 characters, more
// than a file name holds: it is archived, deleted, and restored by name
// and by title all the same.
func TestPluginRestoresAPlaybookWithTheLongestName(t *testing.T) {
	t.Parallel()
	const test = "plugin-restore-long"
	spec := playbookPolicy(test, "1h")
	spec.Reminders = []v1alpha1.Duration{}
	spec.Deletion.Archive = true
	createPolicy(t, test, spec)

	name := []byte(strings.Repeat("long-name.", 26)[:253])
	name[252] = 'z'
	title := "the longest name " + string(uuid.NewUUID())
	pb := newPlaybook(test, title, map[string]string{expiry.AnnotationExpiresAt: rfc3339(time.Now().Add(2 * time.Second))})
	pb.SetName(string(name))
	created := create(t, playbooks, pb)
	select {
	case <-created.gone:
	case <-time.After(15 * time.Second):
		t.Fatal("the controller did not delete the Playbook")
	}
	path := archive.Path(archiveDir, playbookKind, created.GetUID())
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("deleted, and no archive: %v", err)
	}

	for _, by := range []string{"playbook/" + created.GetName(), title} {
		res := kubectlTimeout(t, "restore", by, "--archive-dir", archiveDir).expect(t, plugin.ExitOK)
		mustContain(t, res.out, "restored from "+path)
		restored, err := getPlaybook(t, created.GetName())
		if err != nil {
			t.Fatalf("restore %s: %v", by, err)
		}
		if got, _, _ := unstructured.NestedString(restored.Object, "spec", "title"); got != title {
			t.Errorf("restored title %q", got)
		}
		if err := dyn.Resource(playbooks).Delete(context.Background(), created.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		fixture.Eventually(t, 10*time.Second, "the restored Playbook gone", func() (bool, error) {
			_, err := getPlaybook(t, created.GetName())
			return apierrors.IsNotFound(err), err
		})
	}
}

// TestPluginRefusesANameThatIsAlsoATitle names a Playbook by a word that is
// one Playbook's name and another one's title: the plugin must not pick
// either, and must change neither.
func TestPluginRefusesANameThatIsAlsoATitle(t *testing.T) {
	t.Parallel()
	const test = "plugin-name-or-title"
	createPolicy(t, test, playbookPolicy(test, "1h"))
	word := fmt.Sprintf("demo-%d", time.Now().UnixNano())
	pb := newPlaybook(test, "the one named "+word, nil)
	pb.SetName(word)
	pb.Object["spec"].(map[string]any)["id"] = word
	named := create(t, playbooks, pb)
	titled := create(t, playbooks, newPlaybook(test, word, nil))

	for _, cmd := range [][]string{{"keep", word}, {"extend", word, "2h"}, {"explain", word}} {
		t.Run(cmd[0], func(t *testing.T) {
			res := kubectlTimeout(t, cmd...).expect(t, plugin.ExitAmbiguous)
			mustContain(t, res.errOut, fmt.Sprintf("%q names 2 objects", word), "playbook/"+named.GetName(), "playbook/"+titled.GetName())
		})
	}
	for _, pb := range []*tracked{named, titled} {
		obj, err := getPlaybook(t, pb.GetName())
		if err != nil {
			t.Fatal(err)
		}
		if obj.GetResourceVersion() != pb.GetResourceVersion() {
			t.Errorf("playbook %s changed: %v", pb.GetName(), obj.GetAnnotations())
		}
	}

	// KIND/NAME names by name alone, so the named one can still be kept.
	mustContain(t, kubectlTimeout(t, "keep", "playbook/"+word).expect(t, plugin.ExitOK).out, "kept")
	if obj, err := getPlaybook(t, titled.GetName()); err != nil || obj.GetAnnotations()[expiry.AnnotationKeep] != "" {
		t.Errorf("keeping playbook/%s touched the titled one: %v, %v", word, err, obj)
	}
	if obj, err := getPlaybook(t, word); err != nil || obj.GetAnnotations()[expiry.AnnotationKeep] != "true" {
		t.Errorf("playbook/%s not kept: %v, %v", word, err, obj)
	}
}
