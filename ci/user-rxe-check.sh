#!/usr/bin/env bash
# user-rxe-check.sh: the rxe target as another project uses it (make
# rxe-user-check). The .deb make dist built is unpacked (dpkg-deb -x) into a
# temporary root, and its rdmabench-rxe-run, with the guest files it carries,
# runs contrib/rxe/pingpong-test.sh (rdma-core's ibv_rc_pingpong, server and
# client) from a project directory outside this repository, then the
# package's rdmabench version and devices there.
#   ci/user-rxe-check.sh [DIR]      DIR holds one rdmabench_*.deb (build/dist)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-build/dist}
die() { echo "rxe-user-check: $*" >&2; exit 1; }
debs=("$dir"/rdmabench_*.deb)
[ ${#debs[@]} = 1 ] && [ -f "${debs[0]}" ] || die "want one rdmabench_*.deb in $dir, found: ${debs[*]}"
work=$(mktemp -d "${TMPDIR:-/tmp}/rdmabench-user.XXXXXX")
trap 'rm -rf "$work"' EXIT
dpkg-deb -x "${debs[0]}" "$work/root"
runner=$work/root/usr/bin/rdmabench-rxe-run
[ -L "$runner" ] && [ -x "$runner" ] || die "the .deb has no rdmabench-rxe-run"
mkdir "$work/project"
cp "$here/../contrib/rxe/pingpong-test.sh" "$work/project/"
cd "$work/project"
echo "rxe-user-check: $(basename "${debs[0]}") unpacked in $work/root; running its rdmabench-rxe-run in $PWD"
# Then, in the same guest, the package's own rdmabench (its unpacked root
# shared in with --rw) on rxe0: its version, and the device it sees.
bin=$work/root/usr/bin/rdmabench
rc=0
out=$("$runner" --timeout 300 --rw "$work/root" -- sh -c './pingpong-test.sh && "$1" version && "$1" devices' sh "$bin" 2>&1) || rc=$?
echo "$out" | sed 's/^/  /'
[ "$rc" = 0 ] || die "rdmabench-rxe-run -- ./pingpong-test.sh exited $rc"
grep -q '^pingpong-test: PASS$' <<<"$out" || die "the pingpong test did not pass"
grep -q '^rdmabench [0-9]' <<<"$out" || die "the packaged rdmabench version said nothing"
grep -q 'rxe0' <<<"$(sed -n '/^rdmabench [0-9]/,$p' <<<"$out")" || die "the packaged rdmabench devices does not list rxe0"
# The guest booted from the unpacked package's files, not this repository's
# (or the host ran it directly, where its kernel has rxe).
grep -q -F -e "rxe-run: guest files: $work/root/usr/share/rdmabench/rxe/guest" -e "rxe-run: rxe0 present on the host" -e "rxe-run: created rxe0 on host veth0" <<<"$out" ||
	die "rdmabench-rxe-run did not use the packaged guest files"
echo "rxe-user-check: ok"
