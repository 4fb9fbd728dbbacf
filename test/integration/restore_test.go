// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/amphitheatre-app/timeout-controller/internal/archive"
	"github.com/amphitheatre-app/timeout-controller/internal/plugin"
)

// Not parallel: the plugin takes the S3 credentials from the environment.
func TestRestoreFromS3OfWhatIsNotThereExitsNotFound(t *testing.T) {
	const bucket = "restore-not-found"
	newBucket(t, bucket)
	store := s3Store(t, "s3://"+bucket+"/timeout", s3AccessKey, s3SecretKy)
	// Something is archived, so that a lookup has entries to miss.
	pb := newPlaybook(bucket, "archived", nil)
	pb.SetUID(types.UID(uuid.NewUUID()))
	there, err := store.Write(context.Background(), pb, archive.Header{ArchivedAt: time.Now(), Policy: bucket})
	if err != nil {
		t.Fatal(err)
	}
	missing := "timeout/amphitheatre.app/Playbook/" + string(uuid.NewUUID()) + ".yaml"

	t.Setenv("AWS_ACCESS_KEY_ID", s3AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3SecretKy)
	from := func(spec string) []string {
		return []string{"--from", spec, "--s3-endpoint", s3Server(t), "--s3-path-style", "--s3-region", "us-east-1"}
	}
	tests := []struct {
		name, arg, from string
		want            []string
	}{
		{"a key that does not exist", missing, "s3://" + bucket + "/timeout", []string{missing, "s3://" + bucket + "/timeout"}},
		{"an object no archive holds", "playbook/" + string(uuid.NewUUID()), "s3://" + bucket + "/timeout", []string{"no archive of"}},
		{"a key of another prefix", there, "s3://" + bucket + "/elsewhere", []string{there}},
		{"a key in a bucket that does not exist", missing, "s3://no-such-restore-bucket/timeout", []string{"no archive at s3://no-such-restore-bucket/timeout", `bucket "no-such-restore-bucket" does not exist`, "check --from"}},
		{"a name in a directory that does not exist", "playbook/gone", "/no/such/archive/dir", []string{"no archive at /no/such/archive/dir", "check --from"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := kubectlTimeout(t, append([]string{"restore", tt.arg}, from(tt.from)...)...).expect(t, plugin.ExitNotFound)
			mustContain(t, res.errOut, tt.want...)
		})
	}
	// What is there is restored from the same place: the misses above are
	// not the plugin failing to read the bucket.
	kubectlTimeout(t, append([]string{"restore", there, "--dry-run"}, from("s3://"+bucket+"/timeout")...)...).expect(t, plugin.ExitOK)
}
