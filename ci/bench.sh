#!/usr/bin/env bash
# bench.sh: perftest against rdmabench on the same device, alternating
# (A B A B, PAIRS pairs) so drift hits both alike. Prints each run's figure,
# then the ratio rdmabench/perftest of the medians. Bandwidth: higher is
# better (target ratio >= 1.0); latency (t_typical, the median): lower is
# better (target ratio <= 1.0). Absolute numbers under emulation mean little.
set -uo pipefail
bin=${1:-build/rdmabench}
dev=${RDMABENCH_DEVICE:-rxe0}
gid=${RDMABENCH_GID:-1}
addr=${RDMABENCH_ADDR:-198.18.0.1}
pairs=${PAIRS:-3}
port=18515

# perftest TEST SIZE ITERS → its figure (BW average Gb/s, or t_typical µs)
perftest() {
	local test=$1 size=$2 iters=$3 extra=()
	[[ $test == *_bw ]] && extra=(--report_gbits)
	timeout 60 "ib_$test" -d "$dev" -x "$gid" -s "$size" -n "$iters" -p $port "${extra[@]}" >/dev/null 2>&1 &
	local srv=$!
	sleep 1
	local out
	out=$(timeout 60 "ib_$test" -d "$dev" -x "$gid" -s "$size" -n "$iters" -p $port "${extra[@]}" "$addr" 2>&1)
	wait $srv
	pick "$test" "$size" "$out"
}

rdmabench() {
	local test=$1 size=$2 iters=$3 extra=()
	[[ $test == *_bw ]] && extra=(--report-gbits)
	timeout 60 "$bin" serve -d "$dev" -p $port --bind 127.0.0.1 --max-clients 1 >/dev/null 2>&1 &
	local srv=$!
	sleep 0.5
	local out
	out=$(timeout 60 "$bin" "${test/_/-}" -d "$dev" -x "$gid" -s "$size" -n "$iters" -p $port "${extra[@]}" 127.0.0.1 2>&1)
	wait $srv
	pick "$test" "$size" "$out"
}

# pick the figure from the result row: BW average is column 4, t_typical column 5.
pick() {
	local test=$1 size=$2 out=$3 col=4
	[[ $test == *_lat ]] && col=5
	local v
	v=$(awk -v s="$size" -v c="$col" '$1 == s && NF >= c && $2 ~ /^[0-9]+$/ { v = $c } END { print v }' <<<"$out")
	if [ -z "$v" ]; then
		echo "bench: no result for $test $size; output was:" >&2
		echo "$out" | tail -5 >&2
		echo nan
	else
		echo "$v"
	fi
}

median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

run_case() {
	local test=$1 size=$2 iters=$3 pt=() rb=()
	[[ $test =~ ${BENCH_ONLY:-.} ]] || return 0 # BENCH_ONLY=REGEX picks cases
	for ((i = 0; i < pairs; i++)); do
		pt+=("$(perftest "$test" "$size" "$iters")")
		rb+=("$(rdmabench "$test" "$size" "$iters")")
	done
	local mp mr unit="Gb/s" goal=">= 1.0"
	mp=$(median "${pt[@]}")
	mr=$(median "${rb[@]}")
	[[ $test == *_lat ]] && unit="us (t_typical)" goal="<= 1.0"
	printf '%-10s %8s  perftest %-28s rdmabench %-28s ratio %s (target %s)\n' "$test" "$size" \
		"$(echo "${pt[*]}" | tr ' ' ,) $unit" "$(echo "${rb[*]}" | tr ' ' ,)" \
		"$(awk -v a="$mr" -v b="$mp" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "nan" }')" "$goal"
}

echo "bench: perftest $(ib_write_bw --version 2>/dev/null | head -1 | awk '{print $NF}') vs rdmabench on $dev, $pairs alternating pairs, medians"
run_case write_bw 65536 1000
run_case write_bw 1048576 100
run_case send_bw 65536 1000
run_case send_bw 1048576 100
run_case read_bw 65536 1000
run_case read_bw 1048576 100
run_case send_lat 8 3000
run_case write_lat 8 3000
run_case read_lat 8 3000
