// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/notify/webhook"
)

// linker signs links named after their recipient.
type linker struct{}

func (linker) Link(m notify.Message, recipient string) (notify.Message, error) {
	page := "https://timeout.example.com/a/tok-" + recipient
	m.Actions = &notify.Links{Page: page, Extend: page + "?do=extend", Wake: page + "?do=wake", Step: "1 day", Token: "tok-" + recipient}
	return m, nil
}

// A receiver gets the links signed for its channel in data.actions, in a
// signed event it verifies.
func TestSendCarriesTheChannelsLinks(t *testing.T) {
	rc := &receiver{key: []byte(rawKey)}
	srv := serve(t, rc)
	n := webhook.New("platform-hooks", srv.URL+"/hooks", []byte(rawKey), nil)
	m := reminder()
	m.Linker = linker{}

	if err := n.Send(t.Context(), m, notify.Content{}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	got := rc.deliveries()
	if len(got) != 1 || got[0].err != nil {
		t.Fatalf("deliveries %+v, want one the receiver verified", got)
	}
	var event struct {
		Data struct {
			Actions map[string]any `json:"actions"`
		} `json:"data"`
	}
	if err := json.Unmarshal(got[0].body, &event); err != nil {
		t.Fatal(err)
	}
	page := "https://timeout.example.com/a/tok-webhook:platform-hooks"
	want := map[string]any{"page": page, "extend": page + "?do=extend", "wake": page + "?do=wake"}
	if len(event.Data.Actions) != len(want) {
		t.Fatalf("data.actions = %v, want %v", event.Data.Actions, want)
	}
	for k, v := range want {
		if event.Data.Actions[k] != v {
			t.Errorf("data.actions.%s = %v, want %v", k, event.Data.Actions[k], v)
		}
	}
}

// A receiver that echoes the event back in a refusal does not put the
// link's token in the debug log.
func TestTheDebugLogNeverQuotesALinksToken(t *testing.T) {
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(body[strings.Index(string(body), `"actions"`):])
	}))
	var lines []string
	log := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 1})
	n := webhook.New("platform-hooks", srv.URL+"/hooks", []byte(rawKey), nil)
	m := reminder()
	m.Linker = linker{}
	if err := n.Send(logr.NewContext(context.Background(), log), m, notify.Content{}); err == nil {
		t.Fatal("Send succeeded")
	}
	all := strings.Join(lines, "\n")
	if !strings.Contains(all, `\"actions\"`) || strings.Contains(all, "tok-webhook") {
		t.Errorf("debug log = %q, want the answer without the token", all)
	}
}
