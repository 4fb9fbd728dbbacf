// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package email

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log"
	"math/big"
	"mime"
	"mime/multipart"
	"net"
	netmail "net/mail"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

const (
	testUser     = "mailer"
	testPassword = "s3cret-Pa55word"
	serverName   = "smtp.test"
)

// received is one message the test server accepted.
type received struct {
	from  string
	rcpts []string
	data  []byte
}

// backend is an SMTP server's mailbox and its behaviour.
type backend struct {
	// user and password, when user is set, are required before MAIL.
	user, password string
	// authErr, when set, is how a wrong password is refused.
	authErr *smtp.SMTPError
	rcptErr *smtp.SMTPError
	// refuse is an address whose RCPT is refused, when set.
	refuse   string
	dataErr  *smtp.SMTPError
	stall    chan struct{} // Data waits for it to close, when set
	inData   chan struct{} // receives once Data has the message, when set
	mu       sync.Mutex
	messages []received
}

func (b *backend) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{b: b}, nil }

func (b *backend) received() []received {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.messages)
}

type session struct {
	b      *backend
	authed bool
	from   string
	rcpts  []string
}

func (s *session) AuthMechanisms() []string {
	if s.b.user == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, username, password string) error {
		if username != s.b.user || password != s.b.password {
			if s.b.authErr != nil {
				return s.b.authErr
			}
			return smtp.ErrAuthFailed
		}
		s.authed = true
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.b.user != "" && !s.authed {
		return smtp.ErrAuthRequired
	}
	s.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.b.rcptErr != nil {
		return s.b.rcptErr
	}
	s.b.mu.Lock()
	refuse := s.b.refuse
	s.b.mu.Unlock()
	if refuse != "" && strings.EqualFold(to, refuse) {
		return &smtp.SMTPError{Code: 450, EnhancedCode: smtp.EnhancedCode{4, 2, 1}, Message: "mailbox busy"}
	}
	s.rcpts = append(s.rcpts, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if s.b.inData != nil {
		s.b.inData <- struct{}{}
	}
	if s.b.stall != nil {
		<-s.b.stall
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "too late"}
	}
	if s.b.dataErr != nil {
		return s.b.dataErr
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.b.messages = append(s.b.messages, received{from: s.from, rcpts: slices.Clone(s.rcpts), data: data})
	return nil
}

func (s *session) Reset() { s.from, s.rcpts = "", nil }

func (s *session) Logout() error { return nil }

// transport is how the test server talks: plain with STARTTLS offered,
// TLS from the first byte, or plain only.
type transport int

const (
	startTLS transport = iota
	implicitTLS
	plain
)

// serve runs an SMTP server for b on l until the test ends.
func serve(t *testing.T, b *backend, l net.Listener, tr transport, cert tls.Certificate) {
	t.Helper()
	s := smtp.NewServer(b)
	s.Domain = serverName
	s.ReadTimeout = 10 * time.Second
	s.WriteTimeout = 10 * time.Second
	s.ErrorLog = log.New(io.Discard, "", 0)
	switch tr {
	case startTLS:
		s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	case implicitTLS:
		l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(l)
	}()
	t.Cleanup(func() {
		_ = s.Close()
		<-done
	})
	if b.stall != nil {
		// Registered after the server's cleanup so that it runs first and
		// the stalled session can end.
		t.Cleanup(func() { close(b.stall) })
	}
}

// start runs an SMTP server for b on a free port of 127.0.0.1 and returns
// its port.
func start(t *testing.T, b *backend, tr transport, cert tls.Certificate) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	serve(t, b, l, tr, cert)
	return l.Addr().(*net.TCPAddr).Port
}

