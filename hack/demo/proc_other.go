// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package main

import "syscall"

func ownProcessGroup() *syscall.SysProcAttr {
	return nil
}
