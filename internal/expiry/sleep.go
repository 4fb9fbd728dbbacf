// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package expiry

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Annotations of sleep.
const (
	// AnnotationSleep holds a governed object's SleepState. The controller
	// owns it.
	AnnotationSleep = Prefix + "sleep"
	// AnnotationReplicas is written on each workload a sleep scaled to zero
	// (a Deployment or StatefulSet in a namespace the sleeping object
	// owns): its replicas before, which the wake restores. The controller
	// owns it.
	AnnotationReplicas = Prefix + "replicas"
	// LabelAsleep is set, in the same patch as AnnotationReplicas, on each
	// workload a sleep scaled to zero, to the UID of the sleeping object,
	// and removed by the wake: the controller watches only the workloads
	// that carry it, for a scale-up by someone else. The controller owns
	// it.
	LabelAsleep = Prefix + "asleep"
)

// Phases of a SleepState. Sleeping and Waking are the phases of a sleep or
// a wake under way: a controller that finds one completes it.
const (
	PhaseSleeping = "Sleeping"
	PhaseAsleep   = "Asleep"
	PhaseWaking   = "Waking"
	PhaseAwake    = "Awake"
)

// SourceSleep is Lifetime.Source when the time asleep (sleep plus the
// policy's sleep.deleteAfter) sets the expiry; SourceWoke is
// Lifetime.ActiveBy when the last wake is the latest activity.
const (
	SourceSleep = "sleep"
	SourceWoke  = "wake"
)

// SleepState is what the controller wrote on an object of its sleep: the
// phase, when it went to sleep and last woke, and, for an object scaled
// itself, the replicas to restore.
type SleepState struct {
	Phase string `json:"phase"`
	// Since is when the object went to sleep.
	Since time.Time `json:"since,omitzero"`
	// Woke is when the object last woke, and WokeBy what woke it.
	Woke   time.Time `json:"woke,omitzero"`
	WokeBy string    `json:"wokeBy,omitempty"`
	// Generation is the object's metadata.generation once asleep: a change
	// of it is a spec edit, which wakes the object.
	Generation int64 `json:"generation,omitempty"`
	// Replicas are the replicas of an object that was scaled itself (it
	// has a scale subresource), before the sleep.
	Replicas *int32 `json:"replicas,omitempty"`
	// Freed counts the replicas the sleep scaled down, and
	// FreedCPUMillis and FreedMemoryBytes what their pod templates
	// request.
	Freed            int32 `json:"freed,omitempty"`
	FreedCPUMillis   int64 `json:"freedCPUMillis,omitempty"`
	FreedMemoryBytes int64 `json:"freedMemoryBytes,omitempty"`
	// External says the wake under way was someone else scaling a
	// workload up.
	External bool `json:"external,omitempty"`
	// Patch is the policy's spec.sleep.patch that puts the object to
	// sleep, and WakePatch its inverse: the values it replaces, read from
	// the object before the sleep. Both are kept here, so that a sleep
	// under way goes on, and the wake undoes it, whatever the policy says
	// by then.
	Patch     json.RawMessage `json:"patch,omitempty"`
	WakePatch json.RawMessage `json:"wakePatch,omitempty"`
	// Workloads are, while a sleep is under way (Sleeping), the
	// metadata.generation of each workload it found when it began, by
	// kind, namespace and name ("Deployment amp-1/web"). A workload it has
	// not scaled down yet whose generation changed since was changed by
	// someone else (scaled, re-applied from its manifest, made anew),
	// which is use: the sleep must not scale it down, as if it had simply
	// not reached it. Dropped once the object is Asleep.
	Workloads map[string]int64 `json:"workloads,omitempty"`
}

// MaxSleepWorkloads bounds what Workloads holds, as JSON: the names and
// generations of about fifty workloads with the longest names, or several
// hundred with Amphitheatre's. A sleep that finds more records the first
// that fit; the others are judged as before the record existed (a
// workload without the sleep's annotation is one it has not reached).
const MaxSleepWorkloads = 16 << 10

