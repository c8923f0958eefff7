#!/usr/bin/env bash
# gpu-check.sh: one-command check of ncclbench on a machine with NVIDIA GPUs.
#
#   ci/gpu-check.sh                       # from a checkout (builds if Go is there)
#   NCCLBENCH=/path/ncclbench ci/gpu-check.sh   # a binary built elsewhere: no Go needed
#   NCCL_LIB=/path/libnccl.so.2 MAX_BYTES=1G ci/gpu-check.sh
#
# It finds NCCL (the system's, or the nvidia-nccl-cu12/cu13 wheel PyTorch
# brought), then, with one process per GPU meeting through ncclbench's own
# rendezvous (no MPI):
#   - runs all seven collectives with result checking (-c 1); every row has
#     an out-of-place and an in-place half (in-place alltoall and sendrecv
#     say N/A: NCCL leaves them undefined, as in nccl-tests);
#   - runs all_reduce again, kills one rank with SIGKILL mid-run, and checks
#     that every other rank stops within a minute with an error naming it.
# Before NCCL it runs rdmabench write-bw --use-cuda 0 --verify in loopback
# over rxe when this kernel can load rdma_rxe, and says so when it cannot.
# With one GPU, two ranks share it when NCCL >= 2.30 allows it
# (NCCL_MULTI_RANK_GPU_ENABLE=1); otherwise one rank runs alone and the
# killed-rank check is skipped.
# It prints every table and ends with one line: "gpu-check: PASS ..." or
# "gpu-check: FAIL ...", and exits non-zero on failure. About 3-6 minutes
# on an 8-GPU node with the defaults.
set -u -o pipefail

cd "$(dirname "$0")/.." || exit 1

MIN_BYTES=${MIN_BYTES:-8}
MAX_BYTES=${MAX_BYTES:-64M}
FACTOR=${FACTOR:-4}
ITERS=${ITERS:-10}
WARMUP=${WARMUP:-2}
TIMEOUT=${TIMEOUT:-120} # -T: seconds one collective may take
RUN_LIMIT=${RUN_LIMIT:-240} # seconds one ncclbench run may take in all
BIN=${NCCLBENCH:-build/ncclbench}
COLLS=(all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv)

say() { printf '\n=== %s\n' "$*"; }
die() {
	printf 'gpu-check: FAIL: %s%s\n' "$*" "${RXE_NOTE:+; $RXE_NOTE}"
	exit 1
}

# --- GPUs -----------------------------------------------------------------
command -v nvidia-smi >/dev/null 2>&1 || die "nvidia-smi not found: no NVIDIA driver on this machine"
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
	NGPU=$(awk -F, '{print NF}' <<<"$CUDA_VISIBLE_DEVICES")
fi
[ "$NGPU" -ge 1 ] 2>/dev/null || die "nvidia-smi lists no GPU"
say "GPUs ($NGPU)"
nvidia-smi -L

# --- GPU memory under the verbs tests, over rxe ------------------------------
# rdmabench write-bw --use-cuda 0 --verify in loopback on a Soft-RoCE device,
# when this kernel can load rdma_rxe (ci/rxe-run's host mode; never a VM
# here). rxe imports no dma-buf and takes GPU memory through ibv_reg_mr only
# where a peer-memory client hooks it in (MLNX_OFED's ib_core), so a refused
# registration is a finding about this machine, reported in its one line;
# only a run that fails otherwise is a FAIL.
RXE_NOTE=""
rxe_gpu_check() {
	local bin=${RDMABENCH:-build/rdmabench} out rc
	if [ ! -x "$bin" ]; then
		command -v go >/dev/null 2>&1 || export PATH="/usr/local/go/bin:$PATH"
		if ! command -v go >/dev/null 2>&1 || ! go build -o "$bin" ./cmd/rdmabench 2>/dev/null; then
			RXE_NOTE="GPU memory over rxe not checked: no $bin and it could not be built (needs Go and libibverbs-dev; or pass RDMABENCH=/path/rdmabench)"
			return
		fi
	fi
	say "rdmabench write-bw --use-cuda 0 --verify, loopback over rxe"
	out=$(RXE_MODE=host RXE_NO_INSTALL=1 ci/rxe-run --timeout 180 -- "$bin" write-bw --loopback --use-cuda 0 --verify -n 2000 -s 64K 2>&1)
	rc=$?
	echo "$out"
	case $rc in
	0) RXE_NOTE="GPU memory over rxe: write-bw --use-cuda 0 --verify passed ($(sed -n 's/^ Memory *: \(GPU[^;]*\);.*/\1/p' <<<"$out"))" ;;
	125) RXE_NOTE="GPU memory over rxe not checked: this kernel cannot load rdma_rxe here (ci/rxe-run host mode: $(grep '^rxe-run:' <<<"$out" | tail -1))" ;;
	*)
		if grep -q 'registration' <<<"$out"; then
			RXE_NOTE="GPU memory over rxe: registration refused on this machine: $(grep 'registration' <<<"$out" | tail -1)"
		else
			RXE_NOTE="GPU memory over rxe: write-bw --use-cuda 0 failed (exit $rc)"
			FAILS+=("write-bw --use-cuda over rxe (exit $rc)")
		fi
		;;
	esac
	echo "$RXE_NOTE"
}
FAILS=()
rxe_gpu_check

