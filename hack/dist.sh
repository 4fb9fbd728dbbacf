#!/usr/bin/env bash
# Builds the kubectl plugin for every platform of the krew manifest into
# dist/ as reproducible tar.gz archives with their sha256, and writes
# dist/timeout.yaml from plugins/timeout.yaml. Usage: hack/dist.sh VERSION
set -euo pipefail
version=${1:?usage: hack/dist.sh VERSION}
cd "$(dirname "$0")/.."
platforms="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64"
repo=https://github.com/amphitheatre-app/timeout-controller
out=dist
rm -rf "$out" && mkdir -p "$out/build"

# The builds run at once: each compiles the standard library for its own
# platform, and the Go build cache shares the rest.
pids=()
for p in $platforms; do
	os=${p%/*} arch=${p#*/}
	exe=kubectl-timeout; [ "$os" = windows ] && exe=kubectl-timeout.exe
	dir=$out/build/${os}_$arch
	mkdir -p "$dir"
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "-s -w" -o "$dir/$exe" ./cmd/kubectl-timeout &
	pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done

entries=""
for p in $platforms; do
	os=${p%/*} arch=${p#*/}
	exe=kubectl-timeout; [ "$os" = windows ] && exe=kubectl-timeout.exe
	dir=$out/build/${os}_$arch
	archive=kubectl-timeout_${os}_$arch.tar.gz
	cp LICENSE "$dir/"
	# Same input, same bytes: no timestamps, owners or file order of this machine.
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$dir" -cf - "$exe" LICENSE | gzip -n -9 > "$out/$archive"
	sum=$(sha256sum "$out/$archive" | cut -d' ' -f1)
	echo "$sum  $archive" >> "$out/checksums.txt"
	entries+="    - selector:
        matchLabels:
          os: $os
          arch: $arch
      uri: $repo/releases/download/$version/$archive
      sha256: $sum
      bin: $exe
      files:
        - from: $exe
          to: .
        - from: LICENSE
          to: .
"
done
rm -rf "$out/build"
awk -v version="$version" -v platforms="$entries" '
	/^#/ && !body { next }
	{ body = 1 }
	$0 == "@PLATFORMS@" { printf "%s", platforms; next }
	{ gsub("@VERSION@", version); print }
' plugins/timeout.yaml > "$out/timeout.yaml"
echo "dist: $(ls "$out" | tr '\n' ' ')"