// Generation is the metadata.generation of the workload named Name.
type Generation struct {
	Name       string
	Generation int64
}

// RecordWorkloads sets Workloads to the generations of the workloads a
// sleep found, in the order given, as many as fit in MaxSleepWorkloads.
func (s *SleepState) RecordWorkloads(found []Generation) {
	s.Workloads = nil
	size := len("{}")
	for _, g := range found {
		name, _ := json.Marshal(g.Name)
		// "name":generation, with the comma before all but the first.
		entry := len(name) + len(":") + len(strconv.FormatInt(g.Generation, 10))
		if len(s.Workloads) > 0 {
			entry += len(",")
		}
		if size+entry > MaxSleepWorkloads {
			return
		}
		if s.Workloads == nil {
			s.Workloads = map[string]int64{}
		}
		s.Workloads[g.Name] = g.Generation
		size += entry
	}
}

// ChangedSince reports whether the workload named name, which the sleep
// under way has not scaled down, was changed by someone else since the
// sleep began: its generation is not the one the sleep found. A workload
// the sleep did not find (made since under a new name) is not.
func (s SleepState) ChangedSince(name string, generation int64) bool {
	found, ok := s.Workloads[name]
	return ok && found != generation
}

// ParseSleep reads the sleep annotation; an empty value is an object that
// never slept.
func ParseSleep(value string) (SleepState, error) {
	if value == "" {
		return SleepState{}, nil
	}
	var s SleepState
	if err := json.Unmarshal([]byte(value), &s); err != nil {
		return SleepState{}, fmt.Errorf("annotation %s: %w", AnnotationSleep, err)
	}
	switch s.Phase {
	case PhaseSleeping, PhaseAsleep, PhaseWaking, PhaseAwake:
	default:
		return SleepState{}, fmt.Errorf("annotation %s: unknown phase %q", AnnotationSleep, s.Phase)
	}
	// The controller applies them to the object: never to its metadata,
	// where its own annotations are.
	for _, p := range []json.RawMessage{s.Patch, s.WakePatch} {
		if p == nil {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(p, &m); err != nil || len(p) > 4*MaxSleepPatch || m["metadata"] != nil || m["apiVersion"] != nil || m["kind"] != nil {
			return SleepState{}, fmt.Errorf("annotation %s: a patch that is no merge patch of the object's spec", AnnotationSleep)
		}
	}
	if (s.Patch == nil) != (s.WakePatch == nil) {
		return SleepState{}, fmt.Errorf("annotation %s: a patch without its inverse", AnnotationSleep)
	}
	return s, nil
}

// Inverse returns the merge patch that undoes patch on an object whose
// content is current: for each field patch sets, the value current has
// there, or null where it has none.
func Inverse(patch, current map[string]any) map[string]any {
	out := make(map[string]any, len(patch))
	for k, pv := range patch {
		cv, ok := current[k]
		pm, pIsMap := pv.(map[string]any)
		cm, cIsMap := cv.(map[string]any)
		switch {
		case pIsMap && cIsMap:
			out[k] = Inverse(pm, cm)
		case ok:
			out[k] = cv
		default:
			out[k] = nil
		}
	}
	return out
}

// String is the annotation value.
func (s SleepState) String() string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Sleeping reports whether the state says the object is asleep or going
// to sleep: its workloads are (being) scaled down.
func (s SleepState) Sleeping() bool {
	return s.Phase == PhaseSleeping || s.Phase == PhaseAsleep
}

// Changed reports whether the state says anything was (or is being)
// changed by a sleep that a wake must restore.
func (s SleepState) Changed() bool {
	return s.Sleeping() || s.Phase == PhaseWaking
}

// ParseReplicas reads a workload's replicas annotation.
func ParseReplicas(value string) (int32, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 32)
	if err != nil || n < 0 {
		return 0, false
	}
	return int32(n), true
}

