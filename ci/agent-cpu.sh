#!/usr/bin/env bash
# agent-cpu.sh: the agent's own CPU for N peers (issue 39: "the agent's CPU
# use for 100 peers"), where an RDMA device exists (the rxe guest: make
# bench-agent). A prober agent probes N peers at RATE a second each; after
# they all answer, its rdmabench_agent_cpu_seconds_total and the
# responders' /proc times are read over SECONDS. The peers are N/10
# responder agents (no peers of their own), each listening on every
# loopback address and listed as 127.0.0.1 to 127.0.0.10 at its port: ten
# peers for the prober, each its own probes, replies and series, as ten
# nodes would be. A hundred Go processes would measure the guest, not the
# agent: in TCG on two vCPUs they alone saturate it.
#   ci/agent-cpu.sh BIN OUT_DIR [N=100] [SECONDS=60] [RATE=10]
# Writes OUT_DIR/agent-cpu.txt; its last line is the figure. Every wait is
# bounded; the agents are killed on exit. On the rxe target (TCG) every
# figure is the emulator's: an instruction costs many host instructions, so
# the CPU shares are an upper bound, many times a real host's.
set -euo pipefail
bin=$(realpath "$1") out=$2 n=${3:-100} secs=${4:-60} rate=${5:-10}
mkdir -p "$out"
tmp=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
die() { echo "agent-cpu: $*" >&2; for f in "$tmp"/prober.log "$tmp"/r1.log; do [ -f "$f" ] && tail -n 5 "$f" >&2; done; exit 1; }
printf 'agent-cpu-token\n' >"$tmp/token"
chmod 600 "$tmp/token"
: >"$tmp/none"
base=$((21000 + $$ % 2000 * 10))
[ $((n % 10)) = 0 ] && [ "$n" -ge 10 ] || { echo "agent-cpu: N must be a multiple of 10, got $n" >&2; exit 2; }
resp=$((n / 10))
for i in $(seq 1 "$resp"); do for h in $(seq 1 10); do echo "127.0.0.$h:$((base + i))"; done; done >"$tmp/peers"
for i in $(seq 1 "$resp"); do
	GOMAXPROCS=1 "$bin" agent --listen "0.0.0.0:$((base + i))" --peers "$tmp/none" --token-file "$tmp/token" \
		--host 127.0.0.1 2>"$tmp/r$i.log" &
	pids+=($!)
done
# A scrape that fails (a busy guest) reads as nothing, not as the end.
scrape() { curl -s --max-time 15 "http://127.0.0.1:$1/metrics" || true; }
# Each agent logs a line once it listens: cheaper to read than n scrapes.
up=0
end=$((SECONDS + 300))
while [ "$SECONDS" -lt "$end" ]; do
	up=$(cat "$tmp"/r*.log | grep -c 'serving /metrics' || true)
	[ "$up" = "$resp" ] && break
	sleep 2
done
[ "$up" = "$resp" ] || die "$up of $resp responders listen after 300 s"
echo "agent-cpu: $resp responders listen after $SECONDS s" >&2
GOMAXPROCS=1 "$bin" agent --listen "127.0.0.1:$base" --peers "$tmp/peers" --token-file "$tmp/token" \
	--host 127.0.0.1 --rate "$rate" --budget $((n * rate)) 2>"$tmp/prober.log" &
prober=$!
pids+=($prober)
reached=0
end=$((SECONDS + 300))
while [ "$SECONDS" -lt "$end" ]; do
	reached=$(scrape "$base" | awk '/^rdmabench_agent_peer_reachable\{/ && $NF == 1 { c++ } END { print c + 0 }')
	answered=$(scrape "$base" | awk '/^rdmabench_agent_rtt_seconds_count\{.*part="network"/ && $NF > 0 { c++ } END { print c + 0 }')
	[ "$reached" = "$n" ] && [ "$answered" = "$n" ] && break
	sleep 1
done
[ "$reached" = "$n" ] || die "the prober reaches $reached of $n peers after 300 s"
echo "agent-cpu: the prober reaches all $n after $SECONDS s" >&2
figures() { # cpu seconds, probes sent, probes lost, replies, of them late
	scrape "$base" | awk '
		/^rdmabench_agent_cpu_seconds_total/ { cpu = $NF }
		/^rdmabench_agent_probes_sent_total\{/ { sent += $NF }
		/^rdmabench_agent_probes_lost_total\{/ { lost += $NF }
		/^rdmabench_agent_probes_late_total\{/ { late += $NF }
		/^rdmabench_agent_rtt_seconds_count\{.*part="network"/ { got += $NF }
		END { printf "%s %d %d %d %d\n", cpu, sent, lost, got, late }'
}
ticks() { # the responders' user+system ticks, summed
	local t=0 p
	for p in "${pids[@]:0:$resp}"; do
		t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat")))
	done
	echo "$t"
}
read -r cpu0 sent0 lost0 got0 late0 <<<"$(figures)" # no /dev/fd in the guest: no <(...)
r0=$(ticks)
t0=$(date +%s.%N)
sleep "$secs"
read -r cpu1 sent1 lost1 got1 late1 <<<"$(figures)"
r1=$(ticks)
t1=$(date +%s.%N)
hz=$(getconf CLK_TCK)
export DEVS="$(ls /sys/class/infiniband 2>/dev/null | tr "\n" " ")"
awk -v n="$n" -v rate="$rate" -v c0="$cpu0" -v c1="$cpu1" -v s0="$sent0" -v s1="$sent1" -v l0="$lost0" -v l1="$lost1" \
	-v g0="$got0" -v g1="$got1" -v a0="$late0" -v a1="$late1" -v r0="$r0" -v r1="$r1" -v hz="$hz" -v resp="$resp" -v t0="$t0" -v t1="$t1" -v smp="$(nproc)" '
	BEGIN {
		el = t1 - t0
		printf "host: %d CPUs, RDMA devices: %s\n", smp, ENVIRON["DEVS"]
		printf "window: %.1f s; prober: %d peers at %g probes a second each\n", el, n, rate
		printf "probes sent %d (%.0f a second), replies %d (late %d, %.3f%%), lost %d (%.3f%%)\n", s1 - s0, (s1 - s0) / el, g1 - g0, a1 - a0, 100 * (a1 - a0) / (s1 - s0), l1 - l0, 100 * (l1 - l0) / (s1 - s0)
		printf "responders: %.2f%% of a CPU each on average (%d of them, each answering %g probes a second)\n", 100 * (r1 - r0) / hz / el / resp, resp, 10 * rate
		printf "agent CPU for %d peers: %.2f%% of a CPU (%.1f us a probe sent and answered)\n", n, 100 * (c1 - c0) / el, 1e6 * (c1 - c0) / (s1 - s0)
	}' | tee "$out/agent-cpu.txt"
