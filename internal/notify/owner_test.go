// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package notify

import (
	"errors"
	"strings"
	"testing"
)

func TestOwnerAddress(t *testing.T) {
	book, err := ParseOwnerAddresses(`
alice: alice.smith@example.com
"oidc:bob": bob@example.com
"system:serviceaccount:amp:amphitheatre": ""
carol@example.com: carol@example.org
"oidc:dave": "#dave"
"oidc:erin": erin@10.0.0.1
`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, owner string
		domains     []string
		want        string
		// wantErr is a part of the error; empty for none.
		wantErr string
		silent  bool
	}{
		{name: "mails a username that is an e-mail address", owner: "zoe@example.com", want: "zoe@example.com"},
		{name: "ignores spaces around the owner", owner: " zoe@example.com ", want: "zoe@example.com"},
		{name: "mails the address the mapping gives a plain username", owner: "alice", want: "alice.smith@example.com"},
		{name: "maps a username with a colon", owner: "oidc:bob", want: "bob@example.com"},
		{name: "prefers the mapping to an address that is the username", owner: "carol@example.com", want: "carol@example.org"},
		{name: "tells nobody of an owner mapped to nothing, silently", owner: "system:serviceaccount:amp:amphitheatre", silent: true},
		{name: "names a ServiceAccount it cannot mail", owner: "system:serviceaccount:ci:bot", wantErr: `"system:serviceaccount:ci:bot" is a ServiceAccount, which has no mailbox, and the owner addresses do not map it`},
		{name: "names an unmapped username", owner: "frank", wantErr: `"frank" is not an e-mail address: expected user@domain, and the owner addresses do not map it`},
		{name: "refuses a mapped Slack channel", owner: "oidc:dave", wantErr: `the owner addresses map "oidc:dave" to "#dave" is not an e-mail address`},
		{name: "refuses a mapped IP address domain", owner: "oidc:erin", wantErr: "with a domain name"},
		{name: "refuses a username with a display name", owner: "Zoe <zoe@example.com>", wantErr: "is not an e-mail address"},
		{name: "refuses an owner outside the allowed domains", owner: "zoe@evil.example", domains: []string{"example.com"}, wantErr: "not in an allowed e-mail domain (example.com)"},
		{name: "refuses a mapped address outside the allowed domains", owner: "carol@example.com", domains: []string{"example.com"}, wantErr: "not in an allowed e-mail domain"},
		{name: "accepts a subdomain of an allowed domain", owner: "zoe@eu.example.com", domains: []string{"example.com"}, want: "zoe@eu.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := OwnerAddress(tc.owner, book, tc.domains)
			switch {
			case tc.silent:
				if !errors.Is(err, ErrOwnerSilenced) || got != "" {
					t.Errorf("OwnerAddress(%q) = %q, %v; want ErrOwnerSilenced", tc.owner, got, err)
				}
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || got != "" {
					t.Errorf("OwnerAddress(%q) = %q, %v; want an error with %q", tc.owner, got, err, tc.wantErr)
				}
			default:
				if err != nil || got != tc.want {
					t.Errorf("OwnerAddress(%q) = %q, %v; want %q", tc.owner, got, err, tc.want)
				}
			}
		})
	}
}

func TestParseOwnerAddressesRefusesWhatIsNotAMap(t *testing.T) {
	for _, data := range []string{"- alice@example.com", "alice: [a@example.com]", "alice: a@example.com\nalice: b@example.com", "{"} {
		if _, err := ParseOwnerAddresses(data); err == nil || !strings.Contains(err.Error(), "expected a YAML map from username to e-mail address") {
			t.Errorf("ParseOwnerAddresses(%q) = %v, want an error saying what is expected", data, err)
		}
	}
	if m, err := ParseOwnerAddresses(""); err != nil || len(m) != 0 {
		t.Errorf("ParseOwnerAddresses(\"\") = %v, %v; want an empty map", m, err)
	}
}

// FuzzOwnerAddress: whatever the owner and the mapping, an address comes
// back only when it is one the notify annotation would accept too, within
// the allowed domains.
func FuzzOwnerAddress(f *testing.F) {
	for _, seed := range [][2]string{
		{"alice@example.com", ""},
		{"oidc:bob", `"oidc:bob": bob@example.com`},
		{"system:serviceaccount:a:b", `"system:serviceaccount:a:b": ""`},
		{"eve", "eve: https://x.example/y"},
		{"eve", "eve: a@example.com\r\nBcc: b@example.com"},
		{"Bob <b@example.com>", "{"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, owner, data string) {
		book, _ := ParseOwnerAddresses(data)
		address, err := OwnerAddress(owner, book, []string{"example.com"})
		if err != nil {
			if address != "" {
				t.Fatalf("OwnerAddress(%q) = %q with error %v", owner, address, err)
			}
			return
		}
		r, errs := ParseRecipients(address, []string{"example.com"})
		if len(errs) > 0 || len(r.Emails) != 1 || r.Emails[0] != address {
			t.Fatalf("OwnerAddress(%q) = %q, which the notify annotation would not accept: %v", owner, address, errs)
		}
	})
}
