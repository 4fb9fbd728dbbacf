// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/archive"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/plugin"
)

// archives is the controller's archive: a directory, and for the
// policies a test routes elsewhere, the store it names.
var archives *routedArchive

// routedArchive sends the manifests of each policy to the store a test
// chose for it, and the rest to Dir, so that tests of every kind of
// archive run in parallel against one controller.
type routedArchive struct {
	archive.Dir
	routes sync.Map // policy name -> archive.Store
}

// route sends what policy archives to store until the test ends.
func (r *routedArchive) route(t *testing.T, policy string, store archive.Store) {
	r.routes.Store(policy, store)
	t.Cleanup(func() { r.routes.Delete(policy) })
}

func (r *routedArchive) Write(ctx context.Context, obj *unstructured.Unstructured, h archive.Header) (string, error) {
	if s, ok := r.routes.Load(h.Policy); ok {
		return s.(archive.Store).Write(ctx, obj, h)
	}
	return r.Dir.Write(ctx, obj, h)
}

// clusterArchive is the cluster store in the controller's namespace.
func clusterArchive() *archive.Cluster {
	return &archive.Cluster{Kube: archive.Kube{Reader: k8s, Writer: k8s}, Namespace: outboxNamespace}
}

func TestClusterArchiveArchivesListsRestoresAndPrunes(t *testing.T) {
	t.Parallel()
	const test = "cluster-archive"
	spec := playbookPolicy(test, "1h")
	spec.Deletion.Archive = true
	createPolicy(t, test, spec)
	store := clusterArchive()
	archives.route(t, test, store)

	title := "kept in a Secret " + strings.Repeat("x", 80) // longer than a label value
	pb := create(t, playbooks, newPlaybook(test, title, map[string]string{expiry.AnnotationTTL: "3s"}))
	pb.expectDeletedOnTime(t, pb.after(3*time.Second))

	var s corev1.Secret
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: outboxNamespace, Name: archive.SecretName(string(pb.GetUID()))}, &s); err != nil {
		t.Fatalf("deleted without its archive Secret: %v", err)
	}
	if s.Type != archive.SecretType || s.Labels[archive.LabelUID] != string(pb.GetUID()) || s.Labels[archive.LabelName] != pb.GetName() ||
		s.Labels[archive.LabelKind] != "Playbook" || s.Labels[archive.LabelPolicy] != test {
		t.Errorf("archive Secret type %q labels %v", s.Type, s.Labels)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), &s) })

	from := []string{"--from", "cluster", "--archive-namespace", outboxNamespace}
	list := kubectlTimeout(t, append([]string{"restore", "--list", title, "--since", "1h"}, from...)...).expect(t, plugin.ExitOK)
	mustContain(t, list.out, pb.GetName(), s.Name)
	if got := kubectlTimeout(t, append([]string{"restore", "--list", title, "--until", "1h"}, from...)...).expect(t, plugin.ExitOK); strings.Contains(got.out, pb.GetName()) {
		t.Errorf("--until 1h lists an archive made seconds ago:\n%s", got.out)
	}

	res := kubectlTimeout(t, append([]string{"restore", title}, from...)...).expect(t, plugin.ExitOK)
	mustContain(t, res.out, "restored from Secrets in namespace "+outboxNamespace)
	restored, err := getPlaybook(t, pb.GetName())
	if err != nil {
		t.Fatalf("not restored: %v", err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(playbooks).Delete(context.Background(), restored.GetName(), metav1.DeleteOptions{})
	})
	if got, _, _ := unstructured.NestedString(restored.Object, "spec", "title"); got != title || restored.GetUID() == pb.GetUID() {
		t.Errorf("restored title %q uid %s", got, restored.GetUID())
	}

	// Retention: what was archived before the cutoff goes, the rest stays.
	if n, err := store.Prune(context.Background(), time.Now().Add(-time.Hour)); err != nil || !secretExists(t, s.Name) {
		t.Fatalf("prune with a cutoff an hour ago: %d removed, %v; the archive must stay", n, err)
	}
	if _, err := store.Prune(context.Background(), time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if secretExists(t, s.Name) {
		t.Error("the archive Secret outlived its retention")
	}
}

