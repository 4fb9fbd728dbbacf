// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package actions

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A key the controller adds works at once: a link naming a key the server
// has not read yet makes it read the Secret again.
func TestAKeyAddedSinceTheLastReadWorksAtOnce(t *testing.T) {
	e := newEnv(t)
	tok := e.token(e.claims(Extend))
	if res, _ := e.get("/a/" + tok); res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	// The controller rotates: a newer key signs the next links.
	var s corev1.Secret
	key := types.NamespacedName{Namespace: "timeout-system", Name: SecretName}
	if err := e.c.Get(context.Background(), key, &s); err != nil {
		t.Fatal(err)
	}
	s.Data[KeyName(created.Add(time.Hour))] = bytes.Repeat([]byte{'n'}, KeySize)
	if err := e.c.Update(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	rotated, err := KeyringFromSecret(&s)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := rotated.Sign(e.claims(Extend))
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Step(10 * time.Second)
	if res, body := e.get("/a/" + fresh); res.StatusCode != http.StatusOK {
		t.Errorf("a link of the new key: %d\n%s", res.StatusCode, body)
	}
	// The old key is removed: its links die once the server reads again.
	delete(s.Data, KeyName(created))
	if err := e.c.Update(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(keysInterval + time.Second)
	// The first request after a minute reads the Secret in the background
	// and is served with the keys it had.
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, body := e.get("/a/" + tok)
		if res.StatusCode == http.StatusGone && strings.Contains(body, "no longer works") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a link of the removed key still answers %d 5s after the Secret was read again", res.StatusCode)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A Secret that cannot be read leaves the keys last read serving.
func TestTheKeysLastReadServeWhileTheSecretIsUnreadable(t *testing.T) {
	e := newEnv(t)
	tok := e.token(e.claims(Extend))
	if res, _ := e.get("/a/" + tok); res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	var s corev1.Secret
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: "timeout-system", Name: SecretName}, &s); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Delete(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(keysInterval + time.Second)
	for range 2 {
		if res, body := e.get("/a/" + tok); res.StatusCode != http.StatusOK {
			t.Fatalf("status %d\n%s", res.StatusCode, body)
		}
	}
}
