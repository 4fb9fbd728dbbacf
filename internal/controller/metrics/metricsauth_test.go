// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// countedTokenReviews accepts the one token it is told of and counts the
// TokenReviews made for each token.
type countedTokenReviews struct {
	authenticationv1client.TokenReviewInterface
	valid string

	mu      sync.Mutex
	reviews map[string]int
}

func (c *countedTokenReviews) Create(_ context.Context, tr *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reviews == nil {
		c.reviews = map[string]int{}
	}
	c.reviews[tr.Spec.Token]++
	out := tr.DeepCopy()
	if tr.Spec.Token == c.valid {
		out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "system:serviceaccount:monitoring:prometheus"}}
	}
	return out, nil
}

func (c *countedTokenReviews) count(token string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reviews[token]
}

// Made-up tokens fill the cache; when it is full, the reviews that have
// expired go first, so that a flood of them that has passed does not cost
// the scraper that is still there a review at every scrape.
func TestAFullReviewCacheForgetsExpiredReviewsFirst(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(fixture.T0)
	reviews := &countedTokenReviews{valid: "prometheus"}
	a := newScraperAuth(reviews, nil, clock)
	ctx := context.Background()
	authenticate := func(token string) *authenticationv1.UserInfo {
		t.Helper()
		u, err := a.authenticate(ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	for i := range maxCachedReviews - 1 {
		if authenticate(fmt.Sprintf("made-up-%d", i)) != nil {
			t.Fatalf("made-up token %d accepted", i)
		}
	}
	clock.SetTime(fixture.T0.Add(tokenReviewTTL + time.Second))
	if authenticate("prometheus") == nil {
		t.Fatal("the scraper's token was refused")
	}
	// The cache is full now, of expired made-up reviews and the scraper's.
	authenticate("made-up-again")
	clock.SetTime(clock.Now().Add(time.Second))
	if authenticate("prometheus") == nil {
		t.Fatal("the scraper's token was refused")
	}
	if n := reviews.count("prometheus"); n != 1 {
		t.Errorf("the scraper's token was reviewed %d times within %s; want once, the expired reviews forgotten before it", n, tokenReviewTTL)
	}
}