func secretExists(t *testing.T, name string) bool {
	t.Helper()
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: outboxNamespace, Name: name}, &corev1.Secret{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func TestClusterArchiveRefusesAnOversizeManifestAndKeepsTheObject(t *testing.T) {
	t.Parallel()
	const test = "cluster-archive-oversize"
	spec := playbookPolicy(test, "1h")
	spec.Deletion.Archive = true
	createPolicy(t, test, spec)
	archives.route(t, test, clusterArchive())

	pb := newPlaybook(test, "too big for a Secret", map[string]string{expiry.AnnotationTTL: "2s"})
	// The API server keeps objects up to about 1.5 MiB; a Secret's data
	// holds 1 MiB.
	if err := unstructured.SetNestedField(pb.Object, strings.Repeat("a", 1100<<10), "spec", "description"); err != nil {
		t.Fatal(err)
	}
	big := create(t, playbooks, pb)
	big.expectKept(t, time.Until(big.after(5*time.Second)))
	warning := findEvent(t, eventNamespace, big.GetName(), "ArchiveFailed")
	mustContain(t, warning.Note, "not deleted", "over the 1048576", "Secret")
	if secretExists(t, archive.SecretName(string(big.GetUID()))) {
		t.Error("an archive Secret was written for a manifest over the limit")
	}
}

// The S3 server the tests start, and its root credentials.
var (
	s3Once     sync.Once
	s3Cmd      *exec.Cmd
	s3URL      string
	s3StartErr error
)

const s3AccessKey, s3SecretKy = "timeout-test", "timeout-test-secret-key"

// s3Server starts versitygw over a temporary directory, once, and returns
// its URL. Without the binary the test fails: `make test` builds it.
func s3Server(t *testing.T) string {
	t.Helper()
	s3Once.Do(func() { s3URL, s3StartErr = startS3Server() })
	if s3StartErr != nil {
		t.Fatal(s3StartErr)
	}
	return s3URL
}

func startS3Server() (string, error) {
	bin := os.Getenv("TIMEOUT_S3_SERVER")
	if bin == "" {
		return "", fmt.Errorf("TIMEOUT_S3_SERVER is not set: run `make test`, which builds the S3 server (hack/s3-server.sh) and sets it")
	}
	dir, err := os.MkdirTemp("", "timeout-s3-*")
	if err != nil {
		return "", err
	}
	for _, d := range []string{"data", "meta"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o750); err != nil {
			return "", err
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	_ = l.Close()
	s3Cmd = exec.Command(bin, "--access", s3AccessKey, "--secret", s3SecretKy, "--port", addr, "--quiet",
		"posix", "--sidecar", filepath.Join(dir, "meta"), filepath.Join(dir, "data"))
	s3Cmd.Stdout, s3Cmd.Stderr = os.Stderr, os.Stderr
	if err := s3Cmd.Start(); err != nil {
		return "", fmt.Errorf("start the S3 server %s: %w", bin, err)
	}
	url := "http://" + addr
	c, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(s3AccessKey, s3SecretKy, ""), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.ListBuckets(context.Background())
		if err == nil {
			return url, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the S3 server at %s did not answer in 30s: %w", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func stopS3Server() {
	if s3Cmd != nil && s3Cmd.Process != nil {
		_ = s3Cmd.Process.Kill()
		_ = s3Cmd.Wait()
	}
}

// newBucket makes a bucket for test on the S3 server.
func newBucket(t *testing.T, name string) {
	t.Helper()
	url := s3Server(t)
	c, err := minio.New(strings.TrimPrefix(url, "http://"), &minio.Options{Creds: credentials.NewStaticV4(s3AccessKey, s3SecretKy, ""), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MakeBucket(context.Background(), name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("make bucket %s: %v", name, err)
	}
}

func s3Store(t *testing.T, spec, accessKey, secretKey string) *archive.S3 {
	t.Helper()
	s, err := archive.OpenS3(spec, archive.S3Options{Endpoint: s3Server(t), PathStyle: true, Region: "us-east-1", AccessKeyID: accessKey, SecretAccessKey: secretKey})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Not parallel: the plugin takes the S3 credentials from the environment.
func TestS3ArchiveArchivesListsRestoresAndPrunes(t *testing.T) {
	const test = "s3-archive"
	newBucket(t, test)
	store := s3Store(t, "s3://"+test+"/timeout/archive", s3AccessKey, s3SecretKy)
	spec := playbookPolicy(test, "1h")
	spec.Deletion.Archive = true
	createPolicy(t, test, spec)
	archives.route(t, test, store)

	pb := create(t, playbooks, newPlaybook(test, "kept in a bucket", map[string]string{expiry.AnnotationTTL: "3s"}))
	pb.expectDeletedOnTime(t, pb.after(3*time.Second))

	key := "timeout/archive/amphitheatre.app/Playbook/" + string(pb.GetUID()) + ".yaml"
	got, header, err := store.Read(context.Background(), key)
	if err != nil {
		t.Fatalf("deleted without its archive in the bucket: %v", err)
	}
	if header.UID != pb.GetUID() || header.Policy != test || got.GetName() != pb.GetName() {
		t.Errorf("archived %s with header %+v", got.GetName(), header)
	}

	t.Setenv("AWS_ACCESS_KEY_ID", s3AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3SecretKy)
	from := []string{"--from", "s3://" + test + "/timeout/archive", "--s3-endpoint", s3Server(t), "--s3-path-style", "--s3-region", "us-east-1"}
	list := kubectlTimeout(t, append([]string{"restore", "--list", "kept in a bucket"}, from...)...).expect(t, plugin.ExitOK)
	mustContain(t, list.out, pb.GetName(), key)
	res := kubectlTimeout(t, append([]string{"restore", "playbook/" + pb.GetName()}, from...)...).expect(t, plugin.ExitOK)
	mustContain(t, res.out, "restored from s3://"+test+"/timeout/archive: "+key)
	restored, err := getPlaybook(t, pb.GetName())
	if err != nil {
		t.Fatalf("not restored: %v", err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(playbooks).Delete(context.Background(), restored.GetName(), metav1.DeleteOptions{})
	})

	if n, err := store.Prune(context.Background(), time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("prune with a cutoff an hour ago: %d removed, %v", n, err)
	}
	if n, err := store.Prune(context.Background(), time.Now().Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("prune after the archive: %d removed, %v; want 1", n, err)
	}
	if entries, err := store.List(context.Background()); err != nil || len(entries) != 0 {
		t.Errorf("after pruning the bucket lists %v, %v", entries, err)
	}
}

func TestS3ArchiveFailuresKeepTheObject(t *testing.T) {
	t.Parallel()
	newBucket(t, "s3-refused")
	tests := []struct {
		name, policy, spec, accessKey, secretKey string
		want                                     []string
	}{
		{"keeps an object when the server refuses the credentials", "s3-refused-credentials", "s3://s3-refused/archive",
			s3AccessKey, "not-the-secret", []string{"refused the credentials"}},
		{"keeps an object when the bucket does not exist", "s3-missing-bucket", "s3://no-such-bucket/archive",
			s3AccessKey, s3SecretKy, []string{`bucket "no-such-bucket" does not exist`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec := playbookPolicy(tt.policy, "1h")
			spec.Deletion.Archive = true
			createPolicy(t, tt.policy, spec)
			archives.route(t, tt.policy, s3Store(t, tt.spec, tt.accessKey, tt.secretKey))

			pb := create(t, playbooks, newPlaybook(tt.policy, "cannot be archived", map[string]string{expiry.AnnotationTTL: "2s"}))
			pb.expectKept(t, time.Until(pb.after(5*time.Second)))
			warning := findEvent(t, eventNamespace, pb.GetName(), "ArchiveFailed")
			mustContain(t, warning.Note, append([]string{"not deleted"}, tt.want...)...)
			if strings.Contains(warning.Note, "not-the-secret") {
				t.Error("the Event shows the secret key")
			}
		})
	}
}
