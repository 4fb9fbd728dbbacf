// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"
)

// Step is one thing that happens to the world, then WaitMS of simulated
// time during which the controller does whatever falls due. Every random
// choice is made when the schedule is generated, so that dropping steps
// (shrinking) leaves the others meaning what they meant.
type Step struct {
	// Kind is the input: one of the kinds below, the names the disabled
	// list turns off.
	Kind string
	// Obj and Pol index the objects and policies; Ch the channels.
	Obj, Pol, Ch int
	// Val is the value written: an annotation's, a policy's spec.
	Val string
	// DurMS is how long a fault lasts, or how far a clock jump goes.
	DurMS  int64
	WaitMS int64
}

// The inputs a schedule is made of.
const (
	kCreate                = "create"
	kTTL                   = "ttl"
	kInvalidTTL            = "invalidTTL"
	kTypo                  = "typoKey"
	kExtend                = "extend"
	kShorten               = "shorten"
	kKeep                  = "keep"
	kUnkeep                = "unkeep"
	kNotify                = "notify"
	kPolicyCreate          = "policyCreate"
	kPolicyEdit            = "policyEdit"
	kPolicyInvalidSelector = "policyInvalidSelector"
	kPolicyInvalidTTL      = "policyInvalidTTL"
	kPolicyDelete          = "policyDelete"
	kPrioritySwap          = "prioritySwap"
	kSelectorChange        = "selectorChange"
	kDryRunToggle          = "dryRunToggle"
	kCap                   = "cap"
	kOutage                = "outage"
	kSlow                  = "slowSend"
	kReset                 = "connectionReset"
	kCacheLag              = "cacheLag"
	kConflict              = "writeConflict"
	kRestart               = "restart"
	kLeader                = "leaderChange"
	kClockJump             = "clockJump"
	kUse                   = "use"
	kLastActive            = "lastActive"
	kScaleUp               = "scaleUp"
	kScaleUpRace           = "scaleUpRace"
	kReapply               = "reapply"
	kCrash                 = "crash"
	kWait                  = "wait"
)

// weights says how often generate picks each input.
var weights = []struct {
	kind string
	w    int
}{
	{kCreate, 10}, {kTTL, 4}, {kInvalidTTL, 2}, {kTypo, 2}, {kExtend, 4}, {kShorten, 3},
	{kKeep, 2}, {kUnkeep, 2}, {kNotify, 1},
	{kPolicyCreate, 3}, {kPolicyEdit, 3}, {kPolicyInvalidSelector, 1}, {kPolicyInvalidTTL, 1}, {kPolicyDelete, 1},
	{kPrioritySwap, 2}, {kSelectorChange, 2}, {kDryRunToggle, 2}, {kCap, 1},
	{kOutage, 4}, {kSlow, 2}, {kReset, 3}, {kCacheLag, 3}, {kConflict, 3},
	{kRestart, 2}, {kLeader, 2}, {kClockJump, 1}, {kWait, 8},
	{kUse, 4}, {kLastActive, 3},
	{kScaleUp, 6}, {kScaleUpRace, 3}, {kReapply, 2}, {kCrash, 2},
}

// The shape of the world: a few objects and policies, so that steps
// collide often.
const (
	numObjects  = 5
	numPolicies = 3
	numChannels = 2
	stepsPer    = 40
)

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// randomSpec is a policy spec in the compact form applySpec reads. Some
// policies expire idle objects, cap lifetimes, forbid keep or archive
// before deleting (which reads the object fresh first); a maximum
// shorter than the default TTL makes the policy invalid, on purpose.
func randomSpec(r *rand.Rand) string {
	rem := pick(r, "", "20m", "20m;5m", "5m")
	spec := fmt.Sprintf("ttl=%s,rem=%s,notice=%s,sel=%s,prio=%d,dry=%d,cap=0",
		pick(r, "10m", "30m", "1h", "2h"), rem, pick(r, "0s", "10m", "0s"),
		pick(r, "", "", "a", "b"), r.IntN(5), pick(r, 0, 0, 0, 1))
	if r.IntN(3) == 0 {
		spec += ",idle=" + pick(r, "15m", "30m", "1h")
	}
	if r.IntN(4) == 0 {
		spec += ",max=" + pick(r, "1h", "2h", "3h")
	}
	if r.IntN(4) == 0 {
		spec += ",keep=Forbidden"
	}
	if r.IntN(3) == 0 {
		spec += ",arch=1"
	}
	if r.IntN(3) == 0 {
		spec += ",sleep=" + pick(r, "idle", "after") + ":" + pick(r, "10m", "30m", "1h") + ":" + pick(r, "10m", "30m", "2h") +
			pick(r, "", "", ":5m", ":20m")
	}
	return spec
}

// focus, from SIM_FOCUS (comma-separated kinds), makes those inputs ten
// times as likely: for hunting a defect near them. The fixed seeds run
// without it.
var focus = func() map[string]bool {
	out := map[string]bool{}
	for _, k := range strings.Split(os.Getenv("SIM_FOCUS"), ",") {
		if k != "" {
			out[k] = true
		}
	}
	return out
}()

func weight(kind string, w int) int {
	if focus[kind] {
		return 10 * w
	}
	return w
}

