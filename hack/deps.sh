#!/usr/bin/env bash
# Installs the Debian packages `make test` needs besides Go, when some are
# missing: a C compiler (the race detector uses cgo), shellcheck (make
# verify's actionlint checks the workflows' scripts with it), the one-node
# cluster's container runtime, CNI plugins, iptables, conntrack and ip
# (internal/testenv/cluster says why), and Chromium, Node.js and npm for the
# browser tests (Chromium runs there with --no-sandbox, as root).
#
# As root with apt-get it installs them; otherwise it prints the apt-get
# command to run and fails. `make test` and .ci/run call it.
set -euo pipefail

missing=()
need() { # need PACKAGE CHECK...: PACKAGE is missing unless CHECK succeeds.
  local pkg=$1
  shift
  "$@" >/dev/null 2>&1 || missing+=("$pkg")
}
has() { command -v "$1"; }
# Debian puts iptables, conntrack and ip under /usr/sbin, which a user's
# PATH may leave out.
has_sbin() { command -v "$1" || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]; }

need gcc has gcc
need libc6-dev test -e /usr/include/stdio.h
need shellcheck has shellcheck
need containerd has containerd
need runc has runc
need containernetworking-plugins test -x /usr/lib/cni/bridge
need iptables has_sbin iptables
need conntrack has_sbin conntrack
need iproute2 has_sbin ip
need chromium has chromium
# Node.js from elsewhere (NodeSource) brings its own npm, and conflicts
# with Debian's: ask for each only when its command is missing.
need nodejs has node
need npm has npm

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if ! command -v apt-get >/dev/null; then
  cat >&2 <<EOF
hack/deps.sh: the tests need these Debian packages, and this machine has no apt-get:
  ${missing[*]}
Install them (or your system's equivalents), then run make test again.
EOF
  exit 1
fi

if [ "$(id -u)" -ne 0 ]; then
  cat >&2 <<EOF
hack/deps.sh: the tests need these Debian packages, and installing them takes root:
  ${missing[*]}
Run, then make test again (which needs root for the one-node cluster anyway):
  sudo apt-get update && sudo apt-get install -y ${missing[*]}
EOF
  exit 1
fi

echo "hack/deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Wait for another apt-get (a second make test, say) rather than fail.
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null