// certificate returns a self-signed certificate for serverName and a
// client configuration that trusts only it.
func certificate(t *testing.T) (tls.Certificate, *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: serverName},
		DNSNames:     []string{serverName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("create certificate: %v", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse certificate: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		&tls.Config{RootCAs: pool, ServerName: serverName}
}

// reminder returns a reminder about a Playbook for the given addresses,
// and its content rendered by the real templates.
func reminder(t *testing.T, emails ...string) (notify.Message, notify.Content) {
	t.Helper()
	now := time.Date(2026, 11, 24, 14, 0, 0, 0, time.UTC)
	expires := now.Add(72 * time.Hour)
	uid := types.UID("6f1c2a9e-3c1b-4f55-9a55-2b0f3f1f4a10")
	m := notify.Message{
		ID:        notify.NewID(uid, expires, v1alpha1.EventReminder, "3d"),
		Type:      v1alpha1.EventReminder,
		Time:      now,
		Object:    notify.Object{APIVersion: "amphitheatre.app/v1", Kind: "Playbook", Name: "demo-7f3a", UID: uid, Title: "Démo weekend"},
		ExpiresAt: expires,
		Stage:     "3d",
		Policy:    "playbooks",
		Recipients: notify.Recipients{
			Emails: emails,
		},
		Extend: "kubectl annotate playbook demo-7f3a --overwrite timeout.amphitheatre.app/ttl=21d",
	}
	tpl, err := notify.NewTemplates(nil)
	if err != nil {
		t.Fatalf("templates: %v", err)
	}
	c, err := tpl.Render(m)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return m, c
}

func newNotifier(t *testing.T, cfg Config) notify.Notifier {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return n
}

func TestSendDeliversOneMessageOverStartTLSWithAuth(t *testing.T) {
	cert, clientTLS := certificate(t)
	b := &backend{user: testUser, password: testPassword}
	port := start(t, b, startTLS, cert)
	n := newNotifier(t, Config{
		Host: "127.0.0.1", Port: port, Security: SecurityStartTLS,
		From:     "Timeout Controller <timeout@example.com>",
		To:       []string{"ops@example.com", "Owner@Example.com"},
		Username: testUser, Password: testPassword,
		TLSConfig: clientTLS,
	})
	m, c := reminder(t, "owner@example.com", "alice@example.com", "ALICE@example.com", " bob@example.com ")

	if err := n.Send(t.Context(), m, c); err != nil {
		t.Fatalf("Send: %v", err)
	}

	got := b.received()
	if len(got) != 1 {
		t.Fatalf("server received %d messages, want 1", len(got))
	}
	r := got[0]
	if r.from != "timeout@example.com" {
		t.Errorf("envelope sender = %q, want timeout@example.com", r.from)
	}
	wantRcpts := []string{"ops@example.com", "Owner@Example.com", "alice@example.com", "bob@example.com"}
	if !slices.Equal(r.rcpts, wantRcpts) {
		t.Errorf("envelope recipients = %q, want %q", r.rcpts, wantRcpts)
	}
	header, _, _ := bytes.Cut(r.data, []byte("\r\n\r\n"))
	t.Logf("headers of the received message:\n%s", header)

	msg, err := netmail.ReadMessage(bytes.NewReader(r.data))
	if err != nil {
		t.Fatalf("parse message: %v", err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		t.Fatalf("decode subject: %v", err)
	}
	for _, tc := range []struct{ name, got, want string }{
		{"the subject is the rendered one", subject, c.Subject},
		{"the sender is the configured one", msg.Header.Get("From"), `"Timeout Controller" <timeout@example.com>`},
		{"To lists only the configured addresses", msg.Header.Get("To"), "<ops@example.com>, <Owner@Example.com>"},
		{"the Message-ID derives from the message ID", msg.Header.Get("Message-Id"), "<" + m.ID + "@timeout-controller>"},
		{"X-Timeout-Event names the event type", msg.Header.Get("X-Timeout-Event"), "reminder"},
		{"X-Timeout-Object names the object", msg.Header.Get("X-Timeout-Object"), "Playbook/demo-7f3a"},
		{"Auto-Submitted keeps responders quiet", msg.Header.Get("Auto-Submitted"), "auto-generated"},
		{"there is no Bcc header", msg.Header.Get("Bcc"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
	t.Run("the headers do not disclose the annotation's addresses", func(t *testing.T) {
		for _, a := range []string{"alice@", "bob@"} {
			if bytes.Contains(header, []byte(a)) {
				t.Errorf("headers contain %q", a)
			}
		}
	})

	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/alternative" {
		t.Fatalf("Content-Type = %q (%v), want multipart/alternative", msg.Header.Get("Content-Type"), err)
	}
	parts := map[string]string{}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("next part: %v", err)
		}
		ct, _, err := mime.ParseMediaType(p.Header.Get("Content-Type"))
		if err != nil {
			t.Fatalf("part Content-Type %q: %v", p.Header.Get("Content-Type"), err)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			t.Fatalf("read %s part: %v", ct, err)
		}
		parts[ct] = strings.ReplaceAll(string(body), "\r\n", "\n")
	}
	for _, tc := range []struct{ name, mediaType, want string }{
		{"the text part is the rendered text", "text/plain", c.Text},
		{"the HTML part is the rendered HTML", "text/html", c.HTML},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parts[tc.mediaType]
			if !ok {
				t.Fatalf("no %s part among %d parts", tc.mediaType, len(parts))
			}
			if !strings.Contains(got, strings.TrimSpace(tc.want)) {
				t.Errorf("%s part = %q, want it to contain %q", tc.mediaType, got, tc.want)
			}
		})
	}
}

