package hosttree

import "fmt"

// The layouts below are the host types operators run doctor on. Each is
// healthy as built; tests break one thing at a time (the "broken twin").

// Rail adds InfiniBand rail i: a PCIe switch under its own root port with
// the HCA mlx5_<i> and, when gpu is set, a GPU beside it (NCCL's PIX pair).
// The NIC is a ConnectX-7 (Gen5 x16, NDR 400) unless set otherwise later.
func (t *Tree) Rail(i, numa int, gpu bool) {
	root, sw := railPaths(i)
	t.Bridge(root, Gen5, 16, numa)
	t.Bridge(sw, Gen5, 16, numa)
	t.Bridge(sw+"/"+bdf(railBus(i)+2, 0, 0), Gen5, 16, numa)
	nic := RailNIC(i)
	t.PCI(PCI{Path: nic, Class: "0x020700", Vendor: "0x15b3", Dev: "0x1021", NUMA: numa,
		CurSpeed: Gen5, MaxSpeed: Gen5, CurWidth: 16, MaxWidth: 16})
	name := fmt.Sprintf("mlx5_%d", i)
	t.RDMADev(Dev{Name: name, PCIPath: nic, FW: "28.39.1002", HCAType: "MT4129", BoardID: "MT_0000000838", Uverbs: i})
	t.Port(Port{Dev: name, N: 1, State: Active, Phys: LinkUp, Rate: "400 Gb/sec (4X NDR)", LinkLayer: "InfiniBand",
		LID: fmt.Sprintf("0x%x", 0x100+i)})
	t.Netdev(Netdev{Name: fmt.Sprintf("ibp%ds0", railBus(i)+3), PCIPath: nic, MTU: 4092, Oper: "up"})
	if gpu {
		t.Bridge(sw+"/"+bdf(railBus(i)+2, 1, 0), Gen5, 16, numa)
		t.GPU(sw+"/"+bdf(railBus(i)+2, 1, 0)+"/"+bdf(railBus(i)+4, 0, 0), Gen5, numa)
	}
}

func railBus(i int) int { return 0x10 + 0x10*i }

func bdf(bus, dev, fn int) string { return fmt.Sprintf("0000:%02x:%02x.%d", bus, dev, fn) }

// railPaths are rail i's root port and switch upstream port.
func railPaths(i int) (root, sw string) {
	b := railBus(i)
	root = fmt.Sprintf("pci0000:%02x/%s", b, bdf(b, 1, 0))
	return root, root + "/" + bdf(b+1, 0, 0)
}

// RailNIC is the PCI path of rail i's HCA.
func RailNIC(i int) string {
	_, sw := railPaths(i)
	return sw + "/" + bdf(railBus(i)+2, 0, 0) + "/" + bdf(railBus(i)+3, 0, 0)
}

// RoCENIC adds a ConnectX-6 Dx RoCE port (Gen4 x16) under its own root
// port at bus, as mlx5_<n> on netdev with the IPv4 address in hex
// ("0a0a:0105" is 10.10.1.5), netdev MTU 9000.
func (t *Tree) RoCENIC(n, bus, numa int, netdev, ipv4Hex string) string {
	root := fmt.Sprintf("pci0000:%02x/%s", bus, bdf(bus, 1, 0))
	t.Bridge(root, Gen4, 16, numa)
	nic := root + "/" + bdf(bus+1, 0, 0)
	t.PCI(PCI{Path: nic, Class: "0x020000", Vendor: "0x15b3", Dev: "0x101d", NUMA: numa,
		CurSpeed: Gen4, MaxSpeed: Gen4, CurWidth: 16, MaxWidth: 16})
	name := fmt.Sprintf("mlx5_%d", n)
	t.RDMADev(Dev{Name: name, PCIPath: nic, FW: "22.39.1002", HCAType: "MT4125", BoardID: "MT_0000000359", Uverbs: n})
	t.Port(Port{Dev: name, N: 1, State: Active, Phys: LinkUp, Rate: "100 Gb/sec (2X HDR)", LinkLayer: "Ethernet"})
	t.Netdev(Netdev{Name: netdev, PCIPath: nic, MTU: 9000, Oper: "up"})
	t.RoCEGIDs(name, 1, 0, netdev, ipv4Hex)
	return nic
}

