// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package actions

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// slackMaxSkew is how old (or how far ahead) a Slack request's timestamp
// may be: Slack's own advice against replays.
const slackMaxSkew = 5 * time.Minute

// slackInteraction is the part of a Slack block_actions payload read.
type slackInteraction struct {
	Type string `json:"type"`
	User struct {
		ID       string `json:"id"`
		Username string `json:"username"`
		Name     string `json:"name"`
	} `json:"user"`
	ResponseURL string `json:"response_url"`
	Actions     []struct {
		ActionID string `json:"action_id"`
		Value    string `json:"value"`
	} `json:"actions"`
}

// slackSignature is the X-Slack-Signature Slack sends for body at ts.
func slackSignature(secret []byte, ts string, body []byte) string {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("v0:" + ts + ":"))
	h.Write(body)
	return "v0=" + hex.EncodeToString(h.Sum(nil))
}

// serveSlack carries out a Slack button: the request must be signed with
// a Slack channel's signing secret within 5 minutes; the button's value is
// the link token and its action_id the action. The result replaces the
// message through response_url.
func (s *Server) serveSlack(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		count(View, resultInvalid)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "unreadable", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.o.APITimeout)
	defer cancel()
	now := s.o.Clock.Now()
	ts := r.Header.Get("X-Slack-Request-Timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.Unix(sec, 0)).Abs() > slackMaxSkew {
		count(View, resultInvalid)
		http.Error(w, "stale or missing timestamp", http.StatusUnauthorized)
		return
	}
	got := []byte(r.Header.Get("X-Slack-Signature"))
	signed := false
	for _, secret := range s.slack.get(ctx) {
		if hmac.Equal(got, []byte(slackSignature(secret, ts, body))) {
			signed = true
		}
	}
	if !signed {
		count(View, resultInvalid)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	form, err := url.ParseQuery(string(body))
	var in slackInteraction
	if err != nil || json.Unmarshal([]byte(form.Get("payload")), &in) != nil || in.Type != "block_actions" || len(in.Actions) == 0 {
		count(View, resultInvalid)
		http.Error(w, "not a block_actions payload", http.StatusBadRequest)
		return
	}
	a := Action(in.Actions[0].ActionID)
	text, result := s.slackAct(ctx, in, a, now)
	count(actionOr(string(a)), result)
	w.WriteHeader(http.StatusOK)
	if u, err := url.Parse(in.ResponseURL); err == nil && in.ResponseURL != "" && s.o.SlackResponseURL(u) {
		go s.reply(u.String(), text)
	}
}

// slackAct carries out the action of a Slack button and says the result.
func (s *Server) slackAct(ctx context.Context, in slackInteraction, a Action, now time.Time) (string, string) {
	_, claims, _, err := s.keys.verify(ctx, in.Actions[0].Value, now)
	if err != nil {
		p := tokenProblem(err, claims, now)
		return p.Title + ": " + p.Message, resultInvalid
	}
	if claims.Object == nil || (a != Extend && a != Wake && a != Delete) || !claims.Allows(a) {
		return "This button does not do that. Open the page of the link instead.", resultInvalid
	}
	user := in.User.Username
	if user == "" {
		user = in.User.Name
	}
	if user == "" {
		user = in.User.ID
	}
	v := visit{claims: claims, by: claims.Recipient, via: "slack"}
	if user != "" {
		v.by += " (Slack user " + user + ")"
	}
	o := s.act(ctx, v, *claims.Object, "", a, now)
	text := o.message
	if o.ev != nil {
		title, _ := heading(o.ev)
		text = title + ": " + text
	}
	for _, d := range o.details {
		text += " " + d
	}
	return text, o.result
}

// reply posts a result to a Slack response_url, replacing the message
// with the buttons.
func (s *Server) reply(responseURL, text string) {
	if s.slackDone != nil {
		defer s.slackDone()
	}
	b, _ := json.Marshal(map[string]any{"replace_original": true, "text": text})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, responseURL, bytes.NewReader(b))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.o.SlackClient.Do(req)
	if err != nil {
		// Without the URL, which lets its holder post to the channel.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		s.o.Log.Info("Slack reply failed", "error", err.Error())
		return
	}
	_ = resp.Body.Close()
	if resp.StatusCode >= 300 {
		s.o.Log.Info("Slack reply refused", "status", resp.StatusCode)
	}
}
