// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package webhook delivers events as signed CloudEvents to HTTP receivers.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/notify/httpsend"
)

// DefaultTimeout bounds one delivery, from dialling to the end of the
// response, so that a receiver that hangs cannot stall the queue.
const DefaultTimeout = httpsend.DefaultTimeout

// KeyPrefix marks a signing key in Standard Webhooks form: base64 after it.
const KeyPrefix = "whsec_"

// ContentType is the media type of a structured-mode CloudEvent in JSON.
const ContentType = "application/cloudevents+json"

// maxErrorBody is how much of a failed response's body the debug log quotes.
const maxErrorBody = 200

// Kind is the webhook kind of channel: NotificationChannelSpec.Webhook.
var Kind = notify.Kind{Name: kindName, Build: factory}

// kindName is the kind's name; its notifiers are called after it and the
// webhook's name until Build names them after their NotificationChannel.
const kindName = "webhook"

// factory builds the notifier of a webhook channel, reading its signing
// key.
func factory(ctx context.Context, ch notify.Channel, secrets notify.Secrets) (notify.Notifier, error) {
	w := ch.Spec.Webhook
	if w == nil {
		return nil, nil
	}
	ref := w.SecretRef
	where := fmt.Sprintf("Secret %s/%s key %q", ref.Namespace, ref.Name, ref.Key)
	value, err := secrets.Get(ctx, ref.Namespace, ref.Name, ref.Key)
	if err != nil {
		return nil, fmt.Errorf("signing key from %s: %w", where, err)
	}
	key, err := ParseKey(value)
	if err != nil {
		return nil, fmt.Errorf("signing key in %s: %w", where, err)
	}
	if _, err := parseURL(w.URL); err != nil {
		return nil, err
	}
	var opts []Option
	if ch.TLS != nil {
		opts = append(opts, WithTLSConfig(ch.TLS))
	}
	return New(ch.Name, w.URL, key, nil, opts...), nil
}

// ParseKey returns the HMAC key a Secret value holds: the base64 after
// "whsec_" in Standard Webhooks form, otherwise the value's bytes as they
// are. Its errors never contain the value.
func ParseKey(value []byte) ([]byte, error) {
	s := string(value)
	if rest, ok := strings.CutPrefix(s, KeyPrefix); ok {
		// A Secret made with --from-file often ends in a newline, which
		// base64 cannot contain anyway.
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
		if err != nil {
			// CorruptInputError holds only an offset, never input.
			return nil, fmt.Errorf("value starts with %q but the rest is not standard base64: %w", KeyPrefix, err)
		}
		value = key
	}
	if len(value) == 0 {
		return nil, errors.New("key is empty")
	}
	return value, nil
}

// Option changes how a notifier built by New delivers.
type Option func(*notifier)

// WithTimeout bounds each delivery to d instead of DefaultTimeout. A d of
// zero or less keeps the default.
func WithTimeout(d time.Duration) Option {
	return func(n *notifier) { httpsend.SetTimeout(n.client, d) }
}

// WithClock sets the clock that stamps the webhook-timestamp header.
func WithClock(c clock.PassiveClock) Option {
	return func(n *notifier) { n.clock = c }
}

// WithTLSConfig verifies the receiver with tc (a channel's own CA bundle
// and server name) instead of the system roots.
func WithTLSConfig(tc *tls.Config) Option {
	return func(n *notifier) { httpsend.SetTLS(n.client, tc) }
}

type notifier struct {
	name   string
	url    *url.URL
	urlErr error
	// safeURL is what errors show of url: scheme, host and path, because
	// userinfo and query often carry a token.
	safeURL string
	// secrets are the parts of url that a receiver's error body might echo
	// back and that errors must not repeat.
	secrets []string
	key     []byte
	events  []v1alpha1.EventType
	client  *http.Client
	clock   clock.PassiveClock
}

