// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// ownGroup makes cmd the leader of a process group and has a cancel kill
// the whole group: the test binary the go command started as well.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
