#!/usr/bin/env bash
# rxe-tests.sh: runs prebuilt test binaries where an RDMA device exists (inside
# the rxe guest, or on a host with one), each in its package directory, with
# RDMABENCH_REQUIRE_HW=1 so that a hardware test can fail but never skip.
# Usage: ci/rxe-tests.sh BIN_DIR PKG...   (binary for ./x/y is BIN_DIR/x_y.test)
# RDMABENCH_TESTS_RUN / RDMABENCH_TESTS_SKIP (regexps) pick the tests;
# RDMABENCH_TESTS_COUNT runs each that many times (flakes).
set -uo pipefail
bin_dir=$1
shift
root=$(pwd)
export RDMABENCH_REQUIRE_HW=1
pick=()
[ -z "${RDMABENCH_TESTS_RUN:-}" ] || pick+=(-test.run "$RDMABENCH_TESTS_RUN")
[ -z "${RDMABENCH_TESTS_SKIP:-}" ] || pick+=(-test.skip "$RDMABENCH_TESTS_SKIP")
[ -z "${RDMABENCH_TESTS_COUNT:-}" ] || pick+=(-test.count "$RDMABENCH_TESTS_COUNT")
where="rxe"
[ "${RXE_HOSTS:-1}" = 1 ] || where="rxe two-node"
pass=0 fail=0 skip=0 reruns=0 failed_pkgs=()
# emulator_faults LOG: the top-level tests that failed with evidence of a
# proven emulator fault (the test's own "LAYER: EMULATION FAULT" verdict:
# both kernels fine, the link dead); only those may run once more.
emulator_faults() {
	awk '/^=== RUN   [^\/]+$/ { cur = $3 }
		/LAYER: EMULATION FAULT/ { fault[cur] = 1 }
		/^--- FAIL: / { if (fault[$3]) print $3 }' "$1" | sort -u
}
# reset_link: a fresh link for the rerun (both nodes' NICs; two-node only).
reset_link() {
	[ "${RXE_HOSTS:-1}" != 1 ] || return 0
	rxe-nic-reset && rxe-node 2 --timeout 60 rxe-nic-reset
}
for pkg in "$@"; do
	name=$(echo "${pkg#./}" | tr / _)
	log=$(mktemp)
	# Results stream as they come; the full log is kept for failures.
	(cd "$root/$pkg" && timeout 1400 "$root/$bin_dir/$name.test" -test.v -test.timeout 1300s ${pick[@]+"${pick[@]}"}) 2>&1 |
		tee "$log" | grep --line-buffered -E -- '^\s*--- (PASS|FAIL|SKIP)|^\s+e2e_(twonode|slurm|agent[a-z_]*)_test.go:[0-9]+: [a-z0-9]|LAYER: ' | sed -u "s|^|$where $pkg: |"
	rc=${PIPESTATUS[0]}
	p=$(grep -c -- '--- PASS' "$log")
	f=$(grep -c -- '--- FAIL' "$log")
	s=$(grep -c -- '--- SKIP' "$log")
	# A test that failed on a proven emulator fault runs once more on a
	# reset link; a product failure is never rerun.
	if [ $rc -ne 0 ]; then
		still=0
		for t in $(emulator_faults "$log"); do
			echo "$where $pkg: $t failed on an emulator fault (the evidence above); rerunning it once on a reset link"
			rlog=$(mktemp)
			reset_link >"$rlog" 2>&1 || { cat "$rlog"; still=1; rm -f "$rlog"; continue; }
			(cd "$root/$pkg" && timeout 600 "$root/$bin_dir/$name.test" -test.v -test.timeout 500s -test.run "^$t\$") >"$rlog" 2>&1
			rrc=$?
			grep -E -- '^\s*--- (PASS|FAIL|SKIP)' "$rlog" | sed "s|^|$where $pkg: rerun: |"
			if [ $rrc = 0 ]; then
				reruns=$((reruns + 1))
				f=$((f - $(grep -c -E -- "--- FAIL: $t( |/)" "$log")))
				p=$((p + $(grep -c -- '--- PASS' "$rlog")))
			else
				still=1
			fi
			rm -f "$rlog"
		done
		# Every failure was an emulator fault whose rerun passed.
		if [ $still = 0 ] && [ "$f" -le 0 ] && grep -q -- '--- FAIL' "$log"; then
			rc=0 f=0
		fi
	fi
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
	if [ $rc -ne 0 ]; then
		((f == 0)) && fail=$((fail + 1))
		failed_pkgs+=("$pkg")
		# The whole output goes with the evidence; printed here are the
		# failures' own lines first (a stack dump in the tail once hid
		# them), then the tail.
		keep=/run/rxe-out/evidence
		[ -d /run/rxe-out ] || keep=$root/build/evidence
		if mkdir -p "$keep" 2>/dev/null && cp "$log" "$keep/$name.test.log" 2>/dev/null; then
			echo "$where $pkg: FAILED (exit $rc); its whole output is in the evidence as $name.test.log"
		else
			echo "$where $pkg: FAILED (exit $rc)"
		fi
		echo "$where $pkg: the failures' lines:"
		grep -E -- '^\s*--- FAIL|^\s+[A-Za-z0-9_]+_test\.go:[0-9]+: |^panic: |^FAIL' "$log" | cut -c1-600 | head -60
		echo "$where $pkg: the end of its output:"
		grep -v -E -- "^(=== (RUN|PAUSE|CONT)|\s*--- (PASS|SKIP))" "$log" | tail -60
	fi
	rm -f "$log"
done
echo "$where target: ${#failed_pkgs[@]} failing packages ${failed_pkgs[*]:-}"
echo "$where: $pass passed, $fail failed, $skip skipped, $reruns rerun after an emulator fault"
[ $fail -eq 0 ] && [ ${#failed_pkgs[@]} -eq 0 ]
