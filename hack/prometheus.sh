#!/usr/bin/env bash
# Builds Prometheus from the module version hack/promtool pins (the same
# version as promtool, without the web UI's assets) into a version-keyed
# cache under bin/, reuses it when present, and prints the binary's path
# last so callers can use it as TIMEOUT_PROMETHEUS. The integration tests
# run it to evaluate the policies' traffic queries against a real server
# scraping a real target.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
version=$(awk '$1 == "github.com/prometheus/prometheus" {print $2}' "$root/hack/promtool/go.mod")
dir="$root/bin/prometheus-$version"

if [ -x "$dir/prometheus" ]; then
  echo "$dir/prometheus"
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
  if [ -x "$dir/prometheus" ]; then
    echo "$dir/prometheus"
    exit 0
  fi
  rm -rf "$dir"/.build.* # left by a run that was killed
fi
out=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$out"' EXIT
echo "building prometheus $version (16 CPU-minutes from an empty build cache: about eight minutes on two idle cores)" >&2
(
  cd "$root/hack/promtool"
  GOWORK=off go build -trimpath -ldflags "-s -w" -o "$out/prometheus" github.com/prometheus/prometheus/cmd/prometheus
)
mv "$out/prometheus" "$dir/prometheus"
echo "$dir/prometheus"
