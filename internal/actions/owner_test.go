// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package actions

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// ownerEnv is an env whose owner index holds pr-42 (alice's), pr-43
// (alice's) and pr-44 (bob's), as the informers would.
func ownerEnv(t *testing.T) *env {
	other := playbook("pr-43", "uid-43", map[string]string{notify.AnnotationOwner: "alice@example.com", expiry.AnnotationTTL: "3d"})
	bobs := playbook("pr-44", "uid-44", map[string]string{notify.AnnotationOwner: "bob@example.com"})
	e := newEnv(t, func(c *envConfig) { c.objects = []client.Object{other, bobs} })
	idx := NewOwnerIndexer()
	for _, name := range []string{"pr-42", "pr-43", "pr-44"} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(playbookGVK)
		if err := e.c.Get(context.Background(), types.NamespacedName{Name: name}, u); err != nil {
			t.Fatal(err)
		}
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion(),
			CreationTimestamp: u.GetCreationTimestamp(), Annotations: u.GetAnnotations()}}
		if err := idx.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	e.owners.AddStore(playbookGVK, idx)
	return e
}

func (e *env) ownerToken(owner string, actions ...Action) string {
	return e.token(Claims{Owner: owner, Recipient: owner, Actions: actions, Expires: now.Add(7 * 24 * time.Hour)})
}

func TestTheOwnersPageListsTheOwnersObjectsOnly(t *testing.T) {
	e := ownerEnv(t)
	tok := e.ownerToken("alice@example.com", Extend)
	res, body := e.get("/o/" + tok)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%d\n%s", res.StatusCode, body)
	}
	if !strings.Contains(body, "pr-42") || !strings.Contains(body, "pr-43") || strings.Contains(body, "pr-44") {
		t.Errorf("the page does not list exactly alice's objects:\n%s", body)
	}
	if strings.Index(body, "pr-43") > strings.Index(body, "pr-42") {
		t.Error("the object expiring first is not listed first")
	}
	if n := strings.Count(body, `name="object"`); n != 2 {
		t.Errorf("%d buttons, want one per object", n)
	}
}

func TestAnOwnersButtonActsOnThatOwnersObjectOnly(t *testing.T) {
	e := ownerEnv(t)
	tok := e.ownerToken("alice@example.com", Extend)
	c := mustVerify(t, e.ring, tok)
	csrf := e.ring.formToken(KeyName(created)[len(keyPrefix):], c.ID)

	res, body := e.post("/o/"+tok, url.Values{"csrf": {csrf}, "action": {"extend"}, "object": {"amphitheatre.app/v1/Playbook//pr-42/" + string(playbookUID)}})
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "Done: it now expires 2026-11-16 09:00 UTC") || !strings.Contains(body, "pr-43") {
		t.Fatalf("%d\n%s", res.StatusCode, body)
	}
	if got := e.object().GetAnnotations()[expiry.AnnotationExpiresAt]; got != "2026-11-16T09:00:00Z" {
		t.Errorf("expires-at %q", got)
	}

	// Bob's object, through alice's page: refused, unchanged.
	bob := &unstructured.Unstructured{}
	bob.SetGroupVersionKind(playbookGVK)
	_ = e.c.Get(context.Background(), types.NamespacedName{Name: "pr-44"}, bob)
	res, body = e.post("/o/"+tok, url.Values{"csrf": {csrf}, "action": {"extend"}, "object": {"amphitheatre.app/v1/Playbook//pr-44/uid-44"}})
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "does not belong to alice@example.com") {
		t.Errorf("bob's object: %d\n%s", res.StatusCode, body)
	}
	after := &unstructured.Unstructured{}
	after.SetGroupVersionKind(playbookGVK)
	_ = e.c.Get(context.Background(), types.NamespacedName{Name: "pr-44"}, after)
	if after.GetResourceVersion() != bob.GetResourceVersion() {
		t.Error("bob's object was changed")
	}
}

func TestTheOwnersPageWaitsForTheIndex(t *testing.T) {
	e := newEnv(t)
	e.owners.mu.Lock()
	e.owners.kinds[playbookGVK] = &kindIndex{gvk: playbookGVK, indexer: NewOwnerIndexer(), synced: func() bool { return false }, stop: func() {}}
	e.owners.mu.Unlock()
	res, body := e.get("/o/" + e.ownerToken("alice@example.com"))
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "Try again") {
		t.Errorf("%d\n%s", res.StatusCode, body)
	}
}
