// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// admissionDir holds the shipped policy and binding.
var admissionDir = filepath.Join("..", "..", "config", "admission", "component")

// admissionTest labels the Playbooks the test binding selects. The shipped
// binding selects every Playbook; in the shared API server that would
// refuse the invalid values other tests write on purpose.
const admissionTest = "admission"

// TestAdmissionPolicy installs the shipped ValidatingAdmissionPolicy as it
// is and its binding limited to this test's Playbooks, and checks the
// policy against the controller's own parsers.
func TestAdmissionPolicy(t *testing.T) {
	t.Parallel()
	installAdmissionPolicy(t)

	t.Run("refuses what the controller refuses and accepts what it accepts", func(t *testing.T) {
		for _, tc := range admissionCases() {
			t.Run(tc.annotation, func(t *testing.T) {
				var accepted, refused int
				for _, v := range tc.values {
					pb := newPlaybook(admissionTest, "admission", map[string]string{tc.annotation: v})
					created := time.Now().Truncate(time.Second)
					err := dryRunCreate(pb)
					controllerAccepts := tc.controllerAccepts(created, v)
					switch {
					case err != nil && !apierrors.IsInvalid(err):
						t.Fatalf("%s: %v", short(v), err)
					case err == nil:
						accepted++
					default:
						refused++
						msg := err.Error()
						mustContain(t, msg, "playbook "+pb.GetName()+": annotation "+tc.annotation+" has invalid value", tc.expected)
						if len(v) <= 200 {
							mustContain(t, msg, `invalid value "`+v+`"`)
						}
					}
					policyAccepts := err == nil
					switch {
					case slices.Contains(tc.letThrough, v):
						if !policyAccepts || controllerAccepts {
							t.Errorf("%s: policy accepts %t, controller accepts %t; it is listed as let through by the policy and refused by the controller: update the list and docs/guides/admission-policy.md", short(v), policyAccepts, controllerAccepts)
						}
					case slices.Contains(tc.stricter, v):
						if policyAccepts || !controllerAccepts {
							t.Errorf("%s: policy accepts %t, controller accepts %t; it is listed as refused by the policy and accepted by the controller: update the list and docs/guides/admission-policy.md", short(v), policyAccepts, controllerAccepts)
						}
					case policyAccepts != controllerAccepts:
						t.Errorf("%s: policy accepts %t, controller accepts %t (policy said: %v)", short(v), policyAccepts, controllerAccepts, err)
					}
				}
				t.Logf("%d values accepted, %d refused", accepted, refused)
				if accepted < 5 || refused < 5 {
					t.Errorf("%d values accepted and %d refused: the table must try at least 5 of each", accepted, refused)
				}
			})
		}
	})

	t.Run("refuses the keys under the prefix that the controller does not know", func(t *testing.T) {
		for _, tc := range []struct {
			key  string
			hint string
		}{
			{expiry.Prefix + "Keep", "did you mean " + expiry.AnnotationKeep + "?"},
			{expiry.Prefix + "kep", ""},
			{expiry.Prefix + "expires_at", "did you mean " + expiry.AnnotationExpiresAt + "?"},
			{expiry.Prefix + "owner", ""},
			{expiry.AnnotationTTL, ""},
			{expiry.AnnotationKeep, ""},
			// The record is known too, but only the controller may write
			// it: the record's own subtest covers it.
			{notify.AnnotationNotify, ""},
			{"example.com/Keep", ""},
			{"timeout.amphitheatre.app.example/keep", ""},
		} {
			value := map[string]string{expiry.AnnotationTTL: "1h", expiry.AnnotationKeep: "true", notify.AnnotationNotify: "a@example.com"}[tc.key]
			if value == "" {
				value = "true"
			}
			pb := newPlaybook(admissionTest, "admission", map[string]string{tc.key: value})
			err := dryRunCreate(pb)
			var controllerKnows = true
			for _, inv := range expiry.Compute(time.Now(), pb.GetAnnotations(), time.Hour).Invalid {
				controllerKnows = controllerKnows && !inv.Unknown
			}
			switch {
			case controllerKnows && err != nil:
				t.Errorf("%s: refused, the controller knows it: %v", tc.key, err)
			case !controllerKnows && !apierrors.IsInvalid(err):
				t.Errorf("%s: %v, want refused as the controller warns about it", tc.key, err)
			case !controllerKnows:
				mustContain(t, err.Error(), "playbook "+pb.GetName()+": unknown annotation "+tc.key, "expected one of the keys ttl, expires-at, keep, notify", tc.hint)
			}
		}
	})

	t.Run("checks only the values a write changes", func(t *testing.T) {
		ctx := context.Background()
		res := dyn.Resource(playbooks)

		// Written while the binding does not select it, as if before the
		// policy was installed.
		pb := newPlaybook(admissionTest+"-later", "written before the policy", map[string]string{
			expiry.AnnotationTTL:    "2x",
			expiry.AnnotationKeep:   "please",
			notify.AnnotationNotify: "alice@10.0.0.1",
			expiry.Prefix + "Keep":  "true",
		})
		obj := create(t, playbooks, pb)
		name := obj.GetName()

		patch := func(body string) error {
			_, err := res.Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
			return err
		}
		mustAccept := func(what string, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: refused: %v", what, err)
			}
		}
		mustRefuse := func(what string, err error, parts ...string) {
			t.Helper()
			if err == nil {
				t.Fatalf("%s: accepted, want refused", what)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("%s: %v, want refused as invalid", what, err)
			}
			mustContain(t, err.Error(), parts...)
		}

		mustAccept("labelling it so that the binding selects it",
			patch(fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, testLabel, admissionTest)))

		// As the controller writes its record: a merge patch of the
		// reminders annotation locked on the resourceVersion.
		cur, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		record, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": cur.GetResourceVersion(),
			"annotations": map[string]string{
				expiry.AnnotationReminders: `{"expiresAt":"2026-11-27T14:00:00Z","sent":{}}`,
			},
		}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = asController(t).Resource(playbooks).Patch(ctx, name, types.MergePatchType, record, metav1.PatchOptions{})
		mustAccept("the controller's merge patch of its reminders record", err)
		forged := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, expiry.AnnotationReminders,
			`{"expiresAt":"2026-11-27T14:00:00Z","sent":{"3d":{"at":"2026-11-24T14:00:00Z","channels":["events"]}}}`)
		mustForbid := func(what string, err error) {
			t.Helper()
			if !apierrors.IsForbidden(err) {
				t.Fatalf("%s: %v, want it forbidden", what, err)
			}
			mustContain(t, err.Error(), "playbook "+name, expiry.AnnotationReminders, "only the controller writes it")
		}
		// Someone who may patch Playbooks, as Amphitheatre's users may.
		user := asPlaybookEditor(t)
		patchAs := func(d *dynamic.DynamicClient, body string) error {
			_, err := d.Resource(playbooks).Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
			return err
		}
		mustForbid("anyone else forging the reminders record", patchAs(user, forged))
		mustForbid("anyone else removing the reminders record",
			patchAs(user, fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, expiry.AnnotationReminders)))
		mustAccept("the same user's edit of something else", patchAs(user, `{"metadata":{"labels":{"edited-by":"mallory"}}}`))
		// The policy names no user: the controller installed in another
		// namespace, under another name, writes its record too.
		recordOf := func(expiresAt string) string {
			return fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, expiry.AnnotationReminders, `{"expiresAt":"`+expiresAt+`","sent":{}}`)
		}
		mustAccept("another install's controller changing its record",
			patchAs(asServiceAccount(t, "admission-elsewhere", "amp-timeout"), recordOf("2026-11-28T14:00:00Z")))
		mustAccept("the controller changing it back", patchAs(asController(t), recordOf("2026-11-27T14:00:00Z")))

		// A whole-object update that leaves the bad values as they are.
		cur, err = res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.SetLabels(map[string]string{testLabel: admissionTest, "team": "amp"})
		_, err = res.Update(ctx, cur, metav1.UpdateOptions{})
		mustAccept("an update that keeps the bad values unchanged", err)

		mustRefuse("changing ttl to another bad value",
			patch(`{"metadata":{"annotations":{"timeout.amphitheatre.app/ttl":"3 days"}}}`),
			"playbook "+name, expiry.AnnotationTTL, `invalid value "3 days"`, "expected a positive duration")
		mustRefuse("changing keep to another bad value",
			patch(`{"metadata":{"annotations":{"timeout.amphitheatre.app/keep":"yes"}}}`),
			expiry.AnnotationKeep, `invalid value "yes"`, `expected "true" or "false"`)
		mustRefuse("adding a bad expires-at",
			patch(`{"metadata":{"annotations":{"timeout.amphitheatre.app/expires-at":"next friday"}}}`),
			expiry.AnnotationExpiresAt, "expected an RFC 3339 time")
		mustRefuse("adding an entry to a bad notify value",
			patch(`{"metadata":{"annotations":{"timeout.amphitheatre.app/notify":"alice@10.0.0.1, http://example.com"}}}`),
			notify.AnnotationNotify, `refused "alice@10.0.0.1", "http://example.com"`, "not an IP address")

		mustRefuse("adding an unknown key",
			patch(`{"metadata":{"annotations":{"timeout.amphitheatre.app/kep":"true"}}}`),
			"unknown annotation timeout.amphitheatre.app/kep")
		mustRefuse("changing the value of an unknown key",
			patch(`{"metadata":{"annotations":{"timeout.amphitheatre.app/Keep":"false"}}}`),
			"unknown annotation timeout.amphitheatre.app/Keep (did you mean timeout.amphitheatre.app/keep?)")

		mustAccept("changing ttl to a good value",
			patch(`{"metadata":{"annotations":{"timeout.amphitheatre.app/ttl":"36h"}}}`))
		mustAccept("removing the bad keep and notify values",
			patch(`{"metadata":{"annotations":{"timeout.amphitheatre.app/keep":null,"timeout.amphitheatre.app/notify":null,"timeout.amphitheatre.app/Keep":null}}}`))

		got, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			expiry.AnnotationTTL:       "36h",
			expiry.AnnotationReminders: `{"expiresAt":"2026-11-27T14:00:00Z","sent":{}}`,
		}
		if a := got.GetAnnotations(); !maps.Equal(a, want) {
			t.Errorf("annotations %v, want %v", a, want)
		}
	})
}

