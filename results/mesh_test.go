package results

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// A rank built from the port model writes the mesh document's fields, under
// their saved names and in their saved order, and nothing else of the port.
func TestNewMeshRankJSON(t *testing.T) {
	p := rdmasys.Port{Device: "mlx5_0", Number: 1, State: rdmasys.PortActive, PhysState: "LinkUp",
		RateGbps: 400, Width: 4, SpeedName: "NDR", ActiveMTU: 4096, MaxMTU: 4096,
		LinkLayer: rdmasys.Ethernet, LID: 7, RateText: "400 Gb/sec (4X NDR)"}
	r := NewMeshRank(p, "28.39.1002", 3)
	r.Rank, r.Host, r.Addr = 2, "node03", "10.0.0.3"
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"rank":2,"host":"node03","addr":"10.0.0.3","device":"mlx5_0","port":1,"fw_ver":"28.39.1002",` +
		`"rate_gbps":400,"active_mtu":4096,"link_layer":"Ethernet","gid_index":3}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

// A rank's placement comes from its device's sysfs entries: the PCI root
// above the function its device link resolves to, and its NUMA node; a
// software device (no PCI function) has neither.
func TestMeshRankPlacement(t *testing.T) {
	root := t.TempDir()
	fn := filepath.Join(root, "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0")
	for _, d := range []string{fn, filepath.Join(root, "sys/class/infiniband/mlx5_0"), filepath.Join(root, "sys/class/infiniband/rxe0")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, v := range map[string]string{"vendor": "0x15b3\n", "numa_node": "1\n"} {
		if err := os.WriteFile(filepath.Join(fn, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(fn, filepath.Join(root, "sys/class/infiniband/mlx5_0/device")); err != nil {
		t.Fatal(err)
	}
	hw := MeshRank{Device: "mlx5_0"}
	hw.Placement(filepath.Join(root, "sys"))
	if hw.PCIRoot != "pci0000:3a" || hw.NUMANode == nil || *hw.NUMANode != 1 {
		t.Errorf("mlx5_0: PCI root %q, NUMA node %v; want pci0000:3a, 1", hw.PCIRoot, hw.NUMANode)
	}
	sw := MeshRank{Device: "rxe0"}
	sw.Placement(filepath.Join(root, "sys"))
	if sw.PCIRoot != "" || sw.NUMANode != nil {
		t.Errorf("rxe0: PCI root %q, NUMA node %v; want neither", sw.PCIRoot, sw.NUMANode)
	}
}

// A pair's class is written by its stable name, omitted when unknown, and
// read back; a name this version does not know is refused.
func TestPairClassJSON(t *testing.T) {
	for c := ClassUnknown; c < NumPairClasses; c++ {
		b, err := json.Marshal(MeshPair{From: 0, To: 1, Class: c})
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if name, ok := got["class"]; ok != (c != ClassUnknown) || ok && name != c.String() {
			t.Errorf("%v: %s", c, b)
		}
		var back MeshPair
		if err := json.Unmarshal(b, &back); err != nil || back.Class != c {
			t.Errorf("%v read back as %v (%v)", c, back.Class, err)
		}
	}
	want := map[PairClass]string{ClassSameNIC: "same-nic", ClassSameHost: "same-host", ClassSameRail: "same-rail", ClassCrossRail: "cross-rail", ClassCrossHost: "cross-host"}
	for c, n := range want {
		if c.String() != n {
			t.Errorf("%d: %q, want %q", c, c.String(), n)
		}
	}
	var p MeshPair
	if err := json.Unmarshal([]byte(`{"class":"same-planet"}`), &p); err == nil {
		t.Error("an unknown class read")
	}
}
