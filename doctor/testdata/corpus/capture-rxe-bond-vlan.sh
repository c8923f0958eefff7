#!/usr/bin/env bash
# capture-rxe-bond-vlan.sh KMOD OUT: the provenance of corpus/rxe-bond-vlan.
# Run inside an rxe-run guest (a real kernel's sysfs, not a tree written
# by hand), as the corpus README says:
#
#   K=6.12.95+deb12-amd64   # the kernel rxe-run boots (RXE_STACK=backports)
#   mkdir -p /tmp/kx && dpkg-deb -x ~/.cache/rdmabench-rxe/linux-image-$K/linux-image-${K}_*.deb /tmp/kx
#   ci/rxe-run --rw /tmp/kx --rw doctor/testdata/corpus -- \
#       doctor/testdata/corpus/capture-rxe-bond-vlan.sh /tmp/kx/lib/modules/$K \
#       doctor/testdata/corpus/rxe-bond-vlan
#
# KMOD is the guest kernel's unpacked module tree (the guest's initramfs
# has no bonding or 8021q). It builds what a RoCE LAG node looks like to
# the kernel: an active-backup bond of two ports with MTU 9000, a VLAN on
# it carrying a second subnet, and a RoCE device on the bond (Soft-RoCE
# here, mlx5_bond_0 on a ConnectX), whose GID table the kernel fills from
# the bond and its VLAN upper device; then capture.sh copies what doctor
# reads. Addresses stay inside 198.18.0.0/15, on veth pairs inside the
# guest.
set -eu

kmod=${1:?usage: capture-rxe-bond-vlan.sh KMOD_DIR OUT_DIR}
out=${2:?usage: capture-rxe-bond-vlan.sh KMOD_DIR OUT_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)

# max_bonds=0: insmod reads no modprobe.d, and bonding would create a
# bond0 of its own that the one below then collides with.
for m in net/tls/tls "drivers/net/bonding/bonding max_bonds=0" net/llc/llc net/802/mrp net/802/stp net/802/garp net/8021q/8021q; do
	set -- $m
	mod=${1##*/}
	shift
	[ -e "/sys/module/$mod" ] || insmod "$kmod/kernel/${m%% *}.ko.xz" "$@" || { echo "insmod $m failed" >&2; exit 1; }
done

for i in 2 4; do
	ip link add "veth$i" type veth peer name "veth$((i + 1))"
	ip link set "veth$((i + 1))" mtu 9000 up
done
ip link add bond0 type bond mode active-backup miimon 100
ip link set veth2 master bond0
ip link set veth4 master bond0
ip link set bond0 mtu 9000 up
ip addr add 198.18.2.1/24 dev bond0
ip link add link bond0 name bond0.100 type vlan id 100
ip link set bond0.100 up
ip addr add 198.18.3.1/24 dev bond0.100
rdma link add rxe1 type rxe netdev bond0

# The GID table fills as the addresses come up: wait (bounded) for the
# VLAN's IPv4 GID before capturing.
for _ in $(seq 50); do
	grep -qs bond0.100 /sys/class/infiniband/rxe1/ports/1/gid_attrs/ndevs/* && break
	sleep 0.1
done
grep -qs bond0.100 /sys/class/infiniband/rxe1/ports/1/gid_attrs/ndevs/* || { echo "no GID on bond0.100" >&2; exit 1; }

rm -rf "$out/sys" "$out/proc" "$out/dev" "$out/ibv_devinfo.txt"
"$here/capture.sh" "$out"
ip -d link show >"$out/ip-link.txt"
rdma link show >"$out/rdma-link.txt"