func TestSendSecurityModes(t *testing.T) {
	cert, clientTLS := certificate(t)
	for _, tc := range []struct {
		name      string
		transport transport
		security  string
		auth      bool
	}{
		{"delivers over STARTTLS with authentication", startTLS, SecurityStartTLS, true},
		{"delivers over implicit TLS with authentication", implicitTLS, SecurityTLS, true},
		{"delivers in plain text without authentication", plain, SecurityNone, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &backend{}
			cfg := Config{Host: "127.0.0.1", Security: tc.security, From: "timeout@example.com", To: []string{"ops@example.com"}, TLSConfig: clientTLS}
			if tc.auth {
				b.user, b.password = testUser, testPassword
				cfg.Username, cfg.Password = testUser, testPassword
			}
			cfg.Port = start(t, b, tc.transport, cert)
			m, c := reminder(t)

			if err := newNotifier(t, cfg).Send(t.Context(), m, c); err != nil {
				t.Fatalf("Send: %v", err)
			}
			if got := b.received(); len(got) != 1 {
				t.Fatalf("server received %d messages, want 1", len(got))
			}
		})
	}
}

func TestSendFails(t *testing.T) {
	cert, clientTLS := certificate(t)
	closedPort := func(t *testing.T) int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		return port
	}
	for _, tc := range []struct {
		name      string
		backend   *backend
		transport transport
		security  string
		password  string
		tls       *tls.Config
		down      bool
		want      string // in the error
	}{
		{
			name:      "refuses a wrong password",
			backend:   &backend{user: testUser, password: "the-right-one"},
			transport: startTLS, security: SecurityStartTLS, password: testPassword,
			want: "535",
		},
		{
			name: "keeps a password the server echoes out of the error",
			backend: &backend{user: testUser, password: "the-right-one", authErr: &smtp.SMTPError{
				Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "bad password " + testPassword,
			}},
			transport: startTLS, security: SecurityStartTLS, password: testPassword,
			want: "[redacted]",
		},
		{
			name:      "requires STARTTLS when the server does not offer it",
			backend:   &backend{},
			transport: plain, security: SecurityStartTLS,
			want: "STARTTLS",
		},
		{
			name:      "rejects a certificate it does not trust",
			backend:   &backend{},
			transport: implicitTLS, security: SecurityTLS, tls: &tls.Config{ServerName: serverName},
			want: "certificate",
		},
		{
			name:      "reports a temporary refusal of a recipient",
			backend:   &backend{rcptErr: &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try later"}},
			transport: startTLS, security: SecurityStartTLS,
			want: "451",
		},
		{
			name:      "reports a permanent refusal of a recipient",
			backend:   &backend{rcptErr: &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}},
			transport: startTLS, security: SecurityStartTLS,
			want: "550",
		},
		{
			name:      "reports a temporary refusal of the data",
			backend:   &backend{dataErr: &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try later"}},
			transport: startTLS, security: SecurityStartTLS,
			want: "451",
		},
		{
			name:      "reports a permanent refusal of the data",
			backend:   &backend{dataErr: &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "content rejected"}},
			transport: startTLS, security: SecurityStartTLS,
			want: "550",
		},
		{
			name:     "reports a server that is down",
			backend:  &backend{},
			security: SecurityStartTLS, down: true,
			want: "connect",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Host: "127.0.0.1", Security: tc.security, From: "timeout@example.com", To: []string{"ops@example.com"}, TLSConfig: clientTLS}
			if tc.tls != nil {
				cfg.TLSConfig = tc.tls
			}
			if tc.password != "" {
				cfg.Username, cfg.Password = testUser, tc.password
			}
			if tc.down {
				cfg.Port = closedPort(t)
			} else {
				cfg.Port = start(t, tc.backend, tc.transport, cert)
			}
			m, c := reminder(t, "alice@example.com")

			err := newNotifier(t, cfg).Send(t.Context(), m, c)
			if err == nil {
				t.Fatal("Send succeeded, want an error")
			}
			t.Logf("error: %v", err)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "send reminder to smtp 127.0.0.1:"+strconv.Itoa(cfg.Port)) {
				t.Errorf("error %q does not say what it was sending where", err)
			}
			if strings.Contains(err.Error(), testPassword) {
				t.Errorf("error %q contains the password", err)
			}
			if got := tc.backend.received(); len(got) != 0 {
				t.Errorf("server received %d messages, want none", len(got))
			}
		})
	}
}

