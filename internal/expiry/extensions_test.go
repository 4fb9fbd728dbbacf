// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
)

// limitedObject is an object under a policy with extension limits, whose
// extensions annotation is written back after each look as the controller
// does.
type limitedObject struct {
	t           *testing.T
	s           Schedule
	created     time.Time
	annotations map[string]string
}

func newLimited(t *testing.T, spec v1alpha1.TimeoutPolicySpec, created time.Time) *limitedObject {
	t.Helper()
	s, err := NewSchedule(spec)
	if err != nil {
		t.Fatalf("NewSchedule: %v", err)
	}
	return &limitedObject{t: t, s: s, created: created, annotations: map[string]string{}}
}

// look computes the lifetime at now and writes back the extensions
// annotation it calls for, as settleExtensions does.
func (o *limitedObject) look(now time.Time) Lifetime {
	l := o.s.Lifetime(o.created, o.annotations, now)
	switch {
	case l.Extensions != nil:
		o.annotations[AnnotationExtensions] = l.Extensions.String()
	default:
		delete(o.annotations, AnnotationExtensions)
	}
	return l
}

// change writes a lifetime annotation as user (in groups), with the stamp
// the admission policy puts beside it.
func (o *limitedObject) change(key, value, user string, groups ...string) {
	o.annotations[Prefix+key] = value
	o.stamp(user, groups, key)
}

func (o *limitedObject) stamp(user string, groups []string, keys ...string) {
	c := ChangedBy{By: user, Groups: groups, Changed: keys}
	o.annotations[AnnotationChangedBy] = `{"by":"` + c.By + `","groups":["` + strings.Join(c.Groups, `","`) + `"],"changed":["` + strings.Join(c.Changed, `","`) + `"]}`
}

func refusals(l Lifetime) []Invalid {
	var out []Invalid
	for _, inv := range l.Invalid {
		if strings.Contains(inv.Fallback, "extension is refused") || (inv.Annotation == AnnotationKeep && strings.Contains(inv.Expected, "extension limits")) {
			out = append(out, inv)
		}
	}
	return out
}

var limitedSpec = v1alpha1.TimeoutPolicySpec{
	DefaultTTL: "7d",
	Extensions: &v1alpha1.Extensions{MaxStep: "2d", MaxCount: ptr.To[int32](2), ExemptGroups: []string{"platform-team"}},
}

