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
pass=0 fail=0 skip=0 failed_pkgs=()
for pkg in "$@"; do
	name=$(echo "${pkg#./}" | tr / _)
	log=$(mktemp)
	# Results stream as they come; the full log is kept for failures.
	(cd "$root/$pkg" && timeout 1400 "$root/$bin_dir/$name.test" -test.v -test.timeout 1300s ${pick[@]+"${pick[@]}"}) 2>&1 |
		tee "$log" | grep --line-buffered -E -- '^\s*--- (PASS|FAIL|SKIP)|^\s+e2e_twonode_test.go:[0-9]+: [a-z0-9]' | sed -u "s|^|$where $pkg: |"
	rc=${PIPESTATUS[0]}
	p=$(grep -c -- '--- PASS' "$log")
	f=$(grep -c -- '--- FAIL' "$log")
	s=$(grep -c -- '--- SKIP' "$log")
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
	if [ $rc -ne 0 ]; then
		((f == 0)) && fail=$((fail + 1))
		failed_pkgs+=("$pkg")
		echo "$where $pkg: FAILED (exit $rc); its output:"
		grep -v -E -- "^(=== (RUN|PAUSE|CONT)|\s*--- (PASS|SKIP))" "$log" | tail -80
	fi
	rm -f "$log"
done
echo "$where target: ${#failed_pkgs[@]} failing packages ${failed_pkgs[*]:-}"
echo "$where: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ] && [ ${#failed_pkgs[@]} -eq 0 ]
