// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package slack_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/notify/slack"
)

// linker signs links named after their recipient, with every action.
type linker struct{}

func (linker) Link(m notify.Message, recipient string) (notify.Message, error) {
	page := "https://timeout.example.com/a/tok-" + recipient
	m.Actions = &notify.Links{Page: page, Extend: page + "?do=extend", Wake: page + "?do=wake", Delete: page + "?do=delete",
		Step: "1 day", Token: "tok-" + recipient}
	return m, nil
}

// button is what a test reads of a posted button.
type button struct {
	actionID, text, value, url, style string
	confirms                          bool
}

// buttons returns the buttons of a post's actions block.
func buttons(t *testing.T, post map[string]any) []button {
	t.Helper()
	bs := ofType(blocks(t, post), "actions")
	if len(bs) != 1 {
		t.Fatalf("post has %d actions blocks, want 1", len(bs))
	}
	var out []button
	for _, e := range bs[0]["elements"].([]any) {
		el := e.(map[string]any)
		if el["type"] != "button" {
			t.Fatalf("element of type %v in the actions block", el["type"])
		}
		b := button{text: el["text"].(map[string]any)["text"].(string)}
		b.actionID, _ = el["action_id"].(string)
		b.value, _ = el["value"].(string)
		b.url, _ = el["url"].(string)
		b.style, _ = el["style"].(string)
		_, b.confirms = el["confirm"]
		out = append(out, b)
	}
	return out
}

// The channel's Slack app signs its interactions: each post's buttons
// carry the token signed for its channel, and act through the app.
func TestButtonsActThroughTheSlackAppWithItsSigningSecret(t *testing.T) {
	for _, tt := range []struct {
		name        string
		secrets     secrets
		interactive bool
	}{
		{name: "with the app's signing secret, buttons post their token", interactive: true},
		{name: "without it, buttons open the page"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, url := serve(t, http.StatusOK)
			s := secrets{"timeout-system/slack-webhook/url": url}
			if tt.interactive {
				s["timeout-system/slack-webhook/"+slack.SigningSecretKey] = "8f742231b10e8888abcd99yyyzzz85a5"
			}
			ref := v1alpha1.SecretKeySelector{Namespace: "timeout-system", Name: "slack-webhook", Key: "url"}
			ns, err := notify.Kinds{slack.Kind}.Build(context.Background(),
				[]notify.Channel{{Name: "team-chat", Spec: v1alpha1.NotificationChannelSpec{Slack: &v1alpha1.SlackChannel{WebhookURLSecretRef: ref}}}}, s)
			if err != nil {
				t.Fatal(err)
			}
			m := message(v1alpha1.EventSleeping)
			m.Recipients.SlackChannels = []string{"#team-a"}
			m.Linker = linker{}
			if err := ns[0].Send(context.Background(), m, render(t, m)); err != nil {
				t.Fatalf("Send: %v", err)
			}
			posts := r.received()
			if len(posts) != 2 {
				t.Fatalf("%d posts, want 2", len(posts))
			}
			for i, recipient := range []string{"slack:team-chat", "#team-a"} {
				page := "https://timeout.example.com/a/tok-" + recipient
				token := "tok-" + recipient
				want := []button{
					{actionID: "extend", text: "Keep it 1 day longer", style: "primary"},
					{actionID: "wake", text: "Keep it awake"},
					{actionID: "delete", text: "I am done: delete it now", style: "danger"},
					{actionID: "view", text: "See it", url: page},
				}
				for j, u := range []string{page + "?do=extend", page + "?do=wake", page + "?do=delete"} {
					if tt.interactive {
						want[j].value = token
					} else {
						want[j].url = u
					}
				}
				want[2].confirms = tt.interactive
				got := buttons(t, posts[i])
				if len(got) != len(want) {
					t.Fatalf("post to %s: buttons %+v, want %+v", recipient, got, want)
				}
				for j := range want {
					if got[j] != want[j] {
						t.Errorf("post to %s, button %d = %+v, want %+v", recipient, j, got[j], want[j])
					}
				}
			}
		})
	}
}

func TestAMessageWithoutLinksHasNoButtons(t *testing.T) {
	r, url := serve(t, http.StatusOK)
	m := message(v1alpha1.EventReminder)
	if err := slack.New(url, nil).Send(context.Background(), m, render(t, m)); err != nil {
		t.Fatal(err)
	}
	if bs := ofType(blocks(t, r.received()[0]), "actions"); len(bs) != 0 {
		t.Errorf("a message without links has %d actions blocks", len(bs))
	}
}
