// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package channelset

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// rbacGrants answers SubjectAccessReviews from grants: user or group to
// the channels they may use; it records the reviews it was asked.
func rbacGrants(grants map[string][]string, asked *[]authorizationv1.SubjectAccessReviewSpec) *Grants {
	cs := kubefake.NewClientset()
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		*asked = append(*asked, sar.Spec)
		ra := sar.Spec.ResourceAttributes
		ok := ra.Group == v1alpha1.GroupVersion.Group && ra.Resource == "notificationchannels" && ra.Verb == v1alpha1.VerbUse
		allowed := false
		for _, who := range append([]string{sar.Spec.User}, sar.Spec.Groups...) {
			allowed = allowed || (ok && slices.Contains(grants[who], ra.Name))
		}
		sar.Status.Allowed = allowed
		return true, sar, nil
	})
	return &Grants{Reviews: cs.AuthorizationV1().SubjectAccessReviews()}
}

func stamped(author string) func(*v1alpha1.TimeoutPolicy) {
	return func(p *v1alpha1.TimeoutPolicy) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[v1alpha1.AnnotationAuthor] = author
	}
}

func naming(channels ...string) func(*v1alpha1.TimeoutPolicy) {
	return func(p *v1alpha1.TimeoutPolicy) {
		for _, c := range channels {
			p.Spec.Notifications.Channels = append(p.Spec.Notifications.Channels, v1alpha1.ChannelReference{Name: c})
		}
	}
}

func TestAPolicyUsesOnlyTheChannelsItsAuthorWasGranted(t *testing.T) {
	grants := map[string][]string{
		"alice@example.com":         {"team-a"},
		"team-b":                    {"team-b"},
		"system:authenticated":      {"open"},
		"system:serviceaccount:x:y": {"team-a", "team-b"},
	}
	alice := `{"username":"alice@example.com","groups":["system:authenticated"]}`
	tests := []struct {
		name        string
		policy      *v1alpha1.TimeoutPolicy
		wantReason  string
		wantMessage []string
	}{
		{name: "uses a channel granted to its author", policy: fixture.Policy("a", naming("team-a"), stamped(alice))},
		{name: "uses a channel granted to a group of its author",
			policy: fixture.Policy("b", naming("team-b"), stamped(`{"username":"bob@example.com","groups":["team-b","system:authenticated"]}`))},
		{name: "uses a channel open to every authenticated user", policy: fixture.Policy("o", naming("open"), stamped(alice))},
		{name: "uses a channel open to every authenticated user without an author stamp", policy: fixture.Policy("o", naming("open"))},
		{name: "uses every channel granted", policy: fixture.Policy("sa", naming("team-a", "team-b"), stamped(`{"username":"system:serviceaccount:x:y"}`))},
		{
			name: "refuses another team's channel, naming the channel, the author and the grant", policy: fixture.Policy("a", naming("team-a", "team-b"), stamped(alice)),
			wantReason:  v1alpha1.ReasonChannelNotGranted,
			wantMessage: []string{"policy a was last written by alice@example.com (groups system:authenticated), who may not use NotificationChannel team-b:", "grant the verb use on notificationchannels named team-b", "docs/reference/rbac.md"},
		},
		{
			name: "refuses labels copied from the team a channel is meant for: labels grant nothing", policy: fixture.Policy("copy", naming("team-b"), stamped(alice),
				func(p *v1alpha1.TimeoutPolicy) { p.Labels = map[string]string{"team": "b"} }),
			wantReason: v1alpha1.ReasonChannelNotGranted, wantMessage: []string{"may not use NotificationChannel team-b"},
		},
		{
			name: "refuses a granted channel to a policy without an author stamp", policy: fixture.Policy("unstamped", naming("team-a")),
			wantReason:  v1alpha1.ReasonChannelNotGranted,
			wantMessage: []string{"policy unstamped has no author stamp", "NotificationChannel team-a is not", "install config/admission", "group system:authenticated"},
		},
		{
			name: "refuses with a stamp that does not parse as without one", policy: fixture.Policy("broken", naming("team-a"), stamped(`alice`)),
			wantReason: v1alpha1.ReasonChannelNotGranted, wantMessage: []string{"policy broken has no author stamp"},
		},
		{
			name: "refuses with a stamp that names nobody as without one", policy: fixture.Policy("nobody", naming("team-a"), stamped(`{"groups":["team-b"]}`)),
			wantReason: v1alpha1.ReasonChannelNotGranted, wantMessage: []string{"policy nobody has no author stamp"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked []authorizationv1.SubjectAccessReviewSpec
			c := channelsWith(t, fixture.SecretsByKey{"key": "k"}, fixture.Channel("team-a", fixture.HookSpec), fixture.Channel("team-b", fixture.HookSpec), fixture.Channel("open", fixture.HookSpec))
			c.Grants = rbacGrants(grants, &asked)
			set, err := c.Get(context.Background(), tt.policy)
			if tt.wantReason == "" {
				if err != nil || len(set.Notifiers) != len(tt.policy.Spec.Notifications.Channels) {
					t.Fatalf("get = %v, %v; want every channel named", set, err)
				}
				return
			}
			if err == nil || ChannelReason(err) != tt.wantReason {
				t.Fatalf("get = %v, %v; want reason %s", set, err, tt.wantReason)
			}
			for _, m := range tt.wantMessage {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not say %q", err, m)
				}
			}
			if len(asked) != len(tt.policy.Spec.Notifications.Channels) {
				t.Errorf("%d reviews for %d channels", len(asked), len(tt.policy.Spec.Notifications.Channels))
			}
		})
	}
}

func TestAReviewThatFailsIsNoGrant(t *testing.T) {
	cs := kubefake.NewClientset()
	cs.PrependReactor("create", "subjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the API server is away")
	})
	c := channelsWith(t, fixture.SecretsByKey{"key": "k"}, fixture.Channel("team-a", fixture.HookSpec))
	c.Grants = &Grants{Reviews: cs.AuthorizationV1().SubjectAccessReviews()}
	if _, err := c.Get(context.Background(), fixture.Policy("a", naming("team-a"), stamped(`{"username":"alice"}`))); err == nil || !strings.Contains(err.Error(), "the API server is away") {
		t.Fatalf("get = %v; want the review's error", err)
	}
}

func TestAnotherAuthorIsAskedAboutAfresh(t *testing.T) {
	var asked []authorizationv1.SubjectAccessReviewSpec
	c := channelsWith(t, fixture.SecretsByKey{"key": "k"}, fixture.Channel("team-a", fixture.HookSpec))
	c.Grants = rbacGrants(map[string][]string{"alice": {"team-a"}}, &asked)
	p := fixture.Policy("a", naming("team-a"), stamped(`{"username":"alice"}`))
	if _, err := c.Get(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	// Mallory edits the policy: the admission policy stamps her.
	stamped(`{"username":"mallory"}`)(p)
	if _, err := c.Get(context.Background(), p); ChannelReason(err) != v1alpha1.ReasonChannelNotGranted {
		t.Fatalf("get after mallory's edit = %v; want ChannelNotGranted", err)
	}
	if len(asked) != 2 || asked[1].User != "mallory" {
		t.Errorf("reviews %+v; want alice's, then mallory's", asked)
	}
}
