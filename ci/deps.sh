#!/usr/bin/env bash
# deps.sh: install what building and testing need on a fresh Debian 12 machine
# (as root), only when something is missing, so repeated runs cost nothing.
set -euo pipefail

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in gcc make libibverbs-dev rdma-core ibverbs-providers ibverbs-utils perftest \
	qemu-system-x86 busybox-static cpio kmod iproute2 zstd xz-utils openmpi-bin; do
	have_pkg "$p" || need+=("$p")
done
if ((${#need[@]})); then
	echo "deps: installing ${need[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
	echo "deps: Go 1.26 is required (expected at /usr/local/go/bin/go)" >&2
	exit 1
fi
