// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/rules"
)

// Sleep states of an object, as list, explain and wake say them.
const (
	SleepAwake  = rules.SleepAwake
	SleepAsleep = rules.SleepAsleep
	SleepWaking = rules.SleepWaking
)

// SleepInfo is the sleep of an object under a policy with spec.sleep (or
// one whose sleep annotation says it sleeps, under a policy that no
// longer does).
type SleepInfo struct {
	State string `json:"state"`
	// AfterIdle or After, and DeleteAfter, are the policy's spec.sleep.
	AfterIdle   string `json:"afterIdle,omitempty"`
	After       string `json:"after,omitempty"`
	DeleteAfter string `json:"deleteAfter,omitempty"`
	// Since is when it went to sleep, for an object asleep.
	Since *Time `json:"since,omitempty"`
	// SleepsAt is when the controller puts it to sleep, if nobody uses it
	// before, for an object awake.
	SleepsAt *Time `json:"sleepsAt,omitempty"`
	// Woke is when it last woke, and WokeBy what woke it (or, waking,
	// what wakes it).
	Woke   *Time  `json:"woke,omitempty"`
	WokeBy string `json:"wokeBy,omitempty"`
	// FreedReplicas, FreedCPUMillis and FreedMemoryBytes are what the
	// sleep scaled down: the replicas and what their pod templates request.
	FreedReplicas    int32 `json:"freedReplicas,omitempty"`
	FreedCPUMillis   int64 `json:"freedCPUMillis,omitempty"`
	FreedMemoryBytes int64 `json:"freedMemoryBytes,omitempty"`
}

// sleepOf is the sleep of ev's object; nil when SleepState is "".
func sleepOf(ev *Evaluation) *SleepInfo {
	state := ev.SleepState()
	if state == "" {
		return nil
	}
	s, st := ev.Governing.Schedule, ev.Life.Sleep
	si := &SleepInfo{State: state, Woke: timePtr(st.Woke), WokeBy: st.WokeBy}
	if s.SleepAfterIdle > 0 {
		si.AfterIdle = expiry.FormatDuration(s.SleepAfterIdle)
	}
	if s.SleepAfter > 0 {
		si.After = expiry.FormatDuration(s.SleepAfter)
	}
	if s.SleepDeleteAfter > 0 {
		si.DeleteAfter = expiry.FormatDuration(s.SleepDeleteAfter)
	}
	switch state {
	case SleepAwake:
		si.SleepsAt = timePtr(ev.SleepsAt())
	case SleepAsleep:
		si.Since = timePtr(st.Since)
		si.FreedReplicas, si.FreedCPUMillis, si.FreedMemoryBytes = st.Freed, st.FreedCPUMillis, st.FreedMemoryBytes
	case SleepWaking:
		si.Since = timePtr(st.Since)
		if ev.Plan.Action == expiry.Wake {
			si.WokeBy = ev.Plan.WokeBy
		}
	}
	return si
}

// sleepColumn is list's SLEEP column: "asleep since 3h ago", "sleeps in
// 2h", "waking", or "-".
func sleepColumn(si *SleepInfo, now time.Time) string {
	if si == nil {
		return "-"
	}
	switch {
	case si.State == SleepAsleep && si.Since != nil:
		return "asleep since " + relative(time.Time(*si.Since), now)
	case si.State == SleepAwake && si.SleepsAt != nil:
		return "sleeps " + relative(time.Time(*si.SleepsAt), now)
	}
	return si.State
}

// sleepSentence says in a line where the object's sleep stands.
func sleepSentence(si *SleepInfo, now time.Time) string {
	switch si.State {
	case SleepAsleep:
		s := "asleep"
		if si.Since != nil {
			s += fmt.Sprintf(" since %s (%s)", formatTime(time.Time(*si.Since)), relative(time.Time(*si.Since), now))
		}
		return s
	case SleepWaking:
		return "waking: woken by " + si.WokeBy + "; the controller restores what its sleep scaled down"
	}
	if si.SleepsAt == nil {
		return "awake"
	}
	return fmt.Sprintf("awake: sleeps %s (%s) unless it is used", formatTime(time.Time(*si.SleepsAt)), relative(time.Time(*si.SleepsAt), now))
}

// freed says what a sleep scaled down: "5 replicas, 1500m CPU, 2Gi memory".
func freed(si *SleepInfo) string {
	parts := []string{fmt.Sprintf("%d replicas", si.FreedReplicas)}
	if si.FreedCPUMillis > 0 {
		parts = append(parts, resource.NewMilliQuantity(si.FreedCPUMillis, resource.DecimalSI).String()+" CPU")
	}
	if si.FreedMemoryBytes > 0 {
		parts = append(parts, resource.NewQuantity(si.FreedMemoryBytes, resource.BinarySI).String()+" memory")
	}
	return strings.Join(parts, ", ")
}

