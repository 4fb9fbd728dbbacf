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
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/amphitheatre-app/timeout-controller/internal/archive"
)

// archiveEnv names the environment variable that can stand for --from;
// archiveDirEnv the one that stood for --archive-dir.
const (
	archiveEnv    = "KUBECTL_TIMEOUT_ARCHIVE"
	archiveDirEnv = "KUBECTL_TIMEOUT_ARCHIVE_DIR"
)

// restoreFlags are the restore command's flags.
type restoreFlags struct {
	output, from, dir, namespace string
	dryRun, list                 bool
	since, until                 string
	s3                           archive.S3Options
}

func newRestoreCommand(o *Options) *cobra.Command {
	var f restoreFlags
	cmd := &cobra.Command{
		Use:   "restore (ARCHIVE | [KIND/]NAME) | restore --list [[KIND/]NAME]",
		Short: "Create an archived object again, or list what can be restored",
		Long: `Create an object again from the manifest the controller archived before
deleting it (policies with deletion.archive). --from says where the
controller archives (its --archive): "cluster" for the Secrets in its
namespace (--archive-namespace), s3://BUCKET/PREFIX for an S3 bucket, or a
directory (its volume, mounted or copied). ARCHIVE is what --list shows
under WHERE, or the path of an archived file. With [KIND/]NAME, the newest
archive of the object of that name, or else of that title (a Playbook's
spec.title), is restored.

--list lists the archived objects, newest first: all of them, or those of
NAME or title NAME, archived within --since and --until.

For S3, the credentials are those of the AWS tools ($AWS_ACCESS_KEY_ID and
$AWS_SECRET_ACCESS_KEY, or the instance's identity).

The object is created without the fields the API server sets (uid,
resourceVersion, creationTimestamp, status, managedFields, owner
references) and without what tied it to its old expiry (the expires-at
annotation and the controller's record), so it starts a fresh lifetime
from its new creation: a ttl annotation counts again from now. An object
of the same name that exists is never replaced (exit code 7).`,
		Example: `  # what the in-cluster archive holds from the last day
  kubectl timeout restore --list --from cluster --since 24h
  # by title, from the in-cluster archive
  kubectl timeout restore hello-go --from cluster
  # by name, from a bucket on an S3-compatible server
  kubectl timeout restore playbook/2b1e7c9e-3f7a-4c61-9a51-0f3c2d7e8a10 --from s3://archive/timeout --s3-endpoint https://minio.example:9000 --s3-path-style
  # from a copy of an archived file
  kubectl timeout restore ./pb.yaml
  # show what would be created
  kubectl timeout restore hello-go --from cluster --dry-run`,
		Args: func(cmd *cobra.Command, args []string) error {
			if f.list {
				return cobra.MaximumNArgs(1)(cmd, args)
			}
			return oneArg("ARCHIVE or [KIND/]NAME")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			formats := []string{"text", "json", "yaml"}
			if err := checkOutput(f.output, formats...); err != nil {
				return err
			}
			if f.from == "" {
				f.from = f.dir
			}
			if f.from == "" {
				f.from = os.Getenv(archiveEnv)
			}
			if f.from == "" {
				f.from = os.Getenv(archiveDirEnv)
			}
			if f.list {
				arg := ""
				if len(args) == 1 {
					arg = args[0]
				}
				return runListArchive(cmd.Context(), o, arg, &f)
			}
			return runRestore(cmd.Context(), o, args[0], &f)
		},
	}
	outputFlag(cmd, &f.output, "text", "json", "yaml")
	fl := cmd.Flags()
	fl.StringVar(&f.from, "from", "", `Where the controller archives: "cluster", s3://BUCKET/PREFIX, or a directory (default $`+archiveEnv+`)`)
	fl.StringVar(&f.dir, "archive-dir", "", "The controller's archive directory; the same as --from DIR")
	fl.StringVar(&f.namespace, "archive-namespace", "timeout-system", "The controller's namespace, where --from cluster finds the archive")
	fl.BoolVar(&f.list, "list", false, "List the archived objects, newest first, instead of restoring one")
	fl.StringVar(&f.since, "since", "", "With --list: archived at most this long ago (a duration such as 24h) or since this time (RFC 3339)")
	fl.StringVar(&f.until, "until", "", "With --list: archived at least this long ago or until this time")
	fl.StringVar(&f.s3.Endpoint, "s3-endpoint", os.Getenv("AWS_ENDPOINT_URL_S3"), "URL of the S3-compatible server ($AWS_ENDPOINT_URL_S3; https://s3.amazonaws.com when empty)")
	fl.StringVar(&f.s3.Region, "s3-region", os.Getenv("AWS_REGION"), "Region of the bucket ($AWS_REGION)")
	fl.BoolVar(&f.s3.PathStyle, "s3-path-style", false, "Address the bucket in the URL's path, as most S3-compatible servers need")
	fl.BoolVar(&f.dryRun, "dry-run", false, "Print the manifest that would be created, and create nothing")
	_ = cmd.MarkFlagDirname("archive-dir")
	return cmd
}

// openArchive returns the store --from names, or nil when none is given.
func (s *session) openArchive(f *restoreFlags) (archive.Store, error) {
	if f.from == "" {
		return nil, nil
	}
	f.s3.AccessKeyID, f.s3.SecretAccessKey, f.s3.SessionToken = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN")
	cfg := archive.Config{Namespace: f.namespace, S3: f.s3}
	if f.from == archive.ClusterSpec {
		c, err := s.kubeClient()
		if err != nil {
			return nil, err
		}
		cfg.Kube = archive.Kube{Reader: c, Writer: c}
	}
	store, err := archive.Open(f.from, cfg)
	if err != nil {
		return nil, usageError("--from: %v", err)
	}
	return store, nil
}

