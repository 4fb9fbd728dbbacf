// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package notify

import (
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// AnnotationOwner names the owner of an object: the Kubernetes username
// of whoever created it, stamped by the owner admission policy, or the
// person something that creates objects for people named.
const AnnotationOwner = "timeout.amphitheatre.app/owner"

// OwnerAddressesKey is the key of the owner-addresses ConfigMap that
// holds the mapping.
const OwnerAddressesKey = "addresses"

// serviceAccountPrefix starts the username of every ServiceAccount.
const serviceAccountPrefix = "system:serviceaccount:"

// OwnerAddresses maps owners' usernames to the e-mail address their
// messages go to. An empty address sends nothing to that owner, and says
// nothing about it either: for a ServiceAccount that creates objects for
// nobody in particular.
type OwnerAddresses map[string]string

// ParseOwnerAddresses reads the mapping: a YAML map from username to
// address. The addresses are checked when they are used, so that one bad
// entry concerns only its owner.
func ParseOwnerAddresses(data string) (OwnerAddresses, error) {
	m := OwnerAddresses{}
	if err := yaml.UnmarshalStrict([]byte(data), &m); err != nil {
		return nil, fmt.Errorf("expected a YAML map from username to e-mail address: %w", err)
	}
	return m, nil
}

// ErrOwnerSilenced is OwnerAddress's answer for an owner the mapping
// gives an empty address: nobody is told, and that is no mistake.
var ErrOwnerSilenced = errors.New("the owner addresses give this owner no address")

// OwnerAddress returns the e-mail address owner's messages go to: the
// one the mapping gives, else owner itself when it is an e-mail address.
// It must be in one of allowedDomains, when there are some. The error
// says why there is none.
func OwnerAddress(owner string, book OwnerAddresses, allowedDomains []string) (string, error) {
	owner = strings.TrimSpace(owner)
	if address, ok := book[owner]; ok {
		address = strings.TrimSpace(address)
		if address == "" {
			return "", ErrOwnerSilenced
		}
		if err := checkEmail(address, allowedDomains); err != nil {
			return "", fmt.Errorf("the owner addresses map %q to %w", owner, err)
		}
		return address, nil
	}
	if strings.HasPrefix(owner, serviceAccountPrefix) {
		return "", fmt.Errorf("%q is a ServiceAccount, which has no mailbox, and the owner addresses do not map it", owner)
	}
	if err := checkEmail(owner, allowedDomains); err != nil {
		return "", fmt.Errorf("%w, and the owner addresses do not map it", err)
	}
	return owner, nil
}