// wakesOn says what wakes an object that sleeps: the same use that keeps
// an idle object alive, and anyone scaling its workloads up.
const wakesOn = "use (`kubectl timeout wake` or `touch`, the " + expiry.AnnotationLastActive +
	" annotation, a spec edit), someone else scaling a workload up, the keep annotation"

// wakeTimeout is --timeout's default: how long wake --wait waits.
const wakeTimeout = 2 * time.Minute

// wakePoll is how often wake --wait reads the object again.
var wakePoll = time.Second

func newWakeCommand(o *Options) *cobra.Command {
	var waitAwake bool
	var timeout time.Duration
	cmd := nameCommand(o, &cobra.Command{
		Use:   "wake [KIND/]NAME",
		Short: "Wake an object that sleeps",
		Long: `Wake an object its policy put to sleep (spec.sleep), the way use does: like
touch, it sets the timeout.amphitheatre.app/last-active annotation to now,
and the controller, seeing use after the sleep, scales the object's
workloads back to what they were and restarts its idle clock.

With --wait, the command waits until the object's sleep annotation says
Awake, up to --timeout. An object that is not asleep is left alone ("not
asleep: nothing to wake", exit 0); under a policy without spec.sleep the
command exits with 7. Like extend, the write is locked on the object's
resourceVersion: if the controller deleted the object first, the command
says so and exits with 8.`,
		Example: `  kubectl timeout wake 2b1e7c9e-3f7a-4c61-9a51-0f3c2d7e8a10
  kubectl timeout wake "Weekend demo" --wait --timeout 5m`,
	}, nameArgs{run: func(ctx context.Context, n *named) error {
		if timeout <= 0 {
			return usageError("--timeout %s: expected a positive duration", timeout)
		}
		s, err := newSession(n.o, n.all)
		if err != nil {
			return err
		}
		return s.wake(ctx, n.ref, n.output, waitAwake, timeout)
	}})
	cmd.Flags().BoolVar(&waitAwake, "wait", false, "Wait until the controller has woken the object (its sleep annotation says Awake)")
	cmd.Flags().DurationVar(&timeout, "timeout", wakeTimeout, "How long --wait waits (e.g. 30s, 5m)")
	return cmd
}

// wake writes use on the named object and, with wait, waits until the
// controller has woken it.
func (s *session) wake(ctx context.Context, r ref, output string, waitAwake bool, timeout time.Duration) error {
	var waking bool
	f, err := s.change(ctx, r, output, func(ev *Evaluation) (*rules.Patch, error) {
		p, err := wakePatch(ev)
		waking = err == nil && (!p.None || ev.SleepState() == SleepWaking)
		return p, err
	})
	if err != nil || !waitAwake || !waking {
		return err
	}
	return s.waitAwake(ctx, f, output, timeout)
}

// wakePatch records use now, as touch does, on an object that sleeps
// (rules.Wake).
func wakePatch(ev *Evaluation) (*rules.Patch, error) {
	p, err := rules.Wake(ev)
	if r := (*rules.Refusal)(nil); errors.As(err, &r) && r.Reason == rules.NeverSleeps {
		return nil, withCode(ExitRefused, "policy %s has no spec.sleep: %s never sleeps; nothing was written", ev.Governing.Name, describe(ev))
	}
	return p, err
}

// waitAwake reads the object until its sleep annotation says Awake.
func (s *session) waitAwake(ctx context.Context, f found, output string, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, wakePoll, timeout, false, func(ctx context.Context) (bool, error) {
		obj, err := s.fresh(ctx, f)
		if apierrors.IsNotFound(err) {
			return false, withCode(ExitGone, "%s was deleted while waiting for it to wake", f)
		}
		if err != nil {
			return false, err
		}
		if obj.GetDeletionTimestamp() != nil {
			return false, withCode(ExitGone, "%s is being deleted: it did not wake", f)
		}
		st, err := expiry.ParseSleep(obj.GetAnnotations()[expiry.AnnotationSleep])
		if err != nil {
			return false, err
		}
		last = st.Phase
		if st.Phase != expiry.PhaseAwake {
			return false, nil
		}
		if output == "text" {
			writeWoke(s.o.Out, st, s.o.Clock.Now())
		}
		return true, nil
	})
	if wait.Interrupted(err) {
		return withCode(ExitError, "%s did not wake within %s: its sleep annotation says %s (is the controller running? `kubectl get events` tells what it did)", f, timeout, last)
	}
	return err
}

func writeWoke(w io.Writer, st expiry.SleepState, now time.Time) {
	fmt.Fprintf(w, "  awake: woke %s (%s), by %s\n", formatTime(st.Woke), relative(st.Woke, now), st.WokeBy)
}
