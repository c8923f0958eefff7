package paste

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/ethside"
)

// TestRDMAStatFixture guards both `rdma stat show` layouts: pairs that
// wrap across lines and one pair a line give the same 21 counters, and
// the device from "link mlx5_0/1".
func TestRDMAStatFixture(t *testing.T) {
	ifs := readCase(t, "rdmastat")
	var first map[string]uint64
	for _, name := range []string{"eth0", "eth1"} {
		it := ifs[name]
		if len(it.Problems) != 0 || it.Counters == nil || it.RDMADev != "mlx5_0" {
			t.Fatalf("%s: problems %q counters %+v dev %q", name, it.Problems, it.Counters, it.RDMADev)
		}
		v := it.Counters.Values
		if len(v) != 21 {
			t.Errorf("%s: %d counters, want 21: %v", name, len(v), v)
		}
		for _, want := range []string{"rx_atomic_requests", "out_of_buffer", "rp_cnp_handled", "np_ecn_marked_roce_packets", "np_cnp_sent", "packet_seq_err"} {
			if _, ok := v[want]; !ok {
				t.Errorf("%s: no %s", name, want)
			}
		}
		if first == nil {
			first = v
		} else if !reflect.DeepEqual(first, v) {
			t.Errorf("the two layouts differ: %v vs %v", first, v)
		}
	}
}

// TestDCBAppFixture guards dcb app: symbolic and numeric DSCP give the
// same table; a DSCP mapped twice keeps its last priority.
func TestDCBAppFixture(t *testing.T) {
	ifs := readCase(t, "rdmastat")
	want := map[int]int{0: 0, 24: 3, 48: 6}
	for _, name := range []string{"eth0", "eth1"} {
		d := ifs[name].DCB
		if d == nil || !reflect.DeepEqual(d.DSCPPrio, want) || d.Source != "dcb-app."+name+".txt" {
			t.Errorf("%s: dcb %+v, want %v", name, d, want)
		}
	}
}

// TestInlineParsers covers formats no public paste was found for, on
// the layouts ethtool, dcb, grep and lm-sensors print (see
// docs/ethernet-pastes.md); each row asserts a value a wrong parser
// would miss.
func TestInlineParsers(t *testing.T) {
	cases := []struct {
		name  string
		kind  Kind
		text  string
		check func(it *ethside.Iface) bool
	}{
		{"coalesce", KindCoalesce, "Coalesce parameters for eth0:\nAdaptive RX: on  TX: off\nrx-usecs: 8\ntx-usecs: 16\n",
			func(it *ethside.Iface) bool {
				c := it.Coalesce
				return *c.AdaptiveRX && !*c.AdaptiveTX && c.RXUsecs == 8 && c.TXUsecs == 16
			}},
		{"channels", KindChannels, "Pre-set maximums:\nRX:\t\tn/a\nTX:\t\tn/a\nOther:\t\tn/a\nCombined:\t63\nCurrent hardware settings:\nRX:\t\tn/a\nTX:\t\tn/a\nOther:\t\tn/a\nCombined:\t32\n",
			func(it *ethside.Iface) bool { return it.Channels.CombinedMax == 63 && it.Channels.Combined == 32 }},
		{"pause", KindPause, "Pause parameters for eth0:\nAutonegotiate:\toff\nRX:\t\ton\nTX:\t\toff\n",
			func(it *ethside.Iface) bool { return !*it.Pause.Autoneg && *it.Pause.RX && !*it.Pause.TX }},
		{"fec", KindFEC, "FEC parameters for eth0:\nConfigured FEC encodings: Auto RS\nActive FEC encoding: RS\n",
			func(it *ethside.Iface) bool {
				return it.FEC.Active == "RS" && reflect.DeepEqual(it.FEC.Configured, []string{"Auto", "RS"})
			}},
		{"dcb-pfc", KindDCBPFC, "pfc-cap 8 macsec-bypass off delay 0\nprio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off\n",
			func(it *ethside.Iface) bool { return *it.DCB.PFCEnabled == [8]bool{3: true} }},
		{"grep hw_counters", KindHWCounters, "/sys/class/infiniband/mlx5_0/ports/1/hw_counters/out_of_buffer:135\nnp_cnp_sent:7\n",
			func(it *ethside.Iface) bool {
				return it.Counters.Values["out_of_buffer"] == 135 && it.Counters.Values["np_cnp_sent"] == 7
			}},
		{"sensors", KindSensors, "coretemp-isa-0000\nAdapter: ISA adapter\nCore 0:  +40.0°C  (high = +80.0°C, crit = +100.0°C)\n\nmlx5-pci-0601\nAdapter: PCI adapter\nasic:         +57.0°C  (crit = +105.0°C, highest = +58.0°C)\n",
			func(it *ethside.Iface) bool {
				s := it.HCATemp
				return s.Label == "asic" && s.C == 57 && *s.CritC == 105 && s.MaxC == nil
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var it ethside.Iface
			if err := Parse(c.kind, c.text, "f", &it); err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !c.check(&it) {
				t.Errorf("wrong values: %+v", it)
			}
		})
	}
}

