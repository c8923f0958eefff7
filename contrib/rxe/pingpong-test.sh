#!/bin/sh
# pingpong-test.sh: an RDMA program's test as a user's repository would
# have it, run where rxe0 exists:
#
#   rdmabench-rxe-run -- ./pingpong-test.sh
#
# It runs rdma-core's ibv_rc_pingpong (ibverbs-utils) as server and client
# over rxe0, checking the data received (-c), and fails unless both finish
# their exchanges. The client retries while the server is not listening
# yet; each step is bounded in time.
set -u
dev=${RXE_DEVICE:-rxe0}
gid=${PINGPONG_GID:-1} # rxe's RoCE v2 entry of the interface's IPv4 address
iters=${PINGPONG_ITERS:-200}
log=$(mktemp -d)
trap 'kill "$server" 2>/dev/null; rm -rf "$log"' EXIT
timeout 60 ibv_rc_pingpong -c -d "$dev" -g "$gid" -n "$iters" >"$log/server" 2>&1 &
server=$!
ok=0
for _ in $(seq 50); do
	if timeout 60 ibv_rc_pingpong -c -d "$dev" -g "$gid" -n "$iters" 127.0.0.1 >"$log/client" 2>&1; then
		ok=1
		break
	fi
	# Not listening yet: the client could not connect; try again.
	grep -q "Couldn't connect" "$log/client" || break
	sleep 0.2
done
wait "$server"
src=$?
echo "server (exit $src):"
sed 's/^/  /' "$log/server"
echo "client:"
sed 's/^/  /' "$log/client"
[ "$ok" = 1 ] && [ "$src" = 0 ] && grep -q "$iters iters in" "$log/client" && grep -q "$iters iters in" "$log/server" || {
	echo "pingpong-test: FAIL"
	exit 1
}
echo "pingpong-test: PASS"