func TestSendDeliversOnceTheServerIsBack(t *testing.T) {
	cert, clientTLS := certificate(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := l.Addr().String()
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	n := newNotifier(t, Config{Host: "127.0.0.1", Port: port, From: "timeout@example.com", To: []string{"ops@example.com"}, TLSConfig: clientTLS})
	m, c := reminder(t)

	if err := n.Send(t.Context(), m, c); err == nil {
		t.Fatal("Send to a server that is down succeeded, want an error")
	}
	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	b := &backend{}
	serve(t, b, l, startTLS, cert)
	if err := n.Send(t.Context(), m, c); err != nil {
		t.Fatalf("Send once the server is back: %v", err)
	}
	if got := b.received(); len(got) != 1 {
		t.Errorf("server received %d messages, want 1", len(got))
	}
}

func TestSendGivesUpOnASlowServer(t *testing.T) {
	cert, clientTLS := certificate(t)
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		cancel  bool // cancel the context once the server has the data
		want    error
		within  time.Duration
	}{
		{"gives up after the configured timeout", 500 * time.Millisecond, false, context.DeadlineExceeded, 5 * time.Second},
		{"gives up when the context is cancelled", time.Minute, true, context.Canceled, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &backend{stall: make(chan struct{}), inData: make(chan struct{}, 1)}
			port := start(t, b, startTLS, cert)
			n := newNotifier(t, Config{Host: "127.0.0.1", Port: port, From: "timeout@example.com", To: []string{"ops@example.com"}, Timeout: tc.timeout, TLSConfig: clientTLS})
			m, c := reminder(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.cancel {
				go func() {
					select {
					case <-b.inData:
						cancel()
					case <-ctx.Done():
					}
				}()
			}

			began := time.Now()
			err := n.Send(ctx, m, c)
			took := time.Since(began)

			// The connection's own deadline and the context's race to
			// end a timed-out send: either is a timeout.
			timedOut := tc.want == context.DeadlineExceeded && err != nil &&
				(errors.Is(err, os.ErrDeadlineExceeded) || strings.Contains(err.Error(), "i/o timeout"))
			if !errors.Is(err, tc.want) && !timedOut {
				t.Errorf("Send = %v, want %v", err, tc.want)
			}
			if took > tc.within {
				t.Errorf("Send took %v, want at most %v", took, tc.within)
			}
		})
	}
}

func TestMessageHeaders(t *testing.T) {
	for _, tc := range []struct {
		name      string
		to        []string
		namespace string
		header    string
		want      string
	}{
		{"writes undisclosed recipients when the policy lists nobody", nil, "", "To", "undisclosed-recipients:;"},
		{"names the namespace of a namespaced object", []string{"ops@example.com"}, "team-a", "X-Timeout-Namespace", "team-a"},
		{"leaves the namespace out for a cluster-scoped object", []string{"ops@example.com"}, "", "X-Timeout-Namespace", ""},
		{"names the controller as the user agent", []string{"ops@example.com"}, "", "User-Agent", "timeout-controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNotifier(t, Config{Host: "smtp.example.com", From: "timeout@example.com", To: tc.to}).(*notifier)
			m, c := reminder(t, "alice@example.com")
			m.Object.Namespace = tc.namespace
			to, bcc := n.recipients(n.cfg.To, m.Recipients.Emails)
			msg, err := n.message(m, c, to, bcc)
			if err != nil {
				t.Fatalf("message: %v", err)
			}
			var buf bytes.Buffer
			if _, err := msg.WriteTo(&buf); err != nil {
				t.Fatalf("write message: %v", err)
			}
			parsed, err := netmail.ReadMessage(&buf)
			if err != nil {
				t.Fatalf("parse message: %v", err)
			}
			if got := parsed.Header.Get(tc.header); got != tc.want {
				t.Errorf("%s = %q, want %q", tc.header, got, tc.want)
			}
		})
	}
}

