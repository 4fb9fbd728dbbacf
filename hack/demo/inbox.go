// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/mail"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// The two ways a message reaches the demo.
const (
	viaMail    = "mail"
	viaWebhook = "webhook"
)

// message is one notification that reached the demo's mail inbox or its
// webhook receiver.
type message struct {
	via string
	// id is the mail's Message-ID or the CloudEvent's id.
	id    string
	event v1alpha1.EventType
	// name is the Playbook's metadata.name.
	name    string
	arrived time.Time

	// By mail: the envelope recipients (blind copies included), sorted,
	// and the decoded subject; links are the URLs its text part lists, by
	// what they do (extend, wake, delete, page), when it has any; text
	// is its text part.
	to      []string
	subject string
	links   map[string]string
	text    string

	// By webhook: the CloudEvent's data.
	title     string
	stage     string
	expiresAt time.Time
	detail    string

	// refused says why the webhook receiver turned a request away; the
	// other fields are then unreliable.
	refused string
}

// receivers are the people at the other end: an SMTP server that accepts
// every message, and an HTTP endpoint that checks each request's Standard
// Webhooks signature with its own HMAC before it accepts the CloudEvent.
// Both listen on random loopback ports.
type receivers struct {
	mailHost   string
	mailPort   int32
	webhookURL string
	// secret is the signing key in Standard Webhooks form, for the Secret
	// the controller reads; key is the same key as raw bytes.
	secret string
	key    []byte

	// messages are those about no Playbook routed elsewhere.
	messages chan message
	// routes take the messages about the Playbooks of a scene played
	// alongside to that scene, by metadata.name.
	mu     sync.Mutex
	routes map[string]chan message
	quit   chan struct{}
	mail   *smtp.Server
	web    *http.Server
}

func startReceivers() (*receivers, error) {
	rc := &receivers{
		key:      make([]byte, 32),
		messages: make(chan message, 256),
		routes:   map[string]chan message{},
		quit:     make(chan struct{}),
	}
	_, _ = rand.Read(rc.key)
	rc.secret = "whsec_" + base64.StdEncoding.EncodeToString(rc.key)

	mailL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("mail inbox: %w", err)
	}
	webL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		mailL.Close()
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	addr := mailL.Addr().(*net.TCPAddr)
	rc.mailHost, rc.mailPort = addr.IP.String(), int32(addr.Port)
	rc.webhookURL = "http://" + webL.Addr().String() + "/hooks/timeout"

	rc.mail = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &mailSession{rc: rc}, nil
	}))
	rc.mail.Domain = "demo.local"
	rc.mail.ReadTimeout, rc.mail.WriteTimeout = 10*time.Second, 10*time.Second
	rc.mail.MaxMessageBytes = 1 << 20
	rc.mail.ErrorLog = log.New(io.Discard, "", 0)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks/timeout", rc.serveWebhook)
	rc.web = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}

	go func() { _ = rc.mail.Serve(mailL) }()
	go func() { _ = rc.web.Serve(webL) }()
	return rc, nil
}

func (rc *receivers) mailAddr() string {
	return net.JoinHostPort(rc.mailHost, strconv.Itoa(int(rc.mailPort)))
}

// stop closes both servers. Messages already received but not yet read
// from rc.messages are dropped.
func (rc *receivers) stop() {
	close(rc.quit)
	_ = rc.mail.Close()
	_ = rc.web.Close()
}

// route sends the messages about the named Playbooks to to, from now on.
func (rc *receivers) route(to chan message, names ...string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, n := range names {
		rc.routes[n] = to
	}
}

// unroute sends the messages about the named Playbooks to the story
// again, where the end of the demo gathers them, and returns those to
// had and nobody read.
func (rc *receivers) unroute(to chan message, names ...string) []message {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, n := range names {
		delete(rc.routes, n)
	}
	var left []message
	for {
		select {
		case m := <-to:
			left = append(left, m)
		default:
			return left
		}
	}
}

// keep hands m to the scene its Playbook is in, or to the story, unless
// the demo is over.
func (rc *receivers) keep(m message) {
	rc.mu.Lock()
	to, ok := rc.routes[m.name]
	rc.mu.Unlock()
	if !ok {
		to = rc.messages
	}
	select {
	case to <- m:
	case <-rc.quit:
	}
}

// mailSession is one SMTP transaction: plain, no authentication.
type mailSession struct {
	rc *receivers
	to []string
}

func (s *mailSession) Mail(string, *smtp.MailOptions) error { return nil }

func (s *mailSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}