// installAdmissionPolicy creates the shipped policy and a copy of the
// shipped binding that selects only this test's Playbooks, and waits until
// the API server enforces them.
func installAdmissionPolicy(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	api := clients.AdmissionregistrationV1()

	var policy admissionv1.ValidatingAdmissionPolicy
	readManifest(t, "policy.yaml", &policy)
	var binding admissionv1.ValidatingAdmissionPolicyBinding
	readManifest(t, "binding.yaml", &binding)

	// What the test changes in the binding is its scope, nothing else.
	if binding.Spec.PolicyName != policy.Name {
		t.Fatalf("binding.yaml binds %q, policy.yaml is %q", binding.Spec.PolicyName, policy.Name)
	}
	if binding.Spec.MatchResources != nil {
		t.Fatalf("binding.yaml has matchResources %+v; want it to apply to every object the policy matches", binding.Spec.MatchResources)
	}
	if !slices.Equal(binding.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
		t.Fatalf("binding.yaml has validationActions %v, want [Deny]", binding.Spec.ValidationActions)
	}
	binding.Name = "e2e." + binding.Name
	binding.Spec.MatchResources = &admissionv1.MatchResources{
		ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{testLabel: admissionTest}},
	}

	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, &policy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the policy: %v", err)
	}
	t.Cleanup(func() {
		_ = api.ValidatingAdmissionPolicies().Delete(context.Background(), policy.Name, metav1.DeleteOptions{})
	})
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the binding: %v", err)
	}
	t.Cleanup(func() {
		_ = api.ValidatingAdmissionPolicyBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})

	// The API server loads policies and bindings asynchronously.
	start := time.Now()
	fixture.Eventually(t, 30*time.Second, "the policy refuses a bad ttl", func() (bool, error) {
		err := dryRunCreate(newPlaybook(admissionTest, "probe", map[string]string{expiry.AnnotationTTL: "2x"}))
		return apierrors.IsInvalid(err), err
	})
	t.Logf("policy in force after %s", time.Since(start).Round(time.Millisecond))
}

