// Package metrics is the agent's Prometheus metrics on a registry of its
// own: per peer an RTT histogram split into its network and host parts,
// probes sent, lost and late, a reachable gauge and the last success; for the
// agent its CPU time and probe budget. Series exist only for the peers of
// the current pinglist (SetPeers): a peer that leaves it is deleted, and
// nothing a peer sends makes a series, so the series are bounded by the
// pinglist however long the agent runs.
package metrics

import (
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"

	"github.com/rdmabench/rdmabench/agent/pinglist"
	"github.com/rdmabench/rdmabench/agent/wire"
)

// MaxPeers bounds a pinglist's series: ToR size + k is tens of peers; a
// list of more is a configuration error, refused.
const MaxPeers = 4096

// Part is which part of a round trip a histogram sample is.
type Part uint8

const (
	// PartNetwork is the round trip less the responder's hold time.
	PartNetwork Part = iota + 1
	// PartHost is the responder's hold time, as it reported it.
	PartHost
)

func (p Part) String() string {
	switch p {
	case PartNetwork:
		return "network"
	case PartHost:
		return "host"
	}
	return fmt.Sprintf("Part(%d)", uint8(p))
}

// Clock is where a probe's timestamps come from: the wire's, as the
// probes and the address record carry it.
type Clock = wire.Clock

// The clocks, for callers of this package.
const (
	ClockCQE = wire.ClockCQE
	ClockCPU = wire.ClockCPU
)

// Local is the agent itself: its host, and its RNIC when it runs one per
// RNIC (-d), else "".
type Local struct {
	Host string
	Dev  string
}

// Peer is a pinglist entry with its address: the series' identity.
type Peer struct {
	Addr  string // HOST:PORT, the peer label
	Host  string
	ToR   string
	Scope pinglist.Scope
}

// RTTBuckets are the histogram's upper bounds: 2 µs to about 92 ms by
// factors of √2, fine enough that a median 1.5 times higher moves to
// another bucket (a factor of 2 would hide it inside one), up to past the
// probe timeout.
func RTTBuckets() []float64 {
	b := make([]float64, 0, 32)
	for v := 2e-6; v < 0.1; v *= math.Sqrt2 {
		b = append(b, v)
	}
	return b
}

// peerSeries are one peer's children, looked up once when it joins.
type peerSeries struct {
	network, host prometheus.Observer
	sent, lost    prometheus.Counter
	late          prometheus.Counter
	reachable, ok prometheus.Gauge
}

// Set is the agent's metrics.
type Set struct {
	reg         *prometheus.Registry
	rtt         *prometheus.HistogramVec
	sent, lost  *prometheus.CounterVec
	late        *prometheus.CounterVec
	reachable   *prometheus.GaugeVec
	lastSuccess *prometheus.GaugeVec
	peerCount   *prometheus.GaugeVec
	budget      prometheus.Gauge
	clock       Clock
	local       Local
	counts      atomic.Pointer[func() Counts]
	mu          sync.Mutex // guards peers: the prober and the list's reloads run apart
	peers       map[string]peerSeries
	eth         *ethernet // the Ethernet side, once ReadEthernet set it
}

