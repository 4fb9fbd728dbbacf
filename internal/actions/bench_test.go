// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package actions

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// BenchmarkClicks is issue 33's load: 1,000 people each open their own
// link's page and click "Keep it longer", 4 at a time, on a fake API
// server. Every extension must be applied exactly once; it reports the
// server-side p99 of a page and of a click, and the clicks per second.
func BenchmarkClicks(b *testing.B) {
	const n, parallel = 1000, 4
	for b.Loop() {
		b.StopTimer()
		objs := make([]client.Object, n)
		for i := range objs {
			objs[i] = playbook(fmt.Sprintf("pr-%04d", i), types.UID(fmt.Sprintf("uid-%04d", i)), nil)
		}
		e := newEnv(b, func(c *envConfig) { c.objects = objs })
		type link struct{ path, csrf string }
		links := make([]link, n)
		for i := range links {
			c := Claims{Object: &Ref{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook", Name: fmt.Sprintf("pr-%04d", i), UID: types.UID(fmt.Sprintf("uid-%04d", i))},
				Recipient: "dev@example.com", Actions: []Action{Extend}, Expires: now.Add(time.Hour)}
			tok, err := e.ring.Sign(c)
			if err != nil {
				b.Fatal(err)
			}
			v, _ := e.ring.Verify(tok, now)
			links[i] = link{"/a/" + tok, e.ring.formToken(KeyName(created)[len(keyPrefix):], v.ID)}
		}
		b.StartTimer()
		start := time.Now()
		took, shown := make([]time.Duration, n), make([]time.Duration, n)
		var wg sync.WaitGroup
		next := make(chan int)
		for range parallel {
			wg.Go(func() {
				for i := range next {
					t0 := time.Now()
					rec := httptest.NewRecorder()
					e.srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "https://timeout.example.com"+links[i].path, nil))
					shown[i] = time.Since(t0)
					if rec.Code != http.StatusOK {
						b.Errorf("page %d: %d", i, rec.Code)
					}
					form := url.Values{"csrf": {links[i].csrf}, "action": {"extend"}}
					req := httptest.NewRequest(http.MethodPost, "https://timeout.example.com"+links[i].path, stringsReader(form.Encode()))
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
					t0 = time.Now()
					rec = httptest.NewRecorder()
					e.srv.ServeHTTP(rec, req)
					took[i] = time.Since(t0)
					if rec.Code != http.StatusOK {
						b.Errorf("click %d: %d", i, rec.Code)
					}
				}
			})
		}
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		for i := range n {
			o := getPlaybook(b, e, fmt.Sprintf("pr-%04d", i))
			a := o.GetAnnotations()
			if a[expiry.AnnotationExpiresAt] != "2026-11-16T09:00:00Z" || len(parseUses(a[expiry.AnnotationLinkUses])) != 1 {
				b.Fatalf("pr-%04d: expires-at %s, uses %s; want one extension", i, a[expiry.AnnotationExpiresAt], a[expiry.AnnotationLinkUses])
			}
		}
		slices.Sort(took)
		slices.Sort(shown)
		b.ReportMetric(float64(shown[n*99/100].Microseconds())/1000, "p99-ms/page")
		b.ReportMetric(float64(took[n*99/100].Microseconds())/1000, "p99-ms/click")
		b.ReportMetric(float64(n)/elapsed.Seconds(), "clicks/s")
		b.StartTimer()
	}
}

// BenchmarkOwnersPage is the owner's page of an owner of 100 objects,
// among 100,000 governed objects in the index: the server-side time of
// one page, with no API LIST.
func BenchmarkOwnersPage(b *testing.B) {
	const total, mine = 100_000, 100
	e := newEnv(b)
	idx := NewOwnerIndexer()
	for i := range total {
		owner := fmt.Sprintf("user-%d@example.com", i%(total/mine))
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("pb-%06d", i), UID: types.UID(fmt.Sprintf("uid-%06d", i)), ResourceVersion: "1",
			CreationTimestamp: metav1.NewTime(created.Add(time.Duration(i) * time.Second)),
			Annotations:       map[string]string{notify.AnnotationOwner: owner},
		}}
		if err := idx.Add(m); err != nil {
			b.Fatal(err)
		}
	}
	e.owners.AddStore(playbookGVK, idx)
	tok, err := e.ring.Sign(Claims{Owner: "user-7@example.com", Recipient: "user-7@example.com", Actions: []Action{Extend}, Expires: now.Add(time.Hour)})
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "https://timeout.example.com/o/"+tok, nil)
	b.ResetTimer()
	for b.Loop() {
		rec := httptest.NewRecorder()
		e.srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
	}
	b.StopTimer()
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, req)
	if got := countForms(rec.Body.String()); got != mine {
		b.Fatalf("%d objects on the page, want %d", got, mine)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
}