// generate returns the schedule of seed, without the disabled inputs.
func generate(seed uint64, disabled map[string]string) []Step {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	total := 0
	for _, w := range weights {
		if _, off := disabled[w.kind]; !off {
			total += weight(w.kind, w.w)
		}
	}
	// Every schedule starts with a policy, so that something is governed.
	steps := []Step{{Kind: kPolicyCreate, Pol: 0, Val: randomSpec(r), WaitMS: 1000}}
	for len(steps) < stepsPer {
		n := r.IntN(total)
		kind := ""
		for _, w := range weights {
			if _, off := disabled[w.kind]; off {
				continue
			}
			if n < weight(w.kind, w.w) {
				kind = w.kind
				break
			}
			n -= weight(w.kind, w.w)
		}
		// Only the fields the kind reads are set, so that a schedule
		// prints as what happens.
		obj, pol, ch := r.IntN(numObjects), r.IntN(numPolicies), r.IntN(numChannels)
		s := Step{Kind: kind}
		switch kind {
		case kCreate:
			s.Obj, s.Val = obj, pick(r, "a", "b", "a;ttl=20m", "b;ttl=45m", "a;expires-at=+25m", "a;keep=true")
		case kTTL:
			s.Obj, s.Val = obj, pick(r, "15m", "40m", "1h", "90m")
		case kInvalidTTL:
			s.Obj, s.Val = obj, pick(r, "soon", "-5m", "1x")
		case kTypo:
			s.Obj, s.Val = obj, pick(r, "timeout.amphitheatre.app/tll=5m", "timeout.amphitheatre.app/expire-at=+5m", "timeout.amphitheatre.app/kep=true")
		case kExtend, kShorten:
			// Two hours goes past most maxima: the maximum clamps it.
			s.Obj, s.DurMS = obj, pick[int64](r, 60_000, 10*60_000, 30*60_000, 120*60_000)
		case kKeep, kUnkeep:
			s.Obj = obj
		case kNotify:
			s.Obj, s.Val = obj, pick(r, "ann@sim.test", "ann@sim.test,#ops", "bob@elsewhere.test")
		case kPolicyCreate, kPolicyEdit:
			s.Pol, s.Val = pol, randomSpec(r)
		case kPolicyInvalidSelector, kPolicyInvalidTTL, kPolicyDelete, kDryRunToggle:
			s.Pol = pol
		case kPrioritySwap:
			s.Pol, s.Obj = pol, r.IntN(numPolicies) // Obj: the other policy
		case kSelectorChange:
			s.Pol, s.Val = pol, pick(r, "", "a", "b")
		case kCap:
			s.Pol, s.Val = pol, pick(r, "1", "2", "0")
		case kOutage:
			s.Ch, s.DurMS = ch, pick[int64](r, 500, 30_000, 5*60_000, 40*60_000)
		case kSlow:
			s.Ch, s.DurMS = ch, pick[int64](r, 2_000, 15_000)
		case kReset:
			s.Ch = ch
		case kCacheLag:
			s.DurMS = pick[int64](r, 100, 400)
		case kConflict:
			s.Obj, s.DurMS = obj, pick[int64](r, 1, 2)
		case kLeader:
			s.Obj = obj // the reconcile the old leader had under way
		case kClockJump:
			s.DurMS = pick[int64](r, 5*60_000, 2*3600_000)
		case kUse:
			s.Obj = obj
		case kScaleUp, kReapply:
			// Which workload (db: the StatefulSet of o3 and o4), and when
			// the watch tells the controller: at once, late, never.
			s.Obj, s.Val = obj, pick(r, "", "", "late", "lost")
			if hasDB(objName(obj)) && r.IntN(2) == 0 {
				s.Val = strings.TrimPrefix(s.Val+";db", ";")
			}
			if s.Val == "late" || s.Val == "late;db" {
				s.DurMS = pick[int64](r, 1_000, 30_000, 5*60_000)
			}
		case kScaleUpRace:
			// Just before or after the controller's DurMS-th write of a
			// sleep or wake of the object from now.
			s.Obj, s.Val, s.DurMS = obj, pick(r, "before", "after"), pick[int64](r, 1, 2, 3, 4)
			if hasDB(objName(obj)) && r.IntN(2) == 0 {
				s.Val += ";db"
			}
		case kCrash:
			// Dies at its next write, or a few writes in: mid-sleep, mid-wake.
			s.DurMS, s.Val = pick[int64](r, 1, 2, 3, 4), pick(r, "15s", "15s", "10m")
		case kLastActive:
			// Now, a past and a future time, and a value that is no time.
			s.Obj, s.Val = obj, pick(r, "now", "-10m", "+20m", "+2h", "yesterday")
		}
		s.WaitMS = pick[int64](r, 0, 200, 1_000, 30_000, 5*60_000, 15*60_000, 30*60_000)
		steps = append(steps, s)
	}
	return steps
}

// String is the step as a Go literal, so that a shrunk schedule can be
// pasted into the regression table.
func (s Step) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{Kind: %q", s.Kind)
	if s.Obj != 0 {
		fmt.Fprintf(&b, ", Obj: %d", s.Obj)
	}
	if s.Pol != 0 {
		fmt.Fprintf(&b, ", Pol: %d", s.Pol)
	}
	if s.Ch != 0 {
		fmt.Fprintf(&b, ", Ch: %d", s.Ch)
	}
	if s.Val != "" {
		fmt.Fprintf(&b, ", Val: %q", s.Val)
	}
	if s.DurMS != 0 {
		fmt.Fprintf(&b, ", DurMS: %d", s.DurMS)
	}
	if s.WaitMS != 0 {
		fmt.Fprintf(&b, ", WaitMS: %d", s.WaitMS)
	}
	b.WriteString("},")
	return b.String()
}

func formatSchedule(steps []Step) string {
	var b strings.Builder
	for _, s := range steps {
		b.WriteString("\t" + s.String() + "\n")
	}
	return b.String()
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