// TestHWCountersBesideEthtool: a hw name ethtool -S already gave is kept
// as hw:name, and Source names both files.
func TestHWCountersBesideEthtool(t *testing.T) {
	var it ethside.Iface
	if err := Parse(KindStats, "NIC statistics:\n     out_of_buffer: 3\n", "ethtool-S.e.txt", &it); err != nil {
		t.Fatal(err)
	}
	if err := Parse(KindHWCounters, "out_of_buffer:5\n", "hw_counters.e.txt", &it); err != nil {
		t.Fatal(err)
	}
	v := it.Counters.Values
	if v["out_of_buffer"] != 3 || v["hw:out_of_buffer"] != 5 || it.Counters.Source != "ethtool-S.e.txt+hw_counters.e.txt" {
		t.Errorf("counters %+v", it.Counters)
	}
}

// TestParseProblemsNameLines: what matters and cannot be read names its
// line.
func TestParseProblemsNameLines(t *testing.T) {
	cases := []struct {
		kind Kind
		text string
		want string
	}{
		{KindLink, "Settings for e:\n\tSpeed: fast\n", "line 2: Speed"},
		{KindModule, "\tIdentifier : 0x11 (QSFP28)\n\tRcvr signal avg optical power(Channel 1) : lots\n", "line 2:"},
		{KindMlnxQoS, "PFC configuration:\n enabled 0 0 0 1 0 0 0 0\n", "line 2:"},
		{KindSensors, "coretemp-isa-0000\nCore 0: +40.0°C\n", "no mlx5"},
		{KindHWCounters, "link mlx5_0/1 a 1 b\n", "line 1: b has no value"},
	}
	for _, c := range cases {
		var it ethside.Iface
		err := Parse(c.kind, c.text, "f", &it)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("kind %d: %v, want %q", c.kind, err, c.want)
		}
	}
}

// TestErrorTextIsNotAReading: a paste holding only the tool's complaint
// leaves the part unknown (nil, a SKIP) and says why, never an empty part
// that would read as healthy.
func TestErrorTextIsNotAReading(t *testing.T) {
	complaint := "netlink error: Operation not supported\nCannot get module EEPROM information: Operation not supported\n"
	for k := Kind(0); k < kindCount; k++ {
		var it ethside.Iface
		err := Parse(k, complaint, "f", &it)
		if err == nil {
			t.Errorf("kind %d: no error", k)
		}
		if it.Link != nil || it.Module != nil || it.Counters != nil || it.Ring != nil || it.Channels != nil ||
			it.Coalesce != nil || it.Pause != nil || it.FEC != nil || it.DCB != nil || it.HCATemp != nil {
			t.Errorf("kind %d: a part was set: %+v", k, it)
		}
	}
}
