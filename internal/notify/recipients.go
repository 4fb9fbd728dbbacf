// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package notify

import (
	"fmt"
	"net"
	"net/mail"
	"regexp"
	"slices"
	"strings"
)

// AnnotationNotify names the people to tell about an object: e-mail
// addresses and Slack channels, comma-separated.
const AnnotationNotify = "timeout.amphitheatre.app/notify"

// MaxRecipients is the most entries one notify annotation may name: one
// object's writer must not turn the controller into a mass mailer.
const MaxRecipients = 10

var (
	slackChannel = regexp.MustCompile(`^#[a-z0-9][a-z0-9._-]{0,79}$`)
	// hostname refuses domain literals ([10.0.0.1]) and names without a dot.
	hostname = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$`)
)

// ParseRecipients reads the notify annotation. Entries are e-mail
// addresses (bare, user@domain) or Slack channels (#name); nothing else is
// accepted, so an annotation can never make the controller call an address
// of its writer's choosing. An address outside allowedDomains (when there
// are any) is refused. Each refused entry comes back as an error; the
// others are still used.
func ParseRecipients(value string, allowedDomains []string) (Recipients, []error) {
	var r Recipients
	var errs []error
	taken := 0
	for _, entry := range strings.Split(value, ",") {
		entry = strings.TrimSpace(entry)
		if entry != "" {
			taken++
		}
		switch {
		case entry == "":
		case taken > MaxRecipients:
			errs = append(errs, fmt.Errorf("%q is past the first %d entries, the most one object may name", entry, MaxRecipients))
		case strings.HasPrefix(entry, "#"):
			if !slackChannel.MatchString(entry) {
				errs = append(errs, fmt.Errorf("%q is not a Slack channel: expected # and up to 80 lowercase letters, digits, '.', '_' or '-'", entry))
			} else if !slices.Contains(r.SlackChannels, entry) {
				r.SlackChannels = append(r.SlackChannels, entry)
			}
		default:
			if err := checkEmail(entry, allowedDomains); err != nil {
				errs = append(errs, err)
				continue
			}
			r.Emails = AddEmail(r.Emails, entry)
		}
	}
	return r, errs
}

// checkEmail says why entry is not a bare e-mail address (user@domain,
// with a domain name) in one of allowedDomains, or returns nil.
func checkEmail(entry string, allowedDomains []string) error {
	addr, err := mail.ParseAddress(entry)
	if err != nil || addr.Address != entry || addr.Name != "" {
		return fmt.Errorf("%q is not an e-mail address: expected user@domain", entry)
	}
	domain := strings.ToLower(entry[strings.LastIndexByte(entry, '@')+1:])
	if !hostname.MatchString(domain) || net.ParseIP(domain) != nil {
		return fmt.Errorf("%q is not an e-mail address: expected user@domain with a domain name", entry)
	}
	if !domainAllowed(domain, allowedDomains) {
		return fmt.Errorf("%q is not in an allowed e-mail domain (%s)", entry, strings.Join(allowedDomains, ", "))
	}
	return nil
}

// AddEmail adds address to emails unless they hold it, whatever its case.
func AddEmail(emails []string, address string) []string {
	if slices.ContainsFunc(emails, func(e string) bool { return strings.EqualFold(e, address) }) {
		return emails
	}
	return append(emails, address)
}

// AddressAllowed reports whether the domain of the e-mail address is one
// of allowed or a subdomain of one; every address is allowed when allowed
// is empty.
func AddressAllowed(address string, allowed []string) bool {
	at := strings.LastIndexByte(address, '@')
	if at < 0 {
		return len(allowed) == 0
	}
	return domainAllowed(strings.ToLower(strings.TrimSpace(address[at+1:])), allowed)
}

// domainAllowed reports whether domain is one of allowed or a subdomain
// of one; every domain is allowed when allowed is empty.
func domainAllowed(domain string, allowed []string) bool {
	if len(allowed) == 0 {
		return true
	}
	for _, a := range allowed {
		a = strings.ToLower(a)
		if domain == a || strings.HasSuffix(domain, "."+a) {
			return true
		}
	}
	return false
}
