#!/usr/bin/env bash
# capture-rxe-pod.sh KMOD OUT: the provenance of corpus/rxe-pod-shared.
# Run inside an rxe-run guest (a real kernel's sysfs, not a tree written
# by hand), as the corpus README says:
#
#   K=6.12.95+deb12-amd64   # the kernel rxe-run boots (RXE_STACK=backports)
#   mkdir -p /tmp/kx && dpkg-deb -x ~/.cache/rdmabench-rxe/linux-image-$K/linux-image-${K}_*.deb /tmp/kx
#   ci/rxe-run --rw /tmp/kx --rw doctor/testdata/corpus -- \
#       doctor/testdata/corpus/capture-rxe-pod.sh /tmp/kx/lib/modules/$K \
#       doctor/testdata/corpus/rxe-pod-shared
#
# It builds what a Kubernetes pod with a shared RDMA device sees (the RDMA
# shared device plugin with a macvlan secondary network, the common RoCE
# set-up): the node's RDMA devices stay in the shared net namespace mode,
# the pod is a net namespace with its CNI interface eth0 (a veth) and net1,
# a macvlan on the RoCE port's netdev; then capture.sh runs inside that
# namespace (ip netns exec mounts the namespace's own sysfs, so class/net
# holds only the pod's interfaces while class/infiniband still lists every
# device). Addresses stay inside 198.18.0.0/15; KMOD is the guest kernel's
# unpacked module tree (the guest's initramfs has no macvlan).
set -eu

kmod=${1:?usage: capture-rxe-pod.sh KMOD_DIR OUT_DIR}
out=${2:?usage: capture-rxe-pod.sh KMOD_DIR OUT_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)

[ -e /sys/module/macvlan ] || insmod "$kmod/kernel/drivers/net/macvlan.ko.xz" || { echo "insmod macvlan failed" >&2; exit 1; }

# The node: rxe-run made rxe0 on veth0 (198.18.0.1/24).
ip netns add pod
ip link add net1 link veth0 type macvlan mode bridge
ip link set net1 netns pod
ip link add eth0 type veth peer name vethpod0
ip link set eth0 netns pod
ip link set vethpod0 up
ip netns exec pod ip link set lo up
ip netns exec pod ip addr add 198.18.0.12/24 dev net1
ip netns exec pod ip link set net1 up
ip netns exec pod ip addr add 198.18.6.2/24 dev eth0
ip netns exec pod ip link set eth0 up

# The GID table fills as the addresses come up: wait (bounded) for the
# macvlan's RoCE v2 IPv4 entry before capturing, and say if none comes.
for _ in $(seq 50); do
	grep -qs net1 /sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/* && break
	sleep 0.1
done
grep -qs net1 /sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/* || echo "capture-rxe-pod: no GID entry names net1" >&2

rm -rf "$out/sys" "$out/proc" "$out/dev" "$out/ibv_devinfo.txt"
ip netns exec pod "$here/capture.sh" "$out"
ip netns exec pod ip -d link show >"$out/ip-link.txt"
ip netns exec pod ip -4 addr show >"$out/ip-addr.txt"
rdma system show >"$out/rdma-system.txt"
rdma link show >"$out/rdma-link.txt"