func TestExtensionLimits(t *testing.T) {
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	now := created.Add(time.Hour)
	day := 24 * time.Hour

	t.Run("counts extensions within the step and refuses the one past the count", func(t *testing.T) {
		o := newLimited(t, limitedSpec, created)
		if l := o.look(now); !l.ExpiresAt.Equal(created.Add(7*day)) || len(refusals(l)) > 0 {
			t.Fatalf("start: %v %v", l.ExpiresAt, l.Invalid)
		}
		o.change("ttl", "9d", "alice", "dev")
		l := o.look(now)
		if !l.ExpiresAt.Equal(created.Add(9*day)) || l.Extensions.Used != 1 || l.Extensions.By != "alice" || !l.Extensions.At.Equal(now) {
			t.Fatalf("first extension: %v %+v", l.ExpiresAt, l.Extensions)
		}
		o.change("ttl", "11d", "alice", "dev")
		if l := o.look(now.Add(time.Hour)); !l.ExpiresAt.Equal(created.Add(11*day)) || l.Extensions.Used != 2 {
			t.Fatalf("second extension: %v %+v", l.ExpiresAt, l.Extensions)
		}
		o.change("ttl", "12d", "alice", "dev")
		l = o.look(now.Add(2 * time.Hour))
		if !l.ExpiresAt.Equal(created.Add(11*day)) || l.Extensions.Used != 2 {
			t.Fatalf("third extension: want it refused at the second's expiry, got %v %+v", l.ExpiresAt, l.Extensions)
		}
		r := refusals(l)
		if len(r) != 1 || r[0].Annotation != AnnotationTTL || !strings.Contains(r[0].Error(), "2 of 2 extensions used") ||
			!strings.Contains(r[0].Error(), "ask a member of platform-team") || !strings.Contains(r[0].Error(), "keeps its expiry 2026-11-12T00:00:00Z") {
			t.Fatalf("refusal: %v", r)
		}
	})

	t.Run("refuses a step too long and says what is allowed, then takes one within it", func(t *testing.T) {
		o := newLimited(t, limitedSpec, created)
		o.look(now)
		o.change("expires-at", "2026-11-20T00:00:00Z", "alice", "dev")
		l := o.look(now)
		if !l.ExpiresAt.Equal(created.Add(7*day)) || l.Extensions.Used != 0 {
			t.Fatalf("want the expiry kept, got %v %+v", l.ExpiresAt, l.Extensions)
		}
		if r := refusals(l); len(r) != 1 || !strings.Contains(r[0].Error(), "at most 2d past the current expiry 2026-11-08T00:00:00Z (until 2026-11-10T00:00:00Z), not 12d") ||
			!strings.Contains(r[0].Error(), "0 of 2 extensions used") {
			t.Fatalf("refusal: %v", r)
		}
		o.change("expires-at", "2026-11-10T00:00:00Z", "alice", "dev")
		if l := o.look(now); !l.ExpiresAt.Equal(created.Add(9*day)) || l.Extensions.Used != 1 || len(refusals(l)) > 0 {
			t.Fatalf("within the step: %v %+v %v", l.ExpiresAt, l.Extensions, l.Invalid)
		}
	})

	t.Run("lets an exempt group past the limits without counting", func(t *testing.T) {
		o := newLimited(t, limitedSpec, created)
		o.look(now)
		o.change("ttl", "90d", "bob", "dev", "platform-team")
		l := o.look(now)
		if !l.ExpiresAt.Equal(created.Add(90*day)) || l.Extensions.Used != 0 || l.Extensions.By != "bob" || len(refusals(l)) > 0 {
			t.Fatalf("exempt: %v %+v %v", l.ExpiresAt, l.Extensions, l.Invalid)
		}
	})

	t.Run("does not take an exempt stamp about another annotation for the extension", func(t *testing.T) {
		o := newLimited(t, limitedSpec, created)
		o.look(now)
		o.annotations[AnnotationTTL] = "90d"
		o.stamp("bob", []string{"platform-team"}, "last-active")
		if l := o.look(now); !l.ExpiresAt.Equal(created.Add(7*day)) || len(refusals(l)) != 1 {
			t.Fatalf("want refused: %v %v", l.ExpiresAt, l.Invalid)
		}
	})

	t.Run("takes a shorter lifetime without counting, and judges the next from it", func(t *testing.T) {
		o := newLimited(t, limitedSpec, created)
		o.look(now)
		o.change("ttl", "3d", "alice", "dev")
		if l := o.look(now); !l.ExpiresAt.Equal(created.Add(3*day)) || l.Extensions.Used != 0 {
			t.Fatalf("shorter: %v %+v", l.ExpiresAt, l.Extensions)
		}
		o.change("ttl", "7d", "alice", "dev")
		if l := o.look(now); !l.ExpiresAt.Equal(created.Add(3*day)) || len(refusals(l)) != 1 {
			t.Fatalf("4d past the shorter one: want refused, got %v %v", l.ExpiresAt, l.Invalid)
		}
	})

}

