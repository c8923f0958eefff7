package rdmasys

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

func TestPCIDeviceOfMlx5(t *testing.T) {
	nic := "bus/pci/devices/0000:3b:00.0/"
	root := writeTree(t, map[string]string{
		"class/infiniband/mlx5_0/device":         "->../../../bus/pci/devices/0000:3b:00.0",
		"class/infiniband/mlx5_0/ports/1/state":  "4: ACTIVE",
		nic + "class":                            "0x020700",
		nic + "vendor":                           "0x15b3",
		nic + "device":                           "0x101b",
		nic + "numa_node":                        "1",
		nic + "current_link_speed":               "8.0 GT/s PCIe",
		nic + "current_link_width":               "8",
		nic + "max_link_speed":                   "16.0 GT/s PCIe",
		nic + "max_link_width":                   "16",
		nic + "msi_irqs/131":                     "msix",
		nic + "msi_irqs/99":                      "msix",
		"bus/pci/devices/0000:17:00.0/class":     "0x030200",
		"bus/pci/devices/0000:17:00.0/vendor":    "0x10de",
		"bus/pci/devices/0000:17:00.0/numa_node": "0",
		"class/infiniband/rxe0/ports/1/state":    "4: ACTIVE",
	})
	dir, ok, err := PCIDeviceDirOf(root, "mlx5_0")
	if err != nil || !ok {
		t.Fatalf("PCIDeviceDirOf = %q %v %v", dir, ok, err)
	}
	p, err := ReadPCIDevice(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := PCIDevice{BDF: "0000:3b:00.0", Dir: dir, Class: "0x020700", Vendor: "0x15b3", Device: "0x101b", NUMANode: 1,
		CurLinkSpeed: "8.0 GT/s PCIe", CurLinkWidth: 8, MaxLinkSpeed: "16.0 GT/s PCIe", MaxLinkWidth: 16}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("ReadPCIDevice =\n%+v, want\n%+v", p, want)
	}
	if !p.HasLinkInfo() || p.IsNVIDIAGPU() {
		t.Errorf("HasLinkInfo %v IsNVIDIAGPU %v", p.HasLinkInfo(), p.IsNVIDIAGPU())
	}
	irqs, err := MSIIRQs(dir)
	if err != nil || !reflect.DeepEqual(irqs, []int{99, 131}) {
		t.Errorf("MSIIRQs = %v %v", irqs, err)
	}
	if _, ok, err := PCIDeviceDirOf(root, "rxe0"); ok || err != nil {
		t.Errorf("rxe0 has a PCI device: %v %v", ok, err)
	}
	all, err := ReadPCIDevices(root)
	if err != nil || len(all) != 2 || !all[0].IsNVIDIAGPU() || all[0].NUMANode != 0 {
		t.Errorf("ReadPCIDevices = %+v %v", all, err)
	}
}

func TestParseLinkSpeed(t *testing.T) {
	for text, want := range map[string]float64{"16.0 GT/s PCIe": 16, "8 GT/s": 8, "2.5 GT/s PCIe": 2.5, "Unknown": 0, "": 0} {
		if got := ParseLinkSpeed(text); got != want {
			t.Errorf("ParseLinkSpeed(%q) = %v, want %v", text, got, want)
		}
	}
}