func TestSendWithoutRecipients(t *testing.T) {
	n := newNotifier(t, Config{Host: "127.0.0.1", Port: 1, From: "timeout@example.com"})
	m, c := reminder(t, " ")

	err := n.Send(t.Context(), m, c)
	if !errors.Is(err, ErrNoRecipients) {
		t.Errorf("Send = %v, want %v", err, ErrNoRecipients)
	}
}

func TestRecipients(t *testing.T) {
	for _, tc := range []struct {
		name           string
		to, annotation []string
		wantTo         []string
		wantBcc        []string
	}{
		{"keeps the configured and annotation addresses apart", []string{"ops@example.com"}, []string{"alice@example.com"}, []string{"ops@example.com"}, []string{"alice@example.com"}},
		{"drops an annotation address the policy already lists", []string{"Ops@Example.com"}, []string{"ops@example.COM", "bob@example.com"}, []string{"Ops@Example.com"}, []string{"bob@example.com"}},
		{"drops duplicates that differ in case", nil, []string{"alice@example.com", "ALICE@EXAMPLE.COM"}, nil, []string{"alice@example.com"}},
		{"drops blank entries and trims spaces", []string{" ops@example.com"}, []string{"", "  "}, []string{"ops@example.com"}, nil},
		{"returns nothing for nobody", nil, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &notifier{cfg: Config{To: tc.to}}
			to, bcc := n.recipients(n.cfg.To, tc.annotation)
			if !slices.Equal(to, tc.wantTo) || !slices.Equal(bcc, tc.wantBcc) {
				t.Errorf("recipients = %q, %q; want %q, %q", to, bcc, tc.wantTo, tc.wantBcc)
			}
		})
	}
}

func TestNew(t *testing.T) {
	valid := Config{Host: "smtp.example.com", From: "timeout@example.com"}
	with := func(f func(*Config)) Config {
		c := valid
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name     string
		cfg      Config
		wantErr  string
		wantPort int
	}{
		{"defaults to port 587 and STARTTLS", valid, "", 587},
		{"defaults to port 465 for implicit TLS", with(func(c *Config) { c.Security = SecurityTLS }), "", 465},
		{"keeps a configured port", with(func(c *Config) { c.Port = 2525 }), "", 2525},
		{"rejects an empty host", with(func(c *Config) { c.Host = "" }), "host is empty", 0},
		{"rejects an unknown security", with(func(c *Config) { c.Security = "SSL" }), `security "SSL"`, 0},
		{"rejects a port out of range", with(func(c *Config) { c.Port = 70000 }), "port 70000", 0},
		{"rejects a malformed sender", with(func(c *Config) { c.From = "timeout" }), `from address "timeout"`, 0},
		{"rejects a malformed recipient", with(func(c *Config) { c.To = []string{"ops"} }), `to address "ops"`, 0},
		{"rejects a username without password", with(func(c *Config) { c.Username = testUser }), "password is empty", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := New(tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			got := n.(*notifier)
			if got.cfg.Port != tc.wantPort || got.cfg.Timeout != DefaultTimeout || got.tls.ServerName != tc.cfg.Host {
				t.Errorf("port %d, timeout %v, TLS server name %q; want %d, %v, %q",
					got.cfg.Port, got.cfg.Timeout, got.tls.ServerName, tc.wantPort, DefaultTimeout, tc.cfg.Host)
			}
		})
	}
}

