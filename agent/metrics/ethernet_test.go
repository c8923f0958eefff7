package metrics

import (
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmabench/rdmabench/ethside"
	"github.com/rdmabench/rdmabench/internal/promtest"
)

type ethReader struct {
	ifaces []ethside.Iface
	err    error
}

func (r ethReader) Read() ([]ethside.Iface, error) { return r.ifaces, r.err }

// The Ethernet families hold the counters summed by class and priority
// (traffic left out), PFC by priority, the module by lane, the HCA's
// temperature; promtool accepts them.
func TestEthernetSeries(t *testing.T) {
	up, temp := true, 41.5
	pfc := [8]bool{3: true}
	it := ethside.Iface{Name: "eth2",
		Link:     &ethside.Link{Up: &up, SpeedMbps: 400000},
		Counters: &ethside.Counters{Values: map[string]uint64{"rx_crc_errors_phy": 5, "rx_symbol_err_phy": 2, "rx_prio3_pause": 7, "tx_prio3_pause": 3, "rx_bytes_phy": 1 << 40, "link_down_events_phy": 1}},
		DCB:      &ethside.DCB{PFCEnabled: &pfc},
		Module:   &ethside.Module{RxPowerDBm: []float64{-1.5, -2.25}, TxPowerDBm: []float64{0.5}, TempC: &temp, Alarms: []string{"Laser rx power low warning (Channel 2)"}},
		HCATemp:  &ethside.Sensor{C: 63},
	}
	s := New(Local{Host: "n1", Dev: "mlx5_0"}, ClockCPU)
	s.ReadEthernet(ethReader{ifaces: []ethside.Iface{it}})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	text, fams := promtest.Scrape(t, srv.URL)
	if complaints := promtest.Promtool(t, text); complaints != "" {
		t.Errorf("promtool check metrics:\n%s\n%s", complaints, text)
	}
	got := map[string]float64{}
	for _, name := range EthNames() {
		if fams[name] == nil {
			t.Errorf("%s not exported", name)
		}
		for _, m := range fams[name].GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			got[promtest.Series(name, m)] = v
		}
	}
	want := map[string]float64{
		`rdmabench_agent_eth_events_total{iface="eth2",kind="link_error",local_dev="mlx5_0",local_host="n1",priority="port"}`: 7,
		`rdmabench_agent_eth_events_total{iface="eth2",kind="pause",local_dev="mlx5_0",local_host="n1",priority="3"}`:         10,
		`rdmabench_agent_eth_events_total{iface="eth2",kind="link_down",local_dev="mlx5_0",local_host="n1",priority="port"}`:  1,
		`rdmabench_agent_eth_pfc_enabled{iface="eth2",local_dev="mlx5_0",local_host="n1",priority="3"}`:                       1,
		`rdmabench_agent_eth_pfc_enabled{iface="eth2",local_dev="mlx5_0",local_host="n1",priority="4"}`:                       0,
		`rdmabench_agent_eth_module_rx_power_dbm{iface="eth2",lane="2",local_dev="mlx5_0",local_host="n1"}`:                   -2.25,
		`rdmabench_agent_eth_speed_bytes_per_second{iface="eth2",local_dev="mlx5_0",local_host="n1"}`:                         5e10,
		`rdmabench_agent_eth_module_alarms{iface="eth2",local_dev="mlx5_0",local_host="n1"}`:                                  1,
		`rdmabench_agent_hca_temperature_celsius{iface="eth2",local_dev="mlx5_0",local_host="n1"}`:                            63,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (exported %v), want %v", k, g, ok, v)
		}
	}
	if n := len(fams[EthCounters].GetMetric()); n != 3 {
		t.Errorf("%d counter series, want 3 (traffic is not one)", n)
	}

	// A read that fails exports nothing of the Ethernet side.
	s = New(Local{Host: "n1"}, ClockCPU)
	s.ReadEthernet(ethReader{err: errors.New("no socket")})
	srv2 := httptest.NewServer(s.Handler())
	defer srv2.Close()
	if _, fams := promtest.Scrape(t, srv2.URL); fams[EthCounters] != nil || fams[EthLinkUp] != nil {
		t.Error("a failed read exported Ethernet series")
	}
}

// countingReader counts its reads.
type countingReader struct{ n int }

func (r *countingReader) Read() ([]ethside.Iface, error) {
	r.n++
	up := true
	return []ethside.Iface{{Name: "eth2", Link: &ethside.Link{Up: &up}}}, nil
}

// Scrapes within EthReadEvery of a read export it; the first scrape after
// reads again.
func TestEthernetReadAtMostEvery(t *testing.T) {
	r := &countingReader{}
	clock := time.Unix(1000, 0)
	e := &ethernet{r: r, now: func() time.Time { return clock }}
	scrape := func() int {
		ch := make(chan prometheus.Metric, 64)
		e.Collect(ch)
		close(ch)
		n := 0
		for range ch {
			n++
		}
		return n
	}
	for _, step := range []struct {
		advance time.Duration
		reads   int
	}{{0, 1}, {time.Second, 1}, {EthReadEvery - time.Second - time.Nanosecond, 1}, {time.Nanosecond, 2}, {EthReadEvery / 2, 2}} {
		clock = clock.Add(step.advance)
		if n := scrape(); n != 1 {
			t.Fatalf("%d series, want the link's", n)
		}
		if r.n != step.reads {
			t.Errorf("after %v more: %d reads, want %d", step.advance, r.n, step.reads)
		}
	}
}
