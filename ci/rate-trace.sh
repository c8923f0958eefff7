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
# A fourth argument, another rdmabench binary (an older build), adds its run
# to each round against a long-lived server of its own, so one boot compares
# two builds with perftest; the order of a round's runs turns by one each
# round, so no tool always runs first.
#
# OUT gets summary (a line per run: wall time, Mpps, the client's user and
# system CPU, the CPU its server used meanwhile, what each CPU spent, the
# counters that moved), pairs.tsv and ratios (below), trace (ftrace's),
# each run's output, counters.end, and the guest's clocksource (HPET on the
# stable stack, whose kernel finds the TSCs unsynchronized). docs/rxe.md has
# what it showed.
set -uo pipefail
bin=$(realpath "${1:-build/rdmabench}") out=${2:?OUT}
pairs=${3:-8}
other=${4:+$(realpath "$4")}
dev=${RDMABENCH_DEVICE:-rxe0} gid=${RDMABENCH_GID:-1} addr=${RDMABENCH_ADDR:-198.18.0.1}
cnt=/sys/class/infiniband/$dev/ports/1/hw_counters
uname -r >"$out/uname"
{
	cat /sys/devices/system/clocksource/clocksource0/current_clocksource
	dmesg | grep -i -E 'clocksource|tsc' || true
} >"$out/clocksource" 2>&1
# cpu_ms PID: the CPU time (user + system) the process has used, in ms.
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); print int(($12 + $13) * 1000 / hz) }' "/proc/$1/stat" 2>/dev/null || echo 0; }
TIMEFORMAT='user %3U sys %3S'
# cpus: each CPU's user, system, softirq and idle ticks (/proc/stat);
# cpus_moved OLD NEW what each spent over a run, in ticks: where the client's
# loop and rxe's softirq work ran, together or apart.
cpus() { awk '/^cpu[0-9]/ { print $1, $2 + $3, $4, $8, $5 }' /proc/stat; }
cpus_moved() { join "$1" "$2" | awk '{ printf "%s u%d s%d si%d id%d ", $1, $6 - $2, $7 - $3, $8 - $4, $9 - $5 }'; }
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
srv=$! srvs=$!
if [ -n "$other" ]; then
	"$other" serve -d "$dev" -p 18517 --bind 127.0.0.1 >"$out/srv-other.log" 2>&1 &
	osrv=$!
	srvs="$srvs $!"
fi
trap 'kill $srvs 2>/dev/null; rm -f "$c0" "$c1" "$c0.cpu" "$c1.cpu"' EXIT
sleep 3
# run_pt NAME and run_rb: one run, a line of summary.
run_pt() {
	snap >"$c0"
	mark "$1 start"
	# perftest's server lives for one run: its CPU is its whole life's
	# (from a second before the client), read when it exits.
	{ time timeout 60 ib_write_bw -d "$dev" -x "$gid" -s 2 -n 50000 -p 18515 >/dev/null 2>&1; } 2>"$out/$1.srvtime" &
	local ps=$!
	sleep 1
	local t0 t1
	cpus >"$c0.cpu"
	t0=$(date +%s.%N)
	{ time timeout 60 ib_write_bw -d "$dev" -x "$gid" -s 2 -n 50000 -p 18515 "$addr" >"$out/$1.log" 2>&1; } 2>"$out/$1.time"
	t1=$(date +%s.%N)
	cpus >"$c1.cpu"
	mark "$1 end"
	wait $ps
	snap >"$c1"
	echo "$1 wall $(echo "$t1 - $t0" | bc) mpps $(awk '$1 == 2 { print $5 }' "$out/$1.log") $(cat "$out/$1.time") srv_ms $(awk '{ printf "%d", ($2 + $4) * 1000 }' "$out/$1.srvtime") $(cpus_moved "$c0.cpu" "$c1.cpu")$(moved "$c0" "$c1")" | tee -a "$out/summary"
}
# run_rb NAME BIN PORT SERVER_PID
run_rb() {
	snap >"$c0"
	mark "$1 start"
	local t0 t1 s0 s1
	s0=$(cpu_ms "$4")
	cpus >"$c0.cpu"
	t0=$(date +%s.%N)
	{ time timeout 60 "$2" write-bw -d "$dev" -x "$gid" -s 2 -n 50000 -p "$3" --json 127.0.0.1 >"$out/$1.json" 2>"$out/$1.err"; } 2>"$out/$1.time"
	t1=$(date +%s.%N)
	cpus >"$c1.cpu"
	s1=$(cpu_ms "$4")
	mark "$1 end"
	snap >"$c1"
	echo "$1 wall $(echo "$t1 - $t0" | bc) mpps $(grep -o '"msg_rate_mpps": *[0-9.e-]*' "$out/$1.json" | head -1 | awk '{ print $2 }') $(cat "$out/$1.time") srv_ms $((s1 - s0)) $(cpus_moved "$c0.cpu" "$c1.cpu")$(moved "$c0" "$c1")" | tee -a "$out/summary"
}
runs=(pt rb)
[ -n "$other" ] && runs+=(ob)
for ((i = 0; i < pairs; i++)); do
	for ((j = 0; j < ${#runs[@]}; j++)); do
		r=${runs[(i + j) % ${#runs[@]}]}
		case $r in
		pt) run_pt "pt$i" ;;
		rb) run_rb "rb$i" "$bin" 18516 "$srv" ;;
		ob) run_rb "ob$i" "$other" 18517 "$osrv" ;;
		esac
	done
done
[ -r $T/trace ] && cp $T/trace "$out/trace"
snap >"$out/counters.end"
# Each build against perftest, round by round, as ci/bench.sh's pairs
# (pairs.tsv; a run without a figure is a lost one), and ci/benchstat's
# median ratio, interval and verdict on them (ratios) when it is built
# beside BIN (make bench builds build/benchstat); the script's exit status is
# then benchstat's (1: a build slower than perftest, or too few rounds).
awk -v OFS='\t' -v pairs="$pairs" -v builds="${runs[*]:1}" '
	$5 ~ /^[0-9.]+([eE][-+]?[0-9]+)?$/ { n = $1; sub(/[0-9]+$/, "", n); m[n, substr($1, length(n) + 1)] = $5 }
	END {
		nb = split(builds, who, " ")
		for (w = 1; w <= nb; w++) {
			pt = ""; rb = ""
			for (i = 0; i < pairs; i++) {
				pt = pt (i ? "," : "") (("pt", i) in m ? m["pt", i] : "-")
				rb = rb (i ? "," : "") ((who[w], i) in m ? m[who[w], i] : "-")
			}
			print "write_bw 2 B " who[w] "/perftest", "higher", "Mpps", pt, rb
		}
	}' "$out/summary" >"$out/pairs.tsv"
stat=$(dirname "$bin")/benchstat
if [ -x "$stat" ]; then
	"$stat" <"$out/pairs.tsv" | tee "$out/ratios"
else
	echo "rate-trace: no $stat (go build -o $stat ./ci/benchstat): the pairs are in $out/pairs.tsv" >&2
fi
