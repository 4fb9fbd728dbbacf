#!/usr/bin/env bash
# Installs axe-core, the accessibility checker the browser tests inject
# into the pages of the actions server, from the npm registry at the
# version hack/axe/package.json pins, into a version-keyed cache under bin/;
# reuses it when present, and prints the path of axe.min.js last so callers
# can use it as TIMEOUT_AXE. Needs npm.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/.*"axe-core": *"\([^"]*\)".*/\1/p' "$root/hack/axe/package.json")
dir="$root/bin/axe-core-$version"
js="$dir/node_modules/axe-core/axe.min.js"

if [ -f "$js" ]; then
  echo "$js"
  exit 0
fi
command -v npm >/dev/null || { echo "npm not found: apt-get install npm (hack/deps.sh installs it)" >&2; exit 1; }

# A temporary directory per run, moved into place: two runs at once do
# not see each other's half-installed tree.
mkdir -p "$root/bin"
tmp=$(mktemp -d "$root/bin/.axe-core.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$root/hack/axe/package.json" "$root/hack/axe/package-lock.json" "$tmp/"
echo "installing axe-core $version from the npm registry" >&2
npm ci --prefix "$tmp" --no-audit --no-fund --silent >&2
if [ ! -f "$js" ]; then
  mv "$tmp" "$dir" 2>/dev/null || true
fi
echo "$js"
