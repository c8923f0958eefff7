#!/usr/bin/env bash
# demo.sh: what `make demo` shows on a host with an RDMA device (the rxe guest
# when there is no hardware): the devices, a bandwidth sweep, a latency table,
# the configuration check and the node's health verdict, then a 4-rank mesh
# (every rank on the one device, as 4 nodes would be on a cluster), plots of
# it all, and one HTML report of the saved files with a summary of five lines.
# Usage: ci/demo.sh [RDMABENCH [PLOT_DIR]]   (PLOT_DIR default build/demo)
set -uo pipefail
bin=$(realpath "${1:-build/rdmabench}")
out=${2:-build/demo}
mkdir -p "$out" || exit 1
echo "== rdmabench devices"
"$bin" devices || exit 1
echo
echo "== rdmabench write-bw --loopback -a (2 B .. 8 MiB), 50 iterations per size"
"$bin" write-bw --loopback -a -n 50 --warmup 5 --save "$out/write-bw.json" || exit 1
echo
echo "== rdmabench send-lat --loopback -s 8 -n 5000"
"$bin" send-lat --loopback -s 8 -n 5000 --hgrm "$out/send-lat.hgrm" || exit 1
echo
echo "== rdmabench doctor"
"$bin" doctor
rc=$?
# doctor exits 1 on FAIL findings (rxe's 1500-byte veth, say); that is a
# finding to read, not a failed demo. Anything else is.
[ $rc -le 1 ] || exit $rc
echo
echo "== rdmabench health --json -D 1 > $out/health.json"
"$bin" health --json -D 1 >"$out/health.json"
rc=$?
# 1 (unhealthy) and 2 (cannot check) are verdicts, shown in the summary.
[ $rc -le 2 ] || exit $rc
echo
# Under emulation 4 ranks busy-poll 2 CPUs: latency outliers of a few ms
# (the scheduler's tick) come and go, and a retest alone often clears them.
# The 4 ranks share rxe0, so the mesh runs their pairs one at a time (a
# NIC in two pairs at once measures how it divides itself).
mesh=(mesh -s 64K -D 1 --lat-iters 200 --max-retests 4 --rendezvous 127.0.0.1:29517 --save "$out/mesh.json")
if command -v mpirun >/dev/null && [ "$(hostname)" != "(none)" ]; then
	echo "== mpirun -np 4 rdmabench ${mesh[*]}"
	# As root in the guest, 4 ranks on 2 CPUs: Open MPI wants both said.
	# -q: a rank's exit 1 (the mesh found something) is the mesh's report,
	# not Open MPI's abort banner; the status is said below.
	mpirun -q --allow-run-as-root --oversubscribe -np 4 "$bin" "${mesh[@]}"
	rc=$?
else
	echo "== rdmabench ${mesh[*]}, 4 ranks started as srun would (SLURM_PROCID ...)"
	pids=()
	for r in 1 2 3; do
		SLURM_PROCID=$r SLURM_NTASKS=4 SLURM_LOCALID=$r SLURM_STEP_ID=0 "$bin" "${mesh[@]}" &
		pids+=($!)
	done
	SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_LOCALID=0 SLURM_STEP_ID=0 "$bin" "${mesh[@]}"
	rc=$?
	wait "${pids[@]}"
fi
# Exit 1 is a mesh that found outliers (emulation is noisy): a finding.
[ $rc -le 1 ] || exit $rc
[ $rc -eq 0 ] || echo "mesh: exit 1: it found something to act on or left outliers inconclusive (above)"
echo
echo "== rdmabench plot"
"$bin" plot --out "$out/write-bw.png" "$out/write-bw.json" || exit 1
"$bin" plot --out "$out/send-lat.png" "$out/send-lat.hgrm" || exit 1
"$bin" plot --out "$out/mesh.png" "$out/mesh.json" || exit 1
"$bin" plot --out "$out/mesh.svg" "$out/mesh.json" || exit 1
echo "plots and result files are in $out/"
echo
# The summary: a line per saved file (the bandwidth, the latency's p50 and
# p99, health's verdict, the mesh's, saying when it exits 1) and the
# report's path.
echo "== rdmabench report --summary -o $out/report.html"
"$bin" report --summary -o "$out/report.html" "$out/write-bw.json" "$out/send-lat.hgrm" "$out/health.json" "$out/mesh.json" || exit 1
exit 0
