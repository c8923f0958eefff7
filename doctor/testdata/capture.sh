#!/usr/bin/env bash
# capture.sh OUT: copy what rdmabench doctor reads from a live host into a
# fixture tree OUT/{sys,proc,dev} (plus OUT/ibv_devinfo.txt when ibv_devinfo
# is installed), so the host's findings can be replayed in tests:
#
#   doctor/testdata/capture.sh doctor/testdata/rxe
#   rdmabench doctor --sysfs-root doctor/testdata/rxe/sys ...   (or go test)
#
# Only the files doctor reads are copied, never whole sysfs subtrees (they
# loop through symlinks). ':' in names (PCI addresses) is written as %3A,
# because Go module zips reject ':'; the tests turn it back.
# SYS, PROC, DEV and ETC override the source roots (the round-trip test uses
# them); OUT/etc/nccl.conf is read by doctor beside OUT/sys.
set -eu

out=${1:?usage: capture.sh OUT_DIR}
SYS=${SYS:-/sys}
PROC=${PROC:-/proc}
DEV=${DEV:-/dev}
ETC=${ETC:-/etc}

esc() { printf '%s' "${1//:/%3A}"; }

# put SRC DST: copy one readable attribute file; unreadable or empty ones
# (EINVAL on unpopulated GID attributes, say) are skipped. Builtins only:
# there are hundreds of files and a fork each is slow.
put() {
	local v=""
	{ IFS= read -r -d '' v || :; } 2>/dev/null <"$1" || return 0
	[ -n "$v" ] || return 0
	[ -d "${2%/*}" ] || mkdir -p "${2%/*}"
	printf '%s' "$v" >"$2"
}

sysreal=$(readlink -f "$SYS")

# copy_fn REL: one PCI function's identity, NUMA node, link and MSI IRQs,
# at its place REL in the device tree (devices/pci0000:3a/0000:3a:01.0/...),
# with its bus/pci/devices link.
copy_fn() {
	local rel=$1 src=$sysreal/$1 dst f bdf
	dst=$out/sys/$(esc "$rel")
	[ -e "$dst/vendor" ] && return 0
	for f in class vendor device numa_node current_link_speed current_link_width max_link_speed max_link_width sriov_numvfs \
		aer_dev_correctable aer_dev_nonfatal aer_dev_fatal; do
		[ -e "$src/$f" ] && put "$src/$f" "$dst/$f"
	done
	if [ -d "$src/msi_irqs" ]; then
		for f in "$src"/msi_irqs/*; do
			[ -e "$f" ] && put "$f" "$dst/msi_irqs/${f##*/}"
		done
	fi
	# Config space (MaxReadReq, ACS), binary: beyond 64 bytes only as root.
	if [ -r "$src/config" ]; then
		mkdir -p "$dst"
		cat "$src/config" >"$dst/config" 2>/dev/null || rm -f "$dst/config"
	fi
	# The IOMMU group's domain type (DMA, DMA-FQ, identity), linked as in sysfs.
	if [ -L "$src/iommu_group" ]; then
		local g up=""
		g=$(readlink -f "$src/iommu_group")
		put "$g/type" "$out/sys/${g#"$sysreal"/}/type"
		for f in ${rel//\// }; do up=../$up; done
		ln -sfn "$up${g#"$sysreal"/}" "$dst/iommu_group"
	fi
	# doctor reads only the driver's name from the link.
	[ -L "$src/driver" ] && ln -sfn "../drivers/$(basename "$(readlink "$src/driver")")" "$dst/driver"
	bdf=${rel##*/}
	if [ "$rel" != "bus/pci/devices/$bdf" ]; then
		mkdir -p "$out/sys/bus/pci/devices"
		ln -sfn "../../../$(esc "$rel")" "$out/sys/bus/pci/devices/$(esc "$bdf")"
	fi
}

# copy_pci DIR: a PCI function and every bridge above it (doctor compares
# a link with its slot's and measures GPU-NIC distance along the path), and
# an SR-IOV VF's physical function. Prints the function's tree path.
copy_pci() {
	local real rel acc="" part pf
	real=$(readlink -f "$1")
	rel=${real#"$sysreal"/}
	for part in ${rel//\// }; do
		acc=${acc:+$acc/}$part
		case $part in
		[0-9a-f][0-9a-f][0-9a-f][0-9a-f]:[0-9a-f][0-9a-f]:*) copy_fn "$acc" ;;
		esac
	done
	if [ -e "$real/physfn" ]; then
		pf=$(copy_pci "$real/physfn")
		ln -sfn "../${pf##*/}" "$out/sys/$(esc "$rel")/physfn"
	fi
	printf '%s' "$rel"
}

mkdir -p "$out/sys" "$out/proc" "$out/dev"

for d in "$SYS"/class/infiniband/*; do
	[ -e "$d" ] || continue
	dev=${d##*/}
	dd=$out/sys/class/infiniband/$dev
	for f in node_type node_guid fw_ver hca_type board_id; do
		[ -e "$d/$f" ] && put "$d/$f" "$dd/$f"
	done
	for p in "$d"/ports/*; do
		pd=$dd/ports/${p##*/}
		for f in state phys_state rate link_layer lid sm_lid cap_mask; do
			[ -e "$p/$f" ] && put "$p/$f" "$pd/$f"
		done
		# GID tables have up to 1024 entries, mostly unpopulated (all zero).
		for f in "$p"/gids/*; do
			[ -f "$f" ] || continue
			v=""
			{ IFS= read -r v || :; } 2>/dev/null <"$f"
			[ "$v" = 0000:0000:0000:0000:0000:0000:0000:0000 ] || put "$f" "$pd/gids/${f##*/}"
		done
		for sub in gid_attrs/types gid_attrs/ndevs counters hw_counters; do
			[ -d "$p/$sub" ] || continue
			for f in "$p/$sub"/*; do
				[ -f "$f" ] && put "$f" "$pd/$sub/${f##*/}"
			done
		done
	done
	for f in parent; do
		[ -e "$d/$f" ] && put "$d/$f" "$dd/$f"
	done
	if [ -e "$d/device/vendor" ]; then
		rel=$(copy_pci "$d/device")
		ln -sfn "../../../$(esc "$rel")" "$dd/device"
	fi
