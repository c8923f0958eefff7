#!/usr/bin/env bash
# stress.sh: the stress loop that compares the rxe target's stacks
# (ci/README.md). Runs on node 1 of the two-node target:
#
#   RXE_OOPS_PANIC=0 RXE_STACK=stable|backports ci/rxe-run --hosts 2 --timeout 1800 -- ci/stress.sh build/rdmabench
#
# Cycles through, until STRESS_MINUTES (default 10) have passed: 30 client
# sessions against one server with every 10th killed mid-run, `-a -D 1`
# sweeps both ways, 1% and 5% netem loss, `-q 64`, a 3 s link flap, and
# perftest's own spread (ib_write_bw five times). After every run it pings
# (a dead link is counted, evidenced and reset) and reads both kernels'
# logs (oopses, lockups, warnings counted). Every run and wait is bounded.
# The last lines are the figures the table in ci/README.md holds.
set -uo pipefail
bin=$(realpath "${1:-build/rdmabench}")
minutes=${STRESS_MINUTES:-10}
dev=${RXE_NETDEV:-eth0}
peer=${RXE_PEER_ADDR:-198.18.0.2}
me=${RXE_ADDR:-198.18.0.1}
[ -x "$bin" ] || { echo "stress: $bin is not executable" >&2; exit 2; }
[ "${RXE_HOSTS:-1}" = 2 ] || { echo "stress: needs the two-node target (ci/rxe-run --hosts 2)" >&2; exit 2; }
end=$(($(date +%s) + minutes * 60))
t0=$(date +%s)
runs=0 failed=0 retry=0 deaths=0 faults1=0 faults2=0 sessions=0 killed=0
pt=() # perftest write_bw MiB/s figures
faultre=$(cat "$(dirname "${BASH_SOURCE[0]}")/guest/kernel-faults")
port=21000
srv=

log() { echo "stress [$(( $(date +%s) - t0 ))s] $*"; }
start_server() {
	[ -z "$srv" ] || rxe-node 2 kill -9 "$srv" >/dev/null 2>&1
	port=$((port + 1))
	srv=$(rxe-node 2 --bg env RDMABENCH_RUN_MAIN=1 "$bin" serve --bind "$peer" -p "$port" | tail -n 1)
	for _ in $(seq 50); do
		timeout 2 bash -c "echo >/dev/tcp/$peer/$port" 2>/dev/null && return 0
		sleep 0.2
	done
	log "server on node 2 did not listen on $port"
	return 1
}
# kernels: both kernels' fault lines, counted (a new one is logged).
kernels() {
	local f1 f2
	f1=$(dmesg | grep -c -E "$faultre")
	f2=$(rxe-node 2 --timeout 30 bash -c "dmesg | grep -c -E '$faultre'" 2>/dev/null | tail -n 1)
	[[ $f2 =~ ^[0-9]+$ ]] || f2=$faults2
	if [ "$f1" != "$faults1" ] || [ "$f2" != "$faults2" ]; then
		log "KERNEL: fault lines node 1 $faults1 -> $f1, node 2 $faults2 -> $f2: $(dmesg | grep -E "$faultre" | tail -n 1)"
		faults1=$f1 faults2=$f2
	fi
}
# check: after a run, the link (a ping; the kernels every 10th run).
check() {
	((runs % 10)) || kernels
	if ! busybox ping -c 1 -W 2 "$peer" >/dev/null 2>&1 && ! busybox ping -c 2 -W 2 "$peer" >/dev/null 2>&1; then
		deaths=$((deaths + 1))
		log "LINK DEAD (death $deaths): $(rxe-evidence "stress-death-$deaths" | tr '\n' ';')"
		rxe-node 2 --timeout 60 rxe-nic-reset >/dev/null 2>&1
		busybox ping -c 2 -W 2 "$peer" >/dev/null 2>&1 || rxe-nic-reset >/dev/null 2>&1
		busybox ping -c 2 -W 2 "$peer" >/dev/null 2>&1 || { log "the link stays dead after both resets: stopping"; return 1; }
		start_server || return 1
	fi
	return 0
}
# client WHAT CMD...: one bounded run, counted.
client() {
	local what=$1 out rc
	shift
	out=$(timeout 120 "$@" 2>&1)
	rc=$?
	runs=$((runs + 1))
	if [ $rc != 0 ]; then
		failed=$((failed + 1))
		grep -q -E 'retry counter exceeded|status 12' <<<"$out" && retry=$((retry + 1))
		log "$what: exit $rc: $(grep -v -E '^ *[0-9]' <<<"$out" | tail -n 1)"
	fi
	check
}
rb() { client "$*" env RDMABENCH_RUN_MAIN=1 "$bin" "$@" --timeout 30s -p "$port" "$peer"; }

