#!/usr/bin/env bash
# Builds versitygw, an S3-compatible server, from the module pinned in
# hack/s3/go.mod into a version-keyed cache under bin/, reuses it when
# present, and prints the binary's path last so callers can use it as
# TIMEOUT_S3_SERVER. The integration tests run it over a temporary
# directory (its posix backend) to test the S3 archive against a real server.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
version=$(cd "$root/hack/s3" && GOWORK=off GOFLAGS=-mod=mod go list -m -f '{{.Version}}' github.com/versity/versitygw)
dir="$root/bin/versitygw-$version"

if [ -x "$dir/versitygw" ]; then
  echo "$dir/versitygw"
  exit 0
fi

echo "building versitygw $version (about four minutes from a cold module cache)" >&2
mkdir -p "$dir"
(
  cd "$root/hack/s3"
  GOWORK=off GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$dir/versitygw.tmp" github.com/versity/versitygw/cmd/versitygw
)
mv "$dir/versitygw.tmp" "$dir/versitygw"
echo "$dir/versitygw"
