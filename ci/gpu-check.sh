#!/usr/bin/env bash
# gpu-check.sh: one-command check of ncclbench on a machine with NVIDIA GPUs.
#
#   ci/gpu-check.sh            # from the repository root
#   NCCL_LIB=/path/libnccl.so.2 ci/gpu-check.sh
#   MAX_BYTES=1G ci/gpu-check.sh
#
# It finds NCCL (the system's, or the copy a PyTorch install brought in the
# nvidia-nccl-cu* wheel), builds ncclbench if needed, then runs all_reduce and
# all_gather with result checking over the GPUs present:
#   - one process driving every GPU (-g N),
#   - one process per GPU through ncclbench's own rendezvous (no MPI),
#   - with one GPU: a single rank, and two ranks sharing the GPU when
#     NCCL >= 2.30 allows it (NCCL_MULTI_RANK_GPU_ENABLE=1).
# It prints every table and exits non-zero if any run fails or finds wrong
# results.
set -u -o pipefail

cd "$(dirname "$0")/.." || exit 1
export PATH="/usr/local/go/bin:$PATH"

MIN_BYTES=${MIN_BYTES:-8}
MAX_BYTES=${MAX_BYTES:-256M}
FACTOR=${FACTOR:-2}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
TIMEOUT=${TIMEOUT:-300} # seconds for each run
BIN=${NCCLBENCH:-build/ncclbench}

say() { printf '\n=== %s\n' "$*"; }
die() { printf 'gpu-check: %s\n' "$*" >&2; exit 1; }

# --- GPUs -----------------------------------------------------------------
command -v nvidia-smi >/dev/null 2>&1 || die "nvidia-smi not found: no NVIDIA driver on this machine"
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
	NGPU=$(awk -F, '{print NF}' <<<"$CUDA_VISIBLE_DEVICES")
fi
[ "$NGPU" -ge 1 ] 2>/dev/null || die "nvidia-smi lists no GPU"
say "GPUs ($NGPU)"
nvidia-smi -L

# --- NCCL -----------------------------------------------------------------
find_nccl() {
	if [ -n "${NCCL_LIB:-}" ]; then
		echo "$NCCL_LIB"
		return
	fi
	# The system loader's copy (ldconfig cache or LD_LIBRARY_PATH).
	local p
	p=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')
	if [ -n "$p" ]; then
		echo "$p"
		return
	fi
	local d
	for d in ${LD_LIBRARY_PATH//:/ }; do
		if [ -e "$d/libnccl.so.2" ]; then
			echo "$d/libnccl.so.2"
			return
		fi
	done
	# The pip wheel (nvidia-nccl-cu12/cu13), e.g. installed with PyTorch.
	local py
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
    for f in glob.glob(os.path.join(r, "nvidia", "nccl", "lib", "libnccl.so.2")):
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

# --- build ------------------------------------------------------------------
if [ ! -x "$BIN" ] || [ -n "$(find cmd/ncclbench nccl ncclog -newer "$BIN" -name '*.go' 2>/dev/null | head -1)" ]; then
	say "building $BIN"
	mkdir -p "$(dirname "$BIN")"
	go build -o "$BIN" ./cmd/ncclbench || die "go build failed"
fi

FAILED=0
COMMON=(-b "$MIN_BYTES" -e "$MAX_BYTES" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" -c 1 -T "$TIMEOUT")

# run_single COLL ARGS...: one process; its output is also kept in $LAST_OUT.
LAST_OUT=$(mktemp)
trap 'rm -f "$LAST_OUT"' EXIT
run_single() {
	local coll=$1
	shift
	say "ncclbench $coll ${COMMON[*]} $*"
	timeout $((TIMEOUT + 60)) "$BIN" "$coll" "${COMMON[@]}" "${LIBARGS[@]}" "$@" >"$LAST_OUT"
	local rc=$?
	cat "$LAST_OUT"
	if [ $rc -ne 0 ]; then
		echo "gpu-check: FAILED: $coll $* (exit $rc)"
		FAILED=1
	fi
	return $rc
}

# run_multi N COLL ARGS...: N processes on this node meeting through
# ncclbench's rendezvous, launched the way torchrun would.
run_multi() {
	local n=$1 coll=$2
	shift 2
	local port=$((29500 + RANDOM % 10000))
	local dir
	dir=$(mktemp -d)
	say "$n processes: ncclbench $coll ${COMMON[*]} $* (MASTER_PORT=$port)"
	local pids=() r
	for ((r = 0; r < n; r++)); do
		RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
			timeout $((TIMEOUT + 60)) "$BIN" "$coll" "${COMMON[@]}" "${LIBARGS[@]}" "$@" >"$dir/out.$r" 2>"$dir/err.$r" &
		pids+=($!)
	done
	local rc=0 x
	for ((r = 0; r < n; r++)); do
		wait "${pids[$r]}"
		x=$?
		[ $x -ne 0 ] && rc=$x
	done
	cat "$dir/out.0"
	for ((r = 0; r < n; r++)); do
		if [ -s "$dir/err.$r" ]; then
			sed "s/^/[rank $r] /" "$dir/err.$r"
		fi
	done
	rm -rf "$dir"
	if [ $rc -ne 0 ]; then
		echo "gpu-check: FAILED: $n processes $coll $* (exit $rc)"
		FAILED=1
	fi
	return $rc
}

# First run also tells us the NCCL version (header: "... NCCL 2.21.5").
VERSION=""
for coll in all_reduce all_gather; do
	run_single "$coll" -g "$NGPU"
	[ -z "$VERSION" ] && VERSION=$(sed -n 's/^# ncclbench .* NCCL \([0-9.]*\)$/\1/p' "$LAST_OUT" | head -1)
done
say "NCCL version: ${VERSION:-unknown}"

if [ "$NGPU" -gt 1 ]; then
	for coll in all_reduce all_gather; do
		run_multi "$NGPU" "$coll"
	done
else
	# One GPU: two ranks on it need NCCL >= 2.30 and an explicit opt-in.
	major=${VERSION%%.*}
	rest=${VERSION#*.}
	minor=${rest%%.*}
	if [ -n "$VERSION" ] && { [ "$major" -gt 2 ] || { [ "$major" -eq 2 ] && [ "$minor" -ge 30 ]; }; }; then
		export NCCL_MULTI_RANK_GPU_ENABLE=1
		for coll in all_reduce all_gather; do
			run_multi 2 "$coll"
		done
		unset NCCL_MULTI_RANK_GPU_ENABLE
	else
		say "skipping 2 ranks on one GPU: needs NCCL >= 2.30 (have ${VERSION:-unknown})"
	fi
fi

if [ $FAILED -ne 0 ]; then
	say "gpu-check: FAILED (see above)"
	exit 1
fi
say "gpu-check: all runs passed"
