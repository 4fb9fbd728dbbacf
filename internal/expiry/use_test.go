// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"strings"
	"testing"
	"time"
)

func TestUseRoundTripsThroughItsAnnotations(t *testing.T) {
	at := time.Date(2026, 11, 26, 9, 30, 12, 900_000_000, time.UTC)
	u := Use{At: at, Via: ViaExec, By: "alice@example.com"}
	got, ok := LastUse(u.Annotations())
	if !ok {
		t.Fatalf("LastUse(%v) found no use", u.Annotations())
	}
	want := Use{At: at.Truncate(time.Second), Via: ViaExec, By: "alice@example.com"}
	if got != want {
		t.Errorf("LastUse = %+v, want %+v", got, want)
	}
	if s := got.String(); s != "exec by alice@example.com" {
		t.Errorf("String = %q", s)
	}
	if s := (Use{At: at, Via: ViaTraffic}).String(); s != "traffic" {
		t.Errorf("String of a use without By = %q, want traffic", s)
	}
	if s := (Use{At: at, Via: ViaLink, By: "alice@example.com"}).String(); s != "by alice@example.com via link" {
		t.Errorf("String of a use through a link = %q, want by alice@example.com via link", s)
	}
}

func TestLastUseIgnoresADescriptionOfAnotherTime(t *testing.T) {
	at := time.Date(2026, 11, 26, 9, 30, 12, 0, time.UTC)
	a := Use{At: at, Via: ViaExec, By: "alice"}.Annotations()
	a[AnnotationLastActive] = at.Add(time.Minute).Format(time.RFC3339)
	if u, ok := LastUse(a); ok {
		t.Errorf("LastUse = %+v for a last-use about an earlier last-active", u)
	}
	for _, v := range []string{"", "{}", `{"at":"2026-11-26T09:30:12Z"}`, `{"via":"exec"}`, "not json"} {
		if u, ok := LastUse(map[string]string{AnnotationLastActive: at.Format(time.RFC3339), AnnotationLastUse: v}); ok {
			t.Errorf("LastUse(%q) = %+v, want none", v, u)
		}
	}
}

func TestUseCutsALongName(t *testing.T) {
	u := Use{At: time.Now(), Via: ViaPortForward, By: strings.Repeat("é", MaxUseBy)}
	got, err := ParseUse(u.Annotation())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.By) > MaxUseBy {
		t.Errorf("By kept %d bytes, want at most %d", len(got.By), MaxUseBy)
	}
}

func TestLifetimeNamesTheUseItsIdleClockCountsFrom(t *testing.T) {
	s := Schedule{DefaultTTL: Day, IdleTTL: time.Hour}
	at := created.Add(2 * time.Hour)
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        *Use
	}{
		{"names an exec", Use{At: at, Via: ViaExec, By: "alice"}.Annotations(), &Use{At: at, Via: ViaExec, By: "alice"}},
		{"names nothing when last-use is about an earlier last-active", map[string]string{
			AnnotationLastActive: at.Add(time.Minute).Format(time.RFC3339),
			AnnotationLastUse:    Use{At: at, Via: ViaExec, By: "alice"}.Annotation(),
		}, nil},
		{"names nothing when a later change of generation is the last activity", func() map[string]string {
			a := Use{At: at, Via: ViaExec, By: "alice"}.Annotations()
			a[AnnotationActivity] = Activity{Generation: 2, At: at.Add(time.Minute)}.String()
			return a
		}(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := s.Lifetime(created, tc.annotations, at.Add(2*time.Minute))
			if (l.Use == nil) != (tc.want == nil) || (l.Use != nil && (*l.Use != *tc.want)) {
				t.Errorf("Use = %+v, want %+v", l.Use, tc.want)
			}
		})
	}
}
