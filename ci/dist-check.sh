#!/usr/bin/env bash
# dist-check.sh: check the packages make dist built (make dist-check).
#   ci/dist-check.sh [DIR]      DIR holds one rdmabench_*.deb and one .rpm (build/dist)
#   ci/dist-check.sh --container [DIR]   and 4.
# 1. the .deb's dependencies, files and conffiles, that it has no maintainer
#    script, and lintian on it (every tag left is in
#    packaging/lintian-overrides, with why);
# 2. the .rpm's requires (rpm -qpR), files (rpm -qpl) and config files,
#    exactly, and that it has no scriptlet;
# 3. the .deb installed with apt-get into a fresh copy of a clean Debian 12
#    root (debootstrap --variant=minbase: no Go, no headers) with systemd,
#    its dependencies from the mirror, and run there from /usr/bin; the
#    agent's units checked by that root's systemd-analyze verify, left
#    disabled by the install, and the agent run by its unit in that root
#    booted with systemd-nspawn;
# 4. with --container, packaging/Containerfile built with podman on a local
#    image of that root (no registry is reached) and its binaries run in it.
# The root is made once from the mirror of the machine's own apt entry
# (ci/apt-source.sh) and cached as a tarball under ~/.cache/rdmabench-dist,
# keyed by suite and architecture; DIST_SUITE picks another suite.
# Needs root (chroot), lintian, rpm, debootstrap and systemd-nspawn
# (ci/deps.sh); podman for --container (apt-get install podman; not in
# deps.sh, as make test needs none).
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
tools=(lintian rpm debootstrap dpkg-deb zstd systemd-nspawn)
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
# vendor-completions, RPM distributions: site-functions), where the agent's
# flags are (/etc/default, /etc/sysconfig) and the files only a .deb has.
# A man page for each of rdmabench's commands, as docs/reference has a
# page for each (TestReference holds those to the binary's commands).
files() { # deb|rpm
	local zsh=vendor-completions etc=default
	[ "$1" = deb ] || { zsh=site-functions etc=sysconfig; }
	cat <<-EOF
		/usr/bin/rdmabench
		/usr/bin/ncclbench
		/usr/share/man/man1/rdmabench.1.gz
		/usr/share/man/man1/ncclbench.1.gz
		/usr/lib/systemd/system/rdmabench-agent.service
		/usr/lib/systemd/system/rdmabench-agent@.service
		/etc/$etc/rdmabench-agent
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
	(cd "$here/../docs/reference" && for f in rdmabench-*.md; do echo "/usr/share/man/man1/${f%.md}.1.gz"; done)
	[ "$1" != deb ] || printf '%s\n' /usr/share/doc/rdmabench/changelog.Debian.gz /usr/share/lintian/overrides/rdmabench
}

# 1. The .deb.
step "deb: $deb"
dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/^ *//; s/ *(.*//' |
	expect "the .deb's dependencies" 3<<<$'libc6\nlibibverbs1'
dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { sub(/^\./, "", $6); print $6 }' | expect "the .deb's files" 3< <(files deb)
# The agent's flags are a conffile (an upgrade keeps an admin's edits), and
# no maintainer script enables or starts the agent (it has no token yet):
# the package has none at all.
debctl=$(mktemp -d)
dpkg-deb -e "$deb" "$debctl"
sed 's/ *$//' "$debctl/conffiles" | expect "the .deb's conffiles" 3<<</etc/default/rdmabench-agent
scripts=$(cd "$debctl" && ls | grep -vx -e control -e md5sums -e conffiles || true)
rm -rf "$debctl"
[ -z "$scripts" ] || die "the .deb has maintainer scripts ($scripts): it must neither enable nor start the agent"
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
# %config(noreplace) (flags c and n), and no scriptlets, as for the .deb.
rpm -qp --qf '[%{FILEFLAGS:fflags}|%{FILENAMES}\n]' "$rpmf" 2>/dev/null | awk -F'|' '$1 != ""' |
	expect "the .rpm's config files" 3<<<'cn|/etc/sysconfig/rdmabench-agent'
scripts=$(rpm -qp --scripts "$rpmf" 2>/dev/null)
[ -z "$scripts" ] || die "the .rpm has scriptlets: it must neither enable nor start the agent:
$scripts"