# --- NCCL -----------------------------------------------------------------
find_nccl() {
	if [ -n "${NCCL_LIB:-}" ]; then
		echo "$NCCL_LIB"
		return
	fi
	local p d py
	p=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')
	if [ -n "$p" ]; then
		echo "$p"
		return
	fi
	for d in ${LD_LIBRARY_PATH//:/ }; do
		if [ -e "$d/libnccl.so.2" ]; then
			echo "$d/libnccl.so.2"
			return
		fi
	done
	# The pip wheels (nvidia-nccl-cu12 / -cu13), e.g. installed with PyTorch.
	for py in python3 python; do
		command -v "$py" >/dev/null 2>&1 || continue
		p=$("$py" - <<'EOF' 2>/dev/null
import glob, os, site, sys
roots = []
try:
    roots += site.getsitepackages()
except Exception:
    pass
try:
    roots.append(site.getusersitepackages())
except Exception:
    pass
roots += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
for r in roots:
    for sub in ("nvidia/nccl/lib", "nvidia/cu13/lib"):
        for f in glob.glob(os.path.join(r, sub, "libnccl.so.2")):
            print(f)
            sys.exit(0)
EOF
)
		if [ -n "$p" ]; then
			echo "$p"
			return
		fi
	done
}
NCCL=$(find_nccl)
[ -n "$NCCL" ] || die "NCCL not found: install it (apt install libnccl2, or pip install nvidia-nccl-cu12) or set NCCL_LIB=/path/libnccl.so.2"
say "NCCL: $NCCL"
LIBARGS=(--nccl-lib "$NCCL")
if [ -n "${CUDART_LIB:-}" ]; then
	LIBARGS+=(--cudart-lib "$CUDART_LIB")
fi

# --- ncclbench ------------------------------------------------------------
if [ ! -x "$BIN" ]; then
	command -v go >/dev/null 2>&1 || export PATH="/usr/local/go/bin:$PATH"
	command -v go >/dev/null 2>&1 || die "$BIN not found and no Go to build it: build it elsewhere (go build -o ncclbench ./cmd/ncclbench) and pass NCCLBENCH=/path/ncclbench"
	say "building $BIN"
	mkdir -p "$(dirname "$BIN")"
	go build -o "$BIN" ./cmd/ncclbench || die "go build failed"
fi

# How many ranks, and where: one per GPU; two on a lone GPU if NCCL allows.
NRANKS=$NGPU
version=$("$BIN" all_reduce -b 8 -e 8 -n 1 -w 0 "${LIBARGS[@]}" 2>&1 | sed -n 's/^# ncclbench .* NCCL \([0-9.]*\)$/\1/p' | head -1)
say "NCCL version: ${version:-unknown}"
if [ "$NGPU" -eq 1 ]; then
	major=${version%%.*}
	rest=${version#*.}
	minor=${rest%%.*}
	if [ -n "$version" ] && { [ "$major" -gt 2 ] || { [ "$major" -eq 2 ] && [ "$minor" -ge 30 ]; }; }; then
		export NCCL_MULTI_RANK_GPU_ENABLE=1
		NRANKS=2
	fi
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PORT=$((29500 + RANDOM % 10000))

# launch N COLL ARGS...: N processes meeting through the rendezvous as
# torchrun would start them; their outputs go to $WORK/out.R and err.R,
# their pids to PIDS. Each is bounded by RUN_LIMIT through LIMIT (empty
# when PIDS must be ncclbench's own pids, to kill one).
PIDS=()
LIMIT=(timeout "$RUN_LIMIT")
launch() {
	local n=$1 coll=$2 r
	shift 2
	PORT=$((PORT + 1))
	PIDS=()
	rm -f "$WORK"/out.* "$WORK"/err.*
	for ((r = 0; r < n; r++)); do
		RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT \
			"${LIMIT[@]}" "$BIN" "$coll" "${LIBARGS[@]}" "$@" >"$WORK/out.$r" 2>"$WORK/err.$r" &
		PIDS+=($!)
	done
}

show_errors() {
	local r
	for ((r = 0; r < ${#PIDS[@]}; r++)); do
		if [ -s "$WORK/err.$r" ]; then
			sed "s/^/[rank $r] /" "$WORK/err.$r"
		fi
	done
}

WRONG=0
ROWS=0
# run_case N COLL ARGS...: launch, wait for every rank, show rank 0's
# output and the ranks' errors, its rows in CASE_ROWS and its wrong values
# added to WRONG; the exit status is a failed rank's.
run_case() {
	local p rc=0 bad
	launch "$@"
	for p in "${PIDS[@]}"; do
		wait "$p" || rc=$?
	done
	cat "$WORK/out.0"
	show_errors
	CASE_ROWS=$(grep -cE '^ *[0-9]' "$WORK/out.0")
	bad=$(sed -n 's/^# Out of bounds values : \([0-9]*\).*/\1/p' "$WORK/out.0")
	WRONG=$((WRONG + ${bad:-0}))
	return $rc
}

COMMON=(-b "$MIN_BYTES" -e "$MAX_BYTES" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" -c 1 -T "$TIMEOUT")
for coll in "${COLLS[@]}"; do
	say "$NRANKS ranks: ncclbench $coll ${COMMON[*]}"
	rc=0
	run_case "$NRANKS" "$coll" "${COMMON[@]}" || rc=$?
	ROWS=$((ROWS + ${CASE_ROWS:-0}))
	if [ "$rc" -ne 0 ] || [ "${CASE_ROWS:-0}" -eq 0 ]; then
		FAILS+=("$coll (exit $rc)")
	fi
done

# --- -G: the timed iterations through a CUDA graph ---------------------------
say "$NRANKS ranks: ncclbench all_reduce ${COMMON[*]} -G 4 (CUDA graph launches)"
rc=0
run_case "$NRANKS" all_reduce "${COMMON[@]}" -G 4 || rc=$?
if [ "$rc" -ne 0 ] || ! grep -q 'graph: 4$' "$WORK/out.0"; then
	FAILS+=("all_reduce -G 4 (exit $rc)")
fi

# --- a rank killed mid-run --------------------------------------------------
KILLED=""
if [ "$NRANKS" -ge 2 ]; then
	victim=$((NRANKS - 1))
	say "$NRANKS ranks: all_reduce with rank $victim killed (SIGKILL) mid-run"
	LIMIT=() # bounded below: a minute to start, a minute after the kill
	launch "$NRANKS" all_reduce -b 1M -e 1M -n 100000000 -w 1 -c 0 -T "$TIMEOUT"
	for _ in $(seq 1 600); do
		grep -q '(elements)' "$WORK/out.0" 2>/dev/null && break
		sleep 0.1
	done
	sleep 2
	kill -KILL "${PIDS[$victim]}" 2>/dev/null
	wait "${PIDS[$victim]}" 2>/dev/null
	t0=$(date +%s)
	ok=1
	for ((r = 0; r < NRANKS; r++)); do
		[ "$r" -eq "$victim" ] && continue
		# Each survivor gets a minute from the kill.
		while kill -0 "${PIDS[$r]}" 2>/dev/null && [ $(($(date +%s) - t0)) -lt 60 ]; do
			sleep 0.2
		done
		if kill -0 "${PIDS[$r]}" 2>/dev/null; then
			echo "rank $r still running 60 s after rank $victim was killed"
			kill -KILL "${PIDS[$r]}" 2>/dev/null
			ok=0
		fi
		wait "${PIDS[$r]}"
		code=$?
		if [ "$code" -eq 0 ] || ! grep -q "rank $victim" "$WORK/err.$r"; then
			echo "rank $r: exit $code, its error does not name rank $victim"
			ok=0
		fi
	done
	took=$(($(date +%s) - t0))
	show_errors
	if [ "$ok" -eq 1 ]; then
		KILLED="killed rank $victim: every other rank stopped within ${took} s naming it"
	else
		FAILS+=("killed-rank run")
	fi
else
	KILLED="killed-rank check skipped (one rank: needs 2 GPUs, or NCCL >= 2.30 on one)"
fi

echo
if [ "${#FAILS[@]}" -eq 0 ] && [ "$WRONG" -eq 0 ]; then
	echo "gpu-check: PASS: NCCL ${version:-?}, 7 collectives x $NRANKS ranks on $NGPU GPU(s), $ROWS rows in and out of place, 0 wrong; $KILLED; $RXE_NOTE"
	exit 0
fi
echo "gpu-check: FAIL: NCCL ${version:-?}, $NRANKS ranks on $NGPU GPU(s): failed: ${FAILS[*]:-none}; out-of-bounds values: $WRONG; $KILLED; $RXE_NOTE"
exit 1