// HGX is a DGX/HGX-class node: eight NDR rails each with a GPU behind the
// same PCIe switch (rails 0-3 on NUMA 0, 4-7 on NUMA 1), two RoCE storage
// NICs mlx5_8 and mlx5_9 outside NCCL's use, the GPU driver with
// nvidia_peermem, and the management interface eth0. HGXEnv is its job
// environment.
func HGX(hostname string) *Tree {
	t := New(hostname)
	for i := 0; i < 8; i++ {
		t.Rail(i, i/4, true)
	}
	t.RoCENIC(8, 0xa0, 0, "ens8np0", "0a0a:0108")
	t.RoCENIC(9, 0xb0, 1, "ens9np0", "0a0b:0109")
	t.Netdev(Netdev{Name: "eth0", MTU: 1500, Oper: "up"})
	t.File("sys/module/mlx5_core/version", "23.10-1.1.9")
	t.File("sys/module/nvidia/version", "535.161.08")
	t.File("sys/module/nvidia_peermem/refcnt", "0")
	return t
}

// HGXEnv is what jobs on an HGX node set: the eight rails by exact name.
func HGXEnv() map[string]string {
	return map[string]string{
		"NCCL_IB_HCA":        "=mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7",
		"NCCL_SOCKET_IFNAME": "eth0",
	}
}

// slot adds a root port at bus with a function behind it and returns the
// function's path.
func (t *Tree) slot(bus, fn, numa int, slotSpeed string, slotWidth int, nic PCI) string {
	root := fmt.Sprintf("pci0000:%02x/%s", bus, bdf(bus, 1, 0))
	if !t.Has(PCIDir(root) + "/vendor") {
		t.Bridge(root, slotSpeed, slotWidth, numa)
	}
	nic.Path = root + "/" + bdf(bus+1, 0, fn)
	nic.NUMA = numa
	t.PCI(nic)
	return nic.Path
}

// cx6 is a ConnectX-6 function trained at Gen4 x16.
func cx6(dev string) PCI {
	return PCI{Class: "0x020700", Vendor: "0x15b3", Dev: dev, CurSpeed: Gen4, MaxSpeed: Gen4, CurWidth: 16, MaxWidth: 16}
}

// DualPortUnplugged is a dual-port ConnectX-6 (two PCI functions, mlx5_0
// and mlx5_1) with only the first port cabled, next to a GPU.
func DualPortUnplugged(hostname string) *Tree {
	t := New(hostname)
	for fn, state := range []string{Active, Down} {
		nic := t.slot(0x3a, fn, 0, Gen4, 16, cx6("0x101b"))
		name := fmt.Sprintf("mlx5_%d", fn)
		t.RDMADev(Dev{Name: name, PCIPath: nic, FW: "20.39.1002", HCAType: "MT4123", BoardID: "MT_0000000223", Uverbs: fn})
		phys := LinkUp
		if state == Down {
			phys = Poll
		}
		t.Port(Port{Dev: name, N: 1, State: state, Phys: phys, Rate: "200 Gb/sec (4X HDR)", LinkLayer: "InfiniBand"})
	}
	t.GPU("pci0000:17/0000:17:01.0/0000:18:00.0", Gen4, 0)
	return t
}

// TwoPortDevice is an HCA that is one RDMA device with two ports
// (ConnectX-3, mlx4), port 2 unplugged.
func TwoPortDevice(hostname string) *Tree {
	t := New(hostname)
	nic := t.slot(0x81, 0, 0, Gen3, 8, PCI{Class: "0x028000", Vendor: "0x15b3", Dev: "0x1007",
		CurSpeed: Gen3, MaxSpeed: Gen3, CurWidth: 8, MaxWidth: 8})
	t.RDMADev(Dev{Name: "mlx4_0", PCIPath: nic, FW: "2.42.5000", HCAType: "MT4099", BoardID: "MT_1090120019", Uverbs: 0})
	t.Port(Port{Dev: "mlx4_0", N: 1, State: Active, Phys: LinkUp, Rate: "56 Gb/sec (4X FDR)", LinkLayer: "InfiniBand"})
	t.Port(Port{Dev: "mlx4_0", N: 2, State: Down, Phys: Poll, Rate: "10 Gb/sec (4X SDR)", LinkLayer: "InfiniBand"})
	return t
}

// RoCEBond is a RoCE LAG: both ports of a ConnectX-6 Dx bonded into bond0,
// one RDMA device mlx5_bond_0 on the first function (the second function
// has none in LAG mode), its GIDs on bond0 (IPv4 at index 3).
func RoCEBond(hostname string) *Tree {
	t := New(hostname)
	var pfs [2]string
	for fn := range pfs {
		pfs[fn] = t.slot(0x3a, fn, 0, Gen4, 16, cx6("0x101d"))
		t.Netdev(Netdev{Name: fmt.Sprintf("ens1f%dnp%d", fn, fn), PCIPath: pfs[fn], MTU: 9000, Oper: "up"})
	}
	t.RDMADev(Dev{Name: "mlx5_bond_0", PCIPath: pfs[0], FW: "22.39.1002", HCAType: "MT4125", BoardID: "MT_0000000359", Uverbs: 0})
	t.Port(Port{Dev: "mlx5_bond_0", N: 1, State: Active, Phys: LinkUp, Rate: "200 Gb/sec (4X HDR)", LinkLayer: "Ethernet"})
	t.Netdev(Netdev{Name: "bond0", MTU: 9000, Oper: "up", Slaves: []string{"ens1f0np0", "ens1f1np1"}})
	t.RoCEGIDs("mlx5_bond_0", 1, 0, "bond0", "0a0a:0105")
	return t
}

