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
