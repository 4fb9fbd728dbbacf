// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package image builds container images from static Go binaries, with no
// registry, base image or container engine: one layer, written as a
// docker-archive tarball that `ctr images import` and `docker load` read.
// The controller's image is what the Dockerfile makes on
// gcr.io/distroless/static:nonroot: the binary, CA certificates, the
// nonroot user, no shell.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Nonroot is the user the controller's image runs as, distroless's
// nonroot.
const Nonroot = "65532:65532"

// File is one file of an image's layer.
type File struct {
	// Path is absolute, in the image.
	Path string
	Mode int64
	// UID and GID own it.
	UID, GID int
	Data     []byte
}

// Image is what Write writes.
type Image struct {
	// Refs name it, as `ctr images ls` lists it.
	Refs []string
	// Arch is a GOARCH; the running one when empty.
	Arch       string
	Entrypoint []string
	User       string
	Files      []File
}

// Write writes img as a docker-archive tarball.
func Write(w io.Writer, img Image) error {
	layer, err := layerTar(img.Files)
	if err != nil {
		return err
	}
	diffID := sha256.Sum256(layer)
	arch := img.Arch
	if arch == "" {
		arch = runtime.GOARCH
	}
	config, err := json.Marshal(map[string]any{
		"architecture": arch,
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC().Format(time.RFC3339),
		"config": map[string]any{
			"User":       img.User,
			"Entrypoint": img.Entrypoint,
			"Env":        []string{"PATH=/", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
			"WorkingDir": "/",
		},
		"rootfs": map[string]any{
			"type":     "layers",
			"diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])},
		},
	})
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	layerName := hex.EncodeToString(diffID[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{
		"Config":   configName,
		"RepoTags": img.Refs,
		"Layers":   []string{layerName},
	}})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	for _, f := range []struct {
		name string
		data []byte
	}{{configName, config}, {layerName, layer}, {"manifest.json", manifest}} {
		if err := writeFile(tw, f.name, 0o644, 0, 0, f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// layerTar is the layer: files, with every directory above them.
func layerTar(files []File) ([]byte, error) {
	dirs := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f.Path); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range names {
		mode := int64(0o755)
		if d == "/tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: mode, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		if err := writeFile(tw, strings.TrimPrefix(f.Path, "/"), f.Mode, f.UID, f.GID, f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeFile(tw *tar.Writer, name string, mode int64, uid, gid int, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Uid: uid, Gid: gid, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// BuildStatic builds the Go package pkg of the module at root for linux
// and arch, statically and stripped, as the Dockerfile does, and returns
// the binary.
func BuildStatic(ctx context.Context, root, pkg, arch string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "image-build-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	out := filepath.Join(dir, "bin")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %w: %s", pkg, err, b)
	}
	return os.ReadFile(out)
}

// Controller writes the controller's image, named refs, to the file out.
func Controller(ctx context.Context, root, out, arch string, refs ...string) error {
	if arch == "" {
		arch = runtime.GOARCH
	}
	bin, err := BuildStatic(ctx, root, "./cmd/timeout-controller", arch)
	if err != nil {
		return err
	}
	files := []File{
		{Path: "/timeout-controller", Mode: 0o755, Data: bin},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{Path: "/home/nonroot/.keep", Mode: 0o644, UID: 65532, GID: 65532},
		{Path: "/tmp/.keep", Mode: 0o644},
	}
	// The machine's CA bundle, as distroless carries Debian's: e-mail,
	// Slack and webhook receivers are verified against it.
	if ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		files = append(files, File{Path: "/etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Data: ca})
	}
	return writeTo(out, Image{Refs: refs, Arch: arch, Entrypoint: []string{"/timeout-controller"}, User: Nonroot, Files: files})
}

// Pause writes a sandbox image, named refs, from the pause command at
// root/pkg to the file out.
func Pause(ctx context.Context, root, pkg, out string, refs ...string) error {
	bin, err := BuildStatic(ctx, root, pkg, runtime.GOARCH)
	if err != nil {
		return err
	}
	return writeTo(out, Image{Refs: refs, Entrypoint: []string{"/pause"}, User: "65535:65535", Files: []File{{Path: "/pause", Mode: 0o755, Data: bin}}})
}

func writeTo(file string, img Image) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := Write(f, img); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