# The template unit is the node's unit but for the device (-d %i), its
# description and its per-device files: the same settings, kept so.
units=$here/../packaging
{ diff <(grep -v '^#' "$units/rdmabench-agent.service") <(grep -v '^#' "$units/rdmabench-agent@.service") || true; } |
	grep '^[<>]' | expect "the two agent units' differences" 3<<-'EOF'
		< Description=rdmabench agent: RDMA fabric monitor (UD probes, Prometheus /metrics)
		> Description=rdmabench agent on RDMA device %i: RDMA fabric monitor (UD probes, Prometheus /metrics)
		> EnvironmentFile=-/etc/default/rdmabench-agent@%i
		> EnvironmentFile=-/etc/sysconfig/rdmabench-agent@%i
		< ExecStart=/usr/bin/rdmabench agent --listen ${RDMABENCH_AGENT_LISTEN} --peers ${RDMABENCH_AGENT_PEERS} --token-file ${CREDENTIALS_DIRECTORY}/token $RDMABENCH_AGENT_OPTS
		> ExecStart=/usr/bin/rdmabench agent -d %i --listen ${RDMABENCH_AGENT_LISTEN} --peers ${RDMABENCH_AGENT_PEERS} --token-file ${CREDENTIALS_DIRECTORY}/token $RDMABENCH_AGENT_OPTS
	EOF

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
boot=
cleanup() {
	# A booted root first: a second TERM makes nspawn end at once. (Each
	# step may fail, and errexit holds in a trap too.)
	if [ -n "$boot" ]; then
		kill "$boot" 2>/dev/null || true
		sleep 2
		kill "$boot" 2>/dev/null || true
		wait "$boot" 2>/dev/null || true
	fi
	rm -f "${boot_log:-}"
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
# systemd, as a node has it, before the package: the agent's units are
# checked against it, and its install must leave them disabled. procps has
# the /bin/kill of the units' ExecReload, and man-db the man their
# Documentation= names, on every Debian but minbase.
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd procps man-db \
	>"$root/tmp/systemd.log" 2>&1 || { cat "$root/tmp/systemd.log" >&2; die "apt-get install systemd in the root failed"; }
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "/tmp/$(basename "$deb")" \
	>"$root/tmp/install.log" 2>&1 || { cat "$root/tmp/install.log" >&2; die "apt-get install of the .deb failed"; }
step "installed $(basename "$deb") with $(grep -c '^Setting up' "$root/tmp/install.log") packages set up"

# rdmabench version: the version, and the libibverbs the package pulled in.
out=$(in_root /usr/bin/rdmabench version) || die "rdmabench version failed: $out"
echo "$out" | sed 's/^/  /'
grep -q '^  libibverbs loaded: .*/libibverbs\.so\.1' <<<"$out" || die "rdmabench version names no loaded libibverbs"
out=$(in_root /usr/bin/ncclbench version) || die "ncclbench version failed: $out"
echo "$out" | sed 's/^/  /'
# rdmabench devices with no RDMA device: one line on stderr, exit 3 (could not measure: docs/exit-codes.md).
rc=0
out=$(in_root /usr/bin/rdmabench devices 2>&1 >/dev/null) || rc=$?
echo "  rdmabench devices: exit $rc: $out"
[ "$rc" = 3 ] || die "rdmabench devices exited $rc with no RDMA device, want 3"
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
# The agent's units: the install enabled and started nothing (no token
# yet); systemd-analyze verify, Debian 12's in the root, where ExecStart's
# /usr/bin/rdmabench is installed, finds nothing to say of either (it exits
# 0 on an unknown key or a bad value, so any output fails); and enabling
# them, as docs/packaging.md says, works offline.
for u in rdmabench-agent.service rdmabench-agent@.service; do
	state=$(in_root systemctl is-enabled "$u" 2>&1) || true
	[ "$state" = disabled ] || die "systemctl is-enabled $u after the install: $state, want disabled"
done
! find "$root/etc/systemd/system" -name 'rdmabench-agent*' | grep -q . ||
	die "the install linked the agent's units into /etc/systemd/system: $(find "$root/etc/systemd/system" -name 'rdmabench-agent*')"
rc=0
out=$(in_root systemd-analyze verify rdmabench-agent.service rdmabench-agent@mlx5_0.service 2>&1) || rc=$?
[ "$rc" = 0 ] && [ -z "$out" ] || die "systemd-analyze verify of the agent's units: exit $rc: $out"
echo "  systemd-analyze verify rdmabench-agent.service rdmabench-agent@mlx5_0.service: clean"
out=$(in_root systemd-analyze security --offline=true rdmabench-agent.service 2>&1 | tail -n 1)
echo "  systemd-analyze security rdmabench-agent.service: ${out#→ }"
in_root systemctl enable rdmabench-agent.service rdmabench-agent@mlx5_0.service >/dev/null 2>&1 &&
	[ -L "$root/etc/systemd/system/multi-user.target.wants/rdmabench-agent.service" ] &&
	[ -L "$root/etc/systemd/system/multi-user.target.wants/rdmabench-agent@mlx5_0.service" ] ||
	die "systemctl enable rdmabench-agent.service rdmabench-agent@mlx5_0.service did not link them into multi-user.target"
in_root systemctl disable rdmabench-agent.service rdmabench-agent@mlx5_0.service >/dev/null 2>&1 ||
	die "systemctl disable of the agent's units failed"
# man finds the agent's page, as a user types it, and mandb's index has
# its NAME (man-db's trigger ran on the install).
out=$(in_root env MANWIDTH=80 man rdmabench-agent 2>&1) || die "man rdmabench-agent failed: $out"
grep -q '^DESCRIPTION' <<<"$out" && grep -q '^RUNNING IT AS A SERVICE' <<<"$out" ||
	die "man rdmabench-agent has no DESCRIPTION or RUNNING IT AS A SERVICE: $(head -n 20 <<<"$out")"
out=$(in_root whatis rdmabench-agent 2>&1) || die "whatis rdmabench-agent: $out"
echo "  whatis: $out" | cut -c1-100
# The agent as systemd runs it: the root booted (systemd-nspawn, a network
# of its own), the unit enabled with a token and a peers file. This root
# has no RDMA device, so the agent exits 3 at the device and systemd
# starts it again; to get there it ran as its user of its own, read the
# token systemd handed it, read the peers file and bound its port: the
# sandbox allows all that, and no system call of it is filtered out. An
# instance of the template, also enabled, reads its own file after the
# shared one: there a peers file that is not, which must be its error.
install -d "$root/etc/rdmabench"
(umask 077 && head -c 32 /dev/urandom | base64 >"$root/etc/rdmabench/agent-token")
echo "peer1:9464" >"$root/etc/rdmabench/agent-peers"
echo 'RDMABENCH_AGENT_PEERS=/etc/rdmabench/agent-peers-mlx5_0' >"$root/etc/default/rdmabench-agent@mlx5_0"
in_root systemctl enable rdmabench-agent.service rdmabench-agent@mlx5_0.service >/dev/null 2>&1 ||
	die "systemctl enable rdmabench-agent.service rdmabench-agent@mlx5_0.service failed"
umount "$root/proc"
boot_log=$(mktemp)
timeout 180 systemd-nspawn --register=no --keep-unit --private-network -q --console=pipe -D "$root" -b </dev/null >"$boot_log" 2>&1 &
boot=$!
journal() { journalctl --no-pager -q -D "$root/var/log/journal" -u "$1" 2>/dev/null; }
# An agent's first line of its own, where it stopped (or that it serves).
first() { { grep -m 1 -E 'rdmabench\[[0-9]+\]: ' || true; } | sed 's/^.*rdmabench\[[0-9]*\]: //'; }
for _ in $(seq 1 90); do
	a=$(journal rdmabench-agent.service | first) b=$(journal rdmabench-agent@mlx5_0.service | first)
	[ -n "$a" ] && [ -n "$b" ] && break
	kill -0 "$boot" 2>/dev/null || break
	sleep 1
done
kill "$boot" 2>/dev/null; wait "$boot" 2>/dev/null || true
boot=
log=$(journal rdmabench-agent.service) ilog=$(journal rdmabench-agent@mlx5_0.service)
mount -t proc proc "$root/proc"
if grep -qE 'Failed to set up credentials|Failed at step|status=31/SYS|code=killed|code=dumped' <<<"$log" ||
	! grep -qE 'RDMA device|no RDMA in this kernel|serving /metrics' <<<"$a"; then
	echo "$log" | tail -n 20 >&2
	tail -n 20 "$boot_log" >&2
	die "the agent did not run under its unit as far as the RDMA device (its journal, then the boot's, above)"
fi
echo "  rdmabench-agent.service, booted: $a" | cut -c1-160
grep -q 'agent-peers-mlx5_0' <<<"$b" || {
	echo "$ilog" | tail -n 20 >&2
	die "rdmabench-agent@mlx5_0.service did not take its peers file from /etc/default/rdmabench-agent@mlx5_0 (its journal above)"
}
echo "  rdmabench-agent@mlx5_0.service, booted: $b" | cut -c1-160
in_root systemctl disable rdmabench-agent.service rdmabench-agent@mlx5_0.service >/dev/null 2>&1 ||
	die "systemctl disable of the agent's units failed"
rm -rf "$root/etc/rdmabench" "$root/etc/default/rdmabench-agent@mlx5_0"
step "the agent's units: ok"
# The completions load in bash, and removal leaves nothing behind.
in_root bash -c '. /usr/share/bash-completion/completions/rdmabench && complete -p rdmabench' >/dev/null ||
	die "the bash completion does not load"
in_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq rdmabench >/dev/null 2>&1 || die "apt-get purge rdmabench failed"
[ ! -e "$root/usr/bin/rdmabench" ] && [ ! -e "$root/usr/share/doc/rdmabench" ] && [ ! -e "$root/etc/default/rdmabench-agent" ] &&
	[ ! -e "$root/usr/lib/systemd/system/rdmabench-agent.service" ] || die "apt-get purge left files behind"
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
