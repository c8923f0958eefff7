#!/usr/bin/env bash
# dist-check.sh: check the packages make dist built (make dist-check).
#   ci/dist-check.sh [DIR]      DIR holds one rdmabench_*.deb and one .rpm (build/dist)
#   ci/dist-check.sh --container [DIR]   and 4.
# 1. the .deb's dependencies and files, and lintian on it (every tag left is
#    in packaging/lintian-overrides, with why);
# 2. the .rpm's requires (rpm -qpR) and files (rpm -qpl), exactly;
# 3. the .deb installed with apt-get into a fresh copy of a clean Debian 12
#    root (debootstrap --variant=minbase: no Go, no headers), its
#    dependencies from the mirror, and run there from /usr/bin;
# 4. with --container, packaging/Containerfile built with podman on a local
#    image of that root (no registry is reached) and its binaries run in it.
# The root is made once from the mirror of the machine's own apt entry
# (ci/apt-source.sh) and cached as a tarball under ~/.cache/rdmabench-dist,
# keyed by suite and architecture; DIST_SUITE picks another suite.
# Needs root (chroot), lintian, rpm and debootstrap (ci/deps.sh); podman for
# --container (apt-get install podman; not in deps.sh, as make test needs none).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
container=0
if [ "${1:-}" = --container ]; then container=1; shift; fi
dir=${1:-build/dist}
suite=${DIST_SUITE:-bookworm}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/rdmabench-dist
start=$SECONDS

die() { echo "dist-check: $*" >&2; exit 1; }
step() { printf 'dist-check: %s (%ss)\n' "$*" $((SECONDS - start)); }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap and chroot)"
tools=(lintian rpm debootstrap dpkg-deb zstd)
[ "$container" = 0 ] || tools+=(podman)
for t in "${tools[@]}"; do
	command -v "$t" >/dev/null || die "no $t here ($([ "$t" = podman ] && echo "apt-get install podman" || echo "ci/deps.sh installs it"))"
