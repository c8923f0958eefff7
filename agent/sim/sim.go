// Package sim simulates a fabric of agents to size the rules: how soon an
// RNIC failure fires RNICDown (against the target of 2 periods, which the
// wait for the failed node's own scrape costs 6% of failures),
// that an agent killed never does, and how many alerts a healthy fabric
// raises a day at the noise measured on the rxe target. It evaluates the Go conditions of agent/rules, which the
// rule file is written from, on the series the rules would see.
//
// Two kinds of event are simulated two ways. An RNIC failure is simulated
// probe by probe for every prober of the failed node: its probe phase, the
// run of losses, its own stalls, its scrape's phase and the rule's
// evaluation. The healthy fabric's noise is simulated window by window:
// each node's stalls in each rule window, and what they do to each pair's
// medians; the loss-driven rules (RNIC down, path loss) need a run of
// losses whose chance per window is far below one in 10¹², so their
// windows are counted from the exact binomial tail, one Poisson draw for
// the day, instead of 10¹² draws.
package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/rdmabench/rdmabench/agent/pinglist"
	"github.com/rdmabench/rdmabench/agent/rules"
)

// Noise is a healthy fabric's: what the rxe target shows.
type Noise struct {
	RTT    time.Duration // a pair's median network RTT
	Hold   time.Duration // a responder's median hold time
	Spread float64       // the RTT's spread: sigma of its logarithm
	Loss   float64       // a probe lost: no reply within Reach.LostAfter
	Late   float64       // a probe answered after Reach.Timeout (within LostAfter)
	// Stalls: each host stalls StallRate times a second, for a time drawn
	// uniformly from StallMin to StallMax; a probe that arrives in a
	// stall is held until it ends, a reply that arrives in the prober's
	// stall is timed late (the CPU clock; the CQE clock would not see it).
	StallRate          float64
	StallMin, StallMax time.Duration
}

// RXENoise is the rxe target's. The RTT, its spread and the short stalls
// are from make demo's send-lat (8 B, 5000 ping-pongs): typical 80 µs, p99
// 2.5 ms, max 9.7 ms: a spread of about 20% around the median, and about
// one round trip in fifty inside a stall of a few ms, here 5 stalls a
// second of 1-8 ms (2.25% of the time). Loss and lateness are from the
// agents' own series in TestTwoNodeAgent's healthy phase (six agents on
// two TCG guests, Prometheus scraping them): none of 35 834 probes lost
// (below 1e-4, the bound taken), 3.04% answered after the 50 ms timeout.
func RXENoise() Noise {
	return Noise{RTT: 80 * time.Microsecond, Hold: 20 * time.Microsecond, Spread: 0.2, Loss: 1e-4, Late: 0.0304,
		StallRate: 5, StallMin: time.Millisecond, StallMax: 8 * time.Millisecond}
}

// Config is a simulated fabric.
type Config struct {
	Nodes, ToRSize, K int
	Rate              float64 // probes a second to each peer
	Rules             rules.Rules
	Reach             rules.Reach
	Noise             Noise
}

// Issue39 is the fabric of issue 39: 10 000 nodes under ToRs of 32, k 8,
// 10 probes a second a peer, one-second evaluation.
func Issue39() Config {
	return Config{Nodes: 10000, ToRSize: 32, K: 8, Rate: 10, Rules: rules.Default(), Reach: rules.DefaultReach, Noise: RXENoise()}
}

// fabric is who probes whom: each node's ToR-mesh probers and how many
// probe it in all (its ToR and the draws that landed on it).
type fabric struct {
	torProbers []int // by node
	probers    []int
	peers      []int // each node's own pinglist
	pairs      int   // directed pairs probed
	torPairs   int
}

func (c Config) fabric(seed uint64) (*fabric, error) {
	m := make(map[string]string, c.Nodes)
	names := make([]string, c.Nodes)
	for i := range c.Nodes {
		names[i] = fmt.Sprintf("n%05d", i)
		m[names[i]] = fmt.Sprintf("tor%04d", i/c.ToRSize)
	}
	topo := pinglist.NewTopology(m)
	index := make(map[string]int, c.Nodes)
	for i, n := range names {
		index[n] = i
	}
	f := &fabric{torProbers: make([]int, c.Nodes), probers: make([]int, c.Nodes), peers: make([]int, c.Nodes)}
	for i, n := range names {
		l, err := pinglist.Build(topo, n, c.K, pinglist.Draw{Seed: seed})
		if err != nil {
			return nil, err
		}
		f.peers[i] = len(l.Entries)
		for _, e := range l.Entries {
			j := index[e.Host]
			f.probers[j]++
			f.pairs++
			if e.Scope == pinglist.ScopeToR {
				f.torProbers[j]++
				f.torPairs++
			}
		}
	}
	return f, nil
}

// Detection is the RNIC failures' trials.
type Detection struct {
	Trials       int
	Fired        int           // trials in which RNICDown fired at all
	WithinTarget int           // fired within 2 periods of the failure
	P50, P99     time.Duration // from the failure to the alert
	Max          time.Duration
}

// Fraction is the share of trials fired within 2 periods.
func (d Detection) Fraction() float64 { return float64(d.WithinTarget) / float64(d.Trials) }

// DetectRNIC fails a random node's RNIC trials times, at a random time in
// the rules' period, and finds when RNICDown fires: each ToR-mesh prober's
// gauge drops once Reach.LostInARow probes in a row are lost and the last
// timed out (later if the prober is stalled then), its scrape (at the
// prober's own phase in the period) carries it to Prometheus. The failed
// node's own agent loses its peers the same way (its probes to each at
// their own phases, its one stall), and its own scrape carries that: until
// then the rule reads its last view, from before the failure, in which it
// reaches its peers. The first evaluation at which the condition holds
// fires the alert (for: 0).
func (c Config) DetectRNIC(trials int, seed uint64) (Detection, error) {
	return c.detect(trials, seed, false)
}

// DetectKilled is DetectRNIC's trials with the node's agent killed instead
// of its RNIC: every prober loses it just the same, but its own scrape
// fails (up 0, its series stale) from the first one after the kill.
// RNICDown must fire in none of them.
func (c Config) DetectKilled(trials int, seed uint64) (Detection, error) {
	return c.detect(trials, seed, true)
}

// stallLeft is how much longer a host is stalled at a random moment: 0
// outside a stall (most of the time).
func (c Config) stallLeft(rng *rand.Rand, _ float64) float64 {
	n := c.Noise
	mean := (n.StallMin + n.StallMax).Seconds() / 2
	// A random moment falls in a stall with the probability of the time
	// stalled, and in a longer stall more often (length-biased).
	if rng.Float64() >= n.StallRate*mean {
		return 0
	}
	lo, hi := n.StallMin.Seconds(), n.StallMax.Seconds()
	// length-biased uniform: density ∝ d on [lo, hi]
	d := math.Sqrt(lo*lo + rng.Float64()*(hi*hi-lo*lo))
	return rng.Float64() * d
}
