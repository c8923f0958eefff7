package rdmasys

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTree creates files (path → content) and symlinks (path →
// "->target") under a fresh root.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, full)
		} else {
			err = os.WriteFile(full, []byte(content+"\n"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const zeroGID = "0000:0000:0000:0000:0000:0000:0000:0000"

func rxeTree(t *testing.T) string {
	p := "class/infiniband/rxe0/ports/1/"
	return writeTree(t, map[string]string{
		"class/infiniband/rxe0/node_type": "1: CA",
		p + "state":                       "4: ACTIVE",
		p + "phys_state":                  "5: LinkUp",
		p + "rate":                        "10 Gb/sec (1X QDR)",
		p + "link_layer":                  "Ethernet",
		p + "gids/0":                      "fe80:0000:0000:0000:5054:00ff:fe12:3456",
		p + "gids/1":                      "0000:0000:0000:0000:0000:ffff:c612:0001",
		p + "gids/2":                      zeroGID,
		p + "gid_attrs/types/0":           "RoCE v2",
		p + "gid_attrs/types/1":           "RoCE v2",
		p + "gid_attrs/ndevs/0":           "veth0",
		p + "gid_attrs/ndevs/1":           "veth0",
		p + "hw_counters/rcvd_pkts":       "42",
		p + "hw_counters/lifespan":        "10",
	})
}

func TestReadDeviceRoCE(t *testing.T) {
	root := rxeTree(t)
	d, err := ReadDevice(root, "rxe0")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Ports) != 1 {
		t.Fatalf("ports = %d, want 1", len(d.Ports))
	}
	p := d.Ports[0]
	if p.State != "ACTIVE" || p.PhysState != "LinkUp" || !p.IsRoCE() || p.RateGbps != 10 {
		t.Errorf("port = %+v", p)
	}
	if len(p.GIDs) != 2 {
		t.Fatalf("gids = %+v, want 2 populated entries", p.GIDs)
	}
	if !p.GIDs[0].IsLinkLocal() || p.GIDs[0].IsIPv4() {
		t.Errorf("gid 0 = %+v, want link-local IPv6", p.GIDs[0])
	}
	g, reason, err := PickRoCEv2IPv4(p.GIDs)
	if err != nil {
		t.Fatal(err)
	}
	if g.Index != 1 || reason != "gid 1: RoCE v2 ::ffff:198.18.0.1 on veth0" {
		t.Errorf("picked %d %q", g.Index, reason)
	}
	c, err := ReadCounters(root, "rxe0", 1, "hw_counters")
	if err != nil {
		t.Fatal(err)
	}
	if c["rcvd_pkts"] != 42 || len(c) != 1 {
		t.Errorf("counters = %v, want rcvd_pkts only (lifespan is not a counter)", c)
	}
}

func TestGIDTypes(t *testing.T) {
	tests := []struct {
		text      string
		linkLayer LinkLayer
		want      GIDType
	}{
		{"RoCE v2", "Ethernet", GIDTypeRoCEv2},
		{"IB/RoCE v1", "Ethernet", GIDTypeRoCEv1},
		{"IB/RoCE v1", "InfiniBand", GIDTypeIB},
		{"", "InfiniBand", GIDTypeIB},
	}
	for _, tt := range tests {
		if got := parseGIDType(tt.text, tt.linkLayer); got != tt.want {
			t.Errorf("parseGIDType(%q, %q) = %q, want %q", tt.text, tt.linkLayer, got, tt.want)
		}
	}
}

func TestPickNoIPv4(t *testing.T) {
	ip, _ := ParseGID("fe80:0000:0000:0000:5054:00ff:fe12:3456")
	_, _, err := PickRoCEv2IPv4([]GID{{Index: 0, Type: GIDTypeRoCEv2, Addr: ip}})
	if err == nil {
		t.Fatal("want an error when only link-local GIDs exist")
	}
}

func TestMissingDevice(t *testing.T) {
	root := rxeTree(t)
	if _, err := ReadDevice(root, "mlx5_9"); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("err = %v, want ErrNoDevice", err)
	}
	names, err := DeviceNames(t.TempDir())
	if err != nil || len(names) != 0 {
		t.Fatalf("empty root: %v %v", names, err)
	}
}

func TestReadPortWidthSpeedLID(t *testing.T) {
	p := "class/infiniband/mlx5_0/ports/1/"
	root := writeTree(t, map[string]string{
		p + "state":      "4: ACTIVE",
		p + "phys_state": "5: LinkUp",
		p + "rate":       "200 Gb/sec (4X HDR)",
		p + "link_layer": "InfiniBand",
		p + "lid":        "0x1a",
	})
	got, err := ReadPort(root, "mlx5_0", 1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Width != 4 || got.SpeedName != "HDR" || got.LID != 26 || got.RateGbps != 200 || got.Device != "mlx5_0" {
		t.Errorf("port = %+v, want 4X HDR at 200 Gb/s, LID 26", got)
	}
	for text, want := range map[string]int{"10 Gb/sec (1X QDR)": 1, "25 Gb/sec (1XEDR)": 1, "100 Gb/sec": 0, "": 0} {
		if w, _ := rateWidth(text); w != want {
			t.Errorf("rateWidth(%q) = %d, want %d", text, w, want)
		}
	}
}

func TestParseRate(t *testing.T) {
	for text, want := range map[string]float64{"200 Gb/sec (4X HDR)": 200, "2.5 Gb/sec (1X SDR)": 2.5, "": 0, "junk": 0} {
		if got := ParseRate(text); got != want {
			t.Errorf("ParseRate(%q) = %v, want %v", text, got, want)
		}
	}
}