// New makes the metrics of the agent local, timing with clock.
func New(local Local, clock Clock) *Set {
	constLabels := prometheus.Labels{LabelLocalHost: local.Host, LabelLocalDev: local.Dev}
	peerLabels := []string{LabelPeer, LabelPeerHost, LabelPeerToR, LabelScope}
	s := &Set{
		reg: prometheus.NewRegistry(),
		rtt: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: RTT, ConstLabels: constLabels, Buckets: RTTBuckets(),
			Help: "probe round trips to the peer: part network is the round trip less the responder's hold time, part host the hold time it reported; clock says whose timestamps"},
			append(peerLabels, LabelPart, LabelClock)),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ProbesSent, ConstLabels: constLabels,
			Help: "probes sent to the peer"}, peerLabels),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ProbesLost, ConstLabels: constLabels,
			Help: "probes to the peer that no reply answered within the loss deadline (agent/rules.Reach.LostAfter)"}, peerLabels),
		late: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ProbesLate, ConstLabels: constLabels,
			Help: "probes to the peer answered after the probe timeout, within the loss deadline (counted in the RTT histogram, not as lost)"}, peerLabels),
		reachable: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: PeerReachable, ConstLabels: constLabels,
			Help: "1 while the peer answers, 0 once several probes in a row go unanswered within the probe timeout (agent/rules.Reach)"}, peerLabels),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: LastSuccess, ConstLabels: constLabels,
			Help: "when the peer last answered a probe, in Unix seconds; 0 before its first reply"}, peerLabels),
		peerCount: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: Peers, ConstLabels: constLabels,
			Help: "peers on the pinglist, by scope: the ToR-mesh and the remote draw"}, []string{LabelScope}),
		budget: prometheus.NewGauge(prometheus.GaugeOpts{Name: ProbeBudget, ConstLabels: constLabels,
			Help: "probes a second the agent may send to all its peers together"}),
		clock: clock,
		local: local,
		peers: map[string]peerSeries{},
	}
	cpu := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: CPUSeconds, ConstLabels: constLabels,
		Help: "CPU time the agent's process has used, user and system"}, processCPU)
	// The rules' RNIC-down trusts an agent's own view of its peers only
	// once it has had time to probe them: a restart quicker than a scrape
	// interval leaves up at 1, and this is what tells.
	start := prometheus.NewGauge(prometheus.GaugeOpts{Name: StartTime, ConstLabels: constLabels,
		Help: "when the agent started, in Unix seconds"})
	start.Set(float64(time.Now().UnixNano()) / 1e9)
	s.reg.MustRegister(s.rtt, s.sent, s.lost, s.late, s.reachable, s.lastSuccess, s.peerCount, s.budget, cpu, datagrams{s}, start)
	return s
}

// Counts are what became of the datagrams the agent received, as its
// transport and prober count them: the first sign of a flood, of a peer
// speaking another version, or of replies arriving after their timeout.
type Counts struct {
	Answered uint64 // probes answered
	Refused  uint64 // probes not answered: over the answer rate, or no address handle for their sender
	Bad      uint64 // not an agent message, or no sender in its header
	Stray    uint64 // replies to no probe in flight: late, duplicated, from another session or source
	LastBad  string // why the last bad one was, for the agent's log (not exported)
}

// CountDatagrams makes f the source of the datagrams family, read at each
// scrape (0 until set).
func (s *Set) CountDatagrams(f func() Counts) { s.counts.Store(&f) }

// datagrams exports Counts as one counter family by outcome.
type datagrams struct{ s *Set }

var datagramsDesc = func(constLabels prometheus.Labels) *prometheus.Desc {
	return prometheus.NewDesc(Datagrams, "datagrams the agent received, by what became of them: answered or refused probes, bad datagrams, stray replies",
		[]string{LabelOutcome}, constLabels)
}

func (d datagrams) desc() *prometheus.Desc {
	return datagramsDesc(prometheus.Labels{LabelLocalHost: d.s.local.Host, LabelLocalDev: d.s.local.Dev})
}

func (d datagrams) Describe(ch chan<- *prometheus.Desc) { ch <- d.desc() }

func (d datagrams) Collect(ch chan<- prometheus.Metric) {
	var c Counts
	if f := d.s.counts.Load(); f != nil {
		c = (*f)()
	}
	desc := d.desc()
	for _, o := range []struct {
		name string
		n    uint64
	}{{"answered", c.Answered}, {"refused", c.Refused}, {"bad", c.Bad}, {"stray", c.Stray}} {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(o.n), o.name)
	}
}