// New returns a notifier that POSTs events to rawURL as CloudEvents signed
// with key, for the event types in events (all of them when empty). An
// unusable rawURL makes every Send fail; the factory refuses it earlier.
func New(name, rawURL string, key []byte, events []v1alpha1.EventType, opts ...Option) notify.Notifier {
	n := &notifier{
		name:   name,
		key:    slices.Clone(key),
		events: slices.Clone(events),
		// A redirect is a failure: the client follows none.
		client: httpsend.NewClient(),
		clock:  clock.RealClock{},
	}
	n.url, n.urlErr = parseURL(rawURL)
	if n.url != nil {
		n.safeURL = (&url.URL{Scheme: n.url.Scheme, Host: n.url.Host, Path: n.url.Path, RawPath: n.url.RawPath}).String()
		n.secrets = urlSecrets(n.url)
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

// parseURL checks that raw is an absolute http or https URL. Its errors do
// not quote raw, nor url.Parse's message, which can quote part of it.
func parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("url does not parse (not shown: it may hold credentials)")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errors.New("url scheme is not http or https")
	}
	if u.Host == "" {
		return nil, errors.New("url has no host")
	}
	return u, nil
}

// urlSecrets lists the userinfo and query of u, raw and decoded, longest
// first so that a secret is not half-replaced by a shorter one inside it.
func urlSecrets(u *url.URL) []string {
	var s []string
	add := func(v string) {
		if v != "" {
			s = append(s, v, url.QueryEscape(v), url.PathEscape(v))
		}
	}
	if u.User != nil {
		p, _ := u.User.Password()
		add(u.User.Username())
		add(p)
		// net/http sends userinfo as basic authentication, which a
		// receiver may echo.
		add(base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + p)))
	}
	add(u.RawQuery)
	for _, vs := range u.Query() {
		for _, v := range vs {
			add(v)
		}
	}
	slices.SortFunc(s, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(s)
}

// Name implements notify.Notifier.
func (n *notifier) Name() string { return kindName + "/" + n.name }

// Accepts implements notify.Notifier.
func (n *notifier) Accepts(t v1alpha1.EventType) bool { return notify.Subscribed(n.events, t) }

// Send POSTs m as a signed CloudEvent, with the links signed for the
// channel ("webhook:<name>") when m has links. Any response other than
// 2xx is an error, so the caller retries; c's text is not used, receivers
// get the data.
func (n *notifier) Send(ctx context.Context, m notify.Message, c notify.Content) error {
	if n.urlErr != nil {
		return fmt.Errorf("%s: %w", n.Name(), n.urlErr)
	}
	if len(n.key) == 0 {
		return fmt.Errorf("%s: no signing key", n.Name())
	}
	m, _, err := c.For(m, "webhook:"+n.name)
	if err != nil {
		return fmt.Errorf("%s: %w", n.Name(), err)
	}
	id, body, err := Envelope(m)
	if err != nil {
		return fmt.Errorf("%s: %w", n.Name(), err)
	}
	timestamp := strconv.FormatInt(n.clock.Now().Unix(), 10)

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url.String(), bytes.NewReader(body))
	if err != nil {
		// Only a nil ctx gets here: the URL parsed in New.
		return fmt.Errorf("%s: build request to %s: %w", n.Name(), n.safeURL, err)
	}
	req.Header.Set("Content-Type", ContentType)
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", timestamp)
	req.Header.Set("webhook-signature", "v1,"+Sign(n.key, id, timestamp, body))

	resp, err := n.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: POST %s: %w", n.Name(), n.safeURL, httpsend.WithoutURL(err))
	}
	defer resp.Body.Close()
	// Read a bounded amount, to quote it and so that the connection can
	// be reused, but never let a receiver make us read without end.
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The error becomes an Event, which people read who are not the
		// receiver's owner: what the receiver answered goes to the debug
		// log only.
		logr.FromContextOrDiscard(ctx).V(1).Info("webhook receiver refused the event",
			"channel", n.Name(), "status", resp.StatusCode, "answer", n.quote(head, m.Actions))
		return fmt.Errorf("%s: POST %s: HTTP %d", n.Name(), n.safeURL, resp.StatusCode)
	}
	return nil
}

