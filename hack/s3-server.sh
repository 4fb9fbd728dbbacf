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

mkdir -p "$dir"
# One build at a time (make demo and make test at once): another waits,
# then finds the binary built. It is built under a name of this run's own
# and renamed into place, so that it appears whole or not at all.
exec 9>"$dir/.lock"
if command -v flock >/dev/null; then
  if ! flock -n 9; then
    echo "waiting for another build into $dir" >&2
    flock 9
  fi
  if [ -x "$dir/versitygw" ]; then
    echo "$dir/versitygw"
    exit 0
  fi
  rm -rf "$dir"/.build.* # left by a run that was killed
fi
out=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$out"' EXIT
echo "building versitygw $version (about four minutes from a cold module cache)" >&2
(
  cd "$root/hack/s3"
  GOWORK=off GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$out/versitygw" github.com/versity/versitygw/cmd/versitygw
)
mv "$out/versitygw" "$dir/versitygw"
echo "$dir/versitygw"
