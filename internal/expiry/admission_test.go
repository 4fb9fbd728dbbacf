// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

const admissionPolicyPath = "../../config/admission/component/policy.yaml"

func admissionPolicy(t *testing.T) *admissionv1.ValidatingAdmissionPolicy {
	t.Helper()
	raw, err := os.ReadFile(admissionPolicyPath)
	if err != nil {
		t.Fatal(err)
	}
	var p admissionv1.ValidatingAdmissionPolicy
	if err := yaml.UnmarshalStrict(raw, &p); err != nil {
		t.Fatalf("%s: %v", admissionPolicyPath, err)
	}
	return &p
}

// admissionRule returns the expression of the policy's validation of
// annotation.
func admissionRule(t *testing.T, annotation string) string {
	t.Helper()
	for _, v := range admissionPolicy(t).Spec.Validations {
		if strings.HasPrefix(v.Expression, "!('"+annotation+"' in variables.changed)") {
			return v.Expression
		}
	}
	t.Fatalf("%s has no validation of %s", admissionPolicyPath, annotation)
	return ""
}

// rawStrings returns the CEL raw string literals r'…' in expr: the
// patterns it matches against.
func rawStrings(expr string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`r'([^']*)'`).FindAllStringSubmatch(expr, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestAdmissionPolicyMatchesParsers keeps the patterns of the admission
// policy in config/admission in step with the parsers the controller uses.
// test/integration/admission_test.go runs the policy itself.
func TestAdmissionPolicyMatchesParsers(t *testing.T) {
	t.Run("checks ttl with DurationPattern", func(t *testing.T) {
		rule := admissionRule(t, AnnotationTTL)
		if !strings.Contains(rule, "matches(r'"+DurationPattern+"')") {
			t.Errorf("the ttl rule does not match against DurationPattern %s:\n%s", DurationPattern, rule)
		}
	})

	t.Run("accepts exactly the keep values strconv.ParseBool reads", func(t *testing.T) {
		rule := admissionRule(t, AnnotationKeep)
		list := regexp.MustCompile(`\[([^\]]*)\]`).FindStringSubmatch(rule)
		if list == nil {
			t.Fatalf("no list of values in the keep rule:\n%s", rule)
		}
		var inPolicy []string
		for _, v := range strings.Split(list[1], ",") {
			inPolicy = append(inPolicy, strings.Trim(strings.TrimSpace(v), "'"))
		}
		// Every string of up to five of the letters ParseBool's words use.
		var parsed []string
		const letters = "01tTrRuUeEfFaAlLsS"
		var walk func(prefix string)
		walk = func(prefix string) {
			if _, err := strconv.ParseBool(prefix); err == nil {
				parsed = append(parsed, prefix)
			}
			if len(prefix) == 5 {
				return
			}
			for _, c := range letters {
				walk(prefix + string(c))
			}
		}
		walk("")
		slices.Sort(inPolicy)
		slices.Sort(parsed)
		if !slices.Equal(inPolicy, parsed) {
			t.Errorf("the keep rule accepts %q, strconv.ParseBool %q", inPolicy, parsed)
		}
	})

	t.Run("leaves to its day check only the times time.Parse refuses for the day", func(t *testing.T) {
		var pattern *regexp.Regexp
		for _, s := range rawStrings(admissionRule(t, AnnotationExpiresAt)) {
			if strings.HasPrefix(s, "^[0-9]{4}") {
				pattern = regexp.MustCompile(s)
			}
		}
		if pattern == nil {
			t.Fatal("no time pattern in the expires-at rule")
		}
		// Random edits of well-formed times, which time.Parse sometimes
		// still accepts (a one-digit hour, an offset of +24:00).
		seeds := []string{
			"2026-12-24T18:00:00Z", "2026-02-28T23:59:59.5+01:00", "2028-02-29T09:30:00,25-05:30",
			"2026-04-30T00:00:00+24:00", "9999-12-31T23:59:59-00:60",
		}
		const alphabet = "0123456789-:.,+TtZz 9"
		rng := rand.New(rand.NewPCG(1, 2))
		var accepted, matched int
		for range 200000 {
			b := []byte(seeds[rng.IntN(len(seeds))])
			for range 1 + rng.IntN(3) {
				i := rng.IntN(len(b))
				switch rng.IntN(3) {
				case 0:
					b[i] = alphabet[rng.IntN(len(alphabet))]
				case 1:
					b = slices.Delete(b, i, i+1)
				default:
					b = slices.Insert(b, i, alphabet[rng.IntN(len(alphabet))])
				}
			}
			s := string(b)
			_, err := time.Parse(time.RFC3339, s)
			match := pattern.MatchString(s)
			if err == nil {
				accepted++
				if !match {
					t.Errorf("time.Parse accepts %q, the pattern does not", s)
				}
			}
			if match {
				matched++
				if err != nil && !strings.HasSuffix(err.Error(), "day out of range") {
					t.Errorf("the pattern matches %q, time.Parse refuses it: %v", s, err)
				}
			}
		}
		t.Logf("%d edits accepted by time.Parse, %d matched", accepted, matched)
		if accepted < 1000 {
			t.Errorf("only %d edits accepted by time.Parse: the corpus tests too little", accepted)
		}
	})

	t.Run("checks last-active with the time pattern of expires-at", func(t *testing.T) {
		timePattern := func(annotation string) string {
			for _, s := range rawStrings(admissionRule(t, annotation)) {
				if strings.HasPrefix(s, "^[0-9]{4}") {
					return s
				}
			}
			return ""
		}
		if got, want := timePattern(AnnotationLastActive), timePattern(AnnotationExpiresAt); got == "" || got != want {
			t.Errorf("the last-active rule matches %q, the expires-at rule %q", got, want)
		}
	})

	t.Run("checks no value of the legacy ttl, and of the record only who writes it", func(t *testing.T) {
		p := admissionPolicy(t)
		recordRules := 0
		for _, v := range p.Spec.Validations {
			if strings.Contains(v.Expression, "'"+AnnotationLegacyTTL+"'") {
				t.Errorf("%s has a rule on %s:\n%s", admissionPolicyPath, AnnotationLegacyTTL, v.Expression)
			}
			if !strings.Contains(v.Expression, "'"+AnnotationReminders+"'") {
				continue
			}
			// The record is the controller's: the one rule on it says who
			// may change it (whoever RBAC grants the verb record on the
			// resource reminders, named by no user), never what it holds.
			recordRules++
			want := "variables.annotations[?'" + AnnotationReminders + "'].orValue('') == variables.oldAnnotations[?'" + AnnotationReminders + "'].orValue('') || " +
				"authorizer.group('timeout.amphitheatre.app').resource('reminders').check('record').allowed()"
			if v.Expression != want {
				t.Errorf("%s has a rule on the value of %s, or one that names who writes it another way:\n%s\nwant\n%s", admissionPolicyPath, AnnotationReminders, v.Expression, want)
			}
		}
		if recordRules != 1 {
			t.Errorf("%s has %d rules on %s, want the one that keeps it to the controller", admissionPolicyPath, recordRules, AnnotationReminders)
		}
		for _, v := range p.Spec.Variables {
			if v.Name != "knownKeys" && strings.Contains(v.Expression, "'"+AnnotationReminders+"'") {
				t.Errorf("%s reads %s in variable %s", admissionPolicyPath, AnnotationReminders, v.Name)
			}
		}
	})

	t.Run("knows exactly the keys the controller knows", func(t *testing.T) {
		var known []string
		for _, v := range admissionPolicy(t).Spec.Variables {
			if v.Name == "knownKeys" {
				for _, m := range regexp.MustCompile(`'([^']*)'`).FindAllStringSubmatch(v.Expression, -1) {
					known = append(known, m[1])
				}
			}
		}
		want := slices.Clone(KnownAnnotations)
		slices.Sort(known)
		slices.Sort(want)
		if !slices.Equal(known, want) {
			t.Errorf("the policy's knownKeys are %q, KnownAnnotations %q", known, want)
		}
	})
}
