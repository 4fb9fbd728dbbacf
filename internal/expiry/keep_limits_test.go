// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// TestAKeepIsLetOnlyByAnExemptUserWhoSetIt: under extension limits, keep
// is let when a member of an exempt group set it, and holds until it is
// removed; an exempt user's change to another annotation lets nobody's
// keep. What the extensions annotation records (Extensions.Keep) is what
// the next look goes by.
func TestAKeepIsLetOnlyByAnExemptUserWhoSetIt(t *testing.T) {
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	now := created.Add(time.Hour)
	day := 24 * time.Hour

	t.Run("holds an exempt keep through other people's changes, look after look", func(t *testing.T) {
		o := newLimited(t, limitedSpec, created)
		o.look(now)
		o.change("keep", "true", "bob", "platform-team")
		o.look(now)
		o.change("last-active", now.Format(time.RFC3339), "alice", "dev")
		for i := range 3 {
			if l := o.look(now.Add(time.Duration(i) * time.Minute)); !l.Keep || !l.Extensions.Keep {
				t.Fatalf("look %d after alice's change: Keep %t, Extensions.Keep %t; want kept", i+1, l.Keep, l.Extensions.Keep)
			}
		}
	})
	t.Run("does not let a keep someone else asked for when an exempt user changes the ttl", func(t *testing.T) {
		o := newLimited(t, limitedSpec, created)
		o.look(now)
		o.change("keep", "true", "alice", "dev")
		o.look(now)
		o.change("ttl", "8d", "bob", "platform-team")
		l := o.look(now)
		if l.Keep || !l.KeepRefused || l.Extensions.Keep {
			t.Errorf("Keep %t, KeepRefused %t, Extensions.Keep %t; want alice's keep still refused", l.Keep, l.KeepRefused, l.Extensions.Keep)
		}
	})
	t.Run("marks a keep refused by the limits as Limited", func(t *testing.T) {
		o := newLimited(t, limitedSpec, created)
		o.look(now)
		o.change("keep", "true", "alice", "dev")
		r := refusals(o.look(now))
		if len(r) != 1 || !r[0].Limited {
			t.Errorf("refusals %+v, want one, Limited", r)
		}
	})
	t.Run("takes a keep value that does not parse for keep, and refuses it too", func(t *testing.T) {
		o := newLimited(t, limitedSpec, created)
		o.look(now)
		o.change("keep", "yes please", "alice", "dev")
		if l := o.look(now); l.Keep || !l.KeepRefused || !l.ExpiresAt.Equal(created.Add(7*day)) {
			t.Errorf("Keep %t, KeepRefused %t, expires %s; want the keep refused and the 7d expiry", l.Keep, l.KeepRefused, rfc(l.ExpiresAt))
		}
	})
	t.Run("refuses nothing about a kept object's ttl", func(t *testing.T) {
		o := newLimited(t, limitedSpec, created)
		o.look(now)
		o.change("keep", "true", "bob", "platform-team")
		o.look(now)
		o.change("ttl", "30d", "alice", "dev")
		if l := o.look(now); !l.Keep || len(l.Invalid) != 0 {
			t.Errorf("Keep %t, Invalid %v; want kept and nothing reported", l.Keep, l.Invalid)
		}
	})
}

// TestAForbiddenKeepIsReportedAsForbidden: under spec.keep Forbidden, an
// object that does not ask to be kept is reported for nothing, and one
// that does is told that the policy forbids keep, not that the extension
// limits do.
func TestAForbiddenKeepIsReportedAsForbidden(t *testing.T) {
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	now := created.Add(time.Hour)
	s := Schedule{DefaultTTL: 7 * Day, KeepForbidden: true, Limits: &Limits{MaxCount: 2, MaxStep: 2 * Day}}
	t.Run("reports nothing of an object without the keep annotation", func(t *testing.T) {
		if l := s.Lifetime(created, map[string]string{}, now); len(l.Invalid) != 0 || l.KeepRefused {
			t.Errorf("Invalid %v, KeepRefused %t; want nothing", l.Invalid, l.KeepRefused)
		}
	})
	t.Run("says the policy forbids a keep asked for", func(t *testing.T) {
		l := s.Lifetime(created, map[string]string{AnnotationKeep: "true"}, now)
		if l.Keep || len(l.Invalid) != 1 || l.Invalid[0].Limited || !strings.Contains(l.Invalid[0].Expected, "forbids it") {
			t.Errorf("Keep %t, Invalid %+v; want the keep refused as forbidden", l.Keep, l.Invalid)
		}
	})
}