start_server || exit 1
check || exit 1
cycle=0
while [ "$(date +%s)" -lt "$end" ]; do
	cycle=$((cycle + 1))
	log "cycle $cycle"
	for i in $(seq 30); do
		[ "$(date +%s)" -lt "$end" ] || break
		sessions=$((sessions + 1))
		if ((i % 10 == 0)); then
			env RDMABENCH_RUN_MAIN=1 "$bin" write-bw -s 4096 -D 30 --timeout 30s -p "$port" "$peer" >/dev/null 2>&1 &
			sleep 1
			kill -9 $! 2>/dev/null
			wait $! 2>/dev/null
			killed=$((killed + 1))
			continue
		fi
		case $((i % 3)) in
		0) rb write-bw -s 64 -n 5 --warmup 0 ;;
		1) rb send-lat -s 64 -n 5 --warmup 0 ;;
		2) rb read-bw -s 64 -n 5 --warmup 0 ;;
		esac || break 2
	done
	[ "$(date +%s)" -lt "$end" ] || break
	log "sweeps ($runs runs so far, $failed failed)"
	rb write-bw -a -D 1 || break
	# The other way: a server on node 1, the client on node 2.
	back=$((port + 500))
	env RDMABENCH_RUN_MAIN=1 timeout 150 "$bin" serve --bind "$me" -p "$back" --max-clients 1 >/dev/null 2>&1 &
	bsrv=$!
	sleep 1
	client "read-bw -a -D 1 from node 2" rxe-node 2 --timeout 130 env RDMABENCH_RUN_MAIN=1 "$bin" read-bw -a -D 1 --timeout 30s -p "$back" "$me" || break
	kill "$bsrv" 2>/dev/null; wait "$bsrv" 2>/dev/null
	log "loss, -q 64, link flap"
	for loss in 1% 5%; do
		tc qdisc add dev "$dev" root netem loss "$loss" 2>/dev/null
		rb write-bw -s 64K -D 3
		tc qdisc del dev "$dev" root 2>/dev/null
		check || break 2
	done
	rb write-bw -q 64 -s 64K -D 3 || break
	rxe-node 2 bash -c "ip link set $dev down; sleep 3; ip link set $dev up" >/dev/null 2>&1
	sleep 2
	rb write-bw -s 64K -D 2 || break
	rb send-lat -n 1000 || break
	log "perftest"
	for _ in 1 2 3 4 5; do
		rxe-node 2 --bg timeout 30 ib_write_bw -d rxe0 -x 1 -s 65536 -D 2 -p 18515 >/dev/null
		sleep 1
		f=$(timeout 30 ib_write_bw -d rxe0 -x 1 -s 65536 -D 2 -p 18515 "$peer" 2>/dev/null | awk '$1 == 65536 { print $4 }')
		[ -n "$f" ] && pt+=("$f")
		check || break 2
	done
done
[ -z "$srv" ] || rxe-node 2 kill -9 "$srv" >/dev/null 2>&1
kernels
secs=$(($(date +%s) - t0))
hours=$(awk -v s="$secs" 'BEGIN { printf "%.3f", s / 3600 }')
spread=$(printf '%s\n' "${pt[@]:-}" | awk 'NF { n++; s += $1; q += $1 * $1; if (!m || $1 < m) m = $1; if ($1 > M) M = $1 }
	END { if (n < 2) { print "n/a"; exit } a = s / n; sd = sqrt((q - n * a * a) / (n - 1)); printf "%d runs, mean %.1f MiB/s, min %.1f, max %.1f, cv %.1f%%", n, a, m, M, 100 * sd / a }')
echo "stress: kernel $(uname -r), $secs s, $cycle cycles: $runs runs ($sessions sessions, $killed killed mid-run), $failed failed"
echo "stress: link deaths $deaths; kernel fault lines node 1 $faults1, node 2 $faults2"
echo "stress: retry-exceeded runs $retry ($(awk -v r="$retry" -v h="$hours" 'BEGIN { printf "%.1f", (h > 0 ? r / h : 0) }') per hour)"
echo "stress: perftest ib_write_bw 64 KiB -D 2 node 1 -> 2: $spread"
