// Package sizing is `rdmabench agent --plan`: for a fabric of N nodes under
// ToRs of S, what each agent probes and answers, what the fabric and
// Prometheus carry, and how soon an RNIC failure is detected, measuring
// nothing.
package sizing

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/rdmabench/rdmabench/agent/metrics"
	"github.com/rdmabench/rdmabench/agent/rules"
	"github.com/rdmabench/rdmabench/agent/wire"
)

// Limits on what a plan takes.
const (
	MaxNodes = 1 << 20
	MaxK     = 1024
	MaxRate  = 1000 // probes a second a peer
)

// PacketOverhead is the bytes a RoCEv2 UD packet adds to its payload:
// Ethernet 14 + FCS 4, IPv4 20, UDP 8, BTH 12, DETH 8, ICRC 4.
const PacketOverhead = 70

// Input is a fabric and the agents' settings.
type Input struct {
	Nodes   int
	ToRSize int
	K       int           // remote peers drawn a period
	Rate    float64       // probes a second to each peer
	Budget  float64       // probes a second a node may send to all its peers
	Redraw  time.Duration // how often the remote peers are drawn anew
	Rules   rules.Rules
	Reach   rules.Reach
}

// DefaultInput is the agents' defaults for a fabric of n nodes under ToRs
// of torSize.
func DefaultInput(n, torSize int) Input {
	return Input{Nodes: n, ToRSize: torSize, K: 8, Rate: 10, Budget: 2000, Redraw: 10 * time.Minute,
		Rules: rules.Default(), Reach: rules.DefaultReach}
}

// Validate says what is wrong with in, in the flags' words.
func (in Input) Validate() error {
	switch {
	case in.Nodes < 2 || in.Nodes > MaxNodes:
		return fmt.Errorf("--plan %d outside 2..%d nodes", in.Nodes, MaxNodes)
	case in.ToRSize < 1 || in.ToRSize > in.Nodes:
		return fmt.Errorf("--tor-size %d outside 1..%d (the nodes)", in.ToRSize, in.Nodes)
	case in.K < 0 || in.K > MaxK:
		return fmt.Errorf("--k %d outside 0..%d", in.K, MaxK)
	case !(in.Rate > 0 && in.Rate <= MaxRate):
		return fmt.Errorf("--rate %g outside (0, %d] probes a second", in.Rate, MaxRate)
	case !(in.Budget > 0 && in.Budget <= MaxRate*metrics.MaxPeers):
		return fmt.Errorf("--budget %g outside (0, %d] probes a second", in.Budget, MaxRate*metrics.MaxPeers)
	case in.Redraw < in.Rules.Period:
		return fmt.Errorf("--redraw %v below the period %v", in.Redraw, in.Rules.Period)
	case in.ToRSize-1+in.K > metrics.MaxPeers:
		return fmt.Errorf("%d peers a node, more than an agent's %d", in.ToRSize-1+in.K, metrics.MaxPeers)
	}
	return nil
}

// Plan is what the agents of a fabric do and cost.
type Plan struct {
	Input
	ToRs        int // ToRs of ToRSize (the last may be smaller)
	ToRPeers    int // a node's ToR-mesh
	RemotePeers int // its draw a period
	// Rate is the probes a second to each peer, lowered to fit the budget.
	Rate float64
	// Sent is probes a second a node sends; Answered what it answers on
	// average, AnsweredP999 at the 99.9th percentile of the remote draws
	// that land on it (each of the others draws it with probability
	// K/(N-S): about Poisson(K) of them).
	Sent, Answered, AnsweredP999 float64
	// BitsPerNode is a node's probes and replies, both ways, on the wire.
	BitsPerNode  float64
	FabricProbes float64 // probes a second in the whole fabric
	// SeriesPerAgent is what one agent exports; Series all of them.
	SeriesPerAgent, Series int
	// DetectTypical and DetectWorst are from an RNIC failure to the alert:
	// the run of losses (LostInARow probes, the timeout), then the scrape
	// and the rule's evaluation, half a period each typically, a whole one
	// at worst.
	DetectTypical, DetectWorst time.Duration
}

