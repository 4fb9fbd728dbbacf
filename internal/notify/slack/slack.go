// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package slack posts notifications to a Slack incoming webhook as Block Kit messages.
package slack

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/notify/httpsend"
)

// DefaultTimeout bounds one post to the webhook, from dialling to the
// end of the response.
const DefaultTimeout = httpsend.DefaultTimeout

// Kind is the Slack kind of channel: NotificationChannelSpec.Slack.
var Kind = notify.Kind{Name: kindName, Build: factory}

// kindName is the kind's name, and its notifiers' before Build names them
// after their NotificationChannel.
const kindName = "slack"

// factory builds the notifier of a Slack channel, reading the webhook URL
// from its Secret.
func factory(ctx context.Context, ch notify.Channel, secrets notify.Secrets) (notify.Notifier, error) {
	if ch.Spec.Slack == nil {
		return nil, nil
	}
	ref := ch.Spec.Slack.WebhookURLSecretRef
	raw, err := secrets.Get(ctx, ref.Namespace, ref.Name, ref.Key)
	if err != nil {
		return nil, fmt.Errorf("webhook URL from Secret %s/%s key %q: %w", ref.Namespace, ref.Name, ref.Key, err)
	}
	// Secrets made with --from-file or echo often end in a newline, which
	// would make every post fail with an unhelpful URL error.
	webhookURL := strings.TrimSpace(string(raw))
	if err := checkURL(webhookURL); err != nil {
		return nil, fmt.Errorf("webhook URL in Secret %s/%s key %q: %w", ref.Namespace, ref.Name, ref.Key, err)
	}
	// With a Slack app's signing secret beside the URL, the buttons act
	// through the app; without, they open the page.
	_, err = secrets.Get(ctx, ref.Namespace, ref.Name, SigningSecretKey)
	switch {
	case errors.Is(err, notify.ErrKeyNotFound):
	case err != nil:
		return nil, fmt.Errorf("signing secret from Secret %s/%s key %q: %w", ref.Namespace, ref.Name, SigningSecretKey, err)
	}
	opts := []Option{withChannel(ch.Name, err == nil)}
	if ch.TLS != nil {
		opts = append(opts, WithTLSConfig(ch.TLS))
	}
	return New(webhookURL, nil, opts...), nil
}

// SigningSecretKey is the key, in the Secret of a channel's webhook URL,
// of the signing secret of the Slack app the webhook belongs to. With it,
// the buttons of messages with links act through the app (its
// interactivity request URL is the actions server's /slack/interactions);
// the controller only checks that it is there, the actions server reads
// it to check Slack's requests.
const SigningSecretKey = "signingSecret"

// withChannel names the NotificationChannel the notifier posts for, whose
// own Slack channel is a recipient of links ("slack:<name>"), and says
// whether its Slack app signs interactions.
func withChannel(name string, interactive bool) Option {
	return func(n *notifier) { n.channel, n.interactive = name, interactive }
}

// checkURL reports what is wrong with a webhook URL without repeating any
// of it: the URL carries the webhook's token.
func checkURL(s string) error {
	if s == "" {
		return errors.New("is empty")
	}
	u, err := url.Parse(s)
	if err != nil {
		// url.Parse quotes its input in the error.
		return errors.New("is not a valid URL")
	}
	if u.Host == "" {
		return errors.New("has no host")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		// Plain HTTP would send the token in the clear; a loopback address
		// is a local relay or a test server, where nothing crosses a network.
		if h := u.Hostname(); h == "localhost" || net.ParseIP(h).IsLoopback() {
			return nil
		}
		return errors.New("uses http: an incoming webhook URL must use https")
	default:
		return errors.New("must be an https URL")
	}
}

// Option configures a notifier made by New.
type Option func(*notifier)

// WithTimeout bounds each post to the webhook to d instead of
// DefaultTimeout. A d of zero or less keeps the default: a post without a
// bound could hold up the caller's retries for good.
func WithTimeout(d time.Duration) Option {
	return func(n *notifier) { httpsend.SetTimeout(n.client, d) }
}

// WithTLSConfig verifies the receiver with tc (a channel's own CA bundle
// and server name) instead of the system roots.
func WithTLSConfig(tc *tls.Config) Option {
	return func(n *notifier) { httpsend.SetTLS(n.client, tc) }
}