func (s *mailSession) Data(r io.Reader) error {
	arrived := time.Now()
	m, err := mail.ReadMessage(r)
	if err != nil {
		return err
	}
	links, text, err := mailText(m)
	if err != nil {
		return err
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	if err != nil {
		subject = m.Header.Get("Subject")
	}
	s.rc.keep(message{
		via:     viaMail,
		id:      strings.Trim(m.Header.Get("Message-Id"), "<>"),
		event:   v1alpha1.EventType(m.Header.Get("X-Timeout-Event")),
		name:    strings.TrimPrefix(m.Header.Get("X-Timeout-Object"), playbookGVK.Kind+"/"),
		arrived: arrived,
		to:      slices.Sorted(slices.Values(s.to)),
		subject: subject,
		links:   links,
		text:    text,
	})
	return nil
}

// linkLines find the links in a mail's text part, as the default
// templates write them.
var linkLines = map[string]*regexp.Regexp{
	"extend": regexp.MustCompile(`(?m)^Keep it .*longer: (\S+)$`),
	"wake":   regexp.MustCompile(`(?m)^(?:Wake it|Keep it awake): (\S+)$`),
	"delete": regexp.MustCompile(`(?m)^I am done, delete it now: (\S+)$`),
	"page":   regexp.MustCompile(`(?m)^See it: (\S+)$`),
}

// mailText reads the body of m and returns its text part and the links
// it lists, nil when it has none.
func mailText(m *mail.Message) (map[string]string, string, error) {
	mediaType, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") {
		body, err := io.ReadAll(m.Body)
		return nil, strings.ReplaceAll(string(body), "\r\n", "\n"), err
	}
	var links map[string]string
	var text string
	mr := multipart.NewReader(m.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return links, text, nil
		}
		if err != nil {
			return nil, "", err
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return nil, "", err
		}
		if ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type")); ct != "text/plain" {
			continue
		}
		text = strings.ReplaceAll(string(body), "\r\n", "\n")
		for what, re := range linkLines {
			if l := re.FindStringSubmatch(text); l != nil {
				if links == nil {
					links = map[string]string{}
				}
				links[what] = l[1]
			}
		}
	}
}

func (s *mailSession) Reset()        { s.to = nil }
func (s *mailSession) Logout() error { return nil }

// cloudEvent is the part of a structured-mode CloudEvent the demo reads.
type cloudEvent struct {
	SpecVersion string `json:"specversion"`
	ID          string `json:"id"`
	Type        string `json:"type"`
	Subject     string `json:"subject"`
	Data        struct {
		Name      string `json:"name"`
		Title     string `json:"title"`
		Stage     string `json:"stage"`
		ExpiresAt string `json:"expiresAt"`
		Detail    string `json:"detail"`
	} `json:"data"`
}

func (rc *receivers) serveWebhook(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	id := r.Header.Get("webhook-id")
	var ev cloudEvent
	if err == nil {
		err = rc.verify(id, r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature"), body)
	}
	if err == nil {
		err = parseEvent(r.Header.Get("Content-Type"), id, body, &ev)
	}
	if err != nil {
		rc.keep(message{via: viaWebhook, id: id, arrived: arrived, refused: err.Error()})
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	expiresAt, _ := time.Parse(time.RFC3339Nano, ev.Data.ExpiresAt)
	rc.keep(message{
		via:       viaWebhook,
		id:        ev.ID,
		event:     v1alpha1.EventType(strings.TrimPrefix(ev.Type, notify.CloudEventTypePrefix)),
		name:      ev.Data.Name,
		arrived:   arrived,
		title:     ev.Data.Title,
		stage:     ev.Data.Stage,
		expiresAt: expiresAt,
		detail:    ev.Data.Detail,
	})
	w.WriteHeader(http.StatusNoContent)
}

// verify checks a Standard Webhooks signature: "v1," and the base64 of
// HMAC-SHA256 with the key over "<id>.<timestamp>.<body>", from a request
// sent within the last 5 minutes.
func (rc *receivers) verify(id, timestamp, signatures string, body []byte) error {
	sent, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q is not Unix seconds", timestamp)
	}
	if off := time.Since(time.Unix(sent, 0)); off.Abs() > 5*time.Minute {
		return fmt.Errorf("webhook-timestamp is %s off", off.Round(time.Second))
	}
	mac := hmac.New(sha256.New, rc.key)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(signatures) {
		b64, ok := strings.CutPrefix(sig, "v1,")
		got, err := base64.StdEncoding.DecodeString(b64)
		if ok && err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no webhook-signature matches the body")
}

func parseEvent(contentType, id string, body []byte, ev *cloudEvent) error {
	if contentType != "application/cloudevents+json" {
		return fmt.Errorf("content type %q is not a structured-mode CloudEvent", contentType)
	}
	if err := json.Unmarshal(body, ev); err != nil {
		return fmt.Errorf("body is not JSON: %w", err)
	}
	switch {
	case ev.SpecVersion != "1.0":
		return fmt.Errorf("specversion %q is not 1.0", ev.SpecVersion)
	case ev.ID != id:
		return fmt.Errorf("webhook-id %q differs from the event's id %q", id, ev.ID)
	case !strings.HasPrefix(ev.Type, notify.CloudEventTypePrefix):
		return fmt.Errorf("type %q is not one of the controller's", ev.Type)
	}
	return nil
}
