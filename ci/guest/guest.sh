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
#
# Two-node target (rxe-run --hosts 2; the kernel command line says
# rxe.node=N rxe.hosts=2): rxe0 sits on the virtio NIC at 198.18.0.N, and a
# mailbox share (9p, mount_tag rxembox) joins the nodes. Node 1 runs the
# command; node 2 runs the agent below, which executes what `rxe-node 2 …`
# drops into the mailbox. The mailbox is a host directory, not the network,
# so rxe-node keeps working while the fault suite takes the link down.
set -u
out=/run/rxe-out
mbox=/run/rxe-mbox
node=1 hosts=1
for a in $(cat /proc/cmdline); do
	case "$a" in
	rxe.node=*) node=${a#rxe.node=} ;;
	rxe.hosts=*) hosts=${a#rxe.hosts=} ;;
	esac
done

fail() {
	echo "rxe-guest: $*" >/dev/console
	# Node 1 waits for node 2: tell it node 2 will not come.
	[ "$node" = 1 ] || [ ! -d "$mbox" ] || : >"$mbox/failed.$node"
	echo "rxe-run: guest setup failed: $*" >>"$out/output"
	echo 125 >"$out/rc.tmp" && mv "$out/rc.tmp" "$out/rc"
	exit 125
}

# shellcheck source=/dev/null
. "$out/cmd" || fail "cannot read $out/cmd"

ip link set lo up || fail "ip link set lo up"
# The control groups a node has (slurmd will not start without them).
mountpoint -q /sys/fs/cgroup || mount -t cgroup2 cgroup2 /sys/fs/cgroup ||
	fail "mount of cgroup2 on /sys/fs/cgroup failed"
addr=198.18.0.$node
if [ "$hosts" = 1 ]; then
	hostname rxe-guest
	netdev=veth0
	ip link add veth0 type veth peer name veth1 || fail "ip link add veth0"
	ip addr add "$addr/24" dev veth0 || fail "ip addr add"
	ip link set veth0 up && ip link set veth1 up || fail "ip link set veth up"
else
	hostname "rxe-node$node"
	netdev=
	for n in /sys/class/net/*; do
		case "$(cat "$n/device/vendor" 2>/dev/null)" in 0x1af4|0x8086) netdev=${n##*/}; break ;; esac
	done
	[ -n "$netdev" ] || fail "node $node: no virtio NIC"
	ip link set "$netdev" mtu 1500 || fail "ip link set $netdev mtu 1500"
	ip addr add "$addr/24" dev "$netdev" || fail "ip addr add on $netdev"
	ip link set "$netdev" up || fail "ip link set $netdev up"
	mkdir -p "$mbox"
	mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 rxembox "$mbox" ||
		fail "mount of the mailbox share failed"
	# The nodes know each other by name, as a cluster's nodes do (Slurm's
	# node list, mpirun -H, a rendezvous derived from either): the host's
	# /etc/hosts plus both nodes, laid over the read-only one.
	{ cat /etc/hosts 2>/dev/null; echo "198.18.0.1 rxe-node1"; echo "198.18.0.2 rxe-node2"; } >/run/rxe-hosts &&
		mount --bind /run/rxe-hosts /etc/hosts || fail "bind mount of /run/rxe-hosts on /etc/hosts failed"
fi
rdma link add rxe0 type rxe netdev "$netdev" || fail "rdma link add rxe0"

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
mkdir -p /tmp/go-build /tmp/xdg-config /tmp/xdg-cache
peer=
[ "$hosts" = 1 ] || peer=198.18.0.$((3 - node))
# guest_env CMD...: exec CMD in the environment every command gets, on any
# node (call it in a subshell: it replaces the shell, so a background
# command's $! is the command's own pid).
guest_env() {
	exec env -i \
		HOME=/root \
		PATH=/run/rxe-out/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		TERM=dumb LANG=C.UTF-8 USER=root LOGNAME=root \
		TMPDIR=/tmp GOCACHE=/tmp/go-build GOTMPDIR=/tmp GOTOOLCHAIN=local GOPROXY=off \
		XDG_CONFIG_HOME=/tmp/xdg-config XDG_CACHE_HOME=/tmp/xdg-cache \
		RXE_GUEST=1 RXE_DEVICE=rxe0 RXE_NETDEV="$netdev" RXE_ADDR="$addr" \
		RXE_HOSTS="$hosts" RXE_NODE="$node" ${peer:+RXE_PEER_ADDR="$peer"} \
		${RXE_ENV[@]+"${RXE_ENV[@]}"} \
		"$@"
}

