package metrics

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
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

// slowReader counts its reads; each read after the first waits for
// release, as a read on a slow host outlasts a scrape.
type slowReader struct {
	mu      sync.Mutex
	n       int
	release chan struct{}
}

func (r *slowReader) Read() ([]ethside.Iface, error) {
	r.mu.Lock()
	r.n++
	first := r.n == 1
	r.mu.Unlock()
	if !first {
		<-r.release
	}
	up := true
	return []ethside.Iface{{Name: "eth2", Link: &ethside.Link{Up: &up}}}, nil
}

func (r *slowReader) reads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// The Ethernet side is read once by ReadEthernet and again only by
// RefreshEthernet's loop: scrapes export the last read, and a scrape
// during a read that does not end answers at once.
func TestEthernetReadApartFromScrapes(t *testing.T) {
	r := &slowReader{release: make(chan struct{})}
	s := New(Local{Host: "n1"}, ClockCPU)
	s.ReadEthernet(r)
	s.eth.every = 5 * time.Millisecond
	scrape := func() int {
		ch := make(chan prometheus.Metric, 64)
		s.eth.Collect(ch)
		close(ch)
		return len(ch)
	}
	for range 3 {
		if n := scrape(); n != 1 || r.reads() != 1 {
			t.Fatalf("%d series after %d reads, want the link's after ReadEthernet's one read", n, r.reads())
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.RefreshEthernet(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for r.reads() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if n := scrape(); n != 1 || time.Since(start) > time.Second {
		t.Errorf("a scrape during a read: %d series in %v, want the last read's at once", n, time.Since(start))
	}
	close(r.release)
	for r.reads() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if r.reads() < 3 {
		t.Errorf("%d reads within 5 s of a 5 ms refresh, want the loop to read again", r.reads())
	}
}
