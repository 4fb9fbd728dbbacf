// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/hack/internal/repo"
)

// channelAdmission are the admission policies that make using a channel a
// permission of whoever writes a TimeoutPolicy, as config/admission ships
// them: without the author stamp, the demo's policy could use only
// channels granted to every authenticated user.
var channelAdmission = []string{"author-policy.yaml", "author-binding.yaml", "channel-use-policy.yaml", "channel-use-binding.yaml"}

// installChannelAdmission creates them and waits until the API server
// stamps a TimeoutPolicy with its author.
func installChannelAdmission(ctx context.Context, cl client.Client) error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	for _, f := range channelAdmission {
		raw, err := os.ReadFile(filepath.Join(root, "config", "admission", "component", f))
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if err := cl.Create(ctx, u); err != nil {
			return fmt.Errorf("create %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	// The API server loads them asynchronously.
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := &v1alpha1.TimeoutPolicy{}
		p.Name = "probe"
		p.Spec.Target = v1alpha1.Target{APIVersion: playbookGVK.GroupVersion().String(), Kind: playbookGVK.Kind}
		if err := cl.Create(ctx, p, client.DryRunAll); err == nil && p.Annotations[v1alpha1.AnnotationAuthor] != "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the author stamp (config/admission/component/author-policy.yaml) is not in force after 30s")
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
