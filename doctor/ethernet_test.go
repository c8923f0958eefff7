package doctor

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/ethside"
	"github.com/rdmabench/rdmabench/internal/golden"
)

// fakeEthernet gives its readings in turn (the last one again after
// them), as a live reader reads the kernel again at each call.
type fakeEthernet struct {
	readings [][]ethside.Iface
	err      error
	calls    int
}

func (f *fakeEthernet) Read() ([]ethside.Iface, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	return f.readings[min(f.calls, len(f.readings))-1], nil
}

func ptr[T any](v T) *T { return &v }

// healthyIface is a 200G ConnectX port as a well-run RoCE fabric shows it:
// NCCL_IB_TC=106 → DSCP 26 → priority 3, lossless with ECN, clean optics.
func healthyIface() ethside.Iface {
	dscp := map[int]int{}
	for d := 0; d < 64; d++ {
		dscp[d] = d >> 3
	}
	pfc, ecn := [8]bool{3: true}, [8]bool{3: true}
	thr := func(ha, hw, lw, la float64) ethside.Thresholds {
		return ethside.Thresholds{HighAlarm: &ha, HighWarn: &hw, LowWarn: &lw, LowAlarm: &la}
	}
	return ethside.Iface{
		Name: "eth2", RDMADev: "mlx5_0",
		Link: &ethside.Link{Source: "ethtool.eth2.txt", Up: ptr(true), SpeedMbps: 200000, Duplex: "Full",
			SupportedMbps: []int{50000, 100000, 200000}},
		FEC: &ethside.FEC{Source: "ethtool-fec.eth2.txt", Active: "RS", Configured: []string{"Auto"}},
		Counters: &ethside.Counters{Source: "ethtool-S.eth2.txt", Values: map[string]uint64{
			"rx_crc_errors_phy": 0, "rx_symbol_err_phy": 0, "rx_pcs_symbol_err_phy": 0,
			"rx_corrected_bits_phy": 1000, "rx_prio3_pause": 0, "tx_prio3_pause": 0,
			"rx_prio0_pause": 7, "rx_prio3_discards": 0, "rx_discards_phy": 0,
			"link_down_events_phy": 0, "out_of_buffer": 0, "np_ecn_marked_roce_packets": 0,
			"rx_packets_phy": 123456}},
		Ring:     &ethside.Ring{Source: "ethtool-g.eth2.txt", RX: 8192, TX: 8192, RXMax: 8192, TXMax: 8192},
		Coalesce: &ethside.Coalesce{Source: "ethtool-c.eth2.txt", AdaptiveRX: ptr(true), AdaptiveTX: ptr(true), RXUsecs: 8},
		Channels: &ethside.Channels{Source: "ethtool-l.eth2.txt", Combined: 32, CombinedMax: 63, Cores: 64, CoresOnNICNode: 32},
		Pause:    &ethside.Pause{Source: "ethtool-a.eth2.txt", Autoneg: ptr(false), RX: ptr(false), TX: ptr(false)},
		DCB:      &ethside.DCB{Source: "mlnx_qos.eth2.txt", PFCEnabled: &pfc, Trust: "dscp", DSCPPrio: dscp, ECN: &ecn},
		Module: &ethside.Module{Source: "ethtool-m.eth2.txt", Identifier: "QSFP56", Vendor: "Mellanox", Part: "MMA1T00-VS",
			RxPowerDBm: []float64{-1.2, -0.8, -1.0, -0.5}, TxPowerDBm: []float64{0.5, 0.6, 0.4, 0.5},
			TempC: ptr(45.0), VoltageV: ptr(3.3),
			RxPower: thr(5.4, 2.4, -10.4, -14.4), TxPower: thr(5.4, 2.4, -6.4, -10.4),
			Temp: thr(80, 75, -5, -10), Voltage: thr(3.63, 3.465, 3.135, 2.97)},
		HCATemp: &ethside.Sensor{Source: "hwmon/temp1_input", Label: "asic", C: 62, CritC: ptr(105.0), MaxC: ptr(95.0)},
	}
}

// cloneIface deep-copies the parts the cases change.
func cloneIface(i ethside.Iface) ethside.Iface {
	c := *i.Counters
	c.Values = maps.Clone(c.Values)
	i.Counters = &c
	d := *i.DCB
	i.DCB = &d
	m := *i.Module
	m.RxPowerDBm = append([]float64(nil), m.RxPowerDBm...)
	i.Module = &m
	l := *i.Link
	i.Link = &l
	return i
}