// Make computes the plan of in (Validate first).
func Make(in Input) Plan {
	p := Plan{Input: in, ToRs: (in.Nodes + in.ToRSize - 1) / in.ToRSize}
	p.ToRPeers = in.ToRSize - 1
	p.RemotePeers = min(in.K, in.Nodes-in.ToRSize)
	peers := p.ToRPeers + p.RemotePeers
	p.Rate = in.Rate
	if peers > 0 && float64(peers)*p.Rate > in.Budget {
		p.Rate = in.Budget / float64(peers)
	}
	p.Sent = float64(peers) * p.Rate
	p.Answered = p.Sent // every probe sent is answered somewhere: by symmetry, the mean
	// At most every node outside the ToR draws it.
	p.AnsweredP999 = float64(p.ToRPeers+min(poissonQuantile(float64(p.RemotePeers), 0.999), in.Nodes-in.ToRSize)) * p.Rate
	p.BitsPerNode = 2 * (p.Sent + p.Answered) * (wire.Size + PacketOverhead) * 8
	p.FabricProbes = float64(in.Nodes) * p.Sent
	perPeer := 2*(len(metrics.RTTBuckets())+3) + 5 // the histogram's two parts (buckets, +Inf, sum, count); sent, lost, late, reachable, last success
	// Remote peers in the draw that lands on a node are probers of it, not
	// its own series; the agent's own: CPU, budget, start time, peers by
	// scope (2), datagrams by outcome (4).
	p.SeriesPerAgent = peers*perPeer + 9
	p.Series = in.Nodes * p.SeriesPerAgent
	run := time.Duration(float64(in.Reach.LostInARow) / p.Rate * float64(time.Second))
	half := time.Duration(float64(time.Second) / p.Rate / 2)
	p.DetectWorst = run + in.Reach.Timeout + 2*in.Rules.Period
	p.DetectTypical = run - half + in.Reach.Timeout + in.Rules.Period
	return p
}

// poissonQuantile is the least n with P(X ≤ n) ≥ q for X ~ Poisson(mean).
func poissonQuantile(mean, q float64) int {
	if mean <= 0 {
		return 0
	}
	term := math.Exp(-mean)
	cdf := term
	n := 0
	for cdf < q && n < 100000 {
		n++
		term *= mean / float64(n)
		cdf += term
	}
	return n
}

// WriteText writes the plan as `rdmabench agent --plan` prints it.
func (p Plan) WriteText(w io.Writer) error {
	periods := func(d time.Duration) string {
		return fmt.Sprintf("%.2f periods", d.Seconds()/p.Rules.Period.Seconds())
	}
	lines := []string{
		fmt.Sprintf("rdmabench agent --plan %d: %d ToRs of %d; each node probes %d peers: %s under its ToR, and %d drawn from other ToRs every %v",
			p.Nodes, p.ToRs, p.ToRSize, p.ToRPeers+p.RemotePeers, plural(p.ToRPeers, "other"), p.RemotePeers, p.Redraw),
		fmt.Sprintf(" probes per node: %.4g/s sent (%.4g/s to each peer%s), %.4g/s answered on average, %.4g/s at the 99.9th percentile of the draws",
			p.Sent, p.Rate, p.budgetNote(), p.Answered, p.AnsweredP999),
		fmt.Sprintf(" on the wire: %.3g Mb/s a node, probes and replies both ways (%d-byte messages); %.0f probes/s in the fabric",
			p.BitsPerNode/1e6, wire.Size, p.FabricProbes),
		fmt.Sprintf(" series: %d an agent, %d for Prometheus at a %v scrape", p.SeriesPerAgent, p.Series, p.Rules.Period),
		fmt.Sprintf(" RNIC failure to alert: about %v (%s), at most %v (%s): %d probes lost in a row at %.4g/s and the %v timeout, then a scrape and a rule evaluation every %v; fires when %.0f%% of its %s lose it",
			p.DetectTypical.Round(time.Millisecond), periods(p.DetectTypical), p.DetectWorst.Round(time.Millisecond), periods(p.DetectWorst),
			p.Reach.LostInARow, p.Rate, p.Reach.Timeout, p.Rules.Period, 100*p.Rules.RNICDownFraction, plural(p.ToRPeers, "ToR-mesh peer")),
	}
	if p.ToRPeers < p.Rules.MinProbers {
		lines = append(lines, fmt.Sprintf(" warning: ToRs of %d give a node %s, fewer than the %d the RNIC-down rule needs: raise --tor-size, or group hosts by rail", p.ToRSize, plural(p.ToRPeers, "ToR-mesh prober"), p.Rules.MinProbers))
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}

func (p Plan) budgetNote() string {
	if p.Rate < p.Input.Rate {
		return fmt.Sprintf(", lowered from %g to fit the budget of %g/s", p.Input.Rate, p.Budget)
	}
	return ""
}

// plural is n things, with an s unless n is 1.
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
