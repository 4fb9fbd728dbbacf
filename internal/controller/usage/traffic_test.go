// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package usage

import (
	"strings"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"

	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

func TestParseTraffic(t *testing.T) {
	idle := func(tr v1alpha1.Traffic) v1alpha1.TimeoutPolicySpec {
		return v1alpha1.TimeoutPolicySpec{IdleTTL: "2h", Traffic: &tr}
	}
	for _, tc := range []struct {
		name string
		spec v1alpha1.TimeoutPolicySpec
		want TrafficQuery
		err  string
	}{
		{name: "defaults to a threshold of 0 and an interval of a minute", spec: idle(v1alpha1.Traffic{Query: " up "}),
			want: TrafficQuery{Query: "up", Interval: time.Minute}},
		{name: "reads the threshold, the interval in days and the name label", spec: idle(v1alpha1.Traffic{Query: "up", Threshold: "1e3", Interval: "1d", NameLabel: "playbook"}),
			want: TrafficQuery{Query: "up", threshold: 1000, Interval: 24 * time.Hour, nameLabel: "playbook"}},
		{name: "accepts the minimum interval", spec: idle(v1alpha1.Traffic{Query: "up", Interval: "15s"}),
			want: TrafficQuery{Query: "up", Interval: 15 * time.Second}},
		{name: "refuses a blank query", spec: idle(v1alpha1.Traffic{Query: " \n"}), err: "spec.traffic.query: a PromQL query is required"},
		{name: "refuses an interval under the minimum", spec: idle(v1alpha1.Traffic{Query: "up", Interval: "14s"}), err: `spec.traffic.interval: "14s" is shorter than the minimum, 15s`},
		{name: "refuses an interval that is not a duration", spec: idle(v1alpha1.Traffic{Query: "up", Interval: "soon"}), err: "spec.traffic.interval"},
		{name: "refuses a threshold that is not a number", spec: idle(v1alpha1.Traffic{Query: "up", Threshold: "NaN"}), err: `spec.traffic.threshold: "NaN" is not a decimal number`},
		{name: "refuses an infinite threshold", spec: idle(v1alpha1.Traffic{Query: "up", Threshold: "1e999"}), err: `spec.traffic.threshold: "1e999"`},
		{name: "refuses a name label Prometheus cannot have", spec: idle(v1alpha1.Traffic{Query: "up", NameLabel: "a-b"}), err: `spec.traffic.nameLabel: "a-b"`},
		{name: "refuses traffic under a policy with neither idleTTL nor sleep", spec: v1alpha1.TimeoutPolicySpec{Traffic: &v1alpha1.Traffic{Query: "up"}},
			err: "spec.traffic: traffic counts as use, which only spec.idleTTL or spec.sleep read"},
		{name: "accepts traffic under a sleep", spec: v1alpha1.TimeoutPolicySpec{Sleep: &v1alpha1.Sleep{After: "1h", DeleteAfter: "1d"}, Traffic: &v1alpha1.Traffic{Query: "up"}},
			want: TrafficQuery{Query: "up", Interval: time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTraffic(tc.spec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v; want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v; want %+v", got, tc.want)
			}
		})
	}
}

func TestTrafficQueryTimeoutIsWholeSecondsWithinTheInterval(t *testing.T) {
	for interval, want := range map[time.Duration]time.Duration{15 * time.Second: 7 * time.Second, time.Minute: 10 * time.Second, 17 * time.Second: 8 * time.Second} {
		if got := (TrafficQuery{Interval: interval}).timeout(); got != want {
			t.Errorf("timeout of a %s interval: %s; want %s", interval, got, want)
		}
	}
}

func object(namespace, name string, uid types.UID) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid}}
}

func TestTrafficTargets(t *testing.T) {
	vector := model.Vector{
		fixture.Sample(3, "namespace", "amp-busy"),
		fixture.Sample(0, "namespace", "amp-idle"),
		fixture.Sample(5, "namespace", "team", "playbook", "api"),
		fixture.Sample(7, "job", "no-namespace"),
		fixture.Sample(9, "namespace", ""),
	}
	owned := map[string][]types.UID{"amp-busy": {"uid-busy"}, "amp-idle": {"uid-idle"}, "team": {"uid-owner"}}
	for _, tc := range []struct {
		name      string
		threshold float64
		nameLabel string
		obj       *metav1.PartialObjectMetadata
		want      bool
	}{
		{name: "a sample above the threshold uses the owner of its namespace", obj: object("", "busy", "uid-busy"), want: true},
		{name: "a sample at the threshold uses nothing", obj: object("", "idle", "uid-idle")},
		{name: "a sample uses an object in its namespace", obj: object("amp-busy", "anything", "uid-other"), want: true},
		{name: "a sample uses nothing in another namespace", obj: object("elsewhere", "busy", "uid-other")},
		{name: "a cluster-scoped object that owns no namespace is not used", obj: object("", "busy", "uid-unrelated")},
		{name: "a sample under the threshold uses nothing", threshold: 3, obj: object("", "busy", "uid-busy")},
		{name: "a negative threshold makes a flat series use", threshold: -1, obj: object("", "idle", "uid-idle"), want: true},
		{name: "with nameLabel, a sample uses the object it names", nameLabel: "playbook", obj: object("team", "api", "uid-api"), want: true},
		{name: "with nameLabel, a sample uses no other object in its namespace", nameLabel: "playbook", obj: object("team", "web", "uid-web")},
		{name: "with nameLabel, the namespace's owner is used only if the label names it", nameLabel: "playbook", obj: object("", "owner", "uid-owner")},
		{name: "with nameLabel, a sample without it uses nothing", nameLabel: "playbook", obj: object("amp-busy", "busy", "uid-x")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := targetsOf(vector, tc.threshold, tc.nameLabel).uses(tc.obj, owned)
			if got != tc.want {
				t.Fatalf("uses %s/%s: %v; want %v", tc.obj.Namespace, tc.obj.Name, got, tc.want)
			}
		})
	}
}

func TestTrafficCondition(t *testing.T) {
	p := &v1alpha1.TimeoutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 3}, Spec: v1alpha1.TimeoutPolicySpec{Traffic: &v1alpha1.Traffic{Query: "up"}}}
	t.Run("says traffic is not configured without Prometheus", func(t *testing.T) {
		c := (&Traffic{}).Condition(p)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonTrafficNotConfigured || !strings.Contains(c.Message, "--prometheus-url") {
			t.Fatalf("condition %+v", c)
		}
	})
	t.Run("has no condition for a policy without traffic", func(t *testing.T) {
		if c := (&Traffic{}).Condition(&v1alpha1.TimeoutPolicy{}); c != nil {
			t.Fatalf("condition %+v", c)
		}
	})
	t.Run("is False after a failed query", func(t *testing.T) {
		tr := &Traffic{Prometheus: fixture.FakeAPI{}, Changed: nil}
		tr.record(p, trafficResult{generation: 3, reason: v1alpha1.ReasonQueryFailed, message: "down"})
		c := tr.Condition(p)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonQueryFailed || c.ObservedGeneration != 3 {
			t.Fatalf("condition %+v", c)
		}
	})
}
