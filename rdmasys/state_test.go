package rdmasys

import (
	"slices"
	"testing"
)

func TestParsePhysState(t *testing.T) {
	for _, tc := range []struct {
		text string
		want PhysState
	}{
		{"5: LinkUp", PhysLinkUp},
		{"LinkUp", PhysLinkUp},
		{"3: Disabled", PhysDisabled},
		{"2: Polling", PhysPolling},
		{"4: PortConfigurationTraining", PhysTraining},
		{"7: Phy Test", PhysTest},
		// A driver that writes the logical state here: the code 4 would
		// read as Training, which it is not.
		{"4: ACTIVE", PhysOther},
		{"", PhysOther},
	} {
		if got := ParsePhysState(tc.text); got != tc.want {
			t.Errorf("ParsePhysState(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}

func TestDeviceKind(t *testing.T) {
	for _, tc := range []struct {
		nodeType string
		want     NodeKind
	}{
		{"1: CA", NodeCA}, {"4: RNIC", NodeRNIC}, {"RNIC", NodeRNIC}, {"2: switch", NodeSwitch}, {"", NodeUnknown},
	} {
		if got := (Device{NodeType: tc.nodeType}).Kind(); got != tc.want {
			t.Errorf("Kind(%q) = %d, want %d", tc.nodeType, got, tc.want)
		}
	}
}

func TestIsSoftware(t *testing.T) {
	root := writeTree(t, map[string]string{
		"devices/virtual/infiniband/soft0/node_type":                  "1: CA",
		"class/infiniband/soft0":                                      "->../../devices/virtual/infiniband/soft0",
		"devices/pci0000:00/0000:00:01.0/infiniband/mlx5_0/node_type": "1: CA",
		"class/infiniband/mlx5_0":                                     "->../../devices/pci0000:00/0000:00:01.0/infiniband/mlx5_0",
		"class/infiniband/rxe0/node_type":                             "1: CA",
		"class/infiniband/mlx5_1/hca_type":                            "MT4123",
		"class/infiniband/hfi1_0/board_id":                            "Intel Omni-Path Host Fabric Interface Adapter 100 Series",
		"class/infiniband/myroce/parent":                              "eth0",
	})
	for _, tc := range []struct {
		dev  Device
		want bool
	}{
		{Device{Name: "soft0"}, true},   // linked under devices/virtual
		{Device{Name: "mlx5_0"}, false}, // linked under a PCI function, device link lost
		{Device{Name: "rxe0"}, true},    // flat capture: the name
		{Device{Name: "mlx5_1", HCAType: "MT4123"}, false},
		{Device{Name: "hfi1_0", BoardID: "Intel Omni-Path"}, false},
		{Device{Name: "myroce"}, true}, // rxe/siw write their netdev to parent
	} {
		if got := IsSoftware(root, tc.dev); got != tc.want {
			t.Errorf("IsSoftware(%s) = %v, want %v", tc.dev.Name, got, tc.want)
		}
	}
}

// A bonding host has class/net/bonding_masters, a regular file, beside the
// interfaces.
func TestNetdevNamesSkipsFiles(t *testing.T) {
	root := writeTree(t, map[string]string{
		"class/net/bonding_masters": "bond0",
		"class/net/bond0/mtu":       "9000",
		"class/net/eth0/mtu":        "1500",
	})
	names, err := NetdevNames(root)
	if err != nil || !slices.Equal(names, []string{"bond0", "eth0"}) {
		t.Errorf("NetdevNames = %v %v, want [bond0 eth0]", names, err)
	}
}

// Traffic is told from the other counters that are no errors: the engine
// leaves traffic out of a run's report and keeps the rest (doctor's tests
// cover the error classes).
func TestClassifyCounterTraffic(t *testing.T) {
	want := map[string]CounterClass{
		"port_xmit_data": CounterTraffic, "rcvd_pkts": CounterTraffic, "ack_deferred": CounterTraffic,
		"np_cnp_sent": CounterOther, "rcvd_seq_err": CounterTransport,
	}
	for name, class := range want {
		if got := ClassifyCounter("hw_counters", name); got != class {
			t.Errorf("ClassifyCounter(hw_counters, %s) = %v, want %v", name, got, class)
		}
	}
	if got := ClassifyCounter("counters", "port_xmit_wait"); got != CounterOther {
		t.Errorf("port_xmit_wait: %v", got)
	}
	if w, ok := PMAWidth("link_downed"); !ok || w != 8 {
		t.Errorf("PMAWidth(link_downed) = %d, %v", w, ok)
	}
}