func TestNameAndAccepts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []v1alpha1.EventType
		event  v1alpha1.EventType
		want   bool
	}{
		{"accepts every event type when none are listed", nil, v1alpha1.EventDeleted, true},
		{"accepts a listed event type", []v1alpha1.EventType{v1alpha1.EventReminder}, v1alpha1.EventReminder, true},
		{"declines an event type that is not listed", []v1alpha1.EventType{v1alpha1.EventReminder}, v1alpha1.EventDeleted, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNotifier(t, Config{Host: "smtp.example.com", From: "timeout@example.com", Events: tc.events})
			if n.Name() != "email" {
				t.Errorf("Name = %q, want email", n.Name())
			}
			if got := n.Accepts(tc.event); got != tc.want {
				t.Errorf("Accepts(%s) = %v, want %v", tc.event, got, tc.want)
			}
		})
	}
}

// fakeSecrets holds Secret keys as "namespace/name/key".
type fakeSecrets map[string]string

func (f fakeSecrets) Get(_ context.Context, namespace, name, key string) ([]byte, error) {
	v, ok := f[namespace+"/"+name+"/"+key]
	if !ok {
		return nil, errors.New("not found")
	}
	return []byte(v), nil
}

func TestFactory(t *testing.T) {
	secrets := fakeSecrets{
		"mail/smtp-credentials/username":  testUser + "\n",
		"mail/smtp-credentials/password":  testPassword + "\n",
		"mail/only-username/username":     "lonely-user",
		"mail/empty/username":             "",
		"mail/empty/password":             "",
		"other/smtp-credentials/password": "another-password",
	}
	email := func(namespace, name string) notify.Channel {
		e := &v1alpha1.EmailChannel{Host: "smtp.example.com", Port: 587, Security: "StartTLS", From: "timeout@example.com"}
		if name != "" {
			e.CredentialsSecretRef = &v1alpha1.SecretReference{Namespace: namespace, Name: name}
		}
		return notify.Channel{Name: "team-mail", Spec: v1alpha1.NotificationChannelSpec{Email: e}, To: []string{"ops@example.com"}}
	}
	for _, tc := range []struct {
		name         string
		spec         notify.Channel
		wantN        int
		wantUser     string
		wantPassword string
		wantErr      []string // all in the error
	}{
		{name: "builds nothing for a channel of another kind", spec: notify.Channel{Spec: v1alpha1.NotificationChannelSpec{Slack: &v1alpha1.SlackChannel{}}}},
		{name: "builds one notifier without credentials", spec: email("", ""), wantN: 1},
		{name: "reads the credentials from the Secret", spec: email("mail", "smtp-credentials"), wantN: 1, wantUser: testUser, wantPassword: testPassword},
		{name: "names the Secret and key when the Secret is missing", spec: email("mail", "missing"), wantErr: []string{"mail/missing", `"username"`}},
		{name: "names the key that is missing", spec: email("mail", "only-username"), wantErr: []string{"mail/only-username", `"password"`}},
		{name: "rejects an empty key", spec: email("mail", "empty"), wantErr: []string{"mail/empty", `"username"`, "empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := factory(t.Context(), tc.spec, secrets)
			ns := built(n)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatal("factory succeeded, want an error")
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
				for k, v := range secrets {
					if v = strings.TrimSpace(v); v != "" && strings.Contains(err.Error(), v) {
						t.Errorf("error %q contains the value of %s", err, k)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("factory: %v", err)
			}
			if len(ns) != tc.wantN {
				t.Fatalf("factory built %d notifiers, want %d", len(ns), tc.wantN)
			}
			if tc.wantN == 0 {
				return
			}
			cfg := ns[0].(*notifier).cfg
			if cfg.Username != tc.wantUser || cfg.Password != tc.wantPassword {
				t.Errorf("credentials = %q, %q; want %q, %q", cfg.Username, cfg.Password, tc.wantUser, tc.wantPassword)
			}
		})
	}
}

// built is what a factory returned, as a list: empty for nil.
func built(n notify.Notifier) []notify.Notifier {
	if n == nil {
		return nil
	}
	return []notify.Notifier{n}
}

// TestAChannelWithoutAPortConnectsToThePortOfItsSecurity builds channels
// as the API server stores them, with no port: the port follows security,
// so that implicit TLS does not speak TLS to the submission port.
func TestAChannelWithoutAPortConnectsToThePortOfItsSecurity(t *testing.T) {
	for _, tc := range []struct {
		name, security string
		wantAddr       string
	}{
		{"connects to 465 for implicit TLS", "TLS", "smtp.example.com:465"},
		{"connects to 587 for STARTTLS", "StartTLS", "smtp.example.com:587"},
		{"connects to 587 when security is left to its default", "", "smtp.example.com:587"},
		{"connects to 587 for a plain relay", "None", "smtp.example.com:587"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := notify.Channel{Name: "team-mail", Spec: v1alpha1.NotificationChannelSpec{Email: &v1alpha1.EmailChannel{
				Host: "smtp.example.com", Security: tc.security, From: "timeout@example.com"}}}
			n, err := factory(t.Context(), ch, fakeSecrets{})
			if err != nil {
				t.Fatalf("factory: %v", err)
			}
			if got := n.(*notifier).addr; got != tc.wantAddr {
				t.Errorf("connects to %s, want %s", got, tc.wantAddr)
			}
		})
	}
}

