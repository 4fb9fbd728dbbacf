#!/usr/bin/env bash
# Runs the steps of .github/workflows/release.yaml for a tag on this
# machine, pushing and signing nothing: the checks of its first job, the
# controller binaries of its image (built as the Dockerfile builds them;
# test/release checks that the two commands agree), the krew archives and
# checksums (make dist, checked by test/dist), the chart's lint and package,
# and the release notes. Usage: hack/release-dry-run.sh TAG
set -euo pipefail
tag=${1:?usage: hack/release-dry-run.sh TAG}
cd "$(dirname "$0")/.."
step() { printf '\n== %s\n' "$*"; }

step "the workflows pass actionlint"
make --no-print-directory lint-workflows

step "check: $tag is the version of the chart, of its image and of the install"
make --no-print-directory release-check RELEASE_TAG="$tag"

step "image: the controller for linux/amd64 and linux/arm64, built as in the Dockerfile"
command -v readelf >/dev/null || { echo "readelf (binutils, which gcc brings) is needed to check the binaries" >&2; exit 1; }
for arch in amd64 arm64; do
	bin=bin/release/linux_$arch/timeout-controller
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags="-s -w" -o "$bin" ./cmd/timeout-controller
	# What the toolchain recorded (no cgo, no local paths, the target), and
	# what the ELF file holds: no interpreter (static), no symbol table (-s)
	# and no DWARF (-w); -trimpath builds do not record their -ldflags.
	info=$(go version -m "$bin")
	for want in CGO_ENABLED=0 GOOS=linux "GOARCH=$arch" -trimpath=true; do
		grep -qxF "	build	$want" <<<"$info" || { echo "$bin: go version -m has no build setting $want" >&2; exit 1; }
	done
	if readelf -lW "$bin" | grep -q INTERP || readelf -SW "$bin" | grep -qE ' \.(symtab|z?debug_[a-z]+) '; then
		echo "$bin: dynamically linked, or with symbols or DWARF" >&2
		exit 1
	fi
	echo "$bin: $(du -h "$bin" | cut -f1), static, stripped"
done

step "release: the krew archives, checksums.txt and timeout.yaml (make dist), checked by test/dist"
make --no-print-directory dist VERSION="$tag"
go test -count=1 ./test/dist

step "chart: lint and package"
make --no-print-directory chart-package
chart=dist/timeout-controller-${tag#v}.tgz
test -f "$chart" || { echo "helm package wrote no $chart" >&2; exit 1; }

step "release notes"
notes=$(hack/release-notes.sh "$tag")
if [ -n "$notes" ]; then
	head -n 20 <<<"$notes"
else
	echo "CHANGELOG.md has no section [${tag#v}]: the release would get GitHub's generated notes"
fi

workflow=.github/workflows/release.yaml
image=$(awk '$1 == "IMAGE:" { print $2; exit }' "$workflow")
charts=$(awk '$1 == "CHARTS:" { print $2; exit }' "$workflow")
step "dry run done; a push of the tag $tag would publish"
cat <<EOT
  image    $image:$tag (linux/amd64, linux/arm64), signed, an SBOM attested per platform
  chart    $charts/timeout-controller:${tag#v} ($chart), signed
  release  $tag on GitHub: the krew archives, timeout.yaml, checksums.txt and its signature (checksums.txt.sigstore.json)
EOT