// RoCEVLAN is a RoCE port whose addresses live on a VLAN, ens1f0np0.100:
// link-local entries for the parent (0, 1) and the VLAN (2, 3), then the
// VLAN's address 10.20.0.5 (4, 5) and its secondary 10.20.0.105 (6, 7).
func RoCEVLAN(hostname string) *Tree {
	t := New(hostname)
	nic := t.slot(0x3a, 0, 0, Gen4, 16, cx6("0x101d"))
	t.RDMADev(Dev{Name: "mlx5_0", PCIPath: nic, FW: "22.39.1002", HCAType: "MT4125", BoardID: "MT_0000000359", Uverbs: 0})
	t.Port(Port{Dev: "mlx5_0", N: 1, State: Active, Phys: LinkUp, Rate: "100 Gb/sec (2X HDR)", LinkLayer: "Ethernet"})
	t.Netdev(Netdev{Name: "ens1f0np0", PCIPath: nic, MTU: 9000, Oper: "up"})
	t.Netdev(Netdev{Name: "ens1f0np0.100", MTU: 9000, Oper: "up"})
	t.RoCEGIDs("mlx5_0", 1, 0, "ens1f0np0", "")
	t.RoCEGIDs("mlx5_0", 1, 2, "ens1f0np0.100", "0a14:0005")
	t.GID("mlx5_0", 1, 6, "0000:0000:0000:0000:0000:ffff:0a14:0069", "IB/RoCE v1", "ens1f0np0.100")
	t.GID("mlx5_0", 1, 7, "0000:0000:0000:0000:0000:ffff:0a14:0069", "RoCE v2", "ens1f0np0.100")
	return t
}

// VFPod is a Kubernetes pod given one SR-IOV virtual function (0000:3b:00.2
// of a ConnectX-6 Dx PF): it sees only its own RDMA device mlx5_4, uverbs4
// and netdev net1, and the host's PCI tree. A VF has no link of its own.
func VFPod(hostname string) *Tree {
	t := New(hostname)
	pf := t.slot(0x3a, 0, 0, Gen4, 16, cx6("0x101d"))
	vf := t.slot(0x3a, 2, 0, Gen4, 16, PCI{Class: "0x020000", Vendor: "0x15b3", Dev: "0x101e"})
	t.Link(PCIDir(vf)+"/physfn", PCIDir(pf))
	t.Link(PCIDir(pf)+"/virtfn0", PCIDir(vf))
	t.File(PCIDir(pf)+"/sriov_numvfs", "8")
	t.RDMADev(Dev{Name: "mlx5_4", PCIPath: vf, FW: "22.39.1002", HCAType: "MT4126", BoardID: "MT_0000000359", Uverbs: 4})
	t.Port(Port{Dev: "mlx5_4", N: 1, State: Active, Phys: LinkUp, Rate: "100 Gb/sec (2X HDR)", LinkLayer: "Ethernet"})
	t.Netdev(Netdev{Name: "net1", PCIPath: vf, MTU: 9000, Oper: "up"})
	t.Netdev(Netdev{Name: "eth0", MTU: 1450, Oper: "up"})
	t.RoCEGIDs("mlx5_4", 1, 0, "net1", "0a0a:0207")
	return t
}

// ContainerOwnUverbs is a pod on an HGX node under the shared RDMA device
// plugin: sysfs shows all eight rails, /dev/infiniband only its own
// uverbs2.
func ContainerOwnUverbs(hostname string) *Tree {
	t := New(hostname)
	for i := 0; i < 8; i++ {
		t.Rail(i, i/4, i == 2)
		if i != 2 {
			t.Remove(fmt.Sprintf("dev/infiniband/uverbs%d", i))
		}
	}
	return t
}

// Gen5CardGen4Slot is a ConnectX-7 (Gen5 x16) in a Gen4 x16 slot: it
// trains at Gen4, which is all the slot gives.
func Gen5CardGen4Slot(hostname string) *Tree {
	t := New(hostname)
	nic := t.slot(0x3a, 0, 0, Gen4, 16, PCI{Class: "0x020700", Vendor: "0x15b3", Dev: "0x1021",
		CurSpeed: Gen4, MaxSpeed: Gen5, CurWidth: 16, MaxWidth: 16})
	t.RDMADev(Dev{Name: "mlx5_0", PCIPath: nic, FW: "28.39.1002", HCAType: "MT4129", BoardID: "MT_0000000838", Uverbs: 0})
	t.Port(Port{Dev: "mlx5_0", N: 1, State: Active, Phys: LinkUp, Rate: "400 Gb/sec (4X NDR)", LinkLayer: "InfiniBand"})
	t.IOMMUGroup(nic, 31, "identity") // booted with iommu=pt
	return t
}