// Sleeps reports whether the schedule puts objects to sleep.
func (s Schedule) Sleeps() bool {
	return s.SleepDeleteAfter > 0 && (s.SleepAfterIdle > 0 || s.SleepAfter > 0)
}

// sleepTimes works out, for an object whose lifetime l is computed up to
// its idle clock, when it sleeps (or slept) and whether it is asleep, and
// moves its expiry to no earlier than deleteAfter past the sleep.
//
// An object is asleep when its state says so and no use came after it
// went to sleep: use since then (the last-active annotation, a recorded
// spec edit) makes it awake for planning, and the planner wakes it. An
// awake object sleeps afterIdle past its last activity (which includes its
// last wake), or after its creation or last wake; its expiry is then no
// earlier than that plus deleteAfter, so that an object is deleted only
// asleep, whatever the creation clock says, unless maxTTL comes first.
func (s Schedule) sleepTimes(created time.Time, l *Lifetime) {
	st := l.Sleep
	// Use is written to the second (last-active is RFC 3339): a use in
	// the second the object went to sleep wakes it. A sleep comes at
	// least a second (afterIdle) after the last use, so that this never
	// takes the use that led to the sleep for a new one.
	if st.Sleeping() && !st.Since.IsZero() && l.LastActive.Before(st.Since.Truncate(time.Second)) {
		l.Asleep, l.SleepAt = true, st.Since
	} else {
		switch {
		case s.SleepAfterIdle > 0:
			l.SleepAt = l.LastActive.Add(s.SleepAfterIdle)
			l.SleepByUse = true
		case st.Woke.After(created):
			l.SleepAt = st.Woke.Add(s.SleepAfter)
		default:
			l.SleepAt = created.Add(s.SleepAfter)
		}
		// At a whole second (a wake, or a spec edit the controller saw,
		// is stamped to the nanosecond): the sleep, written a little after
		// it, then gives the deletion time the object had awake.
		if frac := l.SleepAt.Sub(l.SleepAt.Truncate(time.Second)); frac > 0 {
			l.SleepAt = l.SleepAt.Add(time.Second - frac)
		}
	}
	if t := SleepDeletion(l.SleepAt, s.SleepDeleteAfter); t.After(l.ExpiresAt) {
		l.ExpiresAt, l.Source = t, SourceSleep
	}
}

// SleepDeletion is when an object that went to sleep at since may be
// deleted: deleteAfter later, at the first whole second after that.
//
// A whole second, so that the time is announced (slept message, record,
// audit) exactly as it is decided; the first one after, never earlier,
// so that an object sleeps at least deleteAfter, and so that the sleep
// does not move the deletion the object was told of: a sleep due at a
// whole second is written a few milliseconds after it, in the same
// second, and gives the same deletion time as the sleep time it was due
// at.
func SleepDeletion(since time.Time, deleteAfter time.Duration) time.Time {
	return since.Add(deleteAfter).Truncate(time.Second).Add(time.Second)
}

// KeySlept, KeyWoke and KeySleeping are the Record keys of the slept and woke messages
// of one sleep: said once for each, whatever the expiry does meanwhile.
func KeySlept(since time.Time) string { return "slept/" + strconv.FormatInt(since.Unix(), 10) }

// KeyWoke is the Record key of the woke message of the wake at woke.
func KeyWoke(woke time.Time) string { return "woke/" + strconv.FormatInt(woke.Unix(), 10) }

// KeySleeping is the Record key of the sleeping message before the sleep
// due at sleepAt: use that moves the sleep owes a new one.
func KeySleeping(sleepAt time.Time) string {
	return "sleeping/" + strconv.FormatInt(sleepAt.Unix(), 10)
}

// cycleKey reports whether key is a slept or woke message's, and returns
// its prefix.
func cycleKey(key string) (string, bool) {
	for _, p := range []string{"sleeping/", "slept/", "woke/"} {
		if strings.HasPrefix(key, p) {
			return p, true
		}
	}
	return "", false
}
