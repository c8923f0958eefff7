#!/usr/bin/env bash
# deps.sh: install what building and testing need on a fresh Debian 12 machine
# (as root), only when something is missing, so repeated runs cost nothing.
# slurmd, slurmctld and munge: the two-node suite runs a real Slurm on the
# rxe guests, and TestMeshSrun one of its own on this host. prometheus-pushgateway and prometheus (for promtool): the metrics tests run
# against the real Pushgateway and promtool. dpkg-dev (dpkg-shlibdeps) and
# binutils (strip) make the packages; lintian, rpm, debootstrap and
# systemd-container (systemd-nspawn boots the clean root to run the agent's
# unit) check them (make dist-check). chromium: rdmabench report's page is opened
# headless, to show it logs nothing and asks the network for nothing.
# etcd-server: the Kubernetes tests' API server stores in it (its own etcd
# on 127.0.0.1, started by internal/kubetest, not Debian's service).
# containerd (with ctr and containerd-shim-runc-v2) and runc: the kubelet
# tests' container runtime, a containerd of the test's own
# (kubetest.StartKubelet), not Debian's service.
set -euo pipefail

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in gcc make pkg-config libibverbs-dev rdma-core ibverbs-providers ibverbs-utils perftest \
	qemu-system-x86 busybox-static cpio kmod iproute2 zstd xz-utils openmpi-bin groff-base zsh \
	slurm-client slurmd slurmctld munge curl prometheus-pushgateway prometheus dpkg-dev binutils lintian rpm debootstrap systemd-container chromium \
	etcd-server containerd runc; do
	have_pkg "$p" || need+=("$p")
done
if ((${#need[@]})); then
	echo "deps: installing ${need[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# The rxe target's newer stack (RXE_STACK=backports: kernel 6.12, qemu 10.0)
# comes from the release's backports suite. Its sources entry copies the
# URIs and key of the machine's own entry for the release, so no mirror is
# written here; apt keeps preferring the release (backports have priority
# 100), and ci/rxe-run asks for the suite's versions by name.
add_backports() {
	local codename list uris key
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	list=/etc/apt/sources.list.d/rdmabench-backports.sources
	[ -n "$codename" ] || return 0
	grep -rqs -- "$codename-backports" /etc/apt/sources.list /etc/apt/sources.list.d/ && return 0
	# shellcheck source=ci/apt-source.sh
	. "$(dirname "$0")/apt-source.sh"
	read -r uris key < <(apt_source "$codename") ||
		{ echo "deps: no apt entry for $codename to derive $codename-backports from; RXE_STACK=backports will not work" >&2; return 0; }
	echo "deps: adding $codename-backports (from the machine's $codename entry) for RXE_STACK=backports" >&2
	{
		echo "Types: deb"
		echo "URIs: $uris"
		echo "Suites: $codename-backports"
		echo "Components: main"
		[ -z "$key" ] || echo "Signed-By: $key"
	} >"$list"
	apt-get update -qq || echo "deps: apt-get update failed after adding $codename-backports" >&2
}
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
	add_backports
fi
# nccl-tests' own reader of its -J JSON files, for the test that runs it on
# ncclbench's: NVIDIA's script, so fetched (pinned by hash) into a cache
# outside the repository, where internal/ntanalyzer looks for it.
fetch_analyzer() {
	local dir file url sum tmp
	dir=${XDG_CACHE_HOME:-$HOME/.cache}/rdmabench/nccl-tests-2.19.6
	file=$dir/analyze_perf_json.py
	url=https://raw.githubusercontent.com/NVIDIA/nccl-tests/v2.19.6/tools/analyze_perf_json.py
	sum=cfe2d302edda0d898cba2cda0b1dccccf153901f0a491149df5f4991b7e24aec
	[ -n "${NCCL_TESTS_ANALYZER:-}" ] && return 0
	[ -f "$file" ] && return 0
	command -v curl >/dev/null 2>&1 || { echo "deps: no curl to fetch nccl-tests' analyze_perf_json.py; its test will skip" >&2; return 0; }
	mkdir -p "$dir"
	tmp=$(mktemp "$dir/.fetch.XXXXXX")
	if curl -fsSL --connect-timeout 10 --max-time 60 -o "$tmp" "$url" && echo "$sum  $tmp" | sha256sum -c --status; then
		mv "$tmp" "$file"
	else
		rm -f "$tmp"
		echo "deps: could not fetch $url (or its hash differs); the test that runs it will skip" >&2
	fi
}
fetch_analyzer
if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
	echo "deps: Go 1.26 is required (expected at /usr/local/go/bin/go)" >&2
	exit 1
fi