func TestKindBuildsAnEmailChannelNamedAfterIt(t *testing.T) {
	ch := notify.Channel{Name: "team-mail", Spec: v1alpha1.NotificationChannelSpec{Email: &v1alpha1.EmailChannel{Host: "smtp.example.com", From: "timeout@example.com"}}}
	ns, err := notify.Kinds{Kind}.Build(t.Context(), []notify.Channel{ch}, fakeSecrets{})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	var names []string
	for _, n := range ns {
		names = append(names, n.Name())
	}
	if !slices.Equal(names, []string{"team-mail"}) {
		t.Errorf("Build returned %q, want the e-mail notifier of team-mail", names)
	}
}

// TestFactoryNotifierAuthenticates checks that the credentials the factory
// reads are the ones sent: over plain text, which go-mail allows only to
// localhost.
func TestFactoryNotifierAuthenticates(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	b := &backend{user: testUser, password: testPassword}
	s := smtp.NewServer(b)
	s.AllowInsecureAuth = true
	s.ErrorLog = log.New(io.Discard, "", 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(l)
	}()
	t.Cleanup(func() {
		_ = s.Close()
		<-done
	})
	spec := notify.Channel{Name: "team-mail", To: []string{"ops@example.com"}, Spec: v1alpha1.NotificationChannelSpec{Email: &v1alpha1.EmailChannel{
		Host: "127.0.0.1", Port: int32(l.Addr().(*net.TCPAddr).Port), Security: SecurityNone,
		From:                 "timeout@example.com",
		CredentialsSecretRef: &v1alpha1.SecretReference{Namespace: "mail", Name: "smtp-credentials"},
	}}}
	secrets := fakeSecrets{
		"mail/smtp-credentials/username": testUser,
		"mail/smtp-credentials/password": testPassword + "\n",
	}
	n, err := factory(t.Context(), spec, secrets)
	ns := built(n)
	if err != nil || len(ns) != 1 {
		t.Fatalf("factory = %d notifiers, %v; want 1", len(ns), err)
	}
	m, c := reminder(t)

	if err := ns[0].Send(t.Context(), m, c); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if got := b.received(); len(got) != 1 {
		t.Errorf("server received %d messages, want 1", len(got))
	}
}

func TestADigestGoesToTheOwnerAloneEvenWhenThePolicyListsThem(t *testing.T) {
	n := &notifier{cfg: Config{To: []string{"ops@example.com", "Owner@example.com"}}}
	m := notify.Message{Recipients: notify.Recipients{Emails: []string{"owner@example.com"}}}
	if to, bcc := n.addresses(m); !slices.Equal(to, []string{"ops@example.com", "Owner@example.com"}) || len(bcc) != 0 {
		t.Errorf("reminder: addresses = %q, %q; want the policy's, the owner among them", to, bcc)
	}
	m.Digest = &notify.Digest{Stage: "3d"}
	if to, bcc := n.addresses(m); len(to) != 0 || !slices.Equal(bcc, []string{"owner@example.com"}) {
		t.Errorf("digest: addresses = %q, %q; want the owner alone, as a blind copy", to, bcc)
	}
}