func runRestore(ctx context.Context, o *Options, arg string, f *restoreFlags) error {
	dryRun, output := f.dryRun, f.output
	s, err := newSession(o, false)
	if err != nil {
		return err
	}
	store, err := s.openArchive(f)
	if err != nil {
		return err
	}
	path, err := s.archivePath(ctx, arg, store)
	if err != nil {
		return err
	}
	var archived *unstructured.Unstructured
	var header archive.Header
	if store == nil || path == arg && isFile(arg) {
		archived, header, err = archive.Read(path)
	} else {
		archived, header, err = store.Read(ctx, path)
		if _, local := store.(archive.Dir); !local {
			path = store.String() + ": " + path
		}
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || apierrors.IsNotFound(err) {
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

// archiveReadError is the error of a failed read of the whole archive:
// "not found" when the archive --from names is not there (no such bucket
// or directory), as for an entry that is not there.
func archiveReadError(store archive.Store, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return withCode(ExitNotFound, "no archive at %s (%v): check --from", store, err)
	}
	return fmt.Errorf("read the archive %s: %w", store, err)
}

func isFile(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir()
}

// archivePath returns where the archive arg names is in store: arg itself
// when it is a file or an entry's place in the store, or else the place
// of the newest archive of the object [KIND/]NAME, NAME being its name
// or, failing that, its title.
func (s *session) archivePath(ctx context.Context, arg string, store archive.Store) (string, error) {
	if isFile(arg) {
		return arg, nil
	}
	r, err := parseRef(arg)
	if store == nil {
		if err != nil || strings.ContainsAny(arg, `\`) || strings.HasSuffix(arg, ".yaml") {
			return "", withCode(ExitNotFound, "no archive file %s", arg)
		}
		return "", usageError("%q is not a file; to look it up by name, give --from (or set $%s) to where the controller archives", arg, archiveEnv)
	}
	all, lerr := store.List(ctx)
	if lerr != nil {
		return "", archiveReadError(store, lerr)
	}
	for _, e := range all {
		if e.Path == arg {
			return e.Path, nil
		}
	}
	if err != nil {
		return "", withCode(ExitNotFound, "no archive %s in %s", arg, store)
	}
	f := archive.Filter{Name: r.name}
	if r.kind != "" {
		if f.GroupKind, err = s.resolveKind(r.kind); err != nil {
			// The kind may no longer be served; archives name kinds as-is.
			f.GroupKind = schema.GroupKind{Kind: r.kind}
		}
	}
	if s.explicitNamespace {
		f.Namespace = s.namespace
	}
	entries := f.Select(all)
	if len(entries) == 0 {
		return "", withCode(ExitNotFound, "no archive of %q in %s", arg, store)
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
		return "", withCode(ExitAmbiguous, "%q names more than one archived object; say which with KIND/NAME or -n NAMESPACE, or give its place in the archive:\n  %s\n  %s",
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

// listedArchive is one line of restore --list.
type listedArchive struct {
	ArchivedAt time.Time `json:"archivedAt"`
	Group      string    `json:"group,omitempty"`
	Kind       string    `json:"kind"`
	Namespace  string    `json:"namespace,omitempty"`
	Name       string    `json:"name"`
	Title      string    `json:"title,omitempty"`
	UID        string    `json:"uid"`
	Where      string    `json:"where"`
}

func runListArchive(ctx context.Context, o *Options, arg string, f *restoreFlags) error {
	s, err := newSession(o, false)
	if err != nil {
		return err
	}
	store, err := s.openArchive(f)
	if err != nil {
		return err
	}
	if store == nil {
		return usageError("--list needs --from (or $%s): where the controller archives", archiveEnv)
	}
	now := o.Clock.Now()
	var filter archive.Filter
	if filter.Since, err = parseWhen(f.since, now); err != nil {
		return usageError("--since: %v", err)
	}
	if filter.Until, err = parseWhen(f.until, now); err != nil {
		return usageError("--until: %v", err)
	}
	if arg != "" {
		r, err := parseRef(arg)
		if err != nil {
			return usageError("%v", err)
		}
		filter.Name = r.name
		if r.kind != "" {
			if filter.GroupKind, err = s.resolveKind(r.kind); err != nil {
				filter.GroupKind = schema.GroupKind{Kind: r.kind}
			}
		}
	}
	if s.explicitNamespace {
		filter.Namespace = s.namespace
	}
	all, err := store.List(ctx)
	if err != nil {
		return archiveReadError(store, err)
	}
	entries := filter.Select(all)
	items := make([]listedArchive, 0, len(entries))
	for _, e := range entries {
		items = append(items, listedArchive{ArchivedAt: e.ModTime.UTC(), Group: e.GroupKind.Group, Kind: e.GroupKind.Kind,
			Namespace: e.Namespace, Name: e.Name, Title: e.Title, UID: string(e.UID), Where: e.Path})
	}
	if f.output != "text" {
		return writeStructured(o.Out, f.output, map[string]any{"archive": store.String(), "items": items})
	}
	if len(items) == 0 {
		fmt.Fprintf(o.ErrOut, "nothing archived in %s matches\n", store)
		return nil
	}
	tw := tabwriter.NewWriter(o.Out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "ARCHIVED\tKIND\tNAMESPACE\tNAME\tTITLE\tWHERE")
	for _, it := range items {
		ns := it.Namespace
		if ns == "" {
			ns = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", formatTime(it.ArchivedAt), it.Kind, ns, it.Name, it.Title, it.Where)
	}
	return tw.Flush()
}

// parseWhen reads a --since or --until: a duration before now, or a time
// in RFC 3339; empty is no bound.
func parseWhen(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither a duration (24h) nor a time (2026-03-01T09:00:00Z)", v)
	}
	return t, nil
}
