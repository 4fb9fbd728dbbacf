// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
)

// Item is one governed object in list's JSON and YAML output.
type Item struct {
	// Object's fields come first, at the top level of the JSON.
	Object
	// Deletion is set for an object in Terminating; ExpiresAt, DeleteAt,
	// SecondsLeft and the other fields about its lifetime are then absent.
	Deletion *DeletionInfo `json:"deletion,omitempty"`
	// ExpiresAt is absent for kept objects and under a policy whose spec
	// cannot be used.
	ExpiresAt *Time `json:"expiresAt,omitempty"`
	// DeleteAt is when the object will be deleted if reminders go out on
	// time: the expiry, or later when the deletion waits for the minimum
	// notice.
	DeleteAt *Time `json:"deleteAt,omitempty"`
	// SecondsLeft is the time left before DeleteAt; negative when it is
	// past.
	SecondsLeft *int64 `json:"secondsLeft,omitempty"`
	// Source is the annotation that set the expiry, or "defaultTTL",
	// "idleTTL" or "maxTTL".
	Source string `json:"source,omitempty"`
	// LastActive is the object's latest activity under a policy with
	// idleTTL: its creation, last-active, or a generation change.
	LastActive *Time `json:"lastActive,omitempty"`
	// MaxAt is the latest the object may live to, under a policy with
	// maxTTL.
	MaxAt         *Time    `json:"maxAt,omitempty"`
	RemindersSent []string `json:"remindersSent"`
	Policy        string   `json:"policy"`
	Flags         []string `json:"flags"`
	// Sleep is set under a policy with spec.sleep, and for an object
	// whose sleep annotation says it sleeps.
	Sleep *SleepInfo `json:"sleep,omitempty"`
}

// Time is a time written in UTC, RFC 3339.
type Time time.Time

// MarshalJSON writes t in UTC.
func (t Time) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Time(t).UTC().Format(time.RFC3339Nano))
}

// UnmarshalJSON reads an RFC 3339 time.
func (t *Time) UnmarshalJSON(b []byte) error {
	var tt time.Time
	if err := json.Unmarshal(b, &tt); err != nil {
		return err
	}
	*t = Time(tt)
	return nil
}

func timePtr(t time.Time) *Time {
	if t.IsZero() {
		return nil
	}
	tt := Time(t)
	return &tt
}

// ItemList is list's JSON and YAML output.
type ItemList struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Items      []Item `json:"items"`
}

func itemOf(ev *Evaluation) Item {
	it := Item{
		Object:        objectOf(ev),
		Policy:        ev.Governing.Name,
		RemindersSent: ev.SentStages(),
		Flags:         ev.Flags(),
		Deletion:      deletionOf(ev),
		Sleep:         sleepOf(ev),
	}
	if it.RemindersSent == nil {
		it.RemindersSent = []string{}
	}
	if it.Flags == nil {
		it.Flags = []string{}
	}
	if it.Deletion == nil && !ev.Life.Keep && ev.Governing.SpecErr == nil {
		it.ExpiresAt = timePtr(ev.Life.ExpiresAt)
		it.Source = ev.Life.Source
		if ev.Governing.Schedule.IdleTTL > 0 {
			it.LastActive = timePtr(ev.Life.LastActive)
		}
		it.MaxAt = timePtr(ev.Life.Max)
		if d := ev.DeleteAt(); !d.IsZero() {
			it.DeleteAt = timePtr(d)
			left := secondsBetween(ev.Now, d)
			it.SecondsLeft = &left
		}
	}
	return it
}

type listOptions struct {
	output         string
	selector       string
	policy         string
	expiringWithin string
	// within is expiringWithin, parsed.
	within        time.Duration
	allNamespaces bool
}

