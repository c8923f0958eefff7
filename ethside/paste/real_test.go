package paste

import (
	"path/filepath"
	"testing"
)

// The fixtures below are real pastes from public issues, posts and mails
// (each directory's PROVENANCE gives the URL): what the parsers make of
// them is asserted value by value.

// TestRealFixturesParseWhole: every file of the newer fixtures parses
// without a problem, one interface a file name.
func TestRealFixturesParseWhole(t *testing.T) {
	for dir, n := range map[string]int{"cmis": 1, "pfcoff": 1, "pfcon": 1, "tuning": 4, "fec": 1, "sensorsvirt": 1, "ernic": 2, "watchprio": 1, "watchprio/later": 1, "be2net": 1, "be2net/later": 1} {
		ifs, err := Read(filepath.Join("testdata", dir))
		if err != nil || len(ifs) != n {
			t.Fatalf("%s: %d ifaces (want %d), %v", dir, len(ifs), n, err)
		}
		for _, it := range ifs {
			if len(it.Problems) != 0 {
				t.Errorf("%s/%s: problems %q", dir, it.Name, it.Problems)
			}
		}
	}
}

// TestCMISLossOfSignal: the CMIS module says no lane lost its signal,
// which tells its 4 dark channels of 8 are unused; the SFF-8636 QSFP+ of
// darklanes says nothing of it.
func TestCMISLossOfSignal(t *testing.T) {
	if m := readCase(t, "cmis")["eth0"].Module; m == nil || !m.NoRxLOS {
		t.Errorf("cmis: %+v, want NoRxLOS", m)
	}
	if m := readCase(t, "darklanes")["eth2"].Module; m == nil || m.NoRxLOS {
		t.Errorf("darklanes: %+v, want no NoRxLOS", m)
	}
}

// TestRealDCBPFC: dcb pfc show before (every priority off) and after
// (priority 3 on) on one ConnectX-3 Pro, with its dcb app table.
func TestRealDCBPFC(t *testing.T) {
	off := readCase(t, "pfcoff")["ens6"].DCB
	if off == nil || off.PFCEnabled == nil || *off.PFCEnabled != [8]bool{} || off.Trust != "" {
		t.Errorf("pfcoff: %+v", off)
	}
	on := readCase(t, "pfcon")["ens6"].DCB
	if on == nil || on.PFCEnabled == nil || *on.PFCEnabled != [8]bool{3: true} {
		t.Fatalf("pfcon: %+v", on)
	}
	if len(on.DSCPPrio) != 1 || on.DSCPPrio[26] != 3 || on.Trust != "" {
		t.Errorf("pfcon dscp-prio %v trust %q, want AF31 (26) -> 3, trust unknown", on.DSCPPrio, on.Trust)
	}
}

// TestRealTuningFixtures: ethtool -c (a blank line after every line), -l
// ("n/a" counts), -a (netlink's negotiated lines and statistics) and
// sensors (six mlx5-pci chips among others; the first is taken).
func TestRealTuningFixtures(t *testing.T) {
	ifs := readCase(t, "tuning")
	c := ifs["eth2"].Coalesce
	if c == nil || c.AdaptiveRX == nil || !*c.AdaptiveRX || c.AdaptiveTX == nil || *c.AdaptiveTX || c.RXUsecs != 16 || c.TXUsecs != 0 {
		t.Errorf("coalesce %+v", c)
	}
	ch := ifs["ens3f0"].Channels
	if ch == nil || ch.Combined != 1 || ch.CombinedMax != 64 || ch.RX != 0 || ch.RXMax != 0 {
		t.Errorf("channels %+v", ch)
	}
	p := ifs["ens785f0np0"].Pause
	if p == nil || p.Autoneg == nil || !*p.Autoneg || p.RX == nil || *p.RX || p.TX == nil || *p.TX {
		t.Errorf("pause %+v", p)
	}
	s := ifs["bottom_2"].HCATemp
	if s == nil || s.Label != "asic" || s.C != 62 || s.CritC == nil || *s.CritC != 105 || s.MaxC != nil {
		t.Errorf("sensor %+v (highest is no limit)", s)
	}
}

// TestRealFEC: the netlink ethtool's "Supported/Configured FEC
// encodings" line is the configured one; its statistics are no problem.
func TestRealFEC(t *testing.T) {
	f := readCase(t, "fec")["eth0"].FEC
	if f == nil || f.Active != "RS" || len(f.Configured) != 1 || f.Configured[0] != "RS" {
		t.Errorf("fec %+v, want active RS, configured RS", f)
	}
}

// TestRealSensorsVirtualChip: mlx5's chip named after its PCI address,
// colons and all, is an HCA chip; it shows no limits.
func TestRealSensorsVirtualChip(t *testing.T) {
	s := readCase(t, "sensorsvirt")["eth0"].HCATemp
	if s == nil || s.Label != "temp1" || s.C != 41 || s.CritC != nil || s.MaxC != nil {
		t.Errorf("sensor %+v, want temp1 41 C without limits", s)
	}
}

// TestRealERNIC: a vendor guide's mlx5 hw_counters dump (name:value, as
// grep . * prints it) gives every counter of the port, and its ethtool -S
// snippets their values.
func TestRealERNIC(t *testing.T) {
	ifs := readCase(t, "ernic")
	hw := ifs["eth1"].Counters
	if hw == nil || len(hw.Values) != 11 || hw.Values["rx_write_requests"] != 108307999 || hw.Values["lifespan"] != 10 {
		t.Errorf("hw_counters %+v, want its 11 counters", hw)
	}
	s := ifs["eth0"].Counters
	if s == nil || len(s.Values) != 27 || s.Values["link_down_events_phy"] != 4 || s.Values["rx_bytes_phy"] != 467673988652 {
		t.Errorf("ethtool -S %+v, want its 27 counters", s)
	}
}
