// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package channelset

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
)

// everyone is the group every authenticated user is in: a channel granted
// to it is open to every policy, with an author stamp or without.
const everyone = "system:authenticated"

// Author is who last wrote a policy, as the admission policy stamped it.
type Author struct {
	Username string   `json:"username"`
	Groups   []string `json:"groups,omitempty"`
}

// authorOf reads a policy's author stamp. ok is false when the policy has
// none, or one that does not parse or names nobody: the admission policy
// that stamps it is not installed, or came after the policy's last write.
func authorOf(p *v1alpha1.TimeoutPolicy) (Author, bool) {
	v, ok := p.Annotations[v1alpha1.AnnotationAuthor]
	if !ok {
		return Author{}, false
	}
	var a Author
	if err := json.Unmarshal([]byte(v), &a); err != nil || a.Username == "" {
		return Author{}, false
	}
	return a, true
}

func (a Author) String() string {
	if len(a.Groups) == 0 {
		return a.Username
	}
	return fmt.Sprintf("%s (groups %s)", a.Username, strings.Join(a.Groups, ", "))
}

// Grants asks the API server whether a policy's author may use a
// NotificationChannel: the verb use on notificationchannels, with the
// channel's name, in a SubjectAccessReview for the author the policy is
// stamped with. The author cannot grant it to themselves, so copying the
// labels or the name of another team's channel into a policy sends
// nothing through it. A policy without a stamp may use only the channels
// granted to every authenticated user.
type Grants struct {
	Reviews authorizationv1client.SubjectAccessReviewInterface
}

// refused returns, of the channels named, those the author of p may not
// use, in the order given. A nil Grants refuses nothing.
func (g *Grants) refused(ctx context.Context, p *v1alpha1.TimeoutPolicy, channels []string) ([]string, error) {
	if g == nil {
		return nil, nil
	}
	author, stamped := authorOf(p)
	var out []string
	for _, name := range channels {
		spec := authorizationv1.SubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: v1alpha1.GroupVersion.Group, Resource: "notificationchannels", Name: name, Verb: v1alpha1.VerbUse,
			},
			Groups: []string{everyone},
		}
		if stamped {
			spec.User, spec.Groups = author.Username, author.Groups
		}
		ctx, cancel := context.WithTimeout(ctx, kube.ReviewTimeout)
		review, err := g.Reviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("ask whether the author of policy %s may use NotificationChannel %s: %w", p.Name, name, err)
		}
		if !review.Status.Allowed || review.Status.Denied {
			out = append(out, name)
		}
	}
	return out, nil
}

// notGranted says which channels policy p may not use, and what grants
// them: the consequence first, the fix last.
func notGranted(p *v1alpha1.TimeoutPolicy, channels []string) error {
	list := strings.Join(channels, ", ")
	noun := "NotificationChannel " + list
	if len(channels) > 1 {
		noun = "NotificationChannels " + list
	}
	grant := fmt.Sprintf("grant the verb %s on notificationchannels named %s (a ClusterRole with resourceNames, such as the shipped timeout-controller-channel-user narrowed to them, and a ClusterRoleBinding; see %s)",
		v1alpha1.VerbUse, list, RBACDocs)
	author, ok := authorOf(p)
	if !ok {
		return fmt.Errorf("policy %s has no author stamp (annotation %s, written by the admission policy timeout-policy-author.amphitheatre.app on every write), so it may use only channels granted to every authenticated user (group %s), and %s not: "+
			"install config/admission (Helm: admissionPolicy.enabled) and apply the policy again, or %s to group %s",
			p.Name, v1alpha1.AnnotationAuthor, everyone, noun+isAre(channels), grant, everyone)
	}
	return fmt.Errorf("policy %s was last written by %s, who may not use %s: %s to them, then apply the policy again or wait a minute",
		p.Name, author, noun, grant)
}

func isAre(names []string) string {
	if len(names) > 1 {
		return " are"
	}
	return " is"
}

// rbacDocs is where the permissions a target kind needs are listed.
const RBACDocs = "docs/reference/rbac.md"
