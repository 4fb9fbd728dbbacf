#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kube-controller-manager from their Go
# modules into a version-keyed cache under bin/, reuses it when present, and
# prints the directory last so callers can use it as KUBEBUILDER_ASSETS.
#
# With --node it also builds kube-scheduler, kubelet, kube-proxy and
# kubectl, what hack/cluster needs for a one-node cluster. Every Kubernetes
# binary comes from one k8s.io/kubernetes module and one build, so they are
# always the same version.
#
# Two runs at once (make demo in one terminal, make test in another) share
# the cache: the second waits for the first's lock, then finds the
# binaries built. CONTROL_PLANE_DIR moves the cache (bin/control-plane).
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}

root=$(cd "$(dirname "$0")/.." && pwd)
dir="${CONTROL_PLANE_DIR:-$root/bin/control-plane}/kube-${KUBE_VERSION}_etcd-${ETCD_VERSION}"

commands=(kube-apiserver kube-controller-manager)
if [ "${1:-}" = "--node" ]; then
  commands+=(kube-scheduler kubelet kube-proxy kubectl)
fi
find_missing() {
  missing=()
  for c in "${commands[@]}"; do
    [ -x "$dir/$c" ] || missing+=("$c")
  done
}
find_missing
if [ -x "$dir/etcd" ] && [ ${#missing[@]} -eq 0 ]; then
  echo "$dir"
  exit 0
fi

mkdir -p "$dir"
# One build at a time per cache: another waits here, then builds only what
# is still missing. A binary appears whole or not at all: each is built
# under a name of this run's own in the cache and renamed into place.
exec 9>"$dir/.lock"
if command -v flock >/dev/null; then
  if ! flock -n 9; then
    echo "waiting for another build into $dir" >&2
    flock 9
  fi
  find_missing
  rm -rf "$dir"/.build.* # left by a run that was killed
fi
work=$(mktemp -d)
out=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$work" "$out"' EXIT
export GOFLAGS=-mod=mod GOWORK=off

if [ ! -x "$dir/etcd" ]; then
  echo "building etcd $ETCD_VERSION (about a minute)" >&2
  mkdir -p "$work/etcd"
  (
    cd "$work/etcd"
    go mod init local/etcd-build >/dev/null 2>&1
    go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null 2>&1
    go build -trimpath -o "$out/etcd" go.etcd.io/etcd/server/v3
  )
  mv "$out/etcd" "$dir/etcd"
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "building ${missing[*]} $KUBE_VERSION (about six minutes for the first two, four more for the node's)" >&2
  mkdir -p "$work/kube"
  staging=v0.${KUBE_VERSION#v1.}
  pkgs=()
  for c in "${missing[@]}"; do
    case $c in
      kubectl) pkgs+=(k8s.io/kubernetes/cmd/kubectl) ;;
      *) pkgs+=("k8s.io/kubernetes/cmd/$c") ;;
    esac
  done
  (
    cd "$work/kube"
    go mod init local/kube-build >/dev/null 2>&1
    gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    # k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces
    # them with local paths; point each at its published version instead.
    for m in $(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$gomod" | sort -u); do
      go mod edit -replace "$m=$m@$staging"
    done
    go mod edit -require "k8s.io/kubernetes@$KUBE_VERSION"
    {
      printf 'package main\n\nimport (\n'
      for p in "${pkgs[@]}"; do printf '\t_ "%s"\n' "$p"; done
      printf ')\n'
    } > tools.go
    go mod tidy >/dev/null 2>&1 || true
    minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
    pkg=k8s.io/component-base/version
    ldflags="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    go build -trimpath -ldflags "$ldflags" -o "$out/" "${pkgs[@]}"
  )
  for c in "${missing[@]}"; do
    mv "$out/$c" "$dir/$c"
  done
fi

echo "$dir"