func readManifest(t *testing.T, name string, into any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(admissionDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// short quotes v for a test's output, cut to 80 bytes.
func short(v string) string {
	if len(v) > 80 {
		return fmt.Sprintf("%q… (%d bytes)", v[:80], len(v))
	}
	return fmt.Sprintf("%q", v)
}

// dryRunCreate sends pb through admission without storing it.
func dryRunCreate(pb *unstructured.Unstructured) error {
	_, err := dyn.Resource(playbooks).Create(context.Background(), pb, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

type admissionCase struct {
	annotation string
	// expected is the part of the policy's message that says what the
	// annotation accepts.
	expected string
	// controllerAccepts is the controller's own judgement of v on an
	// object created at created.
	controllerAccepts func(created time.Time, v string) bool
	values            []string
	// letThrough are values the policy accepts and the controller refuses;
	// stricter are values the policy refuses and the controller accepts.
	// docs/guides/admission-policy.md lists both.
	letThrough, stricter []string
}

// lifetimeAccepts judges a lifetime annotation as the controller does.
func lifetimeAccepts(annotation string) func(time.Time, string) bool {
	return func(created time.Time, v string) bool {
		return len(expiry.Compute(created, map[string]string{annotation: v}, time.Hour).Invalid) == 0
	}
}

func admissionCases() []admissionCase {
	tenEntries := strings.Repeat("a@example.com, ", 9) + "#team-amp"
	return []admissionCase{
		{
			annotation:        expiry.AnnotationTTL,
			expected:          "expected a positive duration: a number and a unit (ns, us, ms, s, m, h, d, w)",
			controllerAccepts: lifetimeAccepts(expiry.AnnotationTTL),
			values: []string{
				"90m", "36h", "7d", "2w", "1w2d12h", "1.5d", "0.5d", " 36h ", "36h\n", "1ms1m", "10µs", "10us", "1ns", "1.5ns",
				"1.9999999999999999999999h", "15250w", "9223372036854775807ns",
				"2x", "3 days", "", " ", "0", "00", "0s", "0.0h", "0h0m", "-1h", "+1h", "1y", "1D", "1.h", ".5h", "h", "1h 30m",
				"0.000000001ns", "15250w6d", "99999999999999999999s",
				"0.5ns0.5ns", "9223372036854775808ns", strings.Repeat("1s", 100000), strings.Repeat("0s", 501), strings.Repeat("x", 200000),
			},
			// The policy adds the parts up as doubles: it cannot tell
			// 2^63 ns from 2^63-1, and counts fractions of a nanosecond
			// that the parser drops.
			// Past 1000 characters it checks only the form.
			letThrough: []string{"0.5ns0.5ns", "9223372036854775808ns", strings.Repeat("0s", 501)},
		},
		{
			annotation:        expiry.AnnotationExpiresAt,
			expected:          "expected an RFC 3339 time after the object's creation",
			controllerAccepts: lifetimeAccepts(expiry.AnnotationExpiresAt),
			values: []string{
				"2030-12-24T18:00:00Z", "2030-12-24T19:00:00+01:00", "2030-12-24T13:00:00-05:00", " 2030-12-24T18:00:00Z\t",
				"2030-12-24T18:00:00.123456789Z", "2030-12-24T18:00:00,5Z", "2030-12-24T18:00:00.1234567891234Z",
				"2030-12-24T9:00:00Z", "2032-02-29T00:00:00Z", "2400-02-29T00:00:00Z", "2030-01-31T23:59:59Z", "2030-04-30T00:00:00Z",
				"2030-12-24T18:00:00+24:00", "2030-12-24T18:00:00-00:00", "2030-12-24T00:00:00+00:60",
				"9999-12-31T23:59:59Z", "9999-12-31T23:59:59-01:00",
				"2030-12-24", "2030-12-24 18:00:00Z", "2030-12-24T18:00:00", "2030-12-24t18:00:00z", "2030-12-24T18:00Z",
				"2030-02-29T00:00:00Z", "2100-02-29T00:00:00Z", "2030-04-31T00:00:00Z", "2030-13-01T00:00:00Z", "2030-00-01T00:00:00Z",
				"2030-12-00T00:00:00Z", "2030-12-24T24:00:00Z", "2030-12-24T018:00:00Z", "2030-12-24T18:00:60Z", "2030-12-24T18:0:00Z",
				"2030-12-24T18:00:00+25:00", "2030-12-24T18:00:00+01:61", "2030-12-24T18:00:00+0100", "2030-12-24T18:00:00+1:00",
				"2030-12-24T18:00:00.Z", "2030-12-24T18:00:00UTC", "+2030-12-24T18:00:00Z", "20300-12-24T18:00:00Z",
				"2020-01-01T00:00:00Z", "0000-01-01T00:00:00Z", "0001-01-01T00:00:00+01:00",
				"tomorrow", "", "1924905600", strings.Repeat("2", 200000),
			},
		},
		{
			annotation: expiry.AnnotationLastActive,
			expected:   "expected an RFC 3339 time",
			controllerAccepts: func(created time.Time, v string) bool {
				s := expiry.Schedule{DefaultTTL: time.Hour, IdleTTL: time.Hour}
				// Read long after: a time ahead of the clock is the controller's
				// to clamp, not a form the policy could refuse.
				return len(s.Lifetime(created, map[string]string{expiry.AnnotationLastActive: v}, created.AddDate(8000, 0, 0)).Invalid) == 0
			},
			values: []string{
				"2030-12-24T18:00:00Z", "2030-12-24T19:00:00+01:00", " 2030-12-24T18:00:00Z\t", "2030-12-24T18:00:00.123456789Z",
				"2030-12-24T9:00:00Z", "2032-02-29T00:00:00Z", "2030-12-24T18:00:00+24:00",
				// Before the creation: it counts as the creation.
				"2020-01-01T00:00:00Z", "0000-01-01T00:00:00Z", "0001-01-01T00:00:00+01:00",
				"2030-12-24", "2030-12-24T18:00:00", "2030-02-29T00:00:00Z", "2030-12-24T24:00:00Z", "2030-12-24T18:00:00UTC",
				"yesterday", "", "1924905600", strings.Repeat("2", 200000),
			},
		},
		{
			annotation:        expiry.AnnotationKeep,
			expected:          `expected "true" or "false"`,
			controllerAccepts: lifetimeAccepts(expiry.AnnotationKeep),
			values: []string{
				"true", "false", "True", "FALSE", "t", "F", "1", "0", " true ",
				"yes", "no", "on", "tRuE", "2", "", "keep", "true!",
			},
		},
		{
			annotation: notify.AnnotationNotify,
			expected:   "expected at most 10 comma-separated entries, each an e-mail address (user@domain, with a domain name, not an IP address) or a Slack channel",
			controllerAccepts: func(_ time.Time, v string) bool {
				_, errs := notify.ParseRecipients(v, nil)
				return len(errs) == 0
			},
			values: []string{
				"alice@example.com", "alice@example.com, bob@example.com, #team-amp", "#team-amp", "#a", "#" + strings.Repeat("a", 80),
				" alice@example.com ,, ", "", "o'brien+tag@mail.example.co.uk", "{x}|~!$%&*=?^_`@example.com", "ünï@example.com",
				"alice@EXAMPLE.COM", "a.b.c@x-y.example", "alice@256.1.1.1", "alice@01.2.3.4", "a@example.com, a@example.com", tenEntries,
				"alice", "alice@", "@example.com", "alice@localhost", "alice@10.0.0.1", "alice@[10.0.0.1]", "alice@[::1]",
				"Alice <alice@example.com>", "alice@example.com (Alice)", `"alice"@example.com`, "al ice@example.com",
				".alice@example.com", "alice.@example.com", "al..ice@example.com", "alice@-example.com", "alice@example-.com",
				"alice@example..com", "alice@exam_ple.com", "alice@example.com.", "#Team", "#", "#-team", "#" + strings.Repeat("a", 81),
				"#team amp", "#team@example.com", "https://hooks.slack.com/services/x", "alice@example.com; bob@example.com",
				"alice@example.com, bad", tenEntries + ", b@example.com",
				"alice@example.com," + strings.Repeat(" ", 4100), "alice@\u212aeys.example", strings.Repeat(",", 200000), strings.Repeat("a", 4000) + "@example.com",
			},
			// The policy bounds the whole value, where the controller reads
			// any length; it reads domains as ASCII, where the controller
			// lowercases them first, and Go turns the Kelvin sign into k.
			stricter: []string{"alice@example.com," + strings.Repeat(" ", 4100), strings.Repeat(",", 200000), "alice@\u212aeys.example"},
		},
	}
}

// asController returns a client that acts as the controller's ServiceAccount
// as the shipped manifests name it, with the ClusterRole `make manifests`
// generates for it.
func asController(t *testing.T) *dynamic.DynamicClient {
	t.Helper()
	return asServiceAccount(t, "timeout-system", "timeout-controller")
}

// asServiceAccount returns a client that acts as the ServiceAccount
// namespace/name bound to the controller's generated ClusterRole, as an
// install in that namespace binds it.
func asServiceAccount(t *testing.T, namespace, name string) *dynamic.DynamicClient {
	t.Helper()
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role *rbacv1.ClusterRole
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		r := &rbacv1.ClusterRole{}
		if err := yaml.Unmarshal([]byte(doc), r); err != nil {
			t.Fatal(err)
		}
		if r.Kind == "ClusterRole" {
			role = r
		}
	}
	if role == nil {
		t.Fatal("config/rbac/role.yaml has no ClusterRole: run `make manifests`")
	}
	role.Name = "e2e-controller-" + namespace + "-" + name
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	user := "system:serviceaccount:" + namespace + ":" + name
	return impersonating(t, rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}})
}

// asPlaybookEditor returns a client that acts as a user who may get, list
// and patch Playbooks and nothing more of this controller's.
func asPlaybookEditor(t *testing.T) *dynamic.DynamicClient {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-playbook-editor"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"amphitheatre.app"}, Resources: []string{"playbooks"}, Verbs: []string{"get", "list", "patch"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory@example.com"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return impersonating(t, rest.ImpersonationConfig{UserName: "mallory@example.com", Groups: []string{"system:authenticated"}})
}

// impersonating returns a client that acts as who, once RBAC lets it list
// Playbooks.
func impersonating(t *testing.T, who rest.ImpersonationConfig) *dynamic.DynamicClient {
	t.Helper()
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = who
	d := dynamic.NewForConfigOrDie(cfg)
	fixture.Eventually(t, 10*time.Second, who.UserName+"'s role in force", func() (bool, error) {
		_, err := d.Resource(playbooks).List(context.Background(), metav1.ListOptions{Limit: 1})
		return err == nil || !apierrors.IsForbidden(err), err
	})
	return d
}