func TestExtensionLimitsKeepAndUse(t *testing.T) {
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	now := created.Add(time.Hour)
	day := 24 * time.Hour

	t.Run("refuses keep to all but the exempt groups, and keeps an exempt keep", func(t *testing.T) {
		o := newLimited(t, limitedSpec, created)
		o.look(now)
		o.change("keep", "true", "alice", "dev")
		l := o.look(now)
		if l.Keep || !l.KeepRefused || !l.ExpiresAt.Equal(created.Add(7*day)) || len(refusals(l)) != 1 {
			t.Fatalf("developer's keep: %+v", l)
		}
		o.change("keep", "true", "bob", "platform-team")
		if l := o.look(now); !l.Keep || !l.Extensions.Keep {
			t.Fatalf("exempt keep: %+v", l)
		}
		// Someone else's later change does not undo a keep that was let.
		o.change("last-active", now.Format(time.RFC3339), "alice", "dev")
		if l := o.look(now); !l.Keep {
			t.Fatalf("keep after another change: %+v", l)
		}
		// Removing keep is no extension: the object is back where it was.
		delete(o.annotations, AnnotationKeep)
		o.stamp("alice", []string{"dev"}, "keep")
		if l := o.look(now); l.Keep || !l.ExpiresAt.Equal(created.Add(7*day)) || l.Extensions.Keep || len(refusals(l)) > 0 {
			t.Fatalf("keep removed: %+v", l)
		}
	})

	t.Run("a last-active write is use, not an extension", func(t *testing.T) {
		spec := limitedSpec
		spec.IdleTTL = "10d"
		o := newLimited(t, spec, created)
		o.look(now)
		later := created.Add(5 * day)
		o.change("last-active", later.Format(time.RFC3339), "alice", "dev")
		l := o.look(later)
		if !l.ExpiresAt.Equal(later.Add(10*day)) || l.Extensions.Used != 0 || len(refusals(l)) > 0 {
			t.Fatalf("use: %v %+v", l.ExpiresAt, l.Extensions)
		}
	})

}

func TestExtensionLimitsChange(t *testing.T) {
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	now := created.Add(time.Hour)
	day := 24 * time.Hour

	t.Run("starts afresh when limits come back after being turned off", func(t *testing.T) {
		o := newLimited(t, limitedSpec, created)
		o.look(now)
		o.change("ttl", "9d", "alice", "dev")
		o.look(now)
		off := limitedSpec
		off.Extensions = nil
		var err error
		if o.s, err = NewSchedule(off); err != nil {
			t.Fatal(err)
		}
		o.change("ttl", "30d", "alice", "dev")
		if l := o.look(now); !l.ExpiresAt.Equal(created.Add(30*day)) || l.Extensions != nil {
			t.Fatalf("off: %v %+v", l.ExpiresAt, l.Extensions)
		}
		if _, ok := o.annotations[AnnotationExtensions]; ok {
			t.Fatal("the annotation outlived the limits")
		}
		if o.s, err = NewSchedule(limitedSpec); err != nil {
			t.Fatal(err)
		}
		if l := o.look(now); !l.ExpiresAt.Equal(created.Add(30*day)) || l.Extensions.Used != 0 || len(refusals(l)) > 0 {
			t.Fatalf("on again: %v %+v %v", l.ExpiresAt, l.Extensions, l.Invalid)
		}
		o.change("ttl", "40d", "alice", "dev")
		if l := o.look(now); !l.ExpiresAt.Equal(created.Add(30*day)) || len(refusals(l)) != 1 {
			t.Fatalf("judged from the new start: %v %v", l.ExpiresAt, l.Invalid)
		}
	})

	t.Run("keeps the count when the limits change, and judges a refused extension again by the new ones", func(t *testing.T) {
		o := newLimited(t, limitedSpec, created)
		o.look(now)
		o.change("ttl", "9d", "alice", "dev")
		o.look(now)
		o.change("ttl", "20d", "alice", "dev")
		if l := o.look(now); len(refusals(l)) != 1 {
			t.Fatalf("want refused: %v", l.Invalid)
		}
		looser := limitedSpec
		looser.Extensions = &v1alpha1.Extensions{MaxStep: "14d", MaxCount: ptr.To[int32](5)}
		var err error
		if o.s, err = NewSchedule(looser); err != nil {
			t.Fatal(err)
		}
		l := o.look(now)
		if !l.ExpiresAt.Equal(created.Add(20*day)) || l.Extensions.Used != 2 || l.Extensions.Limits.MaxCount != 5 {
			t.Fatalf("looser: %v %+v", l.ExpiresAt, l.Extensions)
		}
	})

	t.Run("survives a restart: the count is on the object", func(t *testing.T) {
		o := newLimited(t, limitedSpec, created)
		o.look(now)
		o.change("ttl", "9d", "alice", "dev")
		o.look(now)
		o.change("ttl", "11d", "alice", "dev")
		o.look(now)
		// A new controller: a new schedule, the same annotations.
		restarted := newLimited(t, limitedSpec, created)
		restarted.annotations = o.annotations
		restarted.change("ttl", "12d", "alice", "dev")
		if l := restarted.look(now); !l.ExpiresAt.Equal(created.Add(11*day)) || len(refusals(l)) != 1 {
			t.Fatalf("after a restart: %v %v", l.ExpiresAt, l.Invalid)
		}
	})

	t.Run("a broken extensions annotation starts afresh and never shortens", func(t *testing.T) {
		o := newLimited(t, limitedSpec, created)
		o.annotations[AnnotationTTL] = "9d"
		o.annotations[AnnotationExtensions] = "granted=garbage"
		if l := o.look(now); !l.ExpiresAt.Equal(created.Add(9*day)) || l.Extensions.Used != 0 {
			t.Fatalf("broken: %v %+v", l.ExpiresAt, l.Extensions)
		}
	})

	t.Run("a refused extension never leaves the object with less than its expiry under maxTTL", func(t *testing.T) {
		spec := limitedSpec
		spec.MaxTTL = "8d"
		o := newLimited(t, spec, created)
		o.look(now)
		o.change("ttl", "30d", "alice", "dev")
		if l := o.look(now); !l.ExpiresAt.Equal(created.Add(7 * day)) {
			t.Fatalf("capped and refused: %v", l.ExpiresAt)
		}
	})
}

