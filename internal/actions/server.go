// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package actions

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Defaults of Options.
const (
	// DefaultAPITimeout bounds the API work of one request, so that a
	// click answers within 2 s even when the API server is slow.
	DefaultAPITimeout = 1500 * time.Millisecond
	// MaxBody is the largest request body read: a page's form is a few
	// hundred bytes, a Slack interaction a few KiB.
	MaxBody = 16 << 10
	// DefaultRequestsPerMinute and DefaultBurst are each client address's
	// token bucket.
	DefaultRequestsPerMinute = 60
	DefaultBurst             = 20
)

// Options configure a Server.
type Options struct {
	// API reads governed objects and Secrets from the API server itself
	// (never a cache: a click judges the object as it is) and patches
	// governed objects.
	API client.Client
	// Cache reads the TimeoutPolicies (as unstructured), the namespaces
	// (as metadata) and the NotificationChannels.
	Cache client.Reader
	// Owners finds an owner's objects for the owner's page.
	Owners OwnerIndex
	// KeyringSecret is the Secret holding the links keyring.
	KeyringSecret types.NamespacedName
	// SecretNamespace is the only namespace a Slack channel's Secret may be
	// in; empty allows any.
	SecretNamespace string
	// TrustedProxies are the addresses whose UserHeader (the signed-in
	// user, set by an auth proxy) and X-Forwarded-For are believed.
	TrustedProxies []netip.Prefix
	UserHeader     string
	// RequestsPerMinute and Burst are each client address's budget of
	// page requests; 0 turns the limit off.
	RequestsPerMinute, Burst int
	// APITimeout bounds the API work of a request.
	APITimeout time.Duration
	// SlackClient posts the results to Slack's response_url;
	// SlackResponseURL says which response URLs may be posted to (https
	// on slack.com by default).
	SlackClient      *http.Client
	SlackResponseURL func(*url.URL) bool
	Clock            clock.PassiveClock
	Log              logr.Logger
}

// Server serves the pages links in messages open, and carries out their
// clicks and Slack's buttons.
type Server struct {
	o        Options
	keys     *keys
	policies *policies
	slack    *slackSecrets
	limit    *limiter
	// slackWG tracks the replies to Slack in flight, for tests.
	slackDone func()
}

// New returns a Server.
func New(o Options) *Server {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.APITimeout <= 0 {
		o.APITimeout = DefaultAPITimeout
	}
	if o.SlackClient == nil {
		o.SlackClient = &http.Client{Timeout: 5 * time.Second}
	}
	if o.SlackResponseURL == nil {
		o.SlackResponseURL = slackURL
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	return &Server{
		o:        o,
		keys:     &keys{reader: o.API, secret: o.KeyringSecret, clock: o.Clock},
		policies: &policies{reader: o.Cache},
		slack:    &slackSecrets{reader: o.API, namespace: o.SecretNamespace, clock: o.Clock},
		limit:    newLimiter(o.Clock, o.RequestsPerMinute, o.Burst),
	}
}

// ServeHTTP answers every request: the pages under /a/ and /o/ (wherever
// the prefix the Ingress routes), the Slack endpoint, and a short page at
// the root. Every answer carries the strict headers.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setHeaders(w.Header())
	start := s.o.Clock.Now()
	parts := strings.Split(strings.TrimSuffix(r.URL.Path, "/"), "/")
	var kind, token string
	if n := len(parts); n >= 2 {
		kind, token = parts[n-2], parts[n-1]
	}
	switch {
	case kind == "slack" && token == "interactions":
		s.serveSlack(w, r)
		actionsSeconds.WithLabelValues("slack").Observe(s.o.Clock.Since(start).Seconds())
	case kind == "a" || kind == "o":
		request := "page"
		if kind == "o" {
			request = "owner"
		}
		if r.Method == http.MethodPost {
			request = "click"
		}
		s.servePage(w, r, kind == "o", token)
		actionsSeconds.WithLabelValues(request).Observe(s.o.Clock.Since(start).Seconds())
	case r.URL.Path == "/" || r.URL.Path == "":
		render(w, page{Title: "Acting from a message", Message: "This server carries out the links in the timeout-controller's messages. Open a link from a message to see what it is about."})
	default:
		render(w, problem(http.StatusNotFound, "Not found", "There is no page here. Open a link from a message."))
	}
}

// servePage serves an object's page (/a/<token>) or an owner's page
// (/o/<token>), and their forms' POSTs.
func (s *Server) servePage(w http.ResponseWriter, r *http.Request, owner bool, token string) {
	addr, trusted := s.client(r)
	if !s.limit.allow(addr) {
		w.Header().Set("Retry-After", "60")
		count(View, resultLimited)
		render(w, problem(http.StatusTooManyRequests, "Too many requests", "Too many requests came from your address. Wait a minute and try again."))
		return
	}
	var form formValues
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost:
		var p *page
		form, p = s.readForm(w, r)
		if p != nil {
			count(actionOr(form.action), resultInvalid)
			render(w, *p)
			return
		}
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		render(w, problem(http.StatusMethodNotAllowed, "Not allowed", "Open the link in a browser."))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.o.APITimeout)
	defer cancel()
	now := s.o.Clock.Now()
	ring, claims, stamp, err := s.keys.verify(ctx, token, now)
	if err != nil {
		count(actionOr(form.action), resultInvalid)
		render(w, tokenProblem(err, claims, now))
		return
	}
	if owner != (claims.Owner != "") {
		count(actionOr(form.action), resultInvalid)
		render(w, problem(http.StatusNotFound, "Not found", "This link does not open this page. Open the link as the message gave it."))
		return
	}
	v := visit{claims: claims, form: ring.formToken(stamp, claims.ID), do: Action(r.URL.Query().Get("do")), by: claims.Recipient, via: "link"}
	if user := s.user(r, trusted); user != "" {
		v.by = user
	}
	if v.by == "" {
		v.by = "link " + claims.ID
	}
	if r.Method == http.MethodPost {
		if !ring.checkFormToken(stamp, claims.ID, form.csrf) {
			count(actionOr(form.action), resultInvalid)
			render(w, problem(http.StatusForbidden, "Not sent from the page", "This request did not come from the link's page, so nothing was done. Open the link and use its buttons."))
			return
		}
		a := Action(form.action)
		if a != Extend && a != Wake && a != Delete {
			count(View, resultInvalid)
			render(w, problem(http.StatusBadRequest, "Unknown action", "The page asked for something this server does not do. Open the link again."))
			return
		}
		var p page
		if owner {
			p = s.ownerClick(ctx, v, a, form.object, now)
		} else {
			p = s.objectClick(ctx, v, a, now)
		}
		render(w, p)
		return
	}
	if owner {
		render(w, s.ownerPage(ctx, v, now, nil))
		return
	}
	render(w, s.objectPage(ctx, v, now))
}

