// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/amphitheatre-app/timeout-controller/internal/archive"
)

// archiveDirEnv names the environment variable that can stand for
// --archive-dir.
const archiveDirEnv = "KUBECTL_TIMEOUT_ARCHIVE_DIR"

func newRestoreCommand(o *Options) *cobra.Command {
	var output, dir string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "restore (ARCHIVE | [KIND/]NAME)",
		Short: "Create an archived object again",
		Long: `Create an object again from the manifest the controller archived before
deleting it (policies with deletion.archive). ARCHIVE is the path of an
archived file: on the controller's archive volume, or copied from it with
kubectl cp. With [KIND/]NAME, the newest archive of the object of that
name, or else of that title (a Playbook's spec.title), is looked up under
--archive-dir (or $` + archiveDirEnv + `).

The object is created without the fields the API server sets (uid,
resourceVersion, creationTimestamp, status, managedFields, owner
references) and without what tied it to its old expiry (the expires-at
annotation and the controller's record), so it starts a fresh lifetime
from its new creation: a ttl annotation counts again from now. An object
of the same name that exists is never replaced (exit code 7).`,
		Example: `  # from a copy of the archived file
  kubectl cp timeout-system/timeout-controller-0:/archive/amphitheatre.app/Playbook/4f0c….yaml ./pb.yaml
  kubectl timeout restore ./pb.yaml
  # by name, with the archive volume mounted here
  kubectl timeout restore playbook/2b1e7c9e-3f7a-4c61-9a51-0f3c2d7e8a10 --archive-dir /mnt/timeout-archive
  # by title
  kubectl timeout restore hello-go --archive-dir /mnt/timeout-archive
  # show what would be created
  kubectl timeout restore ./pb.yaml --dry-run`,
		Args: exactArgs(1, "ARCHIVE or [KIND/]NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "text", "json", "yaml"); err != nil {
				return err
			}
			if dir == "" {
				dir = os.Getenv(archiveDirEnv)
			}
			return runRestore(cmd.Context(), o, args[0], dir, dryRun, output)
		},
	}
	outputFlag(cmd, &output, "text", "json", "yaml")
	cmd.Flags().StringVar(&dir, "archive-dir", "", "The controller's archive directory, to look NAME up in (default $"+archiveDirEnv+")")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "Print the manifest that would be created, and create nothing")
	_ = cmd.MarkFlagDirname("archive-dir")
	return cmd
}

func runRestore(ctx context.Context, o *Options, arg, dir string, dryRun bool, output string) error {
	s, err := newSession(o, false)
	if err != nil {
		return err
	}
	path, err := s.archivePath(arg, dir)
	if err != nil {
		return err
	}
	archived, header, err := archive.Read(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return withCode(ExitNotFound, "%v", err)
		}
		return err
	}
	obj := archive.ForRestore(archived)
	if dryRun {
		if output == "json" {
			return writeStructured(o.Out, "json", obj.Object)
		}
		b, err := yaml.Marshal(obj.Object)
		if err != nil {
			return err
		}
		_, err = o.Out.Write(b)
		return err
	}

	gvk := obj.GroupVersionKind()
	m, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("the API server does not serve %s %s: %w", gvk.GroupVersion(), gvk.Kind, err)
	}
	k := kind{gvk: m.GroupVersionKind, resource: m.Resource, namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}
	if k.namespaced && obj.GetNamespace() == "" {
		return fmt.Errorf("%s: a namespaced %s without a namespace", path, gvk.Kind)
	}
	// Read before the create: a restore that worked must not be reported
	// as failed because the policies could not be read afterwards.
	if err := s.loadPolicies(ctx); err != nil {
		return err
	}
	created, err := s.dyn.Resource(k.resource).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{FieldManager: fieldManager})
	if apierrors.IsAlreadyExists(err) {
		return withCode(ExitRefused, "%s/%s exists already: restore never replaces an object; delete it first if the archived one should take its place",
			strings.ToLower(gvk.Kind), obj.GetName())
	}
	if err != nil {
		return fmt.Errorf("create %s/%s: %w", strings.ToLower(gvk.Kind), obj.GetName(), err)
	}
	ev, err := s.evaluate(ctx, k, created)
	if err != nil {
		return err
	}
	if output != "text" {
		if ev.Governing == nil {
			return writeStructured(o.Out, output, created.Object)
		}
		return writeStructured(o.Out, output, itemOf(ev))
	}
	what := describe(ev) + " restored from " + path
	if !header.ArchivedAt.IsZero() {
		what += fmt.Sprintf(" (archived %s under policy %s)", formatTime(header.ArchivedAt), header.Policy)
	}
	if ev.Governing == nil {
		fmt.Fprintln(o.Out, what)
		fmt.Fprintln(o.Out, "  no TimeoutPolicy governs it now: it does not expire")
		return nil
	}
	return report(o.Out, "text", ev, what+"; now governed by policy "+ev.Governing.Name)
}

// archivePath returns the file arg names: arg itself when it is a file,
// or else the newest archive of the object [KIND/]NAME under dir, NAME
// being its name or, failing that, its title.
func (s *session) archivePath(arg, dir string) (string, error) {
	if info, err := os.Stat(arg); err == nil && !info.IsDir() {
		return arg, nil
	}
	r, err := parseRef(arg)
	if err != nil || strings.ContainsAny(arg, `\`) || strings.HasSuffix(arg, ".yaml") {
		return "", withCode(ExitNotFound, "no archive file %s", arg)
	}
	if dir == "" {
		return "", usageError("%q is not a file; to look it up by name, give --archive-dir (or set $%s) to the controller's archive directory", arg, archiveDirEnv)
	}
	var gk schema.GroupKind
	if r.kind != "" {
		if gk, err = s.resolveKind(r.kind); err != nil {
			// The kind may no longer be served; archives name kinds as-is.
			gk = schema.GroupKind{Kind: r.kind}
		}
	}
	namespace := ""
	if s.explicitNamespace {
		namespace = s.namespace
	}
	entries, err := archive.Find(dir, gk, namespace, r.name)
	if err == nil && len(entries) == 0 {
		// People know Playbooks by their titles, not their UUIDs.
		entries, err = archive.FindTitle(dir, gk, namespace, r.name)
	}
	if err != nil {
		return "", fmt.Errorf("read the archive %s: %w", dir, err)
	}
	if len(entries) == 0 {
		return "", withCode(ExitNotFound, "no archive of %q under %s", arg, dir)
	}
	// The newest is the object last deleted; other objects (another kind,
	// another namespace) of that name make the name ambiguous.
	newest := entries[0]
	var others []string
	for _, e := range entries[1:] {
		if e.GroupKind != newest.GroupKind || e.Namespace != newest.Namespace {
			others = append(others, entryString(e))
		}
	}
	if len(others) > 0 {
		return "", withCode(ExitAmbiguous, "%q names more than one archived object; say which with KIND/NAME or -n NAMESPACE, or give the file:\n  %s\n  %s",
			arg, entryString(newest), strings.Join(others, "\n  "))
	}
	return newest.Path, nil
}

func entryString(e archive.Entry) string {
	s := strings.ToLower(e.GroupKind.Kind) + "/" + e.Name
	if e.Namespace != "" {
		s += " in namespace " + e.Namespace
	}
	return s + " (" + e.Path + ", written " + e.ModTime.UTC().Format(time.RFC3339) + ")"
}