// ChelsioT6 is a Chelsio T6 (Gen3 x16, 100 GbE): the cxgb4 function and
// on it iw_cxgb4's device cxgb4_0, iWARP, whose hca_type is the netdev's
// driver's name (iw_cxgb4 asks ethtool for it); its port carries the
// MAC-based GID iWARP devices have, typed "IB/RoCE v1".
func ChelsioT6(hostname string) *Tree {
	t := New(hostname)
	nic := t.slot(0x81, 4, 0, Gen3, 16, PCI{Class: "0x020000", Vendor: "0x1425", Dev: "0x6408",
		CurSpeed: Gen3, MaxSpeed: Gen3, CurWidth: 16, MaxWidth: 16})
	t.Link(PCIDir(nic)+"/driver", "sys/bus/pci/drivers/cxgb4")
	t.RDMADev(Dev{Name: "cxgb4_0", PCIPath: nic, FW: "1.27.1.0", HCAType: "cxgb4", BoardID: "1425.6408", NodeType: "4: RNIC", Uverbs: 0})
	t.Port(Port{Dev: "cxgb4_0", N: 1, State: Active, Phys: LinkUp, Rate: "100 Gb/sec (4X EDR)", LinkLayer: "Ethernet"})
	t.Netdev(Netdev{Name: "enp130s0f4", PCIPath: nic, MTU: 9000, Oper: "up"})
	t.GID("cxgb4_0", 1, 0, "0007:4301:a1b2:0000:0000:0000:0000:0000", "IB/RoCE v1", "enp130s0f4")
	t.File("sys/module/iw_cxgb4/refcnt", "1")
	return t
}

// E810 is an Intel E810 (ice, Gen4 x16, 100 GbE) whose RDMA device irdma0
// runs mode, "iwarp" or "roce" (ice's devlink enable_iwarp/enable_roce):
// ice hands irdma an auxiliary device named for it, ice.iwarp.0 or
// ice.roce.0, and irdma hangs the device there (kernels before that hung
// it from the PCI function: underPCI). The GID table is what each mode
// fills: RoCE v2 entries only in RoCE mode (irdma offers no RoCE v1), the
// MAC-based entry typed "IB/RoCE v1" in iWARP mode.
func E810(hostname, mode string, underPCI bool) *Tree {
	t := New(hostname)
	nic := t.slot(0x3a, 0, 0, Gen4, 16, PCI{Class: "0x020000", Vendor: "0x8086", Dev: "0x1592",
		CurSpeed: Gen4, MaxSpeed: Gen4, CurWidth: 16, MaxWidth: 16})
	t.Link(PCIDir(nic)+"/driver", "sys/bus/pci/drivers/ice")
	parent := nic
	if !underPCI {
		parent = nic + "/ice." + mode + ".0"
		t.Link(PCIDir(parent)+"/driver", "sys/bus/auxiliary/drivers/irdma")
	}
	node := "1: CA"
	if mode == "iwarp" {
		node = "4: RNIC"
	}
	t.RDMADev(Dev{Name: "irdma0", PCIPath: parent, FW: "1.70", NodeType: node, Uverbs: 0})
	t.Port(Port{Dev: "irdma0", N: 1, State: Active, Phys: LinkUp, Rate: "100 Gb/sec (4X EDR)", LinkLayer: "Ethernet"})
	t.Netdev(Netdev{Name: "ens1f0", PCIPath: nic, MTU: 9000, Oper: "up"})
	if mode == "iwarp" {
		t.GID("irdma0", 1, 0, "b496:91a1:b2c3:0000:0000:0000:0000:0000", "IB/RoCE v1", "ens1f0")
	} else {
		t.GID("irdma0", 1, 0, "fe80:0000:0000:0000:b696:91ff:fea1:b2c3", "RoCE v2", "ens1f0")
		t.GID("irdma0", 1, 1, "0000:0000:0000:0000:0000:ffff:0a0a:0105", "RoCE v2", "ens1f0")
	}
	t.File("sys/module/irdma/refcnt", "1")
	return t
}

// IOMMUGroup puts a function in IOMMU group n with the domain type
// ("identity" for passthrough, "DMA" or "DMA-FQ" when translating).
func (t *Tree) IOMMUGroup(pciPath string, n int, typ string) {
	g := fmt.Sprintf("sys/kernel/iommu_groups/%d", n)
	t.File(g+"/type", typ)
	t.Link(PCIDir(pciPath)+"/iommu_group", g)
}
