// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/mail"
	"strings"
	"time"

	"github.com/emersion/go-smtp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// slowLabel marks the -slow Playbooks; the slow policy selects them and
// the bench policy the others.
const slowLabel = "bench.timeout.amphitheatre.app/slow"

// slowLead is the slow policy's reminder lead: the slow Playbooks expire
// this long after their reminders fall due, long after the run.
const slowLead = time.Hour

// startSMTP starts an SMTP server on loopback that takes delay to accept
// each message (the answer to DATA), as a remote or overloaded relay
// might, and notes when it accepted each reminder.
func (rc *receiver) startSMTP(delay time.Duration) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("SMTP server: %w", err)
	}
	rc.smtpAddr = l.Addr().(*net.TCPAddr)
	rc.smtp = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &mailSession{rc: rc, delay: delay}, nil
	}))
	rc.smtp.Domain = "bench.local"
	rc.smtp.ReadTimeout, rc.smtp.WriteTimeout = time.Minute, time.Minute
	rc.smtp.MaxMessageBytes = 1 << 20
	rc.smtp.ErrorLog = log.New(io.Discard, "", 0)
	go func() { _ = rc.smtp.Serve(l) }()
	return nil
}

// mailSession is one SMTP transaction: plain, no authentication.
type mailSession struct {
	rc    *receiver
	delay time.Duration
}

func (s *mailSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *mailSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *mailSession) Reset()                               {}
func (s *mailSession) Logout() error                        { return nil }

func (s *mailSession) Data(r io.Reader) error {
	m, err := mail.ReadMessage(r)
	if err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, m.Body); err != nil {
		return err
	}
	time.Sleep(s.delay)
	accepted := time.Now()
	if v1alpha1.EventType(m.Header.Get("X-Timeout-Event")) != v1alpha1.EventReminder {
		return nil
	}
	_, name, _ := strings.Cut(m.Header.Get("X-Timeout-Object"), "/")
	s.rc.mu.Lock()
	s.rc.mail[name] = append(s.rc.mail[name], accepted)
	s.rc.mu.Unlock()
	return nil
}

// createSlowPolicy creates the e-mail channel to the slow SMTP server and
// the policy that reminds the slow Playbooks through it, slowLead before
// they expire.
func (cl *cluster) createSlowPolicy(ctx context.Context, rc *receiver) error {
	channel := &v1alpha1.NotificationChannel{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-smtp"},
		Spec: v1alpha1.NotificationChannelSpec{Email: &v1alpha1.EmailChannel{
			Host: rc.smtpAddr.IP.String(), Port: int32(rc.smtpAddr.Port), Security: "None", From: "timeout@bench.local"}},
	}
	if err := cl.client.Create(ctx, channel); err != nil {
		return fmt.Errorf("create NotificationChannel: %w", err)
	}
	policy := &v1alpha1.TimeoutPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName + "-slow", Annotations: benchAuthor},
		Spec: v1alpha1.TimeoutPolicySpec{
			Target:        v1alpha1.Target{APIVersion: "amphitheatre.app/v1", Kind: "Playbook"},
			Selector:      &metav1.LabelSelector{MatchLabels: map[string]string{slowLabel: "true"}},
			DefaultTTL:    "14d",
			Reminders:     []v1alpha1.Duration{v1alpha1.Duration(expiry.FormatDuration(slowLead))},
			MinimumNotice: "0s",
			Notifications: v1alpha1.Notifications{Channels: []v1alpha1.ChannelReference{{
				Name: channel.Name, Events: []v1alpha1.EventType{v1alpha1.EventReminder}, To: []string{"owner@bench.local"}}}},
		},
	}
	if err := cl.client.Create(ctx, policy); err != nil {
		return fmt.Errorf("create the slow TimeoutPolicy: %w", err)
	}
	return nil
}
