// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package email sends notifications over SMTP.
package email

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	netmail "net/mail"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wneessen/go-mail"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// The values of Config.Security, as in the TimeoutPolicy API.
const (
	// SecurityStartTLS upgrades a plain connection with STARTTLS and fails
	// when the server does not offer it.
	SecurityStartTLS = "StartTLS"
	// SecurityTLS speaks TLS from the first byte (implicit TLS, usually port 465).
	SecurityTLS = "TLS"
	// SecurityNone never encrypts; for a relay on the same host or network.
	SecurityNone = "None"
)

// DefaultTimeout bounds one Send when Config.Timeout is zero.
const DefaultTimeout = 15 * time.Second

// ErrNoRecipients is returned by Send when neither the policy nor the
// object names anybody to tell.
var ErrNoRecipients = errors.New("no recipients")

// Config is one SMTP channel.
type Config struct {
	Host string
	// Port defaults to 465 for SecurityTLS and to 587 otherwise.
	Port int
	// Security is SecurityStartTLS (the default when empty), SecurityTLS
	// or SecurityNone.
	Security string
	From     string
	// To receive every message, besides the addresses a message names.
	To []string
	// AllowedDomains, when set, are the only domains the notifier sends
	// to: To must be in them, and a message's own addresses outside them
	// are dropped.
	AllowedDomains []string
	// Username and Password authenticate to the server when Username is
	// set.
	Username string
	Password string
	// Events the channel sends; every event type when empty.
	Events []v1alpha1.EventType
	// Timeout bounds one Send, connection included; DefaultTimeout when zero.
	Timeout time.Duration
	// TLSConfig verifies the server; nil means the system roots and Host
	// as the server name.
	TLSConfig *tls.Config
}

type notifier struct {
	cfg  Config
	addr string
	tls  *tls.Config
	// copies are the personal copies (of messages with links) that the
	// server accepted, so that a retry after some were refused sends
	// only the others. A restart forgets them: a retry then sends a copy
	// again, with the same Message-ID.
	copies delivered
}

// delivered remembers the personal copies the server accepted, by message
// ID and address, for a day.
type delivered struct {
	mu sync.Mutex
	at map[string]time.Time
}

// copyKeep is how long an accepted copy is remembered: longer than any
// retry of its message.
const copyKeep = 24 * time.Hour

func copyKey(id, address string) string { return id + "\x00" + strings.ToLower(address) }

func (d *delivered) has(id, address string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.at[copyKey(id, address)]
	return ok
}

func (d *delivered) add(id, address string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.at == nil {
		d.at = map[string]time.Time{}
	}
	for k, t := range d.at {
		if now.Sub(t) > copyKeep {
			delete(d.at, k)
		}
	}
	d.at[copyKey(id, address)] = now
}

// Kind is the e-mail kind of channel: NotificationChannelSpec.Email.
var Kind = notify.Kind{Name: kindName, Build: factory}

// kindName is the kind's name, and its notifiers' before Build names them
// after their NotificationChannel.
const kindName = "email"

