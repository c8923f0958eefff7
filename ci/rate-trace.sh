#!/usr/bin/env bash
# rate-trace.sh: the message-rate case of make bench (write_bw -s 2 -n 50000,
# default flags, rdmabench against one long-lived server) in PAIRS
# interleaved pairs with perftest, each run with rxe's hw_counters before and
# after it and an ftrace of rxe's retransmit and RNR timers (marked per run),
# to tell what a run's retries were and when its timer fired. Run it in the
# guest, for example:
#
#   RXE_STACK=stable ci/rxe-run --timeout 600 --rw OUT -- ci/rate-trace.sh build/rdmabench OUT 8
#
# OUT gets summary (a line per run: wall time, Mpps, counters that moved),
# trace (ftrace's), each run's output and counters.end. docs/rxe.md has what it
# showed.
set -uo pipefail
bin=$(realpath "${1:-build/rdmabench}") out=${2:?OUT}
pairs=${3:-8}
dev=${RDMABENCH_DEVICE:-rxe0} gid=${RDMABENCH_GID:-1} addr=${RDMABENCH_ADDR:-198.18.0.1}
cnt=/sys/class/infiniband/$dev/ports/1/hw_counters
uname -r >"$out/uname"
snap() { for f in "$cnt"/*; do n=${f##*/}; [ "$n" = lifespan ] || echo "$n $(cat "$f")"; done | sort; }
moved() { join "$1" "$2" | awk '$3 != $2 { printf "%s+%d ", $1, $3 - $2 }'; }
T=/sys/kernel/tracing
mount -t tracefs nodev $T 2>/dev/null
if [ -w $T/set_ftrace_filter ]; then
	printf '%s\n' retransmit_timer rnr_nak_timer >$T/set_ftrace_filter
	echo function >$T/current_tracer && echo 1 >$T/tracing_on
else
	echo "rate-trace: no tracefs at $T: counters only" >&2
fi
mark() { [ -w $T/trace_marker ] && echo "$*" >$T/trace_marker; }
c0=$(mktemp) c1=$(mktemp)
"$bin" serve -d "$dev" -p 18516 --bind 127.0.0.1 >"$out/srv.log" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null; rm -f "$c0" "$c1"' EXIT
sleep 3
for ((i = 0; i < pairs; i++)); do
	snap >"$c0"
	mark "pt$i start"
	timeout 60 ib_write_bw -d "$dev" -x "$gid" -s 2 -n 50000 -p 18515 >/dev/null 2>&1 &
	ps=$!
	sleep 1
	t0=$(date +%s.%N)
	timeout 60 ib_write_bw -d "$dev" -x "$gid" -s 2 -n 50000 -p 18515 "$addr" >"$out/pt$i.log" 2>&1
	t1=$(date +%s.%N)
	mark "pt$i end"
	wait $ps
	snap >"$c1"
	echo "pt$i wall $(echo "$t1 - $t0" | bc) mpps $(awk '$1 == 2 { print $5 }' "$out/pt$i.log") $(moved "$c0" "$c1")" | tee -a "$out/summary"
	snap >"$c0"
	mark "rb$i start"
	t0=$(date +%s.%N)
	timeout 60 "$bin" write-bw -d "$dev" -x "$gid" -s 2 -n 50000 -p 18516 --json 127.0.0.1 >"$out/rb$i.json" 2>"$out/rb$i.err"
	t1=$(date +%s.%N)
	mark "rb$i end"
	snap >"$c1"
	echo "rb$i wall $(echo "$t1 - $t0" | bc) mpps $(grep -o '"msg_rate_mpps": *[0-9.e-]*' "$out/rb$i.json" | head -1 | awk '{ print $2 }') $(moved "$c0" "$c1")" | tee -a "$out/summary"
done
[ -r $T/trace ] && cp $T/trace "$out/trace"
snap >"$out/counters.end"