func newListCommand(o *Options) *cobra.Command {
	var lo listOptions
	cmd := &cobra.Command{
		Use:   "list [KIND]",
		Short: "List governed objects, soonest deletion first",
		Long: `List every object a TimeoutPolicy governs, soonest deletion first; objects
in Terminating come first and kept objects last. KIND (playbooks,
configmaps, ...) limits the list to one kind; without it, every kind a
policy targets is listed.

LEFT is the time left before the deletion, which is the expiry unless the
deletion waits for the minimum notice (flag "postponed"); for an object in
Terminating, how long ago its deletion began. FLAGS:
  terminating the object is being deleted: finalizers still hold it (see
              explain); it is the only flag then
  keep        the object is kept (timeout.amphitheatre.app/keep)
  invalid     an annotation has a value that cannot be used (see explain)
  postponed   expired, and deleted once the minimum notice has passed
  dry-run     the policy reports instead of deleting
  not-ready   the policy is not Ready: nothing is deleted under it now
  inactive    the policy's spec cannot be used: nothing expires under it
  asleep      its policy put it to sleep: its workloads are scaled to zero
  waking      the controller is waking it (or does so now): it was used

SLEEP, shown when a policy puts objects to sleep (spec.sleep), says since
when an object sleeps ("asleep since 3h ago"), or when it goes to sleep if
nobody uses it ("sleeps in 2h"), or "waking".`,
		Example: `  kubectl timeout list
  kubectl timeout list playbooks --expiring-within 3d
  kubectl timeout list configmaps -n dev --policy scratch -l app=demo
  kubectl timeout list -o json`,
		Args: cobra.MaximumNArgs(1),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return completeKinds(cmd.Context(), o)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			kindArg := ""
			if len(args) == 1 {
				kindArg = args[0]
			}
			return runList(cmd.Context(), o, lo, kindArg)
		},
	}
	outputFlag(cmd, &lo.output, "table", "wide", "json", "yaml")
	cmd.Flags().StringVarP(&lo.selector, "selector", "l", "", "Label selector: only objects with these labels (e.g. app=demo,tier!=prod)")
	cmd.Flags().StringVar(&lo.policy, "policy", "", "Only objects this TimeoutPolicy governs")
	cmd.Flags().StringVar(&lo.expiringWithin, "expiring-within", "", "Only objects deleted within this long from now (e.g. 3d, 36h); objects in Terminating are always listed, kept objects never")
	cmd.Flags().BoolVarP(&lo.allNamespaces, "all-namespaces", "A", false, "List namespaced kinds in every namespace")
	_ = cmd.RegisterFlagCompletionFunc("policy", func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		return completePolicies(cmd.Context(), o)
	})
	return cmd
}

func runList(ctx context.Context, o *Options, lo listOptions, kindArg string) error {
	if err := checkOutput(lo.output, "table", "wide", "json", "yaml"); err != nil {
		return err
	}
	if lo.expiringWithin != "" {
		d, err := expiry.ParseDuration(lo.expiringWithin)
		if err != nil {
			return usageError("--expiring-within: %v", err)
		}
		lo.within = d
	}
	s, err := newSession(o, lo.allNamespaces)
	if err != nil {
		return err
	}
	evs, err := s.governed(ctx, lo, kindArg)
	if err != nil {
		return err
	}
	return writeList(o, lo.output, evs)
}

// governed evaluates the objects list shows, in its order.
func (s *session) governed(ctx context.Context, lo listOptions, kindArg string) ([]*Evaluation, error) {
	if err := s.loadPolicies(ctx); err != nil {
		return nil, err
	}
	named := slices.IndexFunc(s.policies, func(p v1alpha1.TimeoutPolicy) bool { return p.Name == lo.policy })
	if lo.policy != "" && named < 0 {
		return nil, withCode(ExitNotFound, "no TimeoutPolicy called %q", lo.policy)
	}
	kinds, err := s.targetKinds(kindArg)
	if err != nil {
		return nil, err
	}
	if named >= 0 {
		// Only the policy's own kind can hold objects it governs.
		target := match.TargetGVK(&s.policies[named]).GroupKind()
		kinds = slices.DeleteFunc(kinds, func(k kind) bool { return k.gvk.GroupKind() != target })
	}
	var evs []*Evaluation
	for _, k := range kinds {
		items, err := s.list(ctx, k, lo.selector)
		if err != nil {
			return nil, err
		}
		for i := range items {
			ev, err := s.evaluate(ctx, k, &items[i])
			if err != nil {
				return nil, err
			}
			if ev.Governing == nil || (lo.policy != "" && ev.Governing.Name != lo.policy) {
				continue
			}
			// An object in Terminating counts as deleted within any time:
			// its deletion has begun and not completed.
			if lo.expiringWithin != "" {
				d := deletionTime(ev)
				if d.IsZero() || d.Sub(ev.Now) > lo.within {
					continue
				}
			}
			evs = append(evs, ev)
		}
	}
	sortEvaluations(evs)
	return evs, nil
}

// writeList writes the evaluated objects in the output format.
func writeList(o *Options, format string, evs []*Evaluation) error {
	switch format {
	case "json", "yaml":
		list := ItemList{APIVersion: "timeout.amphitheatre.app/v1alpha1", Kind: "GovernedObjectList", Items: []Item{}}
		for _, ev := range evs {
			list.Items = append(list.Items, itemOf(ev))
		}
		return writeStructured(o.Out, format, list)
	}
	if len(evs) == 0 {
		fmt.Fprintln(o.ErrOut, "No governed objects found.")
		return nil
	}
	return writeTable(o.Out, evs, format == "wide")
}

