// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"maps"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

func TestTTLCache(t *testing.T) {
	type put struct {
		key string
		ttl time.Duration
	}
	for _, tt := range []struct {
		name string
		// puts are made a second apart, from t0, into a cache of limit 3.
		puts []put
		// then is how long after the last put the cache is read.
		then time.Duration
		want []string
	}{
		{name: "keeps an answer until its time to live is over",
			puts: []put{{"a", time.Minute}}, then: time.Minute - time.Nanosecond, want: []string{"a"}},
		{name: "forgets an answer once its time to live is over",
			puts: []put{{"a", time.Minute}}, then: time.Minute},
		{name: "full, forgets every expired answer before a live one",
			puts: []put{{"a", time.Second}, {"b", time.Second}, {"c", time.Hour}, {"d", time.Hour}}, want: []string{"c", "d"}},
		{name: "full of live answers, forgets the one that would expire first",
			puts: []put{{"a", time.Hour}, {"b", time.Minute}, {"c", time.Hour}, {"d", time.Hour}}, want: []string{"a", "c", "d"}},
		{name: "full, replaces an answer without forgetting another",
			puts: []put{{"a", time.Hour}, {"b", time.Minute}, {"c", time.Hour}, {"b", time.Hour}}, want: []string{"a", "b", "c"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := clocktesting.NewFakePassiveClock(fixture.T0)
			c := NewTTLCache[string, string](clock, 3)
			for i, p := range tt.puts {
				if i > 0 {
					clock.SetTime(clock.Now().Add(time.Second))
				}
				c.Put(p.key, "answer "+p.key, clock.Now().Add(p.ttl))
			}
			if n := len(c.entries); n > 3 {
				t.Errorf("%d entries in a cache of 3", n)
			}
			clock.SetTime(clock.Now().Add(tt.then))
			var got []string
			for _, k := range slices.Sorted(maps.Keys(c.entries)) {
				v, ok := c.Get(k)
				if !ok {
					continue
				}
				if v != "answer "+k {
					t.Errorf("get(%q) = %q", k, v)
				}
				got = append(got, k)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("the cache answers for %q, want %q", got, tt.want)
			}
		})
	}
}