// New returns a notifier that posts to the incoming webhook at webhookURL
// the messages of the event types in events (every type when empty).
func New(webhookURL string, events []v1alpha1.EventType, opts ...Option) notify.Notifier {
	n := &notifier{
		url:    webhookURL,
		events: events,
		// Slack's webhooks do not redirect: the client follows none.
		client: httpsend.NewClient(),
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

type notifier struct {
	url    string
	events []v1alpha1.EventType
	client *http.Client
	// channel is the NotificationChannel's name, and interactive says
	// its buttons act through a Slack app (withChannel).
	channel     string
	interactive bool
}

func (n *notifier) Name() string { return kindName }

func (n *notifier) Accepts(t v1alpha1.EventType) bool { return notify.Subscribed(n.events, t) }

// Send posts m to the webhook's own channel, then once more to each Slack
// channel m's recipients name, each post with the links signed for its
// channel when m has links. It succeeds only when every post did; a
// retry posts all of them again, so a channel that got the message before
// may get it twice.
func (n *notifier) Send(ctx context.Context, m notify.Message, c notify.Content) error {
	msg, err := n.build(m, c, "slack:"+n.channel)
	if err != nil {
		return err
	}
	if err := n.post(ctx, msg); err != nil {
		// The other posts go to the same URL and would fail the same way
		// (Slack down, webhook revoked); not trying them keeps a retry from
		// waiting for a timeout per channel.
		return fmt.Errorf("post to Slack incoming webhook: %w", err)
	}
	var errs []error
	seen := map[string]bool{}
	for _, ch := range m.Recipients.SlackChannels {
		ch = strings.TrimSpace(ch)
		if ch == "" || seen[ch] {
			continue
		}
		seen[ch] = true
		to := msg
		if m.Linker != nil {
			if to, err = n.build(m, c, ch); err != nil {
				return err
			}
		}
		to.Channel = ch
		if err := n.post(ctx, to); err != nil {
			errs = append(errs, fmt.Errorf("post to Slack incoming webhook for channel %s: %w", ch, err))
		}
	}
	return errors.Join(errs...)
}

// build lays out the copy of m for recipient: with its links when m has
// any.
func (n *notifier) build(m notify.Message, c notify.Content, recipient string) (*slackapi.WebhookMessage, error) {
	m, c, err := c.For(m, recipient)
	if err != nil {
		return nil, fmt.Errorf("post to Slack incoming webhook: %w", err)
	}
	return build(m, c, n.interactive), nil
}

// post sends one message and returns an error that does not contain the
// webhook URL. slack-go's errors do: net/http's *url.Error quotes the URL
// of the request, and url.Parse's error quotes the URL it could not parse.
func (n *notifier) post(ctx context.Context, msg *slackapi.WebhookMessage) error {
	err := slackapi.PostWebhookCustomHTTPContext(ctx, n.url, n.client, msg)
	if err == nil {
		return nil
	}
	var (
		status  slackapi.StatusCodeError
		limited *slackapi.RateLimitedError
		uerr    *url.Error
	)
	switch {
	case errors.As(err, &status):
		err = status
	case errors.As(err, &limited):
		err = limited
	case errors.As(err, &uerr):
		// Keep what went wrong (refused, timed out, cancelled) and drop
		// the URL.
		err = fmt.Errorf("%s: %w", uerr.Op, httpsend.WithoutURL(uerr))
	}
	if !n.leaks(err) {
		return err
	}
	// A proxy in front of the webhook may echo the request's path in its
	// status line or in an error.
	if status.Code != 0 {
		return fmt.Errorf("HTTP status %d", status.Code)
	}
	return errors.New("request failed; details withheld because they contain the webhook URL")
}

// leaks reports whether any error in err's tree mentions the webhook URL
// or its path, where the token is, as it is or quoted the way %q quotes
// it. It does not parse the URL: the one that leaks may not parse.
func (n *notifier) leaks(err error) bool {
	var secrets []string
	add := func(s string) {
		if s != "" && s != "/" {
			q := strconv.Quote(s)
			secrets = append(secrets, s, q[1:len(q)-1])
		}
	}
	add(n.url)
	rest := n.url
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+len("://"):]
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		add(rest[i:])
	}
	for _, e := range tree(err) {
		for _, s := range secrets {
			if strings.Contains(e.Error(), s) {
				return true
			}
		}
	}
	return false
}

// tree lists err and every error it wraps.
func tree(err error) []error {
	if err == nil {
		return nil
	}
	out := []error{err}
	switch w := err.(type) {
	case interface{ Unwrap() error }:
		out = append(out, tree(w.Unwrap())...)
	case interface{ Unwrap() []error }:
		for _, e := range w.Unwrap() {
			out = append(out, tree(e)...)
		}
	}
	return out
}
