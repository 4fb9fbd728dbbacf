// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSlugIsTheAnchorGitHubGives(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Idle expiry, a maximum, and keep", "idle-expiry-a-maximum-and-keep"},
		{"The outbox: expired and deleted", "the-outbox-expired-and-deleted"},
		{"`--archive` and `--archive-dir`", "--archive-and---archive-dir"},
		{"Exactly once: the record", "exactly-once-the-record"},
		{"2. Put the URL in a Secret", "2-put-the-url-in-a-secret"},
		{"What a deletion frees", "what-a-deletion-frees"},
		{"The controller's record: reminders", "the-controllers-record-reminders"},
		{"[Linked](other.md) *and* emphasised", "linked-and-emphasised"},
		{"snake_case stays", "snake_case-stays"},
	} {
		if got := Slug(tc.heading); got != tc.want {
			t.Errorf("Slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

func TestRepeatedHeadingsGetNumberedAnchors(t *testing.T) {
	pg := &page{lines: []string{"# A", "## Example", "text", "## Example", "```", "## not a heading", "```", "## Example"}}
	pg.prose = []int{0, 1, 2, 3, 7}
	got := pg.anchors()
	for _, want := range []string{"a", "example", "example-1", "example-2"} {
		if !got[want] {
			t.Errorf("no anchor #%s in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a heading inside fenced code got an anchor")
	}
}

func TestParseGoHelpReadsNamesTypesDefaultsAndUsage(t *testing.T) {
	help := "Usage of timeout-controller:\n" +
		"  -archive-retention duration\n    \tHow long archived manifests are kept. (default 720h0m0s)\n" +
		"  -dry-run\n    \tDelete nothing.\n" +
		"  -metrics-bind-address string\n    \tAddress of the metrics endpoint. (default \":8443\")\n"
	got, err := ParseGoHelp(help)
	if err != nil {
		t.Fatal(err)
	}
	want := []Flag{
		{Name: "archive-retention", Type: "duration", Default: "720h0m0s", Usage: "How long archived manifests are kept."},
		{Name: "dry-run", Type: "bool", Usage: "Delete nothing."},
		{Name: "metrics-bind-address", Type: "string", Default: ":8443", Usage: "Address of the metrics endpoint."},
	}
	if !slices.Equal(got, want) {
		t.Errorf("ParseGoHelp = %+v, want %+v", got, want)
	}
}

func TestTheFlagsTableWritesDurationsWithoutTheirZeroUnits(t *testing.T) {
	for _, tc := range []struct{ printed, want string }{
		{"720h0m0s", "720h"},
		{"24h0m0s", "24h"},
		{"1h30m0s", "1h30m"},
		{"1m0s", "1m"},
		{"30s", "30s"},
		{"10s", "10s"},
		{"2s", "2s"},
		{"1m30s", "1m30s"},
		{"1.5s", "1.5s"},
		{"500ms", "500ms"},
		{"0s", "0s"},
	} {
		table := renderFlags([]Flag{{Name: "timeout", Type: "duration", Default: tc.printed}})
		if want := "| `--timeout` | duration | `" + tc.want + "` |"; !strings.Contains(table, want) {
			t.Errorf("the default %s is written as %q, want %q", tc.printed, table, want)
		}
		if !sameDefault("duration", tc.want, tc.printed) {
			t.Errorf("the check takes %s for another default than %s", tc.want, tc.printed)
		}
	}
}

func TestParseCobraHelpSplitsLocalAndGlobalFlags(t *testing.T) {
	help := "Usage:\n  kubectl timeout list [KIND] [flags]\n\nFlags:\n" +
		"  -A, --all-namespaces           List namespaced kinds in every namespace\n" +
		"      --expiring-within string   Only objects deleted within this long\n" +
		"  -h, --help                     help for list\n" +
		"  -o, --output string            Output format: table, wide (default \"table\")\n\nGlobal Flags:\n" +
		"      --as string                Username to impersonate for the operation.\n"
	local, global := ParseCobraHelp(help)
	var names []string
	for _, f := range local {
		names = append(names, f.Name)
	}
	if !slices.Equal(names, []string{"all-namespaces", "expiring-within", "output"}) || local[2].Default != "table" {
		t.Errorf("local flags %+v", local)
	}
	if len(global) != 1 || global[0].Name != "as" {
		t.Errorf("global flags %+v", global)
	}
}

// fakeFacts are the facts of a small repository, as if gathered from its
// code.
func fakeFacts() *Facts {
	one := int64(1)
	return &Facts{
		Flags: []Flag{
			{Name: "workers", Type: "int", Default: "64", Usage: "Objects reconciled at once."},
			{Name: "policy-status-interval", Type: "duration", Default: "30s", Usage: "How often status is refreshed."},
			{Name: "archive-retention", Type: "duration", Default: "720h0m0s", Usage: "How long archives are kept."},
		},
		PluginFlags:       map[string][]Flag{"list": {{Name: "expiring-within", Type: "string", Usage: "Only objects deleted within this long."}}},
		PluginGlobalFlags: []Flag{{Name: "context", Type: "string"}},
		Reasons:           []string{"Deleted", "InvalidTimeout"},
		Metrics:           []Metric{{Name: "timeout_controller_deletion_lag_seconds", Type: "histogram", Help: "Lag."}, {Name: "timeout_controller_deletions_total", Type: "counter", Help: "Deletions.", Labels: []string{"result"}}},
		Conditions:        []string{"Active", "InvalidSpec"},
		Annotations:       []string{"timeout.amphitheatre.app/ttl"},
		CRDs: []CRD{{File: "tp.yaml", Kind: "TimeoutPolicy", Plural: "timeoutpolicies", Schema: &Schema{Type: "object", Properties: map[string]*Schema{
			"spec": {Type: "object", Properties: map[string]*Schema{
				"defaultTTL": {Type: "string", Description: "DefaultTTL is the lifetime.", Default: []byte(`"14d"`)},
				"target": {Type: "object", Required: []string{"kind"}, Properties: map[string]*Schema{
					"kind": {Type: "string", MinLength: &one},
				}},
			}},
			"status": {Type: "object", Properties: map[string]*Schema{"tracked": {Type: "integer"}}},
		}}}},
		Roles:        []Role{{Kind: "ClusterRole", File: "role.yaml", Rules: []Rule{{APIGroups: []string{"amphitheatre.app"}, Resources: []string{"playbooks"}, Verbs: []string{"get", "delete"}}}}},
		Alerts:       []string{"TimeoutControllerDown"},
		MessageTypes: []string{"reminder", "expired", "deleted", "deletion-failed"},
	}
}

// fakePages are pages that say what fakeFacts holds, their generated
// blocks empty until Generate fills them.
var fakePages = map[string]string{
	"README.md": "# Repo\n\nSee [the flags](docs/reference/flags.md#flags) and [events](docs/reference/events.md).\n\n" +
		"A channel sends `reminder`, `expired`, `deleted` or\n`deletion-failed` messages; `expired`, `deleted` and `deletion-failed` go\n" +
		"through the outbox, and the owner gets them all (`reminder`, `expired`, `deleted`, `deletion-failed`…).\n",
	"docs/reference/flags.md": "# Flags\n\n<!-- BEGIN GENERATED flags -->\n<!-- END GENERATED flags -->\n\n" +
		"`--workers` matters most. kubectl's `--server-side` is fine.\n",
	"docs/reference/metrics.md": "# Metrics\n\n<!-- BEGIN GENERATED metrics -->\n<!-- END GENERATED metrics -->\n\n" +
		"```promql\nhistogram_quantile(0.99, rate(timeout_controller_deletion_lag_seconds_bucket[5m]))\n```\n",
	"docs/reference/rbac.md": "# RBAC\n\n<!-- BEGIN GENERATED rbac -->\n<!-- END GENERATED rbac -->\n\n" +
		"| resource | why |\n| --- | --- |\n| `playbooks` | to delete them |\n",
	"docs/reference/events.md": "# Events\n\n| reason | type | when |\n| --- | --- | --- |\n" +
		"| `Deleted` | Normal | the delete was accepted |\n| `InvalidTimeout` | Warning | an annotation is invalid |\n",
	"docs/reference/timeoutpolicy.md": "# TimeoutPolicy\n\n## Spec\n\n<!-- BEGIN GENERATED crd/timeoutpolicies/spec -->\n<!-- END GENERATED crd/timeoutpolicies/spec -->\n\n" +
		"## Status\n\n<!-- BEGIN GENERATED crd/timeoutpolicies/status -->\n<!-- END GENERATED crd/timeoutpolicies/status -->\n\n" +
		"| type | status | reason | meaning |\n| --- | --- | --- | --- |\n| `Ready` | True | `Active` | valid |\n| `Ready` | False | `InvalidSpec` | not valid |\n",
	"docs/reference/notificationchannel.md": "# NotificationChannel\n",
	"docs/reference/annotations.md":         "# Annotations\n\n`timeout.amphitheatre.app/ttl` is a lifetime.\n",
	"docs/reference/plugin.md":              "# Plugin\n\n## list\n\n`--expiring-within 3d` lists what goes soon; `--context` picks a context.\n",
	"docs/guides/monitoring.md":             "# Monitoring\n\n| alert | fires when |\n| --- | --- |\n| `TimeoutControllerDown` | no replica is up |\n",
	"internal/x.go":                         "package x\n\n// See docs/reference/events.md.\n",
	"docs/guides/notifications.md": "# Notifications\n\n| event type | when |\n| --- | --- |\n| `reminder` | a stage falls due |\n| `expired` | it expired |\n" +
		"| `deleted` | the API server accepted the delete |\n| `deletion-failed` | the delete failed |\n\n" +
		"<!-- BEGIN GENERATED templates -->\n<!-- END GENERATED templates -->\n",
	"docs/guides/webhooks.md": webhooksPage,
}

// webhooksPage is the webhooks guide of fakePages: its table of
// CloudEvent types.
const webhooksPage = "# Webhooks\n\n## Event types\n\n| `type` | sent when | `data.expiresAt` |\n| --- | --- | --- |\n" +
	"| `app.amphitheatre.timeout.reminder` | a stage falls due | the time of deletion |\n" +
	"| `app.amphitheatre.timeout.expired` | it expired | its expiry |\n" +
	"| `app.amphitheatre.timeout.deleted` | the API server accepted the delete | its expiry |\n" +
	"| `app.amphitheatre.timeout.deletion-failed` | the delete failed | its expiry |\n"

// fakeRepo writes fakePages, with the changes given, into a directory and
// fills the generated blocks from facts.
func fakeRepo(t *testing.T, facts *Facts, change map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, text := range fakePages {
		if c, ok := change[p]; ok {
			text = c
		}
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Generate(root, facts); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return root
}

func TestTheCheckPassesPagesThatAgreeWithTheCode(t *testing.T) {
	facts := fakeFacts()
	root := fakeRepo(t, facts, nil)
	problems, err := Check(root, facts)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("problems in pages that agree with the code:\n%s", strings.Join(problems, "\n"))
	}
	b, err := os.ReadFile(filepath.Join(root, "docs/reference/timeoutpolicy.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| `spec.defaultTTL` | string | `\"14d\"` | DefaultTTL is the lifetime. |", "| `spec.target.kind` | string, required |  | Validation: not empty. |", "| `status.tracked` | integer |"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the generated reference has no line with %q:\n%s", want, b)
		}
	}
}

// TestTheCheckFailsOnAStalePage changes the code or a page the way they
// drift apart, and expects the check to say so.
func TestTheCheckFailsOnAStalePage(t *testing.T) {
	for _, tc := range []struct {
		name string
		// code changes the facts after the pages were generated, as a
		// change to the code that nobody ran `make docs` for.
		code func(*Facts)
		page map[string]string
		// edit changes a page after the generated blocks were filled, as
		// a generator with a bug would have written it.
		edit map[string]func(string) string
		want []string
		// not are problems the check must not report.
		not []string
	}{
		{
			name: "a flag the controller no longer has",
			code: func(f *Facts) { f.Flags = f.Flags[:1] },
			want: []string{"docs/reference/flags.md:7: a generated table is stale", "docs/reference/flags.md:7: names the flag --policy-status-interval, which neither the controller"},
		},
		{
			name: "a flag the controller gained",
			code: func(f *Facts) { f.Flags = append(f.Flags, Flag{Name: "max-sends-per-channel", Type: "int"}) },
			want: []string{"a generated table is stale", "the controller's flag --max-sends-per-channel is not in the reference"},
		},
		{
			name: "a duration default written without its unit",
			edit: map[string]func(string) string{"docs/reference/flags.md": func(s string) string {
				return strings.Replace(s, "| `30s` |", "| `3` |", 1)
			}},
			want: []string{"docs/reference/flags.md:7: the default of --policy-status-interval is \"30s\" (`timeout-controller -help`), not \"3\""},
		},
		{
			name: "a default that is another duration",
			edit: map[string]func(string) string{"docs/reference/flags.md": func(s string) string {
				return strings.Replace(s, "| `720h` |", "| `72h` |", 1)
			}},
			want: []string{"the default of --archive-retention is \"720h0m0s\" (`timeout-controller -help`), not \"72h\""},
		},
		{
			name: "a default the flag does not have",
			edit: map[string]func(string) string{"docs/reference/flags.md": func(s string) string {
				return strings.Replace(s, "| `64` |", "| `16` |", 1)
			}},
			want: []string{"the default of --workers is \"64\" (`timeout-controller -help`), not \"16\""},
		},
		{
			name: "a page that names a removed flag",
			page: map[string]string{"README.md": "# Repo\n\nRun with `--archive-dir=/data`.\n"},
			want: []string{"README.md:3: names the flag --archive-dir"},
		},
		{
			name: "a plugin flag missing from its reference",
			page: map[string]string{"docs/reference/plugin.md": "# Plugin\n"},
			want: []string{"the plugin's flag list --expiring-within is not in the reference"},
		},
		{
			name: "a metric the controller does not export",
			page: map[string]string{"README.md": "# Repo\n\nAlert on `timeout_controller_deletions_failed_total`.\n"},
			want: []string{"README.md:3: names the metric timeout_controller_deletions_failed_total"},
		},
		{
			name: "a metric renamed in the code",
			code: func(f *Facts) { f.Metrics[1].Name = "timeout_controller_deletes_total" },
			want: []string{"docs/reference/metrics.md", "a generated table is stale", "names the metric timeout_controller_deletions_total"},
		},
		{
			name: "an Event reason the code no longer records",
			code: func(f *Facts) { f.Reasons = []string{"Deleted"} },
			want: []string{"docs/reference/events.md:6: the Event reason InvalidTimeout is not one the controller records"},
		},
		{
			name: "an Event reason missing from the reference",
			code: func(f *Facts) { f.Reasons = append(f.Reasons, "DeletionStuck") },
			want: []string{"the Event reason DeletionStuck is not in a table of the reference"},
		},
		{
			name: "a message type missing from the notifications guide",
			code: func(f *Facts) { f.MessageTypes = append(f.MessageTypes, "sleeping") },
			want: []string{"the message type sleeping is not in the table of event types", "docs/guides/notifications.md", "a generated table is stale"},
		},
		{
			name: "a message type the API no longer has",
			code: func(f *Facts) { f.MessageTypes = f.MessageTypes[:1] },
			want: []string{"docs/guides/notifications.md:6: the message type expired is not one the API has"},
		},
		{
			name: "a list of event types written before one was added",
			code: func(f *Facts) { f.MessageTypes = append(f.MessageTypes, "sleeping") },
			want: []string{"README.md:5: lists 4 of the 5 event types, without sleeping"},
			// A list that says it is partial, and a group of three.
			not: []string{"README.md:6", "README.md:7"},
		},
		{
			name: "a list of event types, wrapped, that leaves one out",
			page: map[string]string{"docs/reference/timeoutpolicy.md": "# TimeoutPolicy\n\nThe event types are `reminder`,\n`expired` and `deleted`\nand `deletion-failed`. Validation: one of\n`reminder`, `expired`, `deletion-failed`, `deleted`.\n"},
			code: func(f *Facts) { f.MessageTypes = append(f.MessageTypes, "woke") },
			want: []string{"docs/reference/timeoutpolicy.md:3: lists 4 of the 5 event types, without woke", "docs/reference/timeoutpolicy.md:6: lists 4 of the 5 event types, without woke"},
		},
		{
			name: "a list of CloudEvent types that leaves one out",
			page: map[string]string{"README.md": "# Repo\n\n- types: `app.amphitheatre.timeout.reminder`, `app.amphitheatre.timeout.expired`, `app.amphitheatre.timeout.deleted` and `app.amphitheatre.timeout.expired`\n"},
			want: []string{"README.md:3: lists 3 of the 4 event types, without deletion-failed"},
		},
		{
			name: "a count of the event types that is out of date",
			page: map[string]string{"docs/reference/timeoutpolicy.md": "# TimeoutPolicy\n\nAt admission the API server refuses\n\n- an event type that is not one of the\n  seven, more than 10 channels;\n- a bad duration.\n\nSeven event types exist. Ten channels at most.\n"},
			want: []string{"docs/reference/timeoutpolicy.md:5: counts seven event types where v1alpha1.EventTypes has 4", "docs/reference/timeoutpolicy.md:9: counts seven event types"},
		},
		{
			name: "a CloudEvent type missing from the webhooks guide",
			code: func(f *Facts) { f.MessageTypes = append(f.MessageTypes, "slept") },
			want: []string{"docs/guides/webhooks.md:0: the CloudEvent type app.amphitheatre.timeout.slept is not in the table of event types"},
		},
		{
			name: "a CloudEvent type the controller does not send",
			code: func(f *Facts) { f.MessageTypes = f.MessageTypes[:3] },
			want: []string{"docs/guides/webhooks.md:10: the CloudEvent type app.amphitheatre.timeout.deletion-failed is not one the controller sends"},
		},
		{
			name: "a table of CloudEvent types that does not say what data.expiresAt carries",
			page: map[string]string{"docs/guides/webhooks.md": strings.Replace(webhooksPage, "| its expiry |\n| `app.amphitheatre.timeout.deleted`", "|  |\n| `app.amphitheatre.timeout.deleted`", 1)},
			want: []string{"docs/guides/webhooks.md:8: the table of event types does not say what data.expiresAt carries for this one"},
		},
		{
			name: "deleted said to mean the object is gone",
			page: map[string]string{"docs/guides/webhooks.md": strings.Replace(webhooksPage, "the API server accepted the delete", "the object was deleted", 1)},
			want: []string{"docs/guides/webhooks.md:9: defines the event type deleted without saying \"accepted\""},
		},
		{
			name: "a condition reason missing from the reference",
			code: func(f *Facts) { f.Conditions = append(f.Conditions, "ChannelNotFound") },
			want: []string{"the condition reason ChannelNotFound is not in a conditions table"},
		},
		{
			name: "a CRD field added without regenerating",
			code: func(f *Facts) {
				f.CRDs[0].Schema.Properties["spec"].Properties["maxTTL"] = &Schema{Type: "string"}
			},
			want: []string{"docs/reference/timeoutpolicy.md", "a generated table is stale", "the field spec.maxTTL of TimeoutPolicy is not in its reference"},
		},
		{
			name: "an annotation missing from the reference",
			code: func(f *Facts) { f.Annotations = append(f.Annotations, "timeout.amphitheatre.app/keep") },
			want: []string{"the annotation timeout.amphitheatre.app/keep is not in the reference"},
		},
		{
			name: "a permission nobody explains",
			code: func(f *Facts) {
				f.Roles[0].Rules = append(f.Roles[0].Rules, Rule{Resources: []string{"secrets"}, Verbs: []string{"get"}})
			},
			want: []string{"a generated table is stale", "the controller's role grants secrets, which no row of the table of reasons explains"},
		},
		{
			name: "an alert renamed in the rules",
			code: func(f *Facts) { f.Alerts = []string{"TimeoutControllerNoLeader"} },
			want: []string{"the alert TimeoutControllerNoLeader is not in the table of alerts", "docs/guides/monitoring.md:5: the alert TimeoutControllerDown is not in config/prometheus/rules.yaml"},
		},
		{
			name: "a link to a page that moved",
			page: map[string]string{"README.md": "# Repo\n\nSee [install](docs/install.md).\n"},
			want: []string{"README.md:3: link docs/install.md: docs/install.md does not exist"},
		},
		{
			name: "a link to a heading that was renamed",
			page: map[string]string{"README.md": "# Repo\n\nSee [flags](docs/reference/flags.md#options).\n"},
			want: []string{"README.md:3: link docs/reference/flags.md#options: docs/reference/flags.md has no heading with the anchor #options"},
		},
		{
			name: "code that names a page that moved",
			page: map[string]string{"internal/x.go": "package x\n\n// See docs/operations.md#events.\n"},
			want: []string{"internal/x.go:3: names docs/operations.md, which does not exist"},
		},
		{
			name: "a generated table edited by hand",
			page: map[string]string{"docs/reference/flags.md": "# Flags\n\n<!-- BEGIN GENERATED flags -->\n<!-- END GENERATED flags -->\n"},
			want: []string{"the controller's flag --workers is not in the reference"},
		},
		{
			name: "a generated block missing from its page",
			page: map[string]string{"docs/reference/rbac.md": "# RBAC\n\n| resource | why |\n| --- | --- |\n| `playbooks` | to delete them |\n"},
			want: []string{"docs/reference/rbac.md:0: the generated block rbac is missing"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			facts := fakeFacts()
			root := fakeRepo(t, facts, tc.page)
			if tc.name == "a generated table edited by hand" {
				// Empty the block again after Generate filled it.
				if err := os.WriteFile(filepath.Join(root, "docs/reference/flags.md"), []byte(tc.page["docs/reference/flags.md"]), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for p, edit := range tc.edit {
				b, err := os.ReadFile(filepath.Join(root, p))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, p), []byte(edit(string(b))), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.code != nil {
				tc.code(facts)
			}
			problems, err := Check(root, facts)
			if err != nil {
				t.Fatal(err)
			}
			all := strings.Join(problems, "\n")
			if len(problems) == 0 {
				t.Fatal("the check found nothing wrong")
			}
			for _, want := range tc.want {
				if !strings.Contains(all, want) {
					t.Errorf("no problem says %q; the check said:\n%s", want, all)
				}
			}
			for _, not := range tc.not {
				if strings.Contains(all, not) {
					t.Errorf("a problem says %q; the check said:\n%s", not, all)
				}
			}
		})
	}
}

// TestTheRepositoryDocsAgreeWithTheCode runs the check of `make verify`
// on this repository: it builds the controller and the plugin to read
// their flags.
func TestTheRepositoryDocsAgreeWithTheCode(t *testing.T) {
	root := filepath.Join("..", "..")
	facts, err := Gather(root)
	if err != nil {
		t.Fatal(err)
	}
	problems, err := Check(root, facts)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("`make docs-check` would fail:\n%s", strings.Join(problems, "\n"))
	}
}