func TestExtensionsAnnotationRoundTrip(t *testing.T) {
	e := Extensions{
		Granted: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Used: 3,
		Limits: Limits{MaxStep: 7 * 24 * time.Hour, MaxCount: 3, Exempt: []string{"platform-team", "sre"}},
		Keep:   true, At: time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC), By: "system:serviceaccount:ci:bot with spaces",
	}
	want := "granted=2026-12-01T00:00:00Z used=3 maxCount=3 maxStep=7d exempt=platform-team,sre keep=true at=2026-11-20T10:00:00Z by=system:serviceaccount:ci:bot with spaces"
	if got := e.String(); got != want {
		t.Fatalf("String:\n got %s\nwant %s", got, want)
	}
	back, err := ParseExtensions(want)
	if err != nil || back.String() != want {
		t.Fatalf("ParseExtensions: %v %s", err, back.String())
	}
	none := Extensions{Granted: e.Granted, Limits: Limits{MaxCount: -1, MaxStep: time.Hour}}
	if back, err := ParseExtensions(none.String()); err != nil || back.Limits.MaxCount != -1 || back.By != "" || !back.At.IsZero() {
		t.Fatalf("no count: %v %+v", err, back)
	}
	for _, bad := range []string{"", "granted=x", strings.Replace(want, "used=3", "used=-1", 1), strings.Replace(want, "maxStep=7d", "maxStep=0", 1), strings.Replace(want, "keep=true", "keep=maybe", 1)} {
		if _, err := ParseExtensions(bad); err == nil {
			t.Errorf("ParseExtensions(%q) took it", bad)
		}
	}
	if got := e.Extended(e.At.Add(49 * time.Hour)); got != "extended by system:serviceaccount:ci:bot with spaces 2d1h ago, 3 of 3 extensions used" {
		t.Errorf("Extended: %s", got)
	}
}

