// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
)

// How long the API server's answers about a scraper are reused: a
// Prometheus scraping every 15 s costs a TokenReview a minute and a
// SubjectAccessReview every five, and a revoked permission is noticed
// within that time. Refusals are kept shorter, so that a fix is seen soon.
const (
	tokenReviewTTL = time.Minute
	AccessAllowTTL = 5 * time.Minute
	accessDenyTTL  = 30 * time.Second

	// maxCachedReviews bounds each cache: made-up tokens must not grow
	// them without end.
	maxCachedReviews = 1024
)

// authorizeScrapers is the metrics server's filter: it serves a request
// only to a caller whose bearer token the API server accepts (a
// TokenReview) and who may get the request's path (a SubjectAccessReview
// on the non-resource URL), as kube-rbac-proxy and controller-runtime's
// own filter do. It is this repository's own because controller-runtime's
// (pkg/metrics/filters) links k8s.io/apiserver, CEL and OpenAPI: 10 MB of
// binary and 12 MiB of resident memory, for two API calls
// (docs/performance.md).
func authorizeScrapers(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("create TokenReview client: %w", err)
	}
	authz, err := authorizationv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("create SubjectAccessReview client: %w", err)
	}
	a := newScraperAuth(authn.TokenReviews(), authz.SubjectAccessReviews(), clock.RealClock{})
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			a.serve(log, next, w, req)
		}), nil
	}, nil
}

type scraperAuth struct {
	tokens authenticationv1client.TokenReviewInterface
	access authorizationv1client.SubjectAccessReviewInterface
	clock  clock.PassiveClock

	// users are who each token belongs to, nil for a token the API server
	// refused, by the token's hash: the token itself is kept nowhere.
	users *kube.TTLCache[[sha256.Size]byte, *authenticationv1.UserInfo]
	// decisions are whether a user may use a verb on a path.
	decisions *kube.TTLCache[string, bool]
}

func newScraperAuth(tokens authenticationv1client.TokenReviewInterface, access authorizationv1client.SubjectAccessReviewInterface, c clock.PassiveClock) *scraperAuth {
	return &scraperAuth{tokens: tokens, access: access, clock: c,
		users:     kube.NewTTLCache[[sha256.Size]byte, *authenticationv1.UserInfo](c, maxCachedReviews),
		decisions: kube.NewTTLCache[string, bool](c, maxCachedReviews)}
}

func (a *scraperAuth) serve(log logr.Logger, next http.Handler, w http.ResponseWriter, req *http.Request) {
	token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	token = strings.TrimSpace(token)
	if !ok || token == "" {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), kube.ReviewTimeout)
	defer cancel()
	user, err := a.authenticate(ctx, token)
	if err != nil {
		// The error names the request, never the token.
		log.Error(err, "review a metrics scraper's token")
		http.Error(w, "Authentication failed", http.StatusInternalServerError)
		return
	}
	if user == nil {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	allowed, err := a.authorize(ctx, user, strings.ToLower(req.Method), req.URL.Path)
	if err != nil {
		log.Error(err, "review a metrics scraper's access", "user", user.Username)
		http.Error(w, "Authorization failed", http.StatusInternalServerError)
		return
	}
	if !allowed {
		http.Error(w, "Forbidden: user "+user.Username+" may not "+strings.ToLower(req.Method)+" "+req.URL.Path, http.StatusForbidden)
		return
	}
	next.ServeHTTP(w, req)
}

// authenticate returns who token belongs to, or nil when the API server
// does not accept it.
func (a *scraperAuth) authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, error) {
	key := sha256.Sum256([]byte(token))
	if user, ok := a.users.Get(key); ok {
		return user, nil
	}
	asked := a.clock.Now()
	review, err := a.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create TokenReview: %w", err)
	}
	var user *authenticationv1.UserInfo
	if review.Status.Authenticated {
		user = &review.Status.User
	}
	a.users.Put(key, user, asked.Add(tokenReviewTTL))
	return user, nil
}

// authorize reports whether user may use verb on the non-resource path.
func (a *scraperAuth) authorize(ctx context.Context, user *authenticationv1.UserInfo, verb, path string) (bool, error) {
	key := fmt.Sprintf("%q %q %q %q %q", user.Username, user.UID, user.Groups, verb, path)
	if allowed, ok := a.decisions.Get(key); ok {
		return allowed, nil
	}
	asked := a.clock.Now()
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	review, err := a.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("create SubjectAccessReview: %w", err)
	}
	allowed := review.Status.Allowed && !review.Status.Denied
	until := asked.Add(accessDenyTTL)
	if allowed {
		until = asked.Add(AccessAllowTTL)
	}
	a.decisions.Put(key, allowed, until)
	return allowed, nil
}