// New returns the notifier cfg describes. It rejects a configuration that
// could never deliver, so that the mistake shows when the policy is loaded
// rather than at every reminder.
func New(cfg Config) (notify.Notifier, error) {
	if cfg.Host == "" {
		return nil, errors.New("host is empty")
	}
	switch cfg.Security {
	case "":
		cfg.Security = SecurityStartTLS
	case SecurityStartTLS, SecurityTLS, SecurityNone:
	default:
		return nil, fmt.Errorf("security %q is not one of %s, %s, %s", cfg.Security, SecurityStartTLS, SecurityTLS, SecurityNone)
	}
	if cfg.Port == 0 {
		cfg.Port = 587
		if cfg.Security == SecurityTLS {
			cfg.Port = 465
		}
	}
	if cfg.Port < 1 || cfg.Port > 65535 {
		return nil, fmt.Errorf("port %d is out of range", cfg.Port)
	}
	if _, err := netmail.ParseAddress(cfg.From); err != nil {
		return nil, fmt.Errorf("from address %q: %w", cfg.From, err)
	}
	for _, a := range cfg.To {
		if _, err := netmail.ParseAddress(a); err != nil {
			return nil, fmt.Errorf("to address %q: %w", a, err)
		}
		if !notify.AddressAllowed(a, cfg.AllowedDomains) {
			return nil, fmt.Errorf("to address %q is outside the allowed domains (%s)", a, strings.Join(cfg.AllowedDomains, ", "))
		}
	}
	if cfg.Username != "" && cfg.Password == "" {
		return nil, errors.New("username is set but password is empty")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	var tc *tls.Config
	if cfg.TLSConfig != nil {
		tc = cfg.TLSConfig.Clone()
	} else {
		tc = &tls.Config{}
	}
	if tc.ServerName == "" {
		tc.ServerName = cfg.Host
	}
	if tc.MinVersion == 0 {
		tc.MinVersion = tls.VersionTLS12
	}
	return &notifier{cfg: cfg, addr: net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)), tls: tc}, nil
}

func (n *notifier) Name() string { return kindName }

func (n *notifier) Accepts(t v1alpha1.EventType) bool { return notify.Subscribed(n.cfg.Events, t) }

// Send delivers m as one message to every recipient over one connection.
// One message rather than one per person makes delivery all or nothing:
// the server either accepts every recipient or, after a refusal, the
// transaction is reset and nobody gets it, so the caller's retry never
// tells some people twice. A message with links is the exception: each
// recipient gets a copy of their own, with their links (sendCopies).
func (n *notifier) Send(ctx context.Context, m notify.Message, c notify.Content) error {
	to, bcc := n.addresses(m)
	if len(to)+len(bcc) == 0 {
		// Nobody to tell is not a delivery: reporting success would record
		// the stage as delivered by e-mail when nobody read it.
		return fmt.Errorf("send %s by email: %w", m.Type, ErrNoRecipients)
	}
	if m.Linker != nil {
		return n.sendCopies(ctx, m, c, append(to, bcc...))
	}
	msg, err := n.message(m, c, to, bcc)
	if err != nil {
		return fmt.Errorf("send %s by email: %w", m.Type, err)
	}
	return n.deliver(ctx, m, msg)
}

// sendCopies sends m with links: one copy to each address, since each
// carries the links signed for its recipient, all over one connection. A
// copy the server took is not sent again when the message is retried for
// the others.
func (n *notifier) sendCopies(ctx context.Context, m notify.Message, c notify.Content, addresses []string) error {
	var (
		msgs []*mail.Msg
		to   []string
	)
	for _, a := range addresses {
		if n.copies.has(m.ID, a) {
			continue
		}
		personal, pc, err := c.For(m, a)
		if err != nil {
			return fmt.Errorf("send %s by email: %w", m.Type, err)
		}
		msg, err := n.message(personal, pc, []string{a}, nil)
		if err != nil {
			return fmt.Errorf("send %s by email: %w", m.Type, err)
		}
		msgs, to = append(msgs, msg), append(to, a)
	}
	if len(msgs) == 0 {
		return nil
	}
	err := n.deliver(ctx, m, msgs...)
	for i, msg := range msgs {
		if msg.IsDelivered() {
			n.copies.add(m.ID, to[i], time.Now())
		}
	}
	return err
}

// deliver sends msgs over one connection.
func (n *notifier) deliver(ctx context.Context, m notify.Message, msgs ...*mail.Msg) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Timeout)
	defer cancel()
	client, err := mail.NewClient(n.cfg.Host, n.options(ctx)...)
	if err != nil {
		return fmt.Errorf("send %s to smtp %s: %w", m.Type, n.addr, err)
	}
	if err := client.DialAndSendWithContext(ctx, msgs...); err != nil {
		if cerr := context.Cause(ctx); cerr != nil {
			// The closed connection's error alone would hide why it was closed.
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		return n.redact(fmt.Errorf("send %s to smtp %s: %w", m.Type, n.addr, err))
	}
	return nil
}