done
one() { # the one file matching a pattern in $dir
	local f=("$dir"/$1)
	[ ${#f[@]} = 1 ] && [ -f "${f[0]}" ] || die "want one $1 in $dir, found: ${f[*]}"
	echo "${f[0]}"
}
deb=$(one 'rdmabench_*.deb')
rpmf=$(one 'rdmabench-*.rpm')

# expect WHAT: compare stdin with the expected list on fd 3.
expect() {
	local got want
	got=$(sort) want=$(sort <&3)
	[ "$got" = "$want" ] && return 0
	echo "dist-check: $1 differ (- expected, + found):" >&2
	diff <(echo "$want") <(echo "$got") | sed -n 's/^</-/p; s/^>/+/p' >&2
	exit 1
}

# The same files in both packages, but for where zsh looks (Debian:
# vendor-completions, RPM distributions: site-functions) and the files
# only a .deb has.
files() { # deb|rpm
	local zsh=vendor-completions
	[ "$1" = deb ] || zsh=site-functions
	cat <<-EOF
		/usr/bin/rdmabench
		/usr/bin/ncclbench
		/usr/share/man/man1/rdmabench.1.gz
		/usr/share/man/man1/ncclbench.1.gz
		/usr/share/bash-completion/completions/rdmabench
		/usr/share/bash-completion/completions/ncclbench
		/usr/share/zsh/$zsh/_rdmabench
		/usr/share/zsh/$zsh/_ncclbench
		/usr/share/doc/rdmabench/README.md
		/usr/share/doc/rdmabench/copyright
		/usr/share/rdmabench/slurm/rdmabench-healthcheck
		/usr/share/rdmabench/slurm/prolog-rdmabench
		/usr/share/rdmabench/slurm/mesh.sbatch
		/usr/share/rdmabench/slurm/rdmabench.nhc
		/usr/bin/rdmabench-rxe-run
		/usr/share/doc/rdmabench/rxe-run.md
		/usr/share/man/man1/rdmabench-rxe-run.1.gz
	EOF
	printf '/usr/share/rdmabench/rxe/%s\n' rxe-run rxe-selftest guest/guest.sh guest/init guest/rxe-evidence guest/rxe-nic-reset \
		guest/rxe-node guest/rxe-rsh guest/kernel-faults guest/modules
	(cd "$here/.." && printf '/usr/share/doc/rdmabench/%s\n' docs/*.md docs/reference/*.md)
	[ "$1" != deb ] || printf '%s\n' /usr/share/doc/rdmabench/changelog.Debian.gz /usr/share/lintian/overrides/rdmabench
}

# 1. The .deb.
step "deb: $deb"
dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/^ *//; s/ *(.*//' |
	expect "the .deb's dependencies" 3<<<$'libc6\nlibibverbs1'
dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { sub(/^\./, "", $6); print $6 }' | expect "the .deb's files" 3< <(files deb)
# lintian as nobody, as it asks (as root it warns, and it exited 2 here on a
# clean package); --show-overrides would make it exit 2 too.
lint=$(mktemp -d)
chmod 755 "$lint" && cp "$deb" "$lint/" && chmod 644 "$lint/$(basename "$deb")"
rc=0
# From the package's own directory: nobody cannot enter a checkout under
# root's home (0700), and lintian fails at once in a directory it cannot
# enter ("Can't cd to /root/...").
out=$(cd "$lint" && runuser -u nobody -- env HOME="$lint" lintian --display-info --pedantic \
	--fail-on error,warning,info,pedantic "$lint/$(basename "$deb")" 2>&1) || rc=$?
rm -rf "$lint"
[ "$rc" = 0 ] || { echo "$out" >&2; die "lintian: tags not in packaging/lintian-overrides (above)"; }
step "lintian: clean but for the $(grep -c '^rdmabench:' "$here/../packaging/lintian-overrides") tags overridden in packaging/lintian-overrides"

# 2. The .rpm: it needs the verbs library and nothing else (libc is in
# every RPM distribution's base; nfpm adds no rpmlib() requires).
step "rpm: $rpmf"
rpm -qpR "$rpmf" 2>/dev/null | sed 's/ *$//' | expect "the .rpm's requires" 3<<<libibverbs
rpm -qpl "$rpmf" 2>/dev/null | expect "the .rpm's files" 3< <(files rpm)

# 3. The clean root, made once.
arch=$(dpkg --print-architecture)
tarball=$cache/debian-$suite-$arch-minbase.tar.zst
if [ ! -f "$tarball" ]; then
	# shellcheck source=ci/apt-source.sh
	. "$here/apt-source.sh"
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	read -r mirror key < <(apt_source "$suite" || apt_source "$codename") ||
		die "no apt entry for $suite or $codename here to take a mirror from"
	step "making a clean $suite root with debootstrap from $mirror (once; cached in $tarball)"
	mkdir -p "$cache"
	build=$(mktemp -d "$cache/.root.XXXXXX")
	trap 'rm -rf --one-file-system "$build"' EXIT
	debootstrap --variant=minbase --arch="$arch" ${key:+--keyring="$key"} "$suite" "$build/root" "$mirror" \
		>"$build/debootstrap.log" 2>&1 || { tail -n 20 "$build/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
	rm -rf "$build/root/var/cache/apt/archives/"*.deb "$build/root/var/lib/apt/lists/"*
	tar -C "$build/root" --zstd -cf "$build/root.tar.zst" .
	mv "$build/root.tar.zst" "$tarball"
	rm -rf --one-file-system "$build"
	trap - EXIT
fi

# A fresh copy each run; /proc for the tools (rdmabench version reads
# /proc/self/maps for the libibverbs it loaded); no /sys, so no RDMA device.
root=$(mktemp -d "${TMPDIR:-/tmp}/rdmabench-dist-check.XXXXXX")
cleanup() {
	mountpoint -q "$root/proc" && umount "$root/proc"
	mountpoint -q "$root/proc" || rm -rf --one-file-system "$root"
}
trap cleanup EXIT
tar -C "$root" --zstd -xf "$tarball"
mount -t proc proc "$root/proc"
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp "$deb" "$root/tmp/"
step "root ready: $root"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }
in_root sh -c '! command -v go && [ ! -e /usr/include/infiniband ]' >/dev/null ||
	die "the root has Go or the verbs headers; it must be as bare as a cluster node"
in_root apt-get update -qq >/dev/null || die "apt-get update in the root failed"
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "/tmp/$(basename "$deb")" \
	>"$root/tmp/install.log" 2>&1 || { cat "$root/tmp/install.log" >&2; die "apt-get install of the .deb failed"; }
step "installed $(basename "$deb") with $(grep -c '^Setting up' "$root/tmp/install.log") packages set up"

# rdmabench version: the version, and the libibverbs the package pulled in.
out=$(in_root /usr/bin/rdmabench version) || die "rdmabench version failed: $out"
echo "$out" | sed 's/^/  /'
grep -q '^  libibverbs loaded: .*/libibverbs\.so\.1' <<<"$out" || die "rdmabench version names no loaded libibverbs"
out=$(in_root /usr/bin/ncclbench version) || die "ncclbench version failed: $out"
echo "$out" | sed 's/^/  /'
# rdmabench devices with no RDMA device: one line on stderr, exit 1.
rc=0
out=$(in_root /usr/bin/rdmabench devices 2>&1 >/dev/null) || rc=$?
echo "  rdmabench devices: exit $rc: $out"
[ "$rc" = 1 ] || die "rdmabench devices exited $rc with no RDMA device, want 1"
[ "$(wc -l <<<"$out")" = 1 ] && grep -q '^rdmabench devices: ' <<<"$out" ||
	die "rdmabench devices with no RDMA device said more than one line"
# contrib/slurm's scripts, where slurm.conf and nhc.conf name them: each
# parses (bash: NHC checks are bash), the programs are executable, and the
# HealthCheckProgram, on this root that has no RDMA device, drains the node
# with the fault codes (scontrol here is echo: it prints what it is told).
in_root bash -c 'for f in /usr/share/rdmabench/slurm/*; do bash -n "$f" || exit 1; done
	[ -x /usr/share/rdmabench/slurm/rdmabench-healthcheck ] && [ -x /usr/share/rdmabench/slurm/prolog-rdmabench ]' ||
	die "contrib/slurm's scripts do not parse or are not executable"
out=$(in_root env SCONTROL=echo SLURMD_NODENAME=n1 /usr/share/rdmabench/slurm/rdmabench-healthcheck 2>/dev/null) ||
	die "the HealthCheckProgram failed: $out"
echo "  rdmabench-healthcheck without an RDMA device: scontrol $out"
grep -q '^update nodename=n1 state=drain reason=rdmabench: RB101 ' <<<"$out" ||
	die "the HealthCheckProgram did not drain a node without RDMA devices with RB101"
# The completions load in bash, and removal leaves nothing behind.
in_root bash -c '. /usr/share/bash-completion/completions/rdmabench && complete -p rdmabench' >/dev/null ||
	die "the bash completion does not load"
in_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq rdmabench >/dev/null 2>&1 || die "apt-get purge rdmabench failed"
[ ! -e "$root/usr/bin/rdmabench" ] && [ ! -e "$root/usr/share/doc/rdmabench" ] || die "apt-get purge left files behind"
step "the .deb: ok"
[ "$container" = 1 ] || exit 0

# 4. The container, on an image of the clean root (made once), with only
# the .deb in its build context.
base=localhost/rdmabench-dist-base:$suite-$arch
image=localhost/rdmabench:dist-check
if ! podman image exists "$base"; then
	zstd -dc "$tarball" | podman import - "$base" >/dev/null || die "podman import of $tarball failed"
fi
ctx=$root/tmp/context
mkdir "$ctx" && cp "$deb" "$ctx/"
# Chroot isolation: an OCI runtime (crun) refuses to start here (a VM that
# may not set rlimits, hybrid cgroups), and a build needs none this way.
podman build -q --isolation chroot --build-arg BASE="$base" -f "$here/../packaging/Containerfile" -t "$image" "$ctx" \
	>"$root/tmp/build.log" 2>&1 || { cat "$root/tmp/build.log" >&2; die "podman build failed"; }
step "container built: $image"
# The image's binaries run by a build step on it, for the same reason.
printf 'FROM %s\nRUN /usr/bin/rdmabench version && /usr/bin/ncclbench version\n' "$image" >"$ctx/Check"
out=$(podman build --isolation chroot -f "$ctx/Check" -t "$image-run" "$ctx" 2>&1) || { echo "$out" >&2; die "the container's binaries failed"; }
out=$(grep -E '^(rdmabench|ncclbench) |^  ' <<<"$out")
echo "$out" | sed 's/^/  /'
grep -q '^  libibverbs loaded: .*/libibverbs\.so\.1' <<<"$out" || die "rdmabench version in the container names no loaded libibverbs"
grep -q '^ncclbench ' <<<"$out" || die "ncclbench version in the container said nothing"
podman image rm "$image-run" "$image" >/dev/null
step "the container: ok"
