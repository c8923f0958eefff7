package metrics

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmabench/rdmabench/ethside"
)

// The Ethernet side of the agent's RNIC (issue 49), read at a scrape:
// the link, the counters that doctor judges summed by class and priority,
// PFC per priority, the optical module's readings and the HCA's
// temperature. Bounded: a few netdevs, seven classes, nine priorities,
// eight lanes; no counter name becomes a label.
const (
	EthLinkUp       = "rdmabench_agent_eth_link_up"
	EthSpeed        = "rdmabench_agent_eth_speed_bytes_per_second"
	EthCounters     = "rdmabench_agent_eth_events_total"
	EthPFC          = "rdmabench_agent_eth_pfc_enabled"
	EthRxPower      = "rdmabench_agent_eth_module_rx_power_dbm"
	EthTxPower      = "rdmabench_agent_eth_module_tx_power_dbm"
	EthModuleTemp   = "rdmabench_agent_eth_module_temperature_celsius"
	EthModuleAlarms = "rdmabench_agent_eth_module_alarms"
	HCATemp         = "rdmabench_agent_hca_temperature_celsius"
)

// The Ethernet families' own labels.
const (
	LabelIface    = "iface"    // the netdev
	LabelKind     = "kind"     // ethside.CounterKind
	LabelPriority = "priority" // 0..7, "port" for a counter of the whole port
	LabelLane     = "lane"     // 1..8
)

// maxLanes bounds the lanes exported of one module.
const maxLanes = 8

// EthReadEvery is how often the Ethernet side is read. A read is many
// system calls (ethtool netlink and ioctls, the module's EEPROM over its
// I2C bus, rtnetlink DCB, hwmon, and an rxe port found by its GID table's
// 1024 sysfs files): three agents reading at every 1 s scrape starved the
// one-vCPU rxe guests until neither Prometheus nor their peers got an
// answer within a period.
const EthReadEvery = 10 * time.Second

// ReadEthernet reads the Ethernet side through r once now, and exports
// the last read at every scrape; RefreshEthernet reads it again every
// EthReadEvery. A scrape never reads: on a slow host (rxe in a TCG guest)
// one read took longer than Prometheus's 1 s scrape timeout, and every
// tenth scrape failed. A read that fails exports nothing of it until the
// next read.
func (s *Set) ReadEthernet(r ethside.Reader) {
	e := &ethernet{r: r, c: prometheus.Labels{LabelLocalHost: s.local.Host, LabelLocalDev: s.local.Dev}, every: EthReadEvery}
	e.refresh()
	s.eth = e
	s.reg.MustRegister(e)
}

// RefreshEthernet reads the Ethernet side again every EthReadEvery until
// ctx ends (the agent's Run joins it); without ReadEthernet it returns at
// once.
func (s *Set) RefreshEthernet(ctx context.Context) {
	if s.eth == nil {
		return
	}
	tick := time.NewTicker(s.eth.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.eth.refresh()
		}
	}
}

type ethernet struct {
	r     ethside.Reader
	c     prometheus.Labels
	every time.Duration

	mu     sync.Mutex // guards the last read, not the reading
	ifaces []ethside.Iface
	err    error
}

// refresh reads, then keeps the read for the scrapes.
func (e *ethernet) refresh() {
	ifaces, err := e.r.Read()
	e.mu.Lock()
	e.ifaces, e.err = ifaces, err
	e.mu.Unlock()
}

// last is the last read.
func (e *ethernet) last() ([]ethside.Iface, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ifaces, e.err
}

func (e *ethernet) descs() map[string]*prometheus.Desc {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append([]string{LabelIface}, labels...), e.c)
	}
	return map[string]*prometheus.Desc{
		EthLinkUp:       d(EthLinkUp, "1 while the netdev's link is up (ethtool)"),
		EthSpeed:        d(EthSpeed, "the link's speed as it trained (400 Gb/s is 5e10)"),
		EthCounters:     d(EthCounters, "the NIC's Ethernet counters summed by what they count (link errors, FEC-corrected bits, pause, discards, link downs, ECN/CNP) and priority", LabelKind, LabelPriority),
		EthPFC:          d(EthPFC, "1 where PFC is on for the priority", LabelPriority),
		EthRxPower:      d(EthRxPower, "the optical module's received power by lane", LabelLane),
		EthTxPower:      d(EthTxPower, "the optical module's transmitted power by lane", LabelLane),
		EthModuleTemp:   d(EthModuleTemp, "the optical module's temperature"),
		EthModuleAlarms: d(EthModuleAlarms, "the module's own alarm and warning flags that are on"),
		HCATemp:         d(HCATemp, "the HCA's temperature (hwmon)"),
	}
}

func (e *ethernet) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range e.descs() {
		ch <- d
	}
}

func (e *ethernet) Collect(ch chan<- prometheus.Metric) {
	ifaces, err := e.last()
	if err != nil {
		return
	}
	d := e.descs()
	gauge := func(name string, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d[name], prometheus.GaugeValue, v, labels...)
	}
	for _, it := range ifaces {
		if l := it.Link; l != nil {
			if l.Up != nil {
				gauge(EthLinkUp, b2f(*l.Up), it.Name)
			}
			if l.SpeedMbps > 0 {
				gauge(EthSpeed, float64(l.SpeedMbps)*1e6/8, it.Name)
			}
		}
		if c := it.Counters; c != nil {
			for k, v := range counterSums(c) {
				ch <- prometheus.MustNewConstMetric(d[EthCounters], prometheus.CounterValue, v, it.Name, k[0], k[1])
			}
		}
		if dcb := it.DCB; dcb != nil && dcb.PFCEnabled != nil {
			for p, on := range dcb.PFCEnabled {
				gauge(EthPFC, b2f(on), it.Name, strconv.Itoa(p))
			}
		}
		e.module(gauge, it)
		if t := it.HCATemp; t != nil {
			gauge(HCATemp, t.C, it.Name)
		}
	}
}

func (e *ethernet) module(gauge func(string, float64, ...string), it ethside.Iface) {
	m := it.Module
	if m == nil {
		return
	}
	for name, lanes := range map[string][]float64{EthRxPower: m.RxPowerDBm, EthTxPower: m.TxPowerDBm} {
		for i, v := range lanes[:min(len(lanes), maxLanes)] {
			gauge(name, v, it.Name, strconv.Itoa(i+1))
		}
	}
	if m.TempC != nil {
		gauge(EthModuleTemp, *m.TempC, it.Name)
	}
	gauge(EthModuleAlarms, float64(len(m.Alarms)), it.Name)
}

// counterSums adds a reading's counters by class and priority, leaving
// out what counts traffic.
func counterSums(c *ethside.Counters) map[[2]string]float64 {
	out := map[[2]string]float64{}
	for name, v := range c.Values {
		cl := ethside.ClassifyCounter(name)
		if cl.Kind == ethside.CounterOther {
			continue
		}
		prio := "port"
		if cl.Prio >= 0 {
			prio = strconv.Itoa(cl.Prio)
		}
		out[[2]string{cl.Kind.String(), prio}] += float64(v)
	}
	return out
}

// EthNames are the Ethernet families, exported once ReadEthernet is set.
func EthNames() []string {
	return []string{EthLinkUp, EthSpeed, EthCounters, EthPFC, EthRxPower, EthTxPower, EthModuleTemp, EthModuleAlarms, HCATemp}
}