func (n *notifier) options(ctx context.Context) []mail.Option {
	opts := []mail.Option{
		mail.WithPort(n.cfg.Port),
		// go-mail applies this to every step of the exchange; ctx below
		// bounds the whole of it.
		mail.WithTimeout(n.cfg.Timeout),
		mail.WithTLSConfig(n.tls),
		mail.WithDialContextFunc(n.dialer(ctx)),
	}
	switch n.cfg.Security {
	case SecurityStartTLS:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	case SecurityTLS:
		// The dialer does the TLS handshake; WithSSL keeps go-mail from
		// also trying STARTTLS inside it.
		opts = append(opts, mail.WithSSL())
	case SecurityNone:
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	}
	if n.cfg.Username != "" {
		// PLAIN and LOGIN are what most relays offer. go-mail refuses to
		// send either over a connection that is not encrypted (unless the
		// server is localhost), so None with credentials fails instead of
		// disclosing the password; other mechanisms are discovered.
		opts = append(opts,
			mail.WithOpportunisticSMTPAuth(mail.SMTPAuthPlain, mail.SMTPAuthLogin),
			mail.WithUsername(n.cfg.Username),
			mail.WithPassword(n.cfg.Password),
		)
	}
	return opts
}

// dialer connects, and closes the connection when ctx ends. go-mail only
// watches its context while dialling and otherwise relies on per-step
// deadlines, so without this a cancelled Send would wait for a stalled
// server; it also closes the connections go-mail leaves open when the
// greeting, STARTTLS or AUTH fail.
func (n *notifier) dialer(ctx context.Context) mail.DialContextFunc {
	return func(dctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(dctx, network, addr)
		if err != nil {
			return nil, err
		}
		context.AfterFunc(ctx, func() { _ = conn.Close() })
		if n.cfg.Security != SecurityTLS {
			return conn, nil
		}
		// The *tls.Conn itself is returned, not a wrapper, because go-mail
		// recognises an encrypted connection by its type before it allows
		// PLAIN or LOGIN.
		tc := tls.Client(conn, n.tls)
		if err := tc.HandshakeContext(dctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return tc, nil
	}
}

// addresses returns whom m goes to: the policy's addresses and the
// message's own, or the owner alone for an owner's digest (the policy's
// addresses get each object's own reminder instead).
func (n *notifier) addresses(m notify.Message) (to, bcc []string) {
	if m.Digest != nil {
		return n.recipients(nil, m.Recipients.Emails)
	}
	return n.recipients(n.cfg.To, m.Recipients.Emails)
}

// recipients returns the policy's addresses and, apart, the message's own,
// without duplicates across both, compared case-insensitively.
func (n *notifier) recipients(policyTo, extra []string) (to, bcc []string) {
	seen := map[string]bool{}
	add := func(list []string, a string) []string {
		a = strings.TrimSpace(a)
		k := strings.ToLower(a)
		if a == "" || seen[k] {
			return list
		}
		seen[k] = true
		return append(list, a)
	}
	for _, a := range policyTo {
		to = add(to, a)
	}
	for _, a := range extra {
		// The object's writer names these; the channel's administrator
		// decides where its mail may go.
		if notify.AddressAllowed(a, n.cfg.AllowedDomains) {
			bcc = add(bcc, a)
		}
	}
	return to, bcc
}

// message builds the mail for m. The people the object's annotation names
// are blind copies: anyone who can edit the object can add an address, and
// the message should not disclose the policy's list or one owner's address
// to another.
func (n *notifier) message(m notify.Message, c notify.Content, to, bcc []string) (*mail.Msg, error) {
	msg := mail.NewMsg()
	if err := msg.From(n.cfg.From); err != nil {
		return nil, fmt.Errorf("from address %q: %w", n.cfg.From, err)
	}
	if len(to) > 0 {
		if err := msg.To(to...); err != nil {
			return nil, fmt.Errorf("to addresses: %w", err)
		}
	} else {
		// The usual form for "nobody visible"; a message without To is
		// more likely to be taken for spam.
		msg.SetGenHeaderPreformatted(mail.Header(mail.HeaderTo), "undisclosed-recipients:;")
	}
	if len(bcc) > 0 {
		if err := msg.Bcc(bcc...); err != nil {
			return nil, fmt.Errorf("annotation addresses: %w", err)
		}
	}
	msg.Subject(c.Subject)
	if m.ID != "" {
		// The same message retried carries the same Message-ID, so mail
		// clients and archives can drop the copy.
		msg.SetMessageIDWithValue(m.ID + "@timeout-controller")
	}
	if !m.Time.IsZero() {
		msg.SetDateWithValue(m.Time)
	}
	msg.SetGenHeader("X-Timeout-Event", string(m.Type))
	msg.SetGenHeader("X-Timeout-Object", m.Object.Kind+"/"+m.Object.Name)
	if m.Object.Namespace != "" {
		msg.SetGenHeader("X-Timeout-Namespace", m.Object.Namespace)
	}
	// RFC 3834: keeps vacation responders from answering a robot.
	msg.SetGenHeader("Auto-Submitted", "auto-generated")
	// Replaces go-mail's default, which advertises the library's version.
	msg.SetGenHeader(mail.HeaderUserAgent, "timeout-controller")
	msg.SetBodyString(mail.TypeTextPlain, c.Text)
	if c.HTML != "" {
		msg.AddAlternativeString(mail.TypeTextHTML, c.HTML)
	}
	return msg, nil
}

// redact keeps the password out of err, whatever a server chose to echo.
// The original error is dropped rather than wrapped in that case, since
// unwrapping it would bring the password back.
func (n *notifier) redact(err error) error {
	if n.cfg.Password == "" || !strings.Contains(err.Error(), n.cfg.Password) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), n.cfg.Password, "[redacted]"))
}

