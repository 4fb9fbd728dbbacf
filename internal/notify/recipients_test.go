// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package notify

import "testing"

// The notify annotation is written by whoever can edit the object: what it
// names must be a plain address, in an allowed domain, so that no one
// else's mail server, and no one outside the allowed domains, is told.
func TestParseRecipientsRefusesAddressesMailWouldReadOtherwise(t *testing.T) {
	for _, value := range []string{
		// Two @: the mail library refuses it, and the domain after the
		// last one must not make it look valid.
		"a@b@example.com",
		// A quoted local part is read as bob@example.com: not the entry
		// as written.
		`"bob"@example.com`,
	} {
		r, errs := ParseRecipients(value, []string{"example.com"})
		if len(r.Emails) != 0 || len(errs) != 1 {
			t.Errorf("ParseRecipients(%q) = %v, %v; want it refused", value, r.Emails, errs)
		}
	}
}

func TestAddressAllowed(t *testing.T) {
	allowed := []string{"example.com"}
	for _, tt := range []struct {
		name    string
		address string
		allowed []string
		want    bool
	}{
		{"allows an address of an allowed domain", "a@example.com", allowed, true},
		{"allows an address of a subdomain", "a@eu.example.com", allowed, true},
		{"reads the domain after the last @, whatever its case", "a@EXAMPLE.com", allowed, true},
		{"refuses an address of another domain", "a@evil.com", allowed, false},
		{"refuses a domain that merely ends the same", "a@notexample.com", allowed, false},
		{"refuses a string without @ even when it is an allowed domain", "example.com", allowed, false},
		{"allows any address when no domain is listed", "a@evil.com", nil, true},
		{"allows a string without @ when no domain is listed", "nobody", nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := AddressAllowed(tt.address, tt.allowed); got != tt.want {
				t.Errorf("AddressAllowed(%q, %q) = %t, want %t", tt.address, tt.allowed, got, tt.want)
			}
		})
	}
}