if [ "$node" != 1 ]; then
	# The agent: each request is a file the caller renamed into place
	# (req.ID: RXE_REQ_ARGV, RXE_REQ_CWD, RXE_REQ_BG, RXE_REQ_TIMEOUT); the
	# answer is out.ID (foreground output) and done.ID (exit status, or the
	# pid of a background command), renamed into place last. Background
	# commands log to /tmp/rxe-node/PID.log on this node.
	inbox=$mbox/to$node
	mkdir -p "$inbox" /tmp/rxe-node
	# answer ID WORD VALUE: "rc N" (a command's exit status) or "pid N" (a
	# background command's pid), renamed into place last.
	answer() {
		echo "$2 $3" >"$inbox/done.tmp.$1" && mv "$inbox/done.tmp.$1" "$inbox/done.$1"
		rm -f "$inbox/run.$1"
	}
	serve_request() {
		local id=$1 RXE_REQ_ARGV=() RXE_REQ_CWD=/ RXE_REQ_BG=0 RXE_REQ_TIMEOUT=600 rc
		# shellcheck source=/dev/null
		if ! . "$inbox/run.$id"; then
			echo "rxe-node: node $node could not read the request" >"$inbox/out.$id"
			answer "$id" rc 125
			return
		fi
		if ! cd "$RXE_REQ_CWD" 2>/dev/null; then
			echo "rxe-node: $RXE_REQ_CWD is not visible on node $node (use the repository or an --rw directory)" >"$inbox/out.$id"
			answer "$id" rc 125
			return
		fi
		if [ "$RXE_REQ_BG" = 1 ]; then
			(guest_env setsid bash -c 'exec "$@"' rxe-node "${RXE_REQ_ARGV[@]}") \
				</dev/null >"/tmp/rxe-node/req-$id.log" 2>&1 &
			rc=$!
			ln -sf "req-$id.log" "/tmp/rxe-node/$rc.log"
			answer "$id" pid "$rc"
		else
			(guest_env timeout -k 5 "$RXE_REQ_TIMEOUT" bash -c '"$@"' rxe-node "${RXE_REQ_ARGV[@]}") \
				</dev/null >"$inbox/out.$id" 2>&1
			answer "$id" rc $?
		fi
	}
	# A builtin wait (read on a fifo nobody writes) instead of forking
	# sleep 20 times a second on a one-vCPU node that runs the servers.
	mkfifo /tmp/rxe-node/.tick && exec 9<>/tmp/rxe-node/.tick
	: >"$mbox/ready.$node"
	echo "rxe-guest: node $node rxe0 ACTIVE at $addr, serving rxe-node requests" >/dev/console
	while :; do
		for f in "$inbox"/req.*; do
			[ -e "$f" ] || continue
			id=${f##*/req.}
			mv "$f" "$inbox/run.$id" 2>/dev/null || continue
			serve_request "$id" &
		done
		read -r -t 0.05 -u 9 _ || true
	done
fi

if [ "$hosts" != 1 ]; then
	# Node 1 waits (bounded) for the other node's agent before the command runs.
	for _ in $(seq 1200); do
		[ -e "$mbox/ready.2" ] && break
		[ ! -e "$mbox/failed.2" ] || fail "node 2 failed to come up (its console follows)"
		sleep 0.1
	done
	[ -e "$mbox/ready.2" ] || fail "node 2 did not come up within 120 s"
fi
echo "rxe-guest: rxe0 ACTIVE at $addr, running command in $RXE_CWD" >/dev/console
(guest_env "${RXE_ARGV[@]}") >>"$out/output" 2>&1 </dev/null
rc=$?
if [ "$rc" != 0 ]; then
	# A failure keeps each node's state as it is now (rxe-run copies the
	# evidence folders into RXE_EVIDENCE_DIR); the verdict lines follow
	# the command's output.
	{
		echo "rxe-guest: the command exited $rc; each node's state now:"
		(guest_env rxe-evidence exit)
		[ "$hosts" = 1 ] || (guest_env rxe-node 2 --timeout 30 rxe-evidence exit)
	} >>"$out/output" 2>&1 </dev/null
fi
sync
echo "$rc" >"$out/rc.tmp" && mv "$out/rc.tmp" "$out/rc"
echo "rxe-guest: command exited $rc" >/dev/console
dmesg >"$out/dmesg" 2>/dev/null
exit 0