// processCPU is the process's user and system time in seconds.
func processCPU() float64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	tv := func(t unix.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// Registry is the private registry, for tests and a caller's own handler.
func (s *Set) Registry() *prometheus.Registry { return s.reg }

// Handler serves the registry as /metrics does.
func (s *Set) Handler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// SetPeers makes the series of peers and deletes those of every peer no
// longer among them (a new period's draw, a peers file re-read). A peer
// already present keeps its counters. An address twice, or more than
// MaxPeers, is an error and changes nothing.
func (s *Set) SetPeers(peers []Peer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(peers) > MaxPeers {
		return fmt.Errorf("%d peers, more than %d", len(peers), MaxPeers)
	}
	want := make(map[string]Peer, len(peers))
	for _, p := range peers {
		if _, dup := want[p.Addr]; dup {
			return fmt.Errorf("peer %s twice", p.Addr)
		}
		want[p.Addr] = p
	}
	for addr := range s.peers {
		if _, keep := want[addr]; !keep {
			s.delete(addr)
		}
	}
	counts := map[pinglist.Scope]int{pinglist.ScopeToR: 0, pinglist.ScopeRemote: 0}
	for addr, p := range want {
		counts[p.Scope]++
		if _, ok := s.peers[addr]; ok {
			continue
		}
		l := []string{p.Addr, p.Host, p.ToR, p.Scope.String()}
		ps := peerSeries{
			network:   s.rtt.WithLabelValues(append(l, PartNetwork.String(), s.clock.String())...),
			host:      s.rtt.WithLabelValues(append(l, PartHost.String(), s.clock.String())...),
			sent:      s.sent.WithLabelValues(l...),
			lost:      s.lost.WithLabelValues(l...),
			late:      s.late.WithLabelValues(l...),
			reachable: s.reachable.WithLabelValues(l...),
			ok:        s.lastSuccess.WithLabelValues(l...),
		}
		ps.reachable.Set(1) // innocent until probes are lost
		s.peers[addr] = ps
	}
	for scope, n := range counts {
		s.peerCount.WithLabelValues(scope.String()).Set(float64(n))
	}
	return nil
}

// delete removes every series of the peer at addr.
func (s *Set) delete(addr string) {
	match := prometheus.Labels{LabelPeer: addr}
	s.rtt.DeletePartialMatch(match)
	s.sent.DeletePartialMatch(match)
	s.lost.DeletePartialMatch(match)
	s.late.DeletePartialMatch(match)
	s.reachable.DeletePartialMatch(match)
	s.lastSuccess.DeletePartialMatch(match)
	delete(s.peers, addr)
}

// Sent counts a probe sent to addr; false when addr is not on the list.
func (s *Set) Sent(addr string) bool {
	return s.onPeer(addr, func(ps peerSeries) { ps.sent.Inc() })
}

// Lost counts a probe to addr that no reply answered within LostAfter.
func (s *Set) Lost(addr string) bool {
	return s.onPeer(addr, func(ps peerSeries) { ps.lost.Inc() })
}

// SetReachable sets addr's reachable gauge, as the caller's run of
// unanswered probes says.
func (s *Set) SetReachable(addr string, reachable bool) bool {
	return s.onPeer(addr, func(ps peerSeries) { ps.reachable.Set(b2f(reachable)) })
}

// Answered records a reply from addr: the round trip and the hold time the
// responder reported, whether it came after the timeout, at when. A hold
// time outside [0, rtt] is a peer's clock or a lie; it is clamped, so the
// network part is never negative.
func (s *Set) Answered(addr string, rtt, hold time.Duration, late bool, when time.Time) bool {
	return s.onPeer(addr, func(ps peerSeries) {
		rtt = max(rtt, 0)
		hold = min(max(hold, 0), rtt)
		ps.network.Observe((rtt - hold).Seconds())
		ps.host.Observe(hold.Seconds())
		if late {
			ps.late.Inc()
		}
		ps.reachable.Set(1)
		ps.ok.Set(float64(when.UnixNano()) / 1e9)
	})
}

// onPeer runs update on addr's series under the lock; false (and nothing
// run) when addr is not on the list.
func (s *Set) onPeer(addr string, update func(peerSeries)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps, ok := s.peers[addr]
	if ok {
		update(ps)
	}
	return ok
}

// SetBudget records the probes a second the agent may send.
func (s *Set) SetBudget(perSecond float64) { s.budget.Set(perSecond) }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