// factory builds the notifier of an e-mail channel, reading its
// credentials. The policy's to must be in the channel's allowed domains.
func factory(ctx context.Context, ch notify.Channel, secrets notify.Secrets) (notify.Notifier, error) {
	e := ch.Spec.Email
	if e == nil {
		return nil, nil
	}
	cfg := Config{
		Host:           e.Host,
		Port:           int(e.Port),
		Security:       e.Security,
		From:           e.From,
		To:             ch.To,
		AllowedDomains: ch.Spec.AllowedEmailDomains,
		TLSConfig:      ch.TLS,
	}
	if ref := e.CredentialsSecretRef; ref != nil {
		var err error
		if cfg.Username, err = credential(ctx, secrets, ref, "username"); err != nil {
			return nil, err
		}
		if cfg.Password, err = credential(ctx, secrets, ref, "password"); err != nil {
			return nil, err
		}
	}
	n, err := New(cfg)
	if err != nil {
		return nil, fmt.Errorf("spec.email: %w", err)
	}
	return n, nil
}

func credential(ctx context.Context, secrets notify.Secrets, ref *v1alpha1.SecretReference, key string) (string, error) {
	v, err := secrets.Get(ctx, ref.Namespace, ref.Name, key)
	if err != nil {
		return "", fmt.Errorf("read key %q of Secret %s/%s: %w", key, ref.Namespace, ref.Name, err)
	}
	// A file written with echo ends in a newline that is no part of the
	// credential; servers would reject it as a wrong password.
	s := strings.TrimRight(string(v), "\r\n")
	if s == "" {
		return "", fmt.Errorf("key %q of Secret %s/%s is empty", key, ref.Namespace, ref.Name)
	}
	return s, nil
}
