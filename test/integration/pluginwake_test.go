// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/plugin"
)

// TestPluginWake: list and explain say a Playbook sleeps and since when,
// and `kubectl timeout wake --wait` wakes it as use does and returns once
// the controller has restored its workloads.
func TestPluginWake(t *testing.T) {
	t.Parallel()
	createPolicy(t, "plugin-wake", sleepPolicy("plugin-wake", "5s", "1h"))
	pb, ns := deploySleepy(t, "plugin-wake")
	name := pb.GetName()

	awaitPhase(t, name, expiry.PhaseAsleep, 20*time.Second)
	expectReplicas(t, web(ns), 0, "2")

	list := decodeJSON[plugin.ItemList](t, kubectlTimeout(t, "list", "--policy", "plugin-wake", "-o", "json").expect(t, plugin.ExitOK).out)
	if len(list.Items) != 1 || list.Items[0].Sleep == nil || list.Items[0].Sleep.State != plugin.SleepAsleep || list.Items[0].Sleep.FreedReplicas != 5 {
		t.Fatalf("list -o json: %+v, want the Playbook asleep, 5 replicas freed", list.Items)
	}
	mustContain(t, kubectlTimeout(t, "list", "--policy", "plugin-wake").expect(t, plugin.ExitOK).out, "asleep since", "asleep\n")
	mustContain(t, kubectlTimeout(t, "explain", name).expect(t, plugin.ExitOK).out,
		"Sleep:\n", "asleep since", "its sleep freed 5 replicas", "wakes on use", "if it sleeps until then")

	out := kubectlTimeout(t, "wake", name, "--wait", "--timeout", "30s").expect(t, plugin.ExitOK).out
	mustContain(t, out, "woken: last active", "awake: woke")
	// It sleeps again 5s after the wake, so it may be going back to sleep
	// by now; the wake stays recorded.
	st := sleepStateOf(t, name)
	if st.Woke.IsZero() {
		t.Fatalf("after wake --wait the sleep state is %+v, want a wake recorded", st)
	}
	mustContain(t, st.WokeBy, "use")
	findEvent(t, eventNamespace, name, "Woke")
	if n, _ := replicasOf(t, db(ns)); n != 3 && st.Phase == expiry.PhaseAwake {
		t.Errorf("db has %d replicas once awake, want 3", n)
	}
}
