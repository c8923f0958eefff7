package paste

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/ethside"
)

func readCase(t *testing.T, name string) map[string]ethside.Iface {
	t.Helper()
	ifs, err := Dir(filepath.Join("testdata", name)).Read()
	if err != nil {
		t.Fatalf("Read(%s): %v", name, err)
	}
	out := map[string]ethside.Iface{}
	for _, it := range ifs {
		out[it.Name] = it
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func floatsEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !near(a[i], b[i]) {
			return false
		}
	}
	return true
}

func fp(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// TestModuleFixtures guards the ethtool -m readings against the values
// printed in the real pastes: per-lane dBm, dark lanes at FloorDBm, the
// module's thresholds, temperature, voltage and the flags that are On.
func TestModuleFixtures(t *testing.T) {
	cases := []struct {
		dir, iface, ident, part   string
		rx, tx, bias              []float64
		temp, volt                float64
		rxLowAlarm, rxHighWarn    float64
		txLowWarn, tempHigh, vLow float64
		alarms                    []string
	}{
		{"healthy", "eth4", "QSFP28", "MMA1B00-C100D",
			[]float64{-0.12, -0.09, 0.55, 0.55}, []float64{1.44, 1.20, 1.26, 1.27}, []float64{6.75, 6.75, 6.75, 6.75},
			30.56, 3.2350, -13.31, 2.40, -8.40, 80, 3.1000, nil},
		{"lossy", "net03", "SFP", "M14MK",
			[]float64{FloorDBm}, []float64{FloorDBm}, []float64{0},
			29.90, 3.3528, -11.30, 2.40, -8.40, 90, 3.0800,
			[]string{"Laser bias current low alarm", "Laser bias current low warning",
				"Laser output power low alarm", "Laser output power low warning",
				"Laser rx power low alarm", "Laser rx power low warning"}},
		{"darklanes", "eth2", "QSFP+", "<REDACTED>",
			[]float64{-1.15, FloorDBm, FloorDBm, FloorDBm}, []float64{-1.48, FloorDBm, FloorDBm, FloorDBm},
			[]float64{6.662, 0, 0, 0}, 42.17, 3.2917, -13.51, 2.40, FloorDBm, 75, 2.9700, nil},
		{"cmis", "eth0", "QSFP-DD Double Density 8X Pluggable Transceiver (INF-8628)", "QDD-400G-XDR4",
			[]float64{3.52, 2.70, 2.65, 2.60, FloorDBm, FloorDBm, FloorDBm, FloorDBm},
			[]float64{2.03, 2.17, 2.13, 1.58, FloorDBm, FloorDBm, FloorDBm, FloorDBm},
			[]float64{83.806, 81.878, 72.900, 110.100, 0, 0, 0, 0}, 70.49, 3.2186, -8.90, 4.50, -2.90, 75, 3.0500,
			[]string{"Module temperature high warning"}},
	}
	for _, c := range cases {
		t.Run(c.dir, func(t *testing.T) {
			it := readCase(t, c.dir)[c.iface]
			m := it.Module
			if m == nil {
				t.Fatalf("no Module; problems %q", it.Problems)
			}
			if m.Identifier != c.ident || m.Part != c.part {
				t.Errorf("identity %q %q, want %q %q", m.Identifier, m.Part, c.ident, c.part)
			}
			if !floatsEqual(m.RxPowerDBm, c.rx) || !floatsEqual(m.TxPowerDBm, c.tx) || !floatsEqual(m.BiasMA, c.bias) {
				t.Errorf("rx %v tx %v bias %v, want %v %v %v", m.RxPowerDBm, m.TxPowerDBm, m.BiasMA, c.rx, c.tx, c.bias)
			}
			if !near(fp(m.TempC), c.temp) || !near(fp(m.VoltageV), c.volt) {
				t.Errorf("temp %v volt %v, want %v %v", fp(m.TempC), fp(m.VoltageV), c.temp, c.volt)
			}
			got := []float64{fp(m.RxPower.LowAlarm), fp(m.RxPower.HighWarn), fp(m.TxPower.LowWarn), fp(m.Temp.HighAlarm), fp(m.Voltage.LowAlarm)}
			want := []float64{c.rxLowAlarm, c.rxHighWarn, c.txLowWarn, c.tempHigh, c.vLow}
			if !floatsEqual(got, want) {
				t.Errorf("thresholds %v, want %v", got, want)
			}
			if !reflect.DeepEqual(m.Alarms, c.alarms) {
				t.Errorf("alarms %q, want %q", m.Alarms, c.alarms)
			}
			if m.Source != "ethtool-m."+c.iface+".txt" {
				t.Errorf("source %q", m.Source)
			}
		})
	}
}

// TestLinkAndTuningFixtures guards ethtool, --show-fec and -g: link up
// at 10G against a link down with "Unknown!" speed, and rings at their
// maximum against rings at 256 of 4096.
func TestLinkAndTuningFixtures(t *testing.T) {
	cases := []struct {
		dir, iface           string
		up                   bool
		speed                int
		duplex               string
		supported            []int
		rx, rxMax, tx, txMax int
	}{
		{"healthy", "eth4", true, 10000, "Full", []int{1000, 10000}, 8192, 8192, 8192, 8192},
		{"lossy", "net03", false, 0, "", []int{10000}, 256, 4096, 256, 4096},
	}
	for _, c := range cases {
		t.Run(c.dir, func(t *testing.T) {
			it := readCase(t, c.dir)[c.iface]
			l, r := it.Link, it.Ring
			if l == nil || r == nil {
				t.Fatalf("link %v ring %v; problems %q", l, r, it.Problems)
			}
			if l.Up == nil || *l.Up != c.up || l.SpeedMbps != c.speed || l.Duplex != c.duplex || !reflect.DeepEqual(l.SupportedMbps, c.supported) {
				t.Errorf("link %+v up %v, want up %v %d %q %v", *l, l.Up, c.up, c.speed, c.duplex, c.supported)
			}
			if r.RX != c.rx || r.RXMax != c.rxMax || r.TX != c.tx || r.TXMax != c.txMax {
				t.Errorf("ring %+v", *r)
			}
		})
	}
	it := readCase(t, "healthy")["eth4"]
	if it.FEC == nil || !reflect.DeepEqual(it.FEC.Configured, []string{"RS"}) {
		t.Errorf("fec %+v", it.FEC)
	}
}

// TestDCBFixtures guards mlnx_qos: PFC on prio 3 only against PFC off on
// prio 3 (on 0, 2, 6, 7), trust dscp, and the dscp2prio table.
func TestDCBFixtures(t *testing.T) {
	cases := []struct {
		dir, iface string
		pfc        [8]bool
	}{
		{"healthy", "eth4", [8]bool{3: true}},
		{"lossy", "net03", [8]bool{0: true, 2: true, 6: true, 7: true}},
	}
	for _, c := range cases {
		t.Run(c.dir, func(t *testing.T) {
			it := readCase(t, c.dir)[c.iface]
			d := it.DCB
			if d == nil || d.PFCEnabled == nil {
				t.Fatalf("dcb %+v; problems %q", d, it.Problems)
			}
			if *d.PFCEnabled != c.pfc || d.Trust != "dscp" {
				t.Errorf("pfc %v trust %q, want %v dscp", *d.PFCEnabled, d.Trust, c.pfc)
			}
			if len(d.DSCPPrio) != 64 || d.DSCPPrio[26] != 3 || d.DSCPPrio[0] != 0 || d.DSCPPrio[63] != 7 || d.DSCPPrio[46] != 5 {
				t.Errorf("dscp2prio %v", d.DSCPPrio)
			}
		})
	}
}

// TestCountersFixture guards ethtool -S: every name: value, large ones
// exact.
func TestCountersFixture(t *testing.T) {
	it := readCase(t, "healthy")["eth4"]
	c := it.Counters
	if c == nil || len(c.Values) != 32 || c.Values["rx_prio0_bytes"] != 88034564921216 || c.Values["tx_prio0_packets"] != 40177770079 {
		t.Fatalf("counters %+v", c)
	}
	if _, ok := c.Values["rx_prio3_packets"]; !ok {
		t.Error("a zero counter was dropped")
	}
}

// TestFixturesHaveNoProblems: every fixture file parses whole, each
// interface is read, sorted, with each part's Source its file.
func TestFixturesHaveNoProblems(t *testing.T) {
	for _, dir := range []string{"healthy", "lossy", "darklanes"} {
		ifs, err := Read(filepath.Join("testdata", dir))
		if err != nil || len(ifs) != 1 {
			t.Fatalf("%s: %d ifaces, %v", dir, len(ifs), err)
		}
		if len(ifs[0].Problems) != 0 {
			t.Errorf("%s: problems %q", dir, ifs[0].Problems)
		}
	}
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestReadDirErrorsAndProblems guards the error contract (unreadable or
// empty dir: one line naming it) and the one-problem-per-file rule.
func TestReadDirErrorsAndProblems(t *testing.T) {
	if _, err := Read(filepath.Join(t.TempDir(), "absent")); err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("absent dir: %v", err)
	}
	empty := writeFiles(t, map[string]string{"PROVENANCE": "x", "notes.txt": "y"})
	if _, err := Read(empty); err == nil || !strings.Contains(err.Error(), empty) || strings.Contains(err.Error(), "\n") {
		t.Errorf("no paste: %v", err)
	}
	dir := writeFiles(t, map[string]string{
		"ethtool-S.b.txt":      "NIC statistics:\n rx_a: 1\n rx_b: x\n rx_c: y\n",
		"ethtool-zz.b.txt":     "whatever",
		"ethtool-fec.a.txt":    "nothing here",
		"ethtool-g.eth0.1.txt": "Pre-set maximums:\nRX: 10\nCurrent hardware settings:\nRX: 5\n",
	})
	ifs, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{ifs[0].Name, ifs[1].Name, ifs[2].Name}
	if !reflect.DeepEqual(names, []string{"a", "b", "eth0.1"}) {
		t.Fatalf("names %v", names)
	}
	if len(ifs[0].Problems) != 1 || !strings.HasPrefix(ifs[0].Problems[0], "ethtool-fec.a.txt") {
		t.Errorf("a: %q", ifs[0].Problems)
	}
	b := ifs[1]
	if len(b.Problems) != 2 || !strings.Contains(strings.Join(b.Problems, "|"), "ethtool-S.b.txt: line 3") ||
		!strings.Contains(strings.Join(b.Problems, "|"), "unknown kind") || b.Counters.Values["rx_a"] != 1 {
		t.Errorf("b: %q %+v", b.Problems, b.Counters)
	}
	if ifs[2].Ring == nil || ifs[2].Ring.RXMax != 10 || ifs[2].Ring.RX != 5 {
		t.Errorf("eth0.1 ring %+v", ifs[2].Ring)
	}
}

// TestOversizedFileIsBounded: a file past MaxFileBytes is read up to the
// cap and says so.
func TestOversizedFileIsBounded(t *testing.T) {
	big := strings.Repeat(" rx_x: 1\n", MaxFileBytes/9+10)
	dir := writeFiles(t, map[string]string{"ethtool-S.e.txt": big})
	ifs, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := ifs[0].Problems
	if len(p) != 1 || !strings.Contains(p[0], "4194304") {
		t.Errorf("problems %q", p)
	}
}
