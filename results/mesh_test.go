package results

import (
	"encoding/json"
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
