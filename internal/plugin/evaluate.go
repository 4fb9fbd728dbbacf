// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/amphitheatre-app/timeout-controller/internal/decide"
	"github.com/amphitheatre-app/timeout-controller/internal/rules"
)

// Evaluation is what the policies make of one object at one moment: see
// rules.Evaluation, which the actions server judges links by too.
type Evaluation = rules.Evaluation

// Step is one thing the controller will do.
type Step = rules.Step

// Step.Action of the deletion, a sleep and a wake.
const (
	ActionDelete = rules.ActionDelete
	ActionSleep  = rules.ActionSleep
	ActionWake   = rules.ActionWake
)

// Evaluate works out what policies make of an object: rules.Evaluate.
var Evaluate = rules.Evaluate

// title is obj's title, read as the controller reads it.
func title(obj *unstructured.Unstructured) string {
	return decide.Title(obj)
}