func TestNewScheduleExtensions(t *testing.T) {
	for _, tt := range []struct {
		name string
		ext  v1alpha1.Extensions
		want string
	}{
		{"refuses a bad duration", v1alpha1.Extensions{MaxStep: "7 days"}, "spec.extensions.maxStep"},
		{"refuses a zero step", v1alpha1.Extensions{MaxStep: "0"}, "spec.extensions.maxStep"},
		{"refuses a negative count", v1alpha1.Extensions{MaxCount: ptr.To[int32](-1)}, "spec.extensions.maxCount"},
		{"refuses limits that limit nothing", v1alpha1.Extensions{ExemptGroups: []string{"a"}}, "needs maxStep, maxCount or both"},
		{"refuses a group with a comma", v1alpha1.Extensions{MaxStep: "1d", ExemptGroups: []string{"a,b"}}, "exemptGroups[0]"},
		{"refuses a group with a space", v1alpha1.Extensions{MaxStep: "1d", ExemptGroups: []string{"a b"}}, "exemptGroups[0]"},
		{"refuses a group named as the annotation writes none", v1alpha1.Extensions{MaxStep: "1d", ExemptGroups: []string{"-"}}, "exemptGroups[0]"},
		{"takes a zero count", v1alpha1.Extensions{MaxCount: ptr.To[int32](0)}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewSchedule(v1alpha1.TimeoutPolicySpec{Extensions: &tt.ext})
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("want an error with %q, got %v", tt.want, err)
			}
		})
	}
}

// FuzzExtensionLimits: whatever the extensions and changed-by
// annotations hold (the controller's own, and the stamp, which anyone can
// break where the admission policies are not installed), the lifetime
// under limits is either the one the annotations give or the one granted
// before, and the account the controller would write reads back the same.
func FuzzExtensionLimits(f *testing.F) {
	f.Add("granted=2026-11-08T00:00:00Z used=1 maxCount=2 maxStep=2d exempt=platform-team keep=false at=- by=alice", `{"by":"bob","groups":["platform-team"],"changed":["ttl"]}`, "30d")
	f.Add("granted=2026-11-08T00:00:00Z used=9 maxCount=- maxStep=- exempt=- keep=true at=- by=- with spaces", `{"by":""}`, "1d")
	f.Add("granted=0001-01-01T00:00:00Z used=0 maxCount=0 maxStep=1ns exempt=a keep=false at=- by=-", "{", "9999w")
	f.Add("", "", "")
	s, err := NewSchedule(limitedSpec)
	if err != nil {
		f.Fatal(err)
	}
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, extensions, changedBy, ttl string) {
		a := map[string]string{AnnotationExtensions: extensions, AnnotationChangedBy: changedBy, AnnotationTTL: ttl}
		now := created.Add(time.Hour)
		l := s.Lifetime(created, a, now)
		base := Compute(created, a, s.DefaultTTL).ExpiresAt
		prev, perr := ParseExtensions(extensions)
		if !l.ExpiresAt.Equal(base) && (perr != nil || !l.ExpiresAt.Equal(prev.Granted)) {
			t.Fatalf("expires at %s: neither the annotations' %s nor the granted %s", l.ExpiresAt, base, prev.Granted)
		}
		back, err := ParseExtensions(l.Extensions.String())
		if err != nil || back.String() != l.Extensions.String() {
			t.Fatalf("the account %q does not read back: %v", l.Extensions.String(), err)
		}
	})
}

func TestChangedByReadsHowAChangeWasMade(t *testing.T) {
	for _, tt := range []struct {
		name, value string
		want        ChangedBy
		who         string
	}{
		{
			name:  "reads a stamp made at admission, without via",
			value: `{"by":"alice","groups":["dev"],"changed":["ttl"]}`,
			want:  ChangedBy{By: "alice", Groups: []string{"dev"}, Changed: []string{"ttl"}},
			who:   "alice",
		},
		{
			name:  "reads the stamp of a link, which names its recipient and no group",
			value: `{"by":"alice@example.com","via":"link","changed":["expires-at"]}`,
			want:  ChangedBy{By: "alice@example.com", Changed: []string{"expires-at"}, Via: ViaLink},
			who:   "alice@example.com via link",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseChangedBy(map[string]string{AnnotationChangedBy: tt.value})
			if !ok || got.By != tt.want.By || got.Via != tt.want.Via || !slices.Equal(got.Groups, tt.want.Groups) || !slices.Equal(got.Changed, tt.want.Changed) {
				t.Fatalf("ParseChangedBy = %+v, %t; want %+v", got, ok, tt.want)
			}
			if got.Who() != tt.who {
				t.Errorf("Who() = %q, want %q", got.Who(), tt.who)
			}
		})
	}
}
