// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// TestTheExtensionsAnnotationReadsBackWhatWasWritten: the count, the
// limits and who last extended are on the object, so that a restart or a
// new leader judges the next extension as this one would, at the edges
// too: a maxCount of 0, a step of a nanosecond, one exempt group, a time
// without a user and a user without a time.
func TestTheExtensionsAnnotationReadsBackWhatWasWritten(t *testing.T) {
	granted := time.Date(2026, 11, 8, 0, 0, 0, 0, time.UTC)
	at := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name string
		e    Extensions
	}{
		{"no bound and no exempt group", Extensions{Granted: granted, Limits: Limits{MaxCount: -1, MaxStep: 2 * Day}}},
		{"no extension allowed, a step of a nanosecond, one exempt group",
			Extensions{Granted: granted, Limits: Limits{MaxCount: 0, MaxStep: time.Nanosecond, Exempt: []string{"platform-team"}}}},
		{"a step and a count without exempt groups", Extensions{Granted: granted, Used: 1, Limits: Limits{MaxCount: 2, MaxStep: 2 * Day}}},
		{"exempt groups without a step", Extensions{Granted: granted, Used: 3, Limits: Limits{MaxCount: 5, Exempt: []string{"a", "b"}}, Keep: true}},
		{"the time of an extension without its user", Extensions{Granted: granted, Limits: Limits{MaxCount: -1, MaxStep: Day}, At: at}},
		{"the user of an extension without its time", Extensions{Granted: granted, Limits: Limits{MaxCount: -1, MaxStep: Day}, By: "alice"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.e.String()
			got, err := ParseExtensions(v)
			if err != nil {
				t.Fatalf("ParseExtensions(%q): %v", v, err)
			}
			if !got.Granted.Equal(tt.e.Granted) || !got.At.Equal(tt.e.At) || got.Used != tt.e.Used || got.Keep != tt.e.Keep || got.By != tt.e.By ||
				!reflect.DeepEqual(got.Limits, tt.e.Limits) {
				t.Errorf("ParseExtensions(%q) =\n  %+v\nwant\n  %+v", v, got, tt.e)
			}
		})
	}
}

// TestAnExtensionsAnnotationThatDoesNotParseSaysWhere: the error names
// the field that is wrong.
func TestAnExtensionsAnnotationThatDoesNotParseSaysWhere(t *testing.T) {
	good := Extensions{Granted: time.Date(2026, 11, 8, 0, 0, 0, 0, time.UTC), Limits: Limits{MaxCount: 2}, At: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)}.String()
	for _, tt := range []struct{ name, value, want string }{
		{"a field missing", strings.Join(strings.Fields(good)[:7], " "), "expected the fields"},
		{"a field misnamed", strings.Replace(good, "used=", "count=", 1), "expected used= as field 2"},
		{"a granted time that is no time", strings.Replace(good, "granted=2026-11-08T00:00:00Z", "granted=soon", 1), "granted:"},
		{"an extension time that is no time", strings.Replace(good, "at=2026-11-02T00:00:00Z", "at=yesterday", 1), "at:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if e, err := ParseExtensions(tt.value); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseExtensions(%q) = %+v, %v; want an error about %q", tt.value, e, err, tt.want)
			}
		})
	}
}

// TestLimitsAtTheirEdges: a maxCount of 0 allows no extension, a step of
// a nanosecond allows none longer, and a policy without exempt groups
// says that nobody may exceed its limits.
func TestLimitsAtTheirEdges(t *testing.T) {
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	now := created.Add(time.Hour)
	look := func(l *Limits, extendTo time.Time) Lifetime {
		o := &limitedObject{t: t, s: Schedule{DefaultTTL: 7 * Day, Limits: l}, created: created, annotations: map[string]string{}}
		o.look(now)
		o.change("expires-at", extendTo.Format(time.RFC3339), "alice", "dev")
		return o.look(now)
	}
	t.Run("a maxCount of 0 refuses the first extension, and says nobody may exceed it", func(t *testing.T) {
		l := look(&Limits{MaxCount: 0}, created.Add(8*Day))
		r := refusals(l)
		if !l.ExpiresAt.Equal(created.Add(7*Day)) || len(r) != 1 || !strings.Contains(r[0].Error(), "nobody may exceed the limits") {
			t.Errorf("expires %s, refusals %v; want the extension refused", rfc(l.ExpiresAt), r)
		}
	})
	t.Run("reads a policy's maxCount of 0 as 0", func(t *testing.T) {
		s, err := NewSchedule(v1alpha1.TimeoutPolicySpec{Extensions: &v1alpha1.Extensions{MaxCount: ptr.To[int32](0)}})
		if err != nil || s.Limits == nil || s.Limits.MaxCount != 0 {
			t.Errorf("NewSchedule = %+v, %v; want a maxCount of 0", s.Limits, err)
		}
	})
	t.Run("a step of a nanosecond refuses an extension of a second", func(t *testing.T) {
		l := look(&Limits{MaxCount: -1, MaxStep: time.Nanosecond}, created.Add(7*Day+time.Second))
		if !l.ExpiresAt.Equal(created.Add(7*Day)) || len(refusals(l)) != 1 {
			t.Errorf("expires %s, refusals %v; want the extension refused", rfc(l.ExpiresAt), refusals(l))
		}
	})
	t.Run("counts used extensions against a maxCount of 0", func(t *testing.T) {
		e := Extensions{At: created, By: "bob", Limits: Limits{MaxCount: 0}}
		if got, want := e.Extended(created.Add(time.Hour)), "extended by bob 1h ago, 0 of 0 extensions used"; got != want {
			t.Errorf("Extended = %q, want %q", got, want)
		}
	})
}