// formValues are what a page's form posts.
type formValues struct {
	csrf, action, object string
}

// readForm reads and checks a POST: from this site, within MaxBody, a
// well-formed form. The page it returns, if any, says what was wrong.
func (s *Server) readForm(w http.ResponseWriter, r *http.Request) (formValues, *page) {
	if p := crossSite(r); p != nil {
		return formValues{}, p
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		p := problem(http.StatusUnsupportedMediaType, "Not a form", "Only the page's buttons may post here.")
		return formValues{}, &p
	}
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			p := problem(http.StatusRequestEntityTooLarge, "Too large", "The request was too large, so nothing was done.")
			return formValues{}, &p
		}
		p := problem(http.StatusBadRequest, "Not a form", "The request could not be read, so nothing was done. Open the link and use its buttons.")
		return formValues{}, &p
	}
	return formValues{csrf: r.PostForm.Get("csrf"), action: r.PostForm.Get("action"), object: r.PostForm.Get("object")}, nil
}

// crossSite refuses a POST that a browser says came from another site.
func crossSite(r *http.Request) *page {
	refused := func() *page {
		p := problem(http.StatusForbidden, "Not sent from the page", "This request came from another site, so nothing was done. Open the link and use its buttons.")
		return &p
	}
	site := r.Header.Get("Sec-Fetch-Site")
	if site != "" && site != "same-origin" && site != "none" {
		return refused()
	}
	switch origin := r.Header.Get("Origin"); {
	case origin == "null" && site != "":
		// The page's own form: under its Referrer-Policy no-referrer a
		// browser sends the origin of a POST as "null", and says where
		// it came from in Sec-Fetch-Site, which a page cannot set.
	case origin == "null":
		return refused()
	case origin != "":
		u, err := url.Parse(origin)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return refused()
		}
	}
	return nil
}

// client returns the address a request came from, and whether it came
// through a trusted proxy: then the address is the last one the proxies
// added to X-Forwarded-For that is not a proxy's.
func (s *Server) client(r *http.Request) (string, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if !s.trusted(host) {
		return host, false
	}
	hops := strings.Split(r.Header.Get("X-Forwarded-For"), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop := strings.TrimSpace(hops[i])
		if hop != "" && !s.trusted(hop) {
			return hop, true
		}
	}
	return host, true
}

func (s *Server) trusted(addr string) bool {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range s.o.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// user is the signed-in user a trusted proxy names in UserHeader, or "".
func (s *Server) user(r *http.Request, trusted bool) string {
	if !trusted || s.o.UserHeader == "" {
		return ""
	}
	u := strings.TrimSpace(r.Header.Get(s.o.UserHeader))
	if len(u) > 253 || strings.ContainsAny(u, "\x00\r\n") {
		return ""
	}
	return u
}

// tokenProblem is the page for a token Verify refused.
func tokenProblem(err error, c Claims, now time.Time) page {
	switch {
	case errors.Is(err, ErrExpired):
		return problem(http.StatusGone, "This link has expired",
			"This link stopped working "+when(c.Expires, now)+". Newer messages carry new links; the people who run the timeout-controller can extend it too.")
	case errors.Is(err, ErrUnknownKey):
		return problem(http.StatusGone, "This link no longer works",
			"The key this link was signed with has been removed, which ends all its links. Newer messages carry new links.")
	case errors.Is(err, ErrBadSignature):
		return problem(http.StatusBadRequest, "This link is not valid",
			"This link was not made by this server, or was changed since. Use the link exactly as the message gave it.")
	case errors.Is(err, ErrMalformed):
		return problem(http.StatusBadRequest, "This link is incomplete",
			"This link is damaged or cut short. Copy the whole link from the message, or click it there.")
	}
	return problem(http.StatusServiceUnavailable, "Try again",
		"The server cannot check links right now. Try again in a moment.")
}

func actionOr(a string) Action {
	switch Action(a) {
	case Extend, Wake, Delete:
		return Action(a)
	}
	return View
}

func count(a Action, result string) {
	actionsTotal.WithLabelValues(string(a), result).Inc()
}

// slackURL allows Slack's own response URLs: https on slack.com.
func slackURL(u *url.URL) bool {
	h := u.Hostname()
	return u.Scheme == "https" && (h == "slack.com" || strings.HasSuffix(h, ".slack.com"))
}

// HTTPServer is an http.Server for s with the timeouts and limits of a
// server facing people.
func (s *Server) HTTPServer(addr string) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           s,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    32 << 10,
	}
}
