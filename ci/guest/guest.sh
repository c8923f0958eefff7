#!/bin/bash
# rxe-run guest side: runs inside the qemu guest, chrooted into the
# read-only host root, as root.  Copied by ci/rxe-run into the per-run
# output share (mounted at /run/rxe-out) together with "cmd", which defines:
#   RXE_CWD   directory to run the command in
#   RXE_ARGV  the command (array)
#   RXE_ENV   extra environment, "NAME=value" (array)
#   RXE_RW    writable host directories, "tag path" (array)
# Writes the command's stdout+stderr to /run/rxe-out/output and its exit
# status to /run/rxe-out/rc.  Setup messages go to the serial console.
set -u
out=/run/rxe-out

fail() {
	echo "rxe-guest: $*" >/dev/console
	echo "rxe-run: guest setup failed: $*" >>"$out/output"
	echo 125 >"$out/rc.tmp" && mv "$out/rc.tmp" "$out/rc"
	exit 125
}

# shellcheck source=/dev/null
. "$out/cmd" || fail "cannot read $out/cmd"

hostname rxe-guest
ip link set lo up || fail "ip link set lo up"
ip link add veth0 type veth peer name veth1 || fail "ip link add veth0"
ip addr add 198.18.0.1/24 dev veth0 || fail "ip addr add"
ip link set veth0 up && ip link set veth1 up || fail "ip link set veth up"
rdma link add rxe0 type rxe netdev veth0 || fail "rdma link add rxe0"

# Bounded wait (10 s) for the port and the uverbs char device.
st=
for _ in $(seq 100); do
	st=$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null) || st=
	case "$st" in *ACTIVE*) [ -c /dev/infiniband/uverbs0 ] && break ;; esac
	sleep 0.1
done
case "$st" in *ACTIVE*) ;; *) fail "rxe0 port not ACTIVE (state: ${st:-none})" ;; esac
[ -c /dev/infiniband/uverbs0 ] || fail "/dev/infiniband/uverbs0 missing"
ulimit -l unlimited 2>/dev/null || true

for rw in ${RXE_RW[@]+"${RXE_RW[@]}"}; do
	tag=${rw%% *} dir=${rw#* }
	mkdir -p "$dir" 2>/dev/null
	mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 "$tag" "$dir" ||
		fail "mount of writable share $dir failed"
done

if ! cd "$RXE_CWD" 2>/dev/null; then
	fail "working directory $RXE_CWD is not visible in the guest (the guest has its own /tmp, /run, /var/tmp and /dev/shm; use a path elsewhere or --rw DIR)"
fi
echo "rxe-guest: rxe0 ACTIVE, running command in $RXE_CWD" >/dev/console

mkdir -p /tmp/go-build /tmp/xdg-config /tmp/xdg-cache
env -i \
	HOME=/root \
	PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	TERM=dumb LANG=C.UTF-8 USER=root LOGNAME=root \
	TMPDIR=/tmp GOCACHE=/tmp/go-build GOTMPDIR=/tmp GOTOOLCHAIN=local GOPROXY=off \
	XDG_CONFIG_HOME=/tmp/xdg-config XDG_CACHE_HOME=/tmp/xdg-cache \
	RXE_GUEST=1 RXE_DEVICE=rxe0 RXE_NETDEV=veth0 RXE_ADDR=198.18.0.1 \
	${RXE_ENV[@]+"${RXE_ENV[@]}"} \
	"${RXE_ARGV[@]}" >>"$out/output" 2>&1 </dev/null
rc=$?
sync
echo "$rc" >"$out/rc.tmp" && mv "$out/rc.tmp" "$out/rc"
echo "rxe-guest: command exited $rc" >/dev/console
dmesg >"$out/dmesg" 2>/dev/null
exit 0