// deletionTime is when the object's deletion began, for one in
// Terminating, or when it will come; zero when it never will.
func deletionTime(ev *Evaluation) time.Time {
	if d := ev.Object.GetDeletionTimestamp(); d != nil {
		return d.Time
	}
	return ev.DeleteAt()
}

// sortEvaluations orders objects by deletion time, soonest first, so that
// those in Terminating come first, the longest there first; those never
// deleted last, by name.
func sortEvaluations(evs []*Evaluation) {
	slices.SortStableFunc(evs, func(a, b *Evaluation) int {
		da, db := deletionTime(a), deletionTime(b)
		switch {
		case da.IsZero() && db.IsZero():
			return strings.Compare(a.Object.GetNamespace()+"/"+a.Object.GetName(), b.Object.GetNamespace()+"/"+b.Object.GetName())
		case da.IsZero():
			return 1
		case db.IsZero():
			return -1
		}
		return da.Compare(db)
	})
}

func writeStructured(w io.Writer, format string, v any) error {
	if format == "yaml" {
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeTable(w io.Writer, evs []*Evaluation, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	anyNamespaced := slices.ContainsFunc(evs, func(ev *Evaluation) bool { return ev.Object.GetNamespace() != "" })
	header := []string{}
	if anyNamespaced {
		header = append(header, "NAMESPACE")
	}
	header = append(header, "NAME", "TITLE", "CREATED", "EXPIRES (UTC)", "LEFT")
	// SLEEP only when something sleeps, or may.
	sleeps := slices.ContainsFunc(evs, func(ev *Evaluation) bool { return ev.SleepState() != "" })
	if sleeps {
		header = append(header, "SLEEP")
	}
	header = append(header, "REMINDERS", "POLICY", "FLAGS")
	if wide {
		header = append(header, "SOURCE", "DELETE AT", "NEXT", "LAST ACTIVE", "MAX")
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, ev := range evs {
		it := itemOf(ev)
		row := []string{}
		if anyNamespaced {
			row = append(row, dash(it.Namespace))
		}
		created, expires, left := "", "-", "-"
		if wide {
			created = formatTime(time.Time(it.Created))
		} else {
			created = Span(time.Time(it.Created), ev.Now) + " ago"
		}
		if it.ExpiresAt != nil {
			if wide {
				expires = formatTime(time.Time(*it.ExpiresAt))
			} else {
				expires = time.Time(*it.ExpiresAt).UTC().Format("2006-01-02 15:04")
			}
		}
		switch {
		case it.Deletion != nil:
			left = relative(time.Time(it.Deletion.Since), ev.Now)
		case it.DeleteAt != nil:
			left = Left(time.Time(*it.DeleteAt), ev.Now)
		}
		row = append(row, strings.ToLower(it.Kind)+"/"+it.Name, dash(truncate(it.Title, 32)), created, expires, left)
		if sleeps {
			row = append(row, sleepColumn(it.Sleep, ev.Now))
		}
		row = append(row, dash(strings.Join(it.RemindersSent, ",")), it.Policy, dash(strings.Join(it.Flags, ",")))
		if wide {
			deleteAt, next := "-", nextStep(ev)
			switch {
			case it.Deletion != nil:
				deleteAt = formatTime(time.Time(it.Deletion.Since))
				if len(it.Deletion.Finalizers) > 0 {
					next = "held by " + strings.Join(it.Deletion.Finalizers, ",")
				}
			case it.DeleteAt != nil:
				deleteAt = formatTime(time.Time(*it.DeleteAt))
			}
			lastActive, maxAt := "-", "-"
			if it.LastActive != nil {
				lastActive = formatTime(time.Time(*it.LastActive))
			}
			if it.MaxAt != nil {
				maxAt = formatTime(time.Time(*it.MaxAt))
			}
			row = append(row, dash(it.Source), deleteAt, dash(next), lastActive, maxAt)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// nextStep says in a few words what the controller does next.
func nextStep(ev *Evaluation) string {
	if len(ev.Steps) == 0 {
		return ""
	}
	s := ev.Steps[0]
	what := s.Action
	if s.Stage != "" {
		what = s.Stage + " reminder"
	}
	return what + " " + formatTime(s.At)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func formatTime(t time.Time) string {
	return t.UTC().Format(time.RFC3339)
}