func runEthernet(t *testing.T, env map[string]string, watch time.Duration, readings ...ethside.Iface) []Finding {
	t.Helper()
	var list [][]ethside.Iface
	for _, r := range readings {
		list = append(list, []ethside.Iface{r})
	}
	waits := 0
	reader := &fakeEthernet{readings: list}
	opts := Options{Env: env, Ethernet: reader, Watch: watch, Wait: func(time.Duration) { waits++ }}
	opts.defaults()
	h := &host{opts: opts}
	h.readEthernetFirst()
	got := checkEthernet(h)
	// Without RDMA devices port.counters does not wait: the Ethernet
	// side waits itself, once.
	if wantWaits := min(int(watch), 1); waits != wantWaits || reader.calls != 1+wantWaits {
		t.Errorf("%d waits and %d reads under --watch %s", waits, reader.calls, watch)
	}
	return got
}

var tc106 = map[string]string{"NCCL_IB_TC": "106"}

// ecnEverywhere turns ECN on for every priority, so that a case moving the
// RoCE priority sees eth.pfc alone.
func ecnEverywhere(b, _ *ethside.Iface) {
	b.DCB.ECN = &[8]bool{true, true, true, true, true, true, true, true}
}

// Each fault gives exactly the expected check and status, and nothing
// else WARNs or FAILs; the healthy port gives no WARN or FAIL at all.
func TestEthernetJudgements(t *testing.T) {
	type edit func(before, after *ethside.Iface)
	cases := []struct {
		name   string
		env    map[string]string
		watch  bool
		edit   edit
		check  string // "": healthy
		status Status
		value  string
	}{
		{name: "healthy", env: tc106},
		{name: "healthy watched", env: tc106, watch: true, edit: func(b, a *ethside.Iface) {
			a.Counters.Values["rx_corrected_bits_phy"] += 1000 // 5e-10 at 200G over 10 s
		}},
		{"speed below best", tc106, false, func(b, a *ethside.Iface) { b.Link.SpeedMbps = 100000 }, "eth.link", Warn, "100G, the port supports 200G"},
		{"link down", tc106, false, func(b, a *ethside.Iface) { b.Link.Up, b.Link.SpeedMbps = ptr(false), 0 }, "eth.link", Warn, "link down"},
		{"fec off at 200G", tc106, false, func(b, a *ethside.Iface) { b.FEC = &ethside.FEC{Active: "Off"} }, "eth.fec", Warn, "active Off at 200G"},
		{"pfc off on prio 3", tc106, false, func(b, a *ethside.Iface) { b.DCB.PFCEnabled = &[8]bool{4: true} }, "eth.pfc", Fail, "PFC off on priority 3"},
		{"pfc on 3 but TC unset maps to 0", nil, false, ecnEverywhere, "eth.pfc", Fail, "PFC off on priority 0"},
		{"dscp table moves 26 to prio 5", tc106, false, func(b, a *ethside.Iface) {
			b.DCB.DSCPPrio = map[int]int{26: 5}
			ecnEverywhere(b, a)
		}, "eth.pfc", Fail, "DSCP 26 → priority 5"},
		{"pfc nowhere, priority unknowable", nil, false, func(b, a *ethside.Iface) {
			b.DCB.Trust, b.DCB.PFCEnabled = "pcp", &[8]bool{}
		}, "eth.pfc", Fail, "PFC on priorities none"},
		{"trust pcp with a DSCP class", tc106, false, func(b, a *ethside.Iface) { b.DCB.Trust = "pcp" }, "eth.trust", Warn, "NCCL_IB_TC=106 marks DSCP 26"},
		{"ecn off on prio 3", tc106, false, func(b, a *ethside.Iface) { b.DCB.ECN = &[8]bool{} }, "eth.ecn", Warn, "ECN off on priority 3"},
		{"old crc errors", tc106, false, func(b, a *ethside.Iface) { b.Counters.Values["rx_crc_errors_phy"] = 5 }, "eth.errors", Warn, "rx_crc_errors_phy=5"},
		{"growing symbol errors", tc106, true, func(b, a *ethside.Iface) { a.Counters.Values["rx_symbol_err_phy"] = 9 }, "eth.errors", Fail, "rx_symbol_err_phy +9"},
		{"corrected bits are no error", tc106, false, func(b, a *ethside.Iface) { b.Counters.Values["rx_corrected_bits_phy"] = 1 << 40 }, "", "", ""},
		{"pauses growing on prio 3", tc106, true, func(b, a *ethside.Iface) { a.Counters.Values["rx_prio3_pause"] = 500 }, "eth.pause", Warn, "rx_prio3_pause +500"},
		{"pauses on another priority grow", tc106, true, func(b, a *ethside.Iface) { a.Counters.Values["rx_prio0_pause"] = 500 }, "", "", ""},
		{"out_of_buffer growing", tc106, true, func(b, a *ethside.Iface) { a.Counters.Values["out_of_buffer"] = 3 }, "eth.pause", Warn, "out_of_buffer +3"},
		{"high BER", tc106, true, func(b, a *ethside.Iface) { a.Counters.Values["rx_corrected_bits_phy"] += 1e9 }, "eth.ber", Warn, "pre-FEC BER 5.0e-04"},
		{"link went down", tc106, true, func(b, a *ethside.Iface) { a.Counters.Values["link_down_events_phy"] = 1 }, "eth.flaps", Fail, "link_down_events_phy +1"},
		{"link went down twice once", tc106, false, func(b, a *ethside.Iface) { b.Counters.Values["link_down_events_phy"] = 2 }, "eth.flaps", Warn, "link_down_events_phy=2"},
		{"rx power low alarm", tc106, false, func(b, a *ethside.Iface) { b.Module.RxPowerDBm[2] = -20 }, "eth.optics", Fail, "rx power lane 3 -20.00 dBm (low alarm -14.40)"},
		{"rx power low warning", tc106, false, func(b, a *ethside.Iface) { b.Module.RxPowerDBm[1] = -11 }, "eth.optics", Warn, "low warning -10.40"},
		{"module alarm flag", tc106, false, func(b, a *ethside.Iface) { b.Module.Alarms = []string{"Laser bias current high alarm (Channel 1)"} }, "eth.optics", Fail, "Laser bias current high alarm"},
		{"no thresholds, rx out of usual range", tc106, false, func(b, a *ethside.Iface) {
			b.Module.RxPower, b.Module.RxPowerDBm[0] = ethside.Thresholds{}, -12
		}, "eth.optics", Warn, "usual minimum -10.00"},
		{"HCA hot", tc106, false, func(b, a *ethside.Iface) { b.HCATemp = &ethside.Sensor{C: 97, CritC: ptr(105.0), MaxC: ptr(95.0)} }, "eth.temp", Warn, "at or above max 95"},
		{"HCA critical", tc106, false, func(b, a *ethside.Iface) { b.HCATemp = &ethside.Sensor{C: 106, CritC: ptr(105.0)} }, "eth.temp", Fail, "crit 105"},
		{"tiny rings", tc106, false, func(b, a *ethside.Iface) { b.Ring = &ethside.Ring{RX: 512, TX: 8192, RXMax: 8192, TXMax: 8192} }, "eth.rings", Warn, "rx 512"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := cloneIface(healthyIface())
			after := cloneIface(before)
			if c.edit != nil {
				c.edit(&before, &after)
				if !c.watch {
					after = before
				}
			}
			var watch time.Duration
			readings := []ethside.Iface{before}
			if c.watch {
				watch, readings = 10*time.Second, append(readings, after)
			}
			got := runEthernet(t, c.env, watch, readings...)
			assertOnlyFault(t, got, c.check, c.status, c.value)
		})
	}
}