// TestExtensionLimitsBoundOnlyWhatThePolicySets: a policy may bound the
// step of an extension, their count, or both; the bound it leaves unset
// refuses nothing. An expiry moved by the policy's own defaultTTL is no
// extension.
func TestExtensionLimitsBoundOnlyWhatThePolicySets(t *testing.T) {
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	now := created.Add(time.Hour)
	day := 24 * time.Hour
	stepOnly := v1alpha1.TimeoutPolicySpec{DefaultTTL: "7d", Extensions: &v1alpha1.Extensions{MaxStep: "2d"}}
	countOnly := v1alpha1.TimeoutPolicySpec{DefaultTTL: "7d", Extensions: &v1alpha1.Extensions{MaxCount: ptr.To[int32](2)}}

	t.Run("counts no extension against a policy that bounds only the step", func(t *testing.T) {
		o := newLimited(t, stepOnly, created)
		o.look(now)
		for i, ttl := range []string{"9d", "11d", "13d"} {
			o.change("ttl", ttl, "alice", "dev")
			if l := o.look(now); !l.ExpiresAt.Equal(created.Add(time.Duration(9+2*i)*day)) || len(refusals(l)) > 0 {
				t.Fatalf("extension %d to %s: expires %s, refusals %v", i+1, ttl, rfc(l.ExpiresAt), refusals(l))
			}
		}
	})
	t.Run("takes an extension of any length from a policy that bounds only the count", func(t *testing.T) {
		o := newLimited(t, countOnly, created)
		o.look(now)
		o.change("ttl", "60d", "alice", "dev")
		if l := o.look(now); !l.ExpiresAt.Equal(created.Add(60*day)) || l.Extensions.Used != 1 || len(refusals(l)) > 0 {
			t.Errorf("expires %s, used %d, refusals %v; want the 60d extension counted", rfc(l.ExpiresAt), l.Extensions.Used, refusals(l))
		}
	})
	t.Run("marks an extension refused by the limits as Limited", func(t *testing.T) {
		o := newLimited(t, limitedSpec, created)
		o.look(now)
		o.change("ttl", "20d", "alice", "dev")
		if r := refusals(o.look(now)); len(r) != 1 || !r[0].Limited {
			t.Errorf("refusals %+v, want one, Limited", r)
		}
	})
	t.Run("takes a longer defaultTTL for no extension", func(t *testing.T) {
		o := newLimited(t, limitedSpec, created)
		o.look(now)
		o.s.DefaultTTL = 20 * day
		if l := o.look(now); !l.ExpiresAt.Equal(created.Add(20*day)) || l.Extensions.Used != 0 || len(refusals(l)) > 0 {
			t.Errorf("expires %s, used %d, refusals %v; want the policy's 20d, not an extension", rfc(l.ExpiresAt), l.Extensions.Used, refusals(l))
		}
	})
	t.Run("names nobody for an extension whose stamp is about another annotation", func(t *testing.T) {
		o := newLimited(t, limitedSpec, created)
		o.look(now)
		o.annotations[AnnotationTTL] = "8d"
		o.stamp("bob", []string{"dev"}, "keep")
		if l := o.look(now); l.Extensions.Used != 1 || l.Extensions.By != "" {
			t.Errorf("used %d, by %q; want one extension by nobody known", l.Extensions.Used, l.Extensions.By)
		}
	})
}

// TestExtensionsDescribeTheLastExtension: the plugin and the Events say
// how an object was last extended, and only an object never extended
// gets nothing.
func TestExtensionsDescribeTheLastExtension(t *testing.T) {
	at := time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)
	limits := Limits{MaxCount: 2, MaxStep: 2 * Day}
	for _, tt := range []struct {
		name string
		e    Extensions
		want string
	}{
		{"describes an exempt user's extension, which is not counted", Extensions{At: at, By: "bob", Limits: limits},
			"extended by bob 2d ago, 0 of 2 extensions used"},
		{"describes extensions counted by an annotation that shows no time", Extensions{Used: 1, Limits: limits},
			"extended, 1 of 2 extensions used"},
		{"says nothing of an object never extended", Extensions{Limits: limits}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.Extended(at.Add(2 * Day)); got != tt.want {
				t.Errorf("Extended = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestAnnotationsOfTheLimitsRefuseWhatTheyCannotRead: an extensions
// annotation with a count that is no count, and a changed-by stamp that
// names nobody, are not taken at a guess.
func TestAnnotationsOfTheLimitsRefuseWhatTheyCannotRead(t *testing.T) {
	good := Extensions{Granted: time.Date(2026, 11, 8, 0, 0, 0, 0, time.UTC), Used: 1, Limits: Limits{MaxCount: 2, MaxStep: 2 * Day}}.String()
	if _, err := ParseExtensions(good); err != nil {
		t.Fatalf("ParseExtensions(%q): %v", good, err)
	}
	for _, tt := range []struct{ name, from, to string }{
		{"refuses a used count that is no number", "used=1", "used=one"},
		{"refuses a maxCount that is no number", "maxCount=2", "maxCount=two"},
		{"refuses a negative maxCount", "maxCount=2", "maxCount=-2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := strings.Replace(good, tt.from, tt.to, 1)
			if e, err := ParseExtensions(v); err == nil {
				t.Errorf("ParseExtensions(%q) = %+v, want an error", v, e)
			}
		})
	}
	t.Run("takes a stamp that names no user for no stamp", func(t *testing.T) {
		if c, ok := ParseChangedBy(map[string]string{AnnotationChangedBy: `{"groups":["platform-team"],"changed":["keep"]}`}); ok {
			t.Errorf("ParseChangedBy = %+v, true; want no stamp", c)
		}
	})
}
