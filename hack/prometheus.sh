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

echo "building prometheus $version (16 CPU-minutes from an empty build cache: about eight minutes on two idle cores)" >&2
mkdir -p "$dir"
(
  cd "$root/hack/promtool"
  GOWORK=off go build -trimpath -ldflags "-s -w" -o "$dir/prometheus.tmp" github.com/prometheus/prometheus/cmd/prometheus
)
mv "$dir/prometheus.tmp" "$dir/prometheus"
echo "$dir/prometheus"
