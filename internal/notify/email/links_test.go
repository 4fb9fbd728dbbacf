// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package email

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	netmail "net/mail"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// linker signs a page per recipient, named after the address.
type linker struct{ signed []string }

func (l *linker) Link(m notify.Message, recipient string) (notify.Message, error) {
	l.signed = append(l.signed, recipient)
	page := "https://timeout.example.com/a/tok-" + recipient
	m.Actions = &notify.Links{Page: page, Extend: page + "?do=extend", Step: "1 day"}
	return m, nil
}

// parts returns the To header and the text and HTML parts of a received
// message.
func parts(t *testing.T, data []byte) (to, text, html string) {
	t.Helper()
	msg, err := netmail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("parse message: %v", err)
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/alternative" {
		t.Fatalf("Content-Type = %q (%v), want multipart/alternative", msg.Header.Get("Content-Type"), err)
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("next part: %v", err)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			t.Fatal(err)
		}
		ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		switch ct {
		case "text/plain":
			text = strings.ReplaceAll(string(body), "\r\n", "\n")
		case "text/html":
			html = strings.ReplaceAll(string(body), "\r\n", "\n")
		}
	}
	return msg.Header.Get("To"), text, html
}

var href = regexp.MustCompile(`<a href="([^"]+)"`)

// A message with links reaches each recipient as a copy of its own,
// multipart/alternative: the text with the plain URLs, the HTML with
// buttons, each signed for that recipient alone.
func TestSendGivesEachRecipientACopyWithTheirLinks(t *testing.T) {
	b := &backend{}
	port := start(t, b, plain, tls.Certificate{})
	n := newNotifier(t, Config{Host: "127.0.0.1", Port: port, Security: SecurityNone, From: "timeout@example.com", To: []string{"ops@example.com"}})
	m, c := reminder(t, "alice@example.com", "bob@example.com")
	l := &linker{}
	m.Linker = l

	if err := n.Send(t.Context(), m, c); err != nil {
		t.Fatalf("Send: %v", err)
	}
	got := b.received()
	if len(got) != 3 {
		t.Fatalf("server received %d messages, want a copy for each of 3 recipients", len(got))
	}
	for i, want := range []string{"ops@example.com", "alice@example.com", "bob@example.com"} {
		r := got[i]
		if !slices.Equal(r.rcpts, []string{want}) {
			t.Fatalf("copy %d went to %q, want %s alone", i, r.rcpts, want)
		}
		to, text, html := parts(t, r.data)
		if to != "<"+want+">" {
			t.Errorf("copy to %s: To = %q, naming someone else", want, to)
		}
		page := "https://timeout.example.com/a/tok-" + want
		for _, line := range []string{"Keep it 1 day longer: " + page + "?do=extend\n", "See it: " + page + "\n"} {
			if !strings.Contains(text, line) {
				t.Errorf("text of %s's copy lacks %q:\n%s", want, line, text)
			}
		}
		var links []string
		for _, m := range href.FindAllStringSubmatch(html, -1) {
			links = append(links, m[1])
		}
		if !slices.Equal(links, []string{page + "?do=extend", page}) {
			t.Errorf("buttons of %s's copy lead to %q", want, links)
		}
		for _, other := range []string{"ops@", "alice@", "bob@"} {
			if other != want[:strings.Index(want, "@")+1] && bytes.Contains(r.data, []byte("tok-"+other)) {
				t.Errorf("%s's copy carries the links of %s", want, other)
			}
		}
	}
}

// A retry after the server refused one copy sends that one alone: the
// others were taken.
func TestSendSendsOnlyTheRefusedCopiesAgain(t *testing.T) {
	b := &backend{refuse: "bob@example.com"}
	port := start(t, b, plain, tls.Certificate{})
	n := newNotifier(t, Config{Host: "127.0.0.1", Port: port, Security: SecurityNone, From: "timeout@example.com"})
	m, c := reminder(t, "alice@example.com", "bob@example.com")
	m.Linker = &linker{}

	if err := n.Send(t.Context(), m, c); err == nil {
		t.Fatal("Send succeeded with bob's copy refused")
	}
	if got := b.received(); len(got) != 1 || !slices.Equal(got[0].rcpts, []string{"alice@example.com"}) {
		t.Fatalf("after the refusal the server holds %d copies, want alice's", len(got))
	}
	b.mu.Lock()
	b.refuse = ""
	b.mu.Unlock()
	if err := n.Send(t.Context(), m, c); err != nil {
		t.Fatalf("retry: %v", err)
	}
	got := b.received()
	if len(got) != 2 || !slices.Equal(got[1].rcpts, []string{"bob@example.com"}) {
		var rcpts [][]string
		for _, r := range got {
			rcpts = append(rcpts, r.rcpts)
		}
		t.Fatalf("after the retry the server holds copies for %q, want alice's then bob's", rcpts)
	}
}
