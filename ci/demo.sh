#!/usr/bin/env bash
# demo.sh: what `make demo` shows on a host with an RDMA device (the rxe guest
# when there is no hardware): the devices, a bandwidth sweep, a latency table,
# then the configuration check.
set -uo pipefail
bin=${1:-build/rdmabench}
echo "== rdmabench devices"
"$bin" devices || exit 1
echo
echo "== rdmabench write-bw --loopback -a (2 B .. 8 MiB), 50 iterations per size"
"$bin" write-bw --loopback -a -n 50 --warmup 5 || exit 1
echo
echo "== rdmabench send-lat --loopback -s 8 -n 5000"
"$bin" send-lat --loopback -s 8 -n 5000 || exit 1
echo
echo "== rdmabench doctor"
"$bin" doctor
rc=$?
# doctor exits 1 on FAIL findings (rxe's 1500-byte veth, say); that is a
# finding to read, not a failed demo. Anything else is.
[ $rc -le 1 ] || exit $rc
exit 0
