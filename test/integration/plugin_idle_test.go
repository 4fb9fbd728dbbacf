// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/plugin"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

func TestPluginTouchMaximumAndForbiddenKeep(t *testing.T) {
	t.Parallel()
	const test = "plugin-idle"
	spec := playbookPolicy(test, "1h")
	// A window of idleTTL/20 = 3s.
	spec.IdleTTL, spec.MaxTTL, spec.Keep = "60s", "2h", v1alpha1.KeepForbidden
	createPolicy(t, test, spec)
	pb := create(t, playbooks, newPlaybook(test, "in use", nil))
	created := pb.GetCreationTimestamp().Time
	annotation := func(key string) (string, bool) {
		t.Helper()
		obj, err := getPlaybook(t, pb.GetName())
		if err != nil {
			t.Fatal(err)
		}
		v, ok := obj.GetAnnotations()[key]
		return v, ok
	}

	t.Run("touch writes at most once per idleTTL/20", func(t *testing.T) {
		// Creation times are whole seconds: up to a second before now.
		if time.Now().Before(created.Add(2 * time.Second)) {
			mustContain(t, kubectlTimeout(t, "touch", pb.GetName()).expect(t, plugin.ExitOK).out, "nothing written")
			if _, ok := annotation(expiry.AnnotationLastActive); ok {
				t.Fatal("touch wrote last-active within 3s of creation")
			}
		}
		time.Sleep(time.Until(created.Add(3100 * time.Millisecond)))
		mustContain(t, kubectlTimeout(t, "touch", pb.GetName()).expect(t, plugin.ExitOK).out, "touched: last active")
		v, ok := annotation(expiry.AnnotationLastActive)
		at, err := time.Parse(time.RFC3339, v)
		if !ok || err != nil || at.Before(created.Add(3*time.Second)) {
			t.Fatalf("last-active = %q (%v)", v, err)
		}
		mustContain(t, kubectlTimeout(t, "touch", pb.GetName()).expect(t, plugin.ExitOK).out, "nothing written")
		if again, _ := annotation(expiry.AnnotationLastActive); again != v {
			t.Fatalf("a second touch within the window wrote %q over %q", again, v)
		}
	})

	t.Run("list and explain show the clocks", func(t *testing.T) {
		list := decodeJSON[plugin.ItemList](t, kubectlTimeout(t, "list", "-l", testLabel+"="+test, "-o", "json").expect(t, plugin.ExitOK).out)
		if len(list.Items) != 1 || list.Items[0].LastActive == nil || list.Items[0].MaxAt == nil ||
			!time.Time(*list.Items[0].MaxAt).Equal(created.Add(2*time.Hour)) {
			t.Fatalf("list: %+v", list.Items)
		}
		out := kubectlTimeout(t, "explain", pb.GetName()).expect(t, plugin.ExitOK).out
		mustContain(t, out, "clocks: creation "+rfc3339(created.Add(time.Hour)), "maximum "+rfc3339(created.Add(2*time.Hour)), "the creation clock decides")
	})

	t.Run("extend refuses to go past the maximum", func(t *testing.T) {
		res := kubectlTimeout(t, "extend", pb.GetName(), "3h").expect(t, plugin.ExitPastMaximum)
		mustContain(t, res.errOut, "past the maximum", "maxTTL 2h")
		if _, ok := annotation(expiry.AnnotationExpiresAt); ok {
			t.Fatal("a refused extension wrote expires-at")
		}
		kubectlTimeout(t, "extend", pb.GetName(), "--until", rfc3339(created.Add(90*time.Minute))).expect(t, plugin.ExitOK)
	})

	t.Run("keep is refused", func(t *testing.T) {
		mustContain(t, kubectlTimeout(t, "keep", pb.GetName()).expect(t, plugin.ExitKeepForbidden).errOut, "forbids keep")
		if _, ok := annotation(expiry.AnnotationKeep); ok {
			t.Fatal("a refused keep wrote the annotation")
		}
	})

	t.Run("the controller ignores a keep and clamps an expiry written by hand, with a Warning", func(t *testing.T) {
		mergePatch(t, playbooks, "", pb.GetName(), `{"metadata":{"annotations":{"timeout.amphitheatre.app/keep":"true","timeout.amphitheatre.app/expires-at":"`+rfc3339(created.Add(5*time.Hour))+`"}}}`)
		fixture.Eventually(t, 10*time.Second, "an InvalidTimeout Warning about keep and maxTTL", func() (bool, error) {
			for _, n := range eventNotes(t, eventNamespace, pb.GetName(), "InvalidTimeout") {
				if strings.Contains(n, "forbids it") && strings.Contains(n, "maxTTL 2h") {
					return true, nil
				}
			}
			return false, nil
		})
		list := decodeJSON[plugin.ItemList](t, kubectlTimeout(t, "list", "-l", testLabel+"="+test, "-o", "json").expect(t, plugin.ExitOK).out)
		if it := list.Items[0]; it.ExpiresAt == nil || !time.Time(*it.ExpiresAt).Equal(created.Add(2*time.Hour)) || it.Source != expiry.SourceMax {
			t.Fatalf("after keep and a late expires-at: %+v", it)
		}
	})

	t.Run("touch refuses under a policy without idleTTL", func(t *testing.T) {
		createPolicy(t, test+"-none", playbookPolicy(test+"-none", "1h"))
		other := create(t, playbooks, newPlaybook(test+"-none", "not idle", nil))
		mustContain(t, kubectlTimeout(t, "touch", other.GetName()).expect(t, plugin.ExitRefused).errOut, "no idleTTL")
	})
}
