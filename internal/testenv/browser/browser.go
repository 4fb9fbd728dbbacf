// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package browser runs the pages of the actions server in a real browser
// for tests: Debian's headless Chromium, driven over the DevTools protocol
// (chromedp), with axe-core injected to check accessibility. Nothing is
// downloaded: Chromium comes from the chromium package (hack/deps.sh
// installs it) and axe-core from hack/axe.sh.
package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// EnvChromium names a Chromium binary in place of the chromium on PATH;
// EnvAxe the axe.min.js to inject (hack/axe.sh prints it).
const (
	EnvChromium = "TIMEOUT_CHROMIUM"
	EnvAxe      = "TIMEOUT_AXE"
)

// Find returns the path of Chromium: $TIMEOUT_CHROMIUM, else chromium or
// chromium-browser on PATH.
func Find() (string, error) {
	if p := os.Getenv(EnvChromium); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium on PATH and " + EnvChromium + " unset: apt-get install chromium (hack/deps.sh)")
}

// New starts a headless Chromium for the test, width pixels wide, and
// returns a context that drives one tab of it; the browser stops when the
// test ends. A test that needs a browser fails without one: it does not
// skip.
func New(t *testing.T, width int) context.Context {
	t.Helper()
	path, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, 900),
		// This machine's network is closed: Chromium's own background
		// connections would only fail, many at a time.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter"),
	}
	if os.Geteuid() == 0 {
		// As root, Chromium refuses to start with its sandbox.
		opts = append(opts, chromedp.NoSandbox)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first action starts the browser, which lives as long as ctx:
	// chromedp wants no timeout on it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx
}

// Violation is one rule axe-core found broken on a page.
type Violation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

func (v Violation) String() string {
	var where []string
	for _, n := range v.Nodes {
		where = append(where, n.HTML)
	}
	return fmt.Sprintf("%s (%s): %s at %s", v.ID, v.Impact, v.Help, strings.Join(where, ", "))
}

// Axe injects axe-core into the page ctx shows and returns the rules the
// page breaks.
func Axe(ctx context.Context) ([]Violation, error) {
	path := os.Getenv(EnvAxe)
	if path == "" {
		return nil, errors.New(EnvAxe + " unset: run hack/axe.sh, which prints the path of axe.min.js")
	}
	src, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return nil, fmt.Errorf("read axe-core: %w", err)
	}
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](string(src))); err != nil {
		return nil, fmt.Errorf("inject axe-core: %w", err)
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](`axe.run(document).then(r => r.violations)`, chromedp.EvalAwaitPromise))
	if err != nil {
		return nil, fmt.Errorf("run axe-core: %w", err)
	}
	var out []Violation
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("read axe-core's answer: %w", err)
	}
	return out, nil
}