func TestNetdevAndUverbs(t *testing.T) {
	root := writeTree(t, map[string]string{
		"class/net/veth0/mtu":                  "1500",
		"class/net/veth0/operstate":            "up",
		"class/net/veth0/flags":                "0x1003",
		"class/net/lo/mtu":                     "65536",
		"class/net/lo/operstate":               "unknown",
		"class/net/lo/flags":                   "0x9",
		"class/net/eth1/operstate":             "down",
		"class/net/eth1/flags":                 "0x1002",
		"class/infiniband_verbs/uverbs0/ibdev": "rxe0",
		"class/infiniband_verbs/abi_version":   "6",
		"module/ib_uverbs/refcnt":              "2",
	})
	for name, wantUp := range map[string]bool{"veth0": true, "lo": true, "eth1": false} {
		n, err := ReadNetdev(root, name)
		if err != nil || n.IsUp() != wantUp {
			t.Errorf("%s: %+v up=%v err=%v, want up=%v", name, n, n.IsUp(), err, wantUp)
		}
	}
	if n, _ := ReadNetdev(root, "veth0"); n.MTU != 1500 {
		t.Errorf("veth0 MTU = %d", n.MTU)
	}
	if _, err := ReadNetdev(root, "ib0"); err == nil {
		t.Error("ReadNetdev(ib0) succeeded on a missing interface")
	}
	names, err := NetdevNames(root)
	if err != nil || !reflect.DeepEqual(names, []string{"eth1", "lo", "veth0"}) {
		t.Errorf("NetdevNames = %v %v", names, err)
	}
	m, err := UverbsDevices(root)
	if err != nil || !reflect.DeepEqual(m, map[string]string{"rxe0": "uverbs0"}) {
		t.Errorf("UverbsDevices = %v %v", m, err)
	}
	if !ModuleLoaded(root, "ib_uverbs") || ModuleLoaded(root, "rdma_ucm") {
		t.Error("ModuleLoaded wrong")
	}
}

func TestPCIPathType(t *testing.T) {
	dev := func(path string, numa int) PCIDevice { return PCIDevice{Dir: "/sys/devices/" + path, NUMANode: numa} }
	sw := "pci0000:10/0000:10:01.0/0000:11:00.0"
	nic := dev(sw+"/0000:12:00.0/0000:13:00.0", 0)
	for _, c := range []struct {
		name string
		b    PCIDevice
		want string
	}{
		{"same switch", dev(sw+"/0000:12:01.0/0000:14:00.0", 0), "PIX"},
		{"two switches down", dev(sw+"/0000:12:01.0/0000:15:00.0/0000:16:00.0/0000:17:00.0", 0), "PXB"},
		{"other root port", dev("pci0000:10/0000:10:02.0/0000:20:00.0", 0), "PHB"},
		{"other host bridge, same socket", dev("pci0000:30/0000:30:01.0/0000:31:00.0", 0), "PHB"},
		{"other socket", dev("pci0000:b0/0000:b0:01.0/0000:b1:00.0", 1), "SYS"},
		{"flat tree", PCIDevice{Dir: "/sys/bus/pci/devices/0000:17:00.0"}, ""},
	} {
		if got := PCIPathType(nic, c.b); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		if got := PCIPathType(c.b, nic); got != c.want {
			t.Errorf("%s reversed: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestPCIConfig(t *testing.T) {
	acs := uint16(ACSRequestRedirect | ACSCompletionRedirect | 1)
	for _, c := range []struct {
		mrrs int
		acs  *uint16
	}{{512, nil}, {4096, &acs}, {128, nil}} {
		got, err := ParsePCIConfig(BuildPCIConfig(c.mrrs, c.acs))
		if err != nil || got.MaxReadReq != c.mrrs || got.HasACS != (c.acs != nil) || (c.acs != nil && got.ACSCtrl != *c.acs) {
			t.Errorf("mrrs %d acs %v: %+v %v", c.mrrs, c.acs, got, err)
		}
	}
	// Non-root reads: the header only.
	if _, err := ParsePCIConfig(BuildPCIConfig(512, nil)[:64]); !errors.Is(err, ErrConfigTruncated) {
		t.Errorf("64 bytes: %v, want ErrConfigTruncated", err)
	}
	// A looping capability list ends.
	b := BuildPCIConfig(512, nil)
	b[0x61] = 0x40
	binary.LittleEndian.PutUint32(b[0x100:], 0x100<<20|0x0001)
	if _, err := ParsePCIConfig(b); err != nil {
		t.Errorf("looping lists: %v", err)
	}
	if _, err := ParsePCIConfig([]byte{1, 2}); err == nil {
		t.Error("2 bytes parsed")
	}
}