// quote returns the start of a response body for an error message, with
// the URL's secrets taken out, and the tokens of the event's links: a
// receiver that echoes the request back would otherwise put them in our
// logs.
func (n *notifier) quote(body []byte, links *notify.Links) string {
	s := strings.ToValidUTF8(string(body), "\uFFFD")
	for _, secret := range n.secrets {
		s = strings.ReplaceAll(s, secret, "[redacted]")
	}
	if links != nil && links.Token != "" {
		s = strings.ReplaceAll(s, links.Token, "[redacted]")
	}
	if len(s) > maxErrorBody {
		s = strings.ToValidUTF8(s[:maxErrorBody], "")
	}
	return s
}

// Data is the "data" of every event: the object, its expiry and why.
type Data struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
	UID        string `json:"uid"`
	Title      string `json:"title,omitempty"`
	// ExpiresAt is Message.ExpiresAt, RFC 3339 in UTC, with fractions of a
	// second only when it has them: not always the expiry (for a sleeping
	// event, the time of the sleep).
	ExpiresAt string `json:"expiresAt"`
	Stage     string `json:"stage,omitempty"`
	Policy    string `json:"policy"`
	Detail    string `json:"detail,omitempty"`
	// Reclaimed is what the namespaces a deleted object owned held when it
	// was deleted (deleted events only).
	Reclaimed *notify.Reclaimed `json:"reclaimed,omitempty"`
	// Actions are the links signed for the channel, when the controller
	// runs with --actions-url: page, extend, wake, delete
	// (docs/guides/acting-from-messages.md).
	Actions *notify.Links `json:"actions,omitempty"`
}

// Source is the CloudEvents source of events about objects of policy.
func Source(policy string) string {
	return "/timeout-controller/policies/" + url.PathEscape(policy)
}

// Envelope returns the id and the structured-mode JSON of the CloudEvent
// for m. Recipients are left out: receivers get the object, and people's
// addresses do not leave the cluster through a webhook.
func Envelope(m notify.Message) (id string, body []byte, err error) {
	id = m.ID
	if id == "" {
		id = notify.NewID(m.Object.UID, m.ExpiresAt, m.Type, m.Stage)
	}
	e := event.New(event.CloudEventsVersionV1)
	e.SetID(id)
	e.SetSource(Source(m.Policy))
	e.SetType(notify.CloudEventType(m.Type))
	e.SetSubject(m.Object.Name)
	e.SetTime(m.Time)
	data := Data{
		APIVersion: m.Object.APIVersion,
		Kind:       m.Object.Kind,
		Name:       m.Object.Name,
		Namespace:  m.Object.Namespace,
		UID:        string(m.Object.UID),
		Title:      m.Object.Title,
		ExpiresAt:  m.ExpiresAt.UTC().Format(time.RFC3339Nano),
		Stage:      m.Stage,
		Policy:     m.Policy,
		Detail:     m.Detail,
		Reclaimed:  m.Reclaimed,
		Actions:    m.Actions,
	}
	if err := e.SetData(event.ApplicationJSON, data); err != nil {
		return "", nil, fmt.Errorf("event %s data: %w", id, err)
	}
	// The setters record their errors on the event instead of returning
	// them; Validate reports those with what the spec requires.
	if err := e.Validate(); err != nil {
		return "", nil, fmt.Errorf("event %s: %w", id, err)
	}
	body, err = json.Marshal(e)
	if err != nil {
		return "", nil, fmt.Errorf("event %s: %w", id, err)
	}
	return id, body, nil
}

// Sign returns the Standard Webhooks signature of body, without its "v1,"
// prefix: base64 of HMAC-SHA256 with key over "<id>.<timestamp>.<body>".
func Sign(key []byte, id, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
