// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package httpsend is the HTTP client that the Slack and webhook channels
// send with: each request bounded in time, no redirect followed, the
// channel's own TLS settings, and errors that never quote the request's
// URL, which carries a token.
package httpsend

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/url"
	"time"
)

// DefaultTimeout bounds one request, from dialling to the end of the
// response, so that a receiver that hangs cannot stall the queue.
const DefaultTimeout = 10 * time.Second

// NewClient returns a client with DefaultTimeout that does not follow
// redirects: following one would hand the message to a host nobody
// configured, and a 301 or 302 would turn a POST into a GET without a
// body. The redirect comes back as the response, which senders treat as a
// failure.
func NewClient() *http.Client {
	return &http.Client{
		Timeout:       DefaultTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// SetTimeout bounds each request of c to d. A d of zero or less keeps the
// bound c has: a request without one could hold up retries for good.
func SetTimeout(c *http.Client, d time.Duration) {
	if d > 0 {
		c.Timeout = d
	}
}

// SetTLS makes c verify receivers with tc (a channel's CA bundle and
// server name) instead of the system roots.
func SetTLS(c *http.Client, tc *tls.Config) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tc.Clone()
	c.Transport = t
}

// WithoutURL returns what a failed request's error wraps, without the
// *url.Error around it that quotes the whole URL, query and userinfo
// included. The result still answers errors.Is for context.Canceled and
// context.DeadlineExceeded.
func WithoutURL(err error) error {
	if uerr, ok := errors.AsType[*url.Error](err); ok {
		return uerr.Err
	}
	return err
}
