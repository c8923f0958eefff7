package inventory

import (
	"bytes"
	"encoding/json"
	"net"
	"testing"

	"github.com/rdmabench/rdmabench/internal/golden"
	"github.com/rdmabench/rdmabench/rdmasys"
)

func sampleDevices() []Device {
	roce := Port{Port: rdmasys.Port{
		Number: 1, State: "ACTIVE", PhysState: "LinkUp", RateGbps: 200, Width: 4, SpeedName: "HDR",
		ActiveMTU: 1024, MaxMTU: 4096, LinkLayer: "Ethernet",
		GIDs: []rdmasys.GID{
			{Index: 0, Type: rdmasys.GIDTypeRoCEv1, Addr: net.ParseIP("fe80::5054:ff:fe12:3456"), Netdev: "eth2"},
			{Index: 1, Type: rdmasys.GIDTypeRoCEv2, Addr: net.ParseIP("fe80::5054:ff:fe12:3456"), Netdev: "eth2"},
			{Index: 2, Type: rdmasys.GIDTypeRoCEv1, Addr: net.ParseIP("::ffff:198.18.0.1"), Netdev: "eth2"},
			{Index: 3, Type: rdmasys.GIDTypeRoCEv2, Addr: net.ParseIP("::ffff:198.18.0.1"), Netdev: "eth2"},
		},
	}}
	Annotate(&roce)
	ib := Port{Port: rdmasys.Port{
		Number: 1, State: "ACTIVE", PhysState: "LinkUp", RateGbps: 200, Width: 4, SpeedName: "HDR",
		ActiveMTU: 4096, MaxMTU: 4096, LinkLayer: "InfiniBand", LID: 12,
		GIDs: []rdmasys.GID{{Index: 0, Type: rdmasys.GIDTypeIB, Addr: net.ParseIP("fe80::ec0d:9a03:11:2233")}},
	}}
	Annotate(&ib)
	noV4 := Port{Port: rdmasys.Port{Number: 1, State: "DOWN", PhysState: "Disabled", LinkLayer: "Ethernet",
		GIDs: []rdmasys.GID{{Index: 0, Type: rdmasys.GIDTypeRoCEv2, Addr: net.ParseIP("fe80::1"), Netdev: "eth3"}}}}
	Annotate(&noV4)
	return []Device{
		{Name: "mlx5_0", FWVer: "20.31.1014", NodeType: "CA", Ports: []Port{ib}},
		{Name: "mlx5_2", FWVer: "22.36.1010", NodeType: "CA", Ports: []Port{roce}},
		{Name: "mlx5_3", Ports: []Port{noV4}},
	}
}

func TestAnnotatePicksRoCEv2IPv4(t *testing.T) {
	devs := sampleDevices()
	if got := devs[1].Ports[0].NCCLGIDIndex; got != 3 {
		t.Errorf("RoCE port GID index = %d, want 3 (RoCE v2 IPv4)", got)
	}
	if got := devs[0].Ports[0].NCCLGIDIndex; got != -1 {
		t.Errorf("IB port GID index = %d, want -1", got)
	}
	if got := devs[2].Ports[0].NCCLGIDIndex; got != -1 || devs[2].Ports[0].GIDReason == "" {
		t.Errorf("no-IPv4 port: index %d, reason %q", got, devs[2].Ports[0].GIDReason)
	}
}

func TestWriteTextGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteText(&buf, sampleDevices()); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "devices.txt", buf.Bytes())
}

func TestWriteJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJSON(&buf, sampleDevices(), nil); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "devices.json", buf.Bytes())
	var doc struct {
		Schema  int `json:"schema"`
		Devices []struct {
			Name  string `json:"name"`
			Ports []struct {
				NCCLGIDIndex int `json:"nccl_gid_index"`
				GIDs         []struct {
					Index   int    `json:"index"`
					Type    string `json:"type"`
					Address string `json:"address"`
				} `json:"gids"`
			} `json:"ports"`
		} `json:"devices"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	p := doc.Devices[1].Ports[0]
	if doc.Schema != 1 || p.NCCLGIDIndex != 3 || p.GIDs[3].Address != "::ffff:198.18.0.1" || p.GIDs[3].Type != "RoCE v2" {
		t.Errorf("decoded %+v", doc)
	}
}