done

# NVIDIA GPUs (NUMA, GPU-NIC distance) and every Mellanox function (one
# without an RDMA device has no driver bound).
for p in "$SYS"/bus/pci/devices/*; do
	[ -e "$p/vendor" ] || continue
	case "$(cat "$p/vendor")/$(cat "$p/class")" in
	0x10de/0x0300* | 0x10de/0x0302* | 0x15b3/*) copy_pci "$p" >/dev/null ;;
	esac
done

for u in "$SYS"/class/infiniband_verbs/uverbs*; do
	[ -e "$u" ] || continue
	for f in ibdev abi_version dev; do
		[ -e "$u/$f" ] && put "$u/$f" "$out/sys/class/infiniband_verbs/${u##*/}/$f"
	done
done
# module/ always, so that a replay tells "none loaded" from "not captured".
mkdir -p "$out/sys/module"
for m in ib_core ib_uverbs rdma_ucm rdma_rxe mlx5_core mlx5_ib nvidia nvidia_peermem; do
	[ -d "$SYS/module/$m" ] || continue
	mkdir -p "$out/sys/module/$m"
	put "$SYS/module/$m/refcnt" "$out/sys/module/$m/refcnt"
	[ -e "$SYS/module/$m/version" ] && put "$SYS/module/$m/version" "$out/sys/module/$m/version"
	[ -e "$out/sys/module/$m/refcnt" ] || echo builtin >"$out/sys/module/$m/builtin"
done
for n in "$SYS"/class/net/*; do
	[ -e "$n" ] || continue
	for f in mtu operstate flags bonding/slaves; do
		[ -e "$n/$f" ] && put "$n/$f" "$out/sys/class/net/${n##*/}/$f"
	done
done

# procfs: this shell's limits and capabilities stand for the job's.
put "$PROC/self/limits" "$out/proc/self/limits"
put "$PROC/self/status" "$out/proc/self/status"
put "$PROC/self/mounts" "$out/proc/self/mounts" # the size of /dev/shm
[ -e "$PROC/driver/nvidia/version" ] && put "$PROC/driver/nvidia/version" "$out/proc/driver/nvidia/version"
# The host's own name and kernel, so a captured tree keeps them.
for k in kernel/hostname kernel/osrelease; do
	[ -e "$PROC/sys/$k" ] && put "$PROC/sys/$k" "$out/proc/sys/$k"
done
for k in net/core/rmem_max net/core/wmem_max net/ipv4/tcp_rmem net/ipv4/tcp_wmem \
	net/core/netdev_max_backlog net/ipv4/tcp_congestion_control net/ipv4/tcp_mtu_probing; do
	[ -e "$PROC/sys/$k" ] && put "$PROC/sys/$k" "$out/proc/sys/$k"
done
for c in "$PROC"/[0-9]*/comm; do
	[ "$(cat "$c" 2>/dev/null)" = irqbalance ] || continue
	put "$c" "$out/proc/$(basename "$(dirname "$c")")/comm"
done
# The affinity of every IRQ the captured PCI functions own.
for l in "$out"/sys/bus/pci/devices/*/msi_irqs/*; do
	[ -e "$l" ] || continue
	i=${l##*/}
	for f in smp_affinity_list effective_affinity_list; do
		[ -e "$PROC/irq/$i/$f" ] && put "$PROC/irq/$i/$f" "$out/proc/irq/$i/$f"
	done
done

[ -e "$ETC/nccl.conf" ] && mkdir -p "$out/etc" && put "$ETC/nccl.conf" "$out/etc/nccl.conf"

if [ -d "$DEV/infiniband" ]; then
	mkdir -p "$out/dev/infiniband"
	for f in "$DEV"/infiniband/*; do
		[ -e "$f" ] && : >"$out/dev/infiniband/${f##*/}"
	done
fi

if [ "$SYS" = /sys ] && command -v ibv_devinfo >/dev/null 2>&1; then
	ibv_devinfo -v >"$out/ibv_devinfo.txt" 2>/dev/null || rm -f "$out/ibv_devinfo.txt"
fi
echo "captured into $out"
