// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package usage

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
)

// connectReviewTTL is how long the API server's answer about a user's
// connections to a Pod is trusted: a burst of execs costs one review, and
// a permission revoked stops counting within this time.
const connectReviewTTL = time.Minute

// verdict is what a connection's review said.
type verdict int

const (
	// unverified: the API server does not let the user named connect to
	// the Pod so, or the request was not the API server's.
	unverified verdict = iota
	// verified: the user named may connect to the Pod so.
	verified
	// unanswered: the review failed; asked again after resolveRetry.
	unanswered
)

// reviewKey names a review by what it asks: a hash, so that the cache's
// size does not depend on the size of what a request says about its user.
type reviewKey [sha256.Size]byte

// connectVerbs are the verbs the API server authorizes a connection with:
// create (kubectl's POST) or get (a WebSocket client's GET, on API
// servers that authorize it as one).
var connectVerbs = []string{"create", "get"}

// connectReview is the SubjectAccessReview that says whether conn's user
// may make it: verb on the Pod's subresource, as the API server checked
// before it sent the request. A request that did not come from the API
// server names a user who may not, unless it names one who may: that is
// what --webhook-client-ca and the NetworkPolicy are for.
func connectReview(conn connection, verb string) *authorizationv1.SubjectAccessReview {
	var extra map[string]authorizationv1.ExtraValue
	if len(conn.user.Extra) > 0 {
		extra = make(map[string]authorizationv1.ExtraValue, len(conn.user.Extra))
		for k, v := range conn.user.Extra {
			extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	return &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: conn.user.Username, UID: conn.user.UID, Groups: conn.user.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: conn.pod.Namespace, Name: conn.pod.Name,
			Verb: verb, Group: "", Version: "v1", Resource: "pods", Subresource: conn.subresource,
		},
	}}
}

// verify asks the API server whether conn's user may make it, with
// either verb, unless its answer about the same user, Pod and
// subresource is still trusted.
func (c *Connections) verify(ctx context.Context, conn connection) (verdict, error) {
	spec, err := json.Marshal(connectReview(conn, connectVerbs[0]).Spec)
	if err != nil {
		return unanswered, err
	}
	key := reviewKey(sha256.Sum256(spec))
	if v, ok := c.reviewed.Get(key); ok {
		return v, nil
	}
	asked := c.Clock.Now()
	for _, verb := range connectVerbs {
		ctx, cancel := context.WithTimeout(ctx, kube.ReviewTimeout)
		answer, err := c.Reviews.Create(ctx, connectReview(conn, verb), metav1.CreateOptions{})
		cancel()
		if err != nil {
			// The same connections in the next few seconds are not asked
			// about again, rather than each failing (and logging) alike.
			c.reviewed.Put(key, unanswered, asked.Add(resolveRetry))
			return unanswered, fmt.Errorf("ask whether the user named may %s pods/%s %s: %w", verb, conn.subresource, conn.pod, err)
		}
		if answer.Status.Allowed && !answer.Status.Denied {
			c.reviewed.Put(key, verified, asked.Add(connectReviewTTL))
			return verified, nil
		}
	}
	c.reviewed.Put(key, unverified, asked.Add(connectReviewTTL))
	return unverified, nil
}