// assertOnlyFault: the one WARN or FAIL is check's, with status and value;
// or, for check "", none at all and no SKIP (every part was given).
func assertOnlyFault(t *testing.T, got []Finding, check string, status Status, value string) {
	t.Helper()
	var faults []Finding
	for _, f := range got {
		if f.Subject != "mlx5_0/eth2" {
			t.Errorf("subject %q", f.Subject)
		}
		if f.Status == Warn || f.Status == Fail {
			faults = append(faults, f)
			if f.Remedy == "" {
				t.Errorf("%s %s without a remedy", f.Status, f.Check)
			}
		}
		if check == "" && f.Status == Skip && f.Check != "eth.ber" {
			t.Errorf("healthy: SKIP %s %s", f.Check, f.Value)
		}
	}
	if check == "" {
		if len(faults) > 0 {
			t.Errorf("healthy, got %+v", faults)
		}
		return
	}
	if len(faults) != 1 || faults[0].Check != check || faults[0].Status != status || !strings.Contains(faults[0].Value, value) {
		t.Errorf("want one %s %s containing %q, got %+v", status, check, value, faults)
	}
}

// A device that answers nothing gives SKIPs, never a fault: every part
// nil, a Read error, and problems an input had.
func TestEthernetNothingSaid(t *testing.T) {
	got := runEthernet(t, tc106, 10*time.Second, ethside.Iface{Name: "eth2",
		Problems: []string{"ethtool-m.eth2.txt line 4: no value"}})
	if len(got) != len(ethJudges)+1 {
		t.Errorf("%d findings, want one a check and eth.input's", len(got))
	}
	for _, f := range got {
		if f.Status != Skip {
			t.Errorf("%s %s %q, want SKIP", f.Status, f.Check, f.Value)
		}
	}
	if got[0].Check != "eth.input" || !strings.Contains(got[0].Value, "ethtool-m.eth2.txt") {
		t.Errorf("first %+v, want eth.input naming the file", got[0])
	}
	opts := Options{Ethernet: &fakeEthernet{err: errors.New("open pastes/: no such directory")}}
	opts.defaults()
	h := &host{opts: opts}
	h.readEthernetFirst()
	got = checkEthernet(h)
	if len(got) != 1 || got[0].Status != Skip || !strings.Contains(got[0].Value, "no such directory") {
		t.Errorf("read error: %+v", got)
	}
}

