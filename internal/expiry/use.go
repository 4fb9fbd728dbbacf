// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// AnnotationLastUse says what the use that last-active names was, and who
// made it: JSON {"at": RFC 3339, "via": "exec", "by": "alice"}. It is
// written in the same patch as last-active, by the controller (for the uses
// it sees itself: exec, attach, port-forward, traffic) or, for a
// last-active someone wrote, stamped at admission. A last-use whose At is
// not last-active's time describes an older use and is ignored.
const AnnotationLastUse = Prefix + "last-use"

// Ways an object is used, the Via of a Use.
const (
	// ViaExec, ViaAttach and ViaPortForward: a connection to one of the
	// object's Pods (kubectl exec, attach, port-forward), seen at admission.
	ViaExec        = "exec"
	ViaAttach      = "attach"
	ViaPortForward = "portforward"
	// ViaTraffic: the policy's traffic query was above its threshold.
	ViaTraffic = "traffic"
	// ViaAnnotation: someone wrote last-active (kubectl timeout touch, or
	// any client).
	ViaAnnotation = "annotation"
	// ViaLink and ViaSlack: someone acted through a link in a message, on
	// its page or from a Slack button (the actions server writes them,
	// in last-use for a wake and in the changed-by stamp for any change).
	ViaLink  = "link"
	ViaSlack = "slack"
)

// Use is what a last-use annotation holds.
type Use struct {
	// At is the time of use, last-active's value.
	At time.Time `json:"at"`
	// Via is how the object was used: one of the Via constants.
	Via string `json:"via"`
	// By is who used it, a Kubernetes username, when known.
	By string `json:"by,omitempty"`
}

// MaxUseBy is the longest By kept: a longer username is cut, so that the
// annotation stays small whatever the name.
const MaxUseBy = 256

// ParseUse reads a last-use annotation.
func ParseUse(value string) (Use, error) {
	var u Use
	if err := json.Unmarshal([]byte(value), &u); err != nil {
		return Use{}, fmt.Errorf("annotation %s: %w", AnnotationLastUse, err)
	}
	if u.At.IsZero() || u.Via == "" {
		return Use{}, fmt.Errorf("annotation %s: expected at and via", AnnotationLastUse)
	}
	return u, nil
}

// Annotation is the annotation value, with At truncated to the second as
// last-active holds it and By cut to MaxUseBy bytes.
func (u Use) Annotation() string {
	u.At = u.At.UTC().Truncate(time.Second)
	if len(u.By) > MaxUseBy {
		u.By = strings.ToValidUTF8(u.By[:MaxUseBy], "")
	}
	b, _ := json.Marshal(u)
	return string(b)
}

// Annotations are the two annotations that record the use: last-active
// and last-use, to be written in one patch.
func (u Use) Annotations() map[string]string {
	return map[string]string{
		AnnotationLastActive: u.At.UTC().Truncate(time.Second).Format(time.RFC3339),
		AnnotationLastUse:    u.Annotation(),
	}
}

// String names the use for people: "exec by alice", "traffic", "by
// alice via link".
func (u Use) String() string {
	if (u.Via == ViaLink || u.Via == ViaSlack) && u.By != "" {
		return "by " + u.By + " via " + u.Via
	}
	s := u.Via
	if u.By != "" {
		s += " by " + u.By
	}
	return s
}

// LastUse returns the use that the object's last-active names, if its
// last-use annotation describes it (ok is false otherwise: no last-use, a
// broken one, or one about an earlier last-active).
func LastUse(annotations map[string]string) (u Use, ok bool) {
	v, has := annotations[AnnotationLastUse]
	if !has {
		return Use{}, false
	}
	u, err := ParseUse(v)
	if err != nil {
		return Use{}, false
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(annotations[AnnotationLastActive]))
	if err != nil || !t.Equal(u.At.Truncate(time.Second)) {
		return Use{}, false
	}
	return u, true
}
