// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package browser

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The harness itself: a page is opened and read, and axe-core finds what
// a page without a language or a labelled field breaks, and nothing on a
// page that has them.
func TestTheBrowserReadsAPageAndAxeJudgesIt(t *testing.T) {
	pages := map[string]string{
		"/bad":  `<!doctype html><html><head><title>bad</title></head><body><main><h1>Hi</h1><input type="text"></main></body></html>`,
		"/good": `<!doctype html><html lang="en"><head><title>good</title></head><body><main><h1>Hi</h1><label for="f">Name</label><input id="f" type="text"></main></body></html>`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(pages[r.URL.Path]))
	}))
	defer srv.Close()
	ctx := New(t, 320)

	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/bad")); err != nil {
		t.Fatal(err)
	}
	h1, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("h1")))
	if err != nil || h1 != "Hi" {
		t.Fatalf("h1 %q, %v; want Hi", h1, err)
	}
	bad, err := Axe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, v := range bad {
		ids = append(ids, v.ID)
	}
	if !strings.Contains(strings.Join(ids, " "), "html-has-lang") || !strings.Contains(strings.Join(ids, " "), "label") {
		t.Errorf("axe-core found %v on a page without lang and with an unlabelled field; want html-has-lang and label", ids)
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/good")); err != nil {
		t.Fatal(err)
	}
	good, err := Axe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(good) != 0 {
		t.Errorf("axe-core found %v on a page that breaks no rule", good)
	}
}