// The RoCE traffic's priority follows NCCL_IB_TC, the trust mode and the
// DSCP table; what cannot be told is said, not guessed.
func TestRoCETrafficPriority(t *testing.T) {
	dscp := &ethside.DCB{Trust: "dscp"}
	for _, c := range []struct {
		env   map[string]string
		dcb   *ethside.DCB
		prio  int
		known bool
		why   string
	}{
		{tc106, dscp, 3, true, "DSCP 26 → priority 3 by the default mapping"},
		{map[string]string{"NCCL_IB_TC": "160"}, dscp, 5, true, "DSCP 40 → priority 5"},
		{nil, dscp, 0, true, "NCCL_IB_TC unset"},
		{tc106, &ethside.DCB{Trust: "dscp", DSCPPrio: map[int]int{26: 4}}, 4, true, "by the NIC's DSCP table"},
		{tc106, &ethside.DCB{Trust: "pcp"}, 0, false, "VLAN tag's PCP"},
		{tc106, &ethside.DCB{}, 0, false, "trust mode is not shown"},
		{tc106, nil, 0, false, "trust mode is not shown"},
		{map[string]string{"NCCL_IB_TC": "x"}, dscp, 0, false, "not a traffic class"},
	} {
		got := roceTrafficPriority(c.env, c.dcb)
		if got.known != c.known || (c.known && got.prio != c.prio) || !strings.Contains(got.why, c.why) {
			t.Errorf("%v %+v: %+v, want prio %d known %v (%q)", c.env, c.dcb, got, c.prio, c.known, c.why)
		}
	}
}

// Through Run: under --watch the Ethernet side is read twice around the
// one wait port.counters takes, its checks come last, and a fault on a
// device NCCL does not use is INFO, as for the port checks.
func TestEthernetInRun(t *testing.T) {
	root := sharedFixture(t, "roce-wrong-gid")
	bad := cloneIface(healthyIface())
	bad.DCB.PFCEnabled = &[8]bool{}
	for _, c := range []struct {
		hca    string
		status Status
	}{{"mlx5_0", Fail}, {"^mlx5_0", Info}} {
		reader := &fakeEthernet{readings: [][]ethside.Iface{{bad}}}
		waits := 0
		r, err := Run(Options{SysRoot: root + "/sys", ProcRoot: root + "/proc", DevRoot: root + "/dev",
			Env: map[string]string{"NCCL_IB_TC": "106", "NCCL_IB_HCA": c.hca}, Ethernet: reader,
			Watch: 10 * time.Second, Wait: func(time.Duration) { waits++ }})
		if err != nil {
			t.Fatal(err)
		}
		if waits != 1 || reader.calls != 2 {
			t.Errorf("%s: %d waits, %d reads; want 1 and 2", c.hca, waits, reader.calls)
		}
		pfc := r.Find("eth.pfc", "mlx5_0/eth2")
		if len(pfc) != 1 || pfc[0].Status != c.status {
			t.Errorf("NCCL_IB_HCA=%s: eth.pfc %+v, want %s", c.hca, pfc, c.status)
		}
		if last := r.Findings[len(r.Findings)-1]; !strings.HasPrefix(last.Check, "eth.") {
			t.Errorf("last finding %s, want the Ethernet checks last", last.Check)
		}
	}
}

