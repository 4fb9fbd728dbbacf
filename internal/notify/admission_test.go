// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package notify

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

const admissionPolicyPath = "../../config/admission/component/policy.yaml"

// TestAdmissionPolicyMatchesRecipients keeps the notify checks of the
// admission policy in config/admission in step with ParseRecipients.
// test/integration/admission_test.go runs the policy itself.
func TestAdmissionPolicyMatchesRecipients(t *testing.T) {
	raw, err := os.ReadFile(admissionPolicyPath)
	if err != nil {
		t.Fatal(err)
	}
	policy := string(raw)

	// The policy matches domains before lowercasing them: it has no
	// Unicode lowercasing to do it with.
	domain := strings.ReplaceAll(strings.TrimPrefix(hostname.String(), "^"), "a-z0-9", "A-Za-z0-9")
	for _, want := range []string{
		"e.matches(r'" + slackChannel.String() + "')",
		"@" + domain + `")`,
		"!isIP(",
		"size(variables.notifyEntries) <= " + strconv.Itoa(MaxRecipients),
		"'" + AnnotationNotify + "'",
	} {
		if !strings.Contains(policy, want) {
			t.Errorf("%s does not contain %s", admissionPolicyPath, want)
		}
	}
}

// TestTheNotifyAnnotationIsAKnownKey: expiry warns about every key under
// its prefix that it does not know, and must not warn about this one.
func TestTheNotifyAnnotationIsAKnownKey(t *testing.T) {
	if !slices.Contains(expiry.KnownAnnotations, AnnotationNotify) {
		t.Errorf("expiry.KnownAnnotations %q lacks %s", expiry.KnownAnnotations, AnnotationNotify)
	}
}
