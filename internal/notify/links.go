// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package notify

import "fmt"

// Links are the URLs one copy of a message carries for its recipient to
// act on the object without kubectl (docs/guides/acting-from-messages.md):
// the object's page, and the page with one action's button first. Only
// the actions the policy and the object allow are set. Every URL carries
// a signed token: none of them is ever logged.
type Links struct {
	// Page shows the object, its clocks and a button per allowed action.
	// For an owner's digest, the message's Links.Page is the owner's page,
	// which lists all the owner's objects.
	Page string `json:"page"`
	// Extend keeps it longer, by Step.
	Extend string `json:"extend,omitempty"`
	// Wake wakes it, or keeps it awake before a sleep.
	Wake string `json:"wake,omitempty"`
	// Delete deletes it now (the policy's spec.actions.deleteNow).
	Delete string `json:"delete,omitempty"`
	// Step says for people how far Extend moves the expiry: "1 day".
	Step string `json:"-"`
	// Token is the token the URLs carry, which an interactive Slack
	// button posts.
	Token string `json:"-"`
}

// Linker signs the links of a message for each of its recipients. A
// message carries one when the controller runs with --actions-url and its
// type is one people can act on; each kind of channel asks it for the
// links of every recipient it sends a copy to, through Content.For.
type Linker interface {
	// Link returns m with recipient's links: Actions and, for a digest,
	// each item's Actions. Its errors never contain a token.
	Link(m Message, recipient string) (Message, error)
}

// For returns m and its content as recipient gets them: with the links
// signed for recipient, and the content rendered again with them. A
// message without a Linker, or content not made by Templates.Render, is
// returned as it is.
func (c Content) For(m Message, recipient string) (Message, Content, error) {
	if m.Linker == nil {
		return m, c, nil
	}
	linked, err := m.Linker.Link(m, recipient)
	if err != nil {
		return m, c, fmt.Errorf("links for %s: %w", recipient, err)
	}
	linked.Linker = nil
	if c.templates == nil {
		return linked, c, nil
	}
	out, err := c.templates.Render(linked)
	if err != nil {
		return m, c, err
	}
	return linked, out, nil
}