// With the link down, a module's alarms explain it: WARN, so that a spare
// port with a module and no fibre does not drain the node.
func TestOpticsLinkDown(t *testing.T) {
	i := cloneIface(healthyIface())
	i.Module.RxPowerDBm[0] = -40
	i.Link.Up = ptr(false)
	f := judgeOptics(&ethPort{now: i})
	if f.Status != Warn || !strings.Contains(f.Value, "link down") {
		t.Errorf("%+v", f)
	}
}

// BER: corrected bits over the bits carried; PAM4 links are held to
// IEEE's 2.4e-4, NRZ ones to 1e-8.
func TestBER(t *testing.T) {
	for _, c := range []struct {
		speed     int
		module    string
		corrected uint64
		want      Status
	}{
		{200000, "QSFP56", 2e9, Warn}, // 2e9 / 2e12 bits = 1e-3
		{100000, "QSFP28", 2e4, Warn}, // 2e-8, 4×25G NRZ
		{100000, "QSFP28", 5e3, Pass}, // 5e-9
		{25000, "SFP28", 1e3, Pass},   // 4e-9
		{25000, "SFP28", 1e4, Warn},   // 4e-8 > 1e-8
		{100000, "QSFP56", 1e6, Pass}, // 1e-6: normal for PAM4
		{400000, "OSFP", 1e9, Warn},   // 2.5e-4 > 2.4e-4
	} {
		i := cloneIface(healthyIface())
		i.Link.SpeedMbps, i.Module.Identifier = c.speed, c.module
		a := *i.Counters
		a.Values = map[string]uint64{"rx_corrected_bits_phy": i.Counters.Values["rx_corrected_bits_phy"] + c.corrected}
		f := judgeBER(&ethPort{now: i, before: i.Counters, after: &a, watch: 10 * time.Second})
		if f.Status != c.want {
			t.Errorf("%dM %s +%d: %s %q", c.speed, c.module, c.corrected, f.Status, f.Value)
		}
	}
}

// One report's eth.* lines, text and JSON, for two ports under --watch:
// a healthy one and one with a dirty fibre, PFC on the wrong priority and
// the defaults of a fresh install. go test -update rewrites it.
func TestEthernetGolden(t *testing.T) {
	good := cloneIface(healthyIface())
	bad := cloneIface(healthyIface())
	bad.Name, bad.RDMADev = "eth3", "mlx5_1"
	bad.DCB.PFCEnabled, bad.DCB.Trust = &[8]bool{4: true}, "pcp"
	bad.Module.RxPowerDBm[1] = -11.5
	bad.Ring = &ethside.Ring{Source: "ethtool-g.eth3.txt", RX: 1024, TX: 1024, RXMax: 8192, TXMax: 8192}
	bad.Coalesce = &ethside.Coalesce{Source: "ethtool-c.eth3.txt", AdaptiveRX: ptr(false), RXUsecs: 8}
	bad.Problems = []string{"ethtool-l.eth3.txt: empty"}
	bad.Channels = nil
	bad.Counters.Values["rx_prio4_pause"] = 10
	good2, bad2 := cloneIface(good), cloneIface(bad)
	good2.Counters.Values["rx_corrected_bits_phy"] += 2000
	bad2.Counters.Values["rx_crc_errors_phy"] = 17
	bad2.Counters.Values["rx_corrected_bits_phy"] += 6e8 // 3e-4 at 200G over 10 s
	bad2.Counters.Values["rx_prio4_pause"] = 90
	opts := Options{Env: tc106, Watch: 10 * time.Second, Wait: func(time.Duration) {},
		Ethernet: &fakeEthernet{readings: [][]ethside.Iface{{good, bad}, {good2, bad2}}}}
	opts.defaults()
	h := &host{opts: opts}
	h.readEthernetFirst()
	r := &Report{Findings: checkEthernet(h)}
	var text, js strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "ethernet.golden", []byte(text.String()))
	golden.Check(t, "ethernet.golden.json", []byte(js.String()))
}
