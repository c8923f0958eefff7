package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/rdmabench/rdmabench/agent/rules"
)

// detector runs DetectRNIC's and DetectKilled's trials on one fabric with
// one random stream; the draws keep their order (the tables in docs/agent.md
// are from fixed seeds).
type detector struct {
	c           Config
	f           *fabric
	rng         *rand.Rand
	period, gap float64
	killed      bool
}

// failure is one trial: when the RNIC failed, when each ToR-mesh prober's
// scrape first carries the loss (sorted), when the failed node's own agent
// knows each peer lost (sorted), and its own stall and scrape phase.
type failure struct {
	at                 float64
	scrapes, own       []float64
	ownStall, ownPhase float64
}

func (c Config) detect(trials int, seed uint64, killed bool) (Detection, error) {
	f, err := c.fabric(seed)
	if err != nil {
		return Detection{}, err
	}
	dt := &detector{c: c, f: f, rng: rand.New(rand.NewPCG(seed, 1)), period: c.Rules.Period.Seconds(), gap: 1 / c.Rate, killed: killed}
	var times []float64
	d := Detection{Trials: trials}
	fl := failure{scrapes: make([]float64, 0, c.ToRSize), own: make([]float64, 0, c.ToRSize+c.K)}
	for range trials {
		dt.draw(&fl)
		fired := dt.firedAt(&fl)
		if math.IsInf(fired, 1) {
			continue
		}
		d.Fired++
		took := fired - fl.at
		times = append(times, took)
		if took <= 2*dt.period+1e-12 {
			d.WithinTarget++
		}
	}
	d.quantiles(times)
	return d, nil
}

// known is when a prober's gauge of a peer reads 0: its next probe after
// the failure, the rest of the run, the last one's timeout.
func (dt *detector) known(fail float64) float64 {
	first := fail + dt.rng.Float64()*dt.gap
	return first + float64(dt.c.Reach.LostInARow-1)*dt.gap + dt.c.Reach.Timeout.Seconds()
}

// nextScrape is the first scrape at or after t at phase.
func (dt *detector) nextScrape(t, phase float64) float64 {
	return t + math.Mod(phase-math.Mod(t, dt.period)+dt.period, dt.period)
}

// draw makes a random node's RNIC fail at a random time in the period
// (evaluations are at whole periods), reusing fl's slices.
func (dt *detector) draw(fl *failure) {
	x := dt.rng.IntN(dt.c.Nodes)
	fl.at = dt.rng.Float64() * dt.period
	fl.scrapes = fl.scrapes[:0]
	for range dt.f.torProbers[x] {
		k := dt.known(fl.at)
		k += dt.c.stallLeft(dt.rng, k)
		fl.scrapes = append(fl.scrapes, dt.nextScrape(k, dt.rng.Float64()*dt.period))
	}
	slices.Sort(fl.scrapes)
	fl.own = fl.own[:0]
	for range dt.f.peers[x] {
		fl.own = append(fl.own, dt.known(fl.at))
	}
	slices.Sort(fl.own)
	fl.ownStall, fl.ownPhase = dt.c.stallLeft(dt.rng, fl.at), dt.rng.Float64()*dt.period
}

// ownView is the failed node's own view as the rule reads it at t: from
// its last scrape at or before t, which fails from the first one after a
// kill. Its agent has run, scraped, for far longer than the rules' startup
// window.
func (dt *detector) ownView(fl *failure, t float64) rules.OwnView {
	v := rules.OwnView{Scraped: true, UpFor: 24 * time.Hour, Reach: 1}
	last := dt.nextScrape(t, fl.ownPhase)
	if last > t {
		last -= dt.period
	}
	if last < fl.at || len(fl.own) == 0 {
		return v
	}
	if dt.killed {
		v.UpFor, v.Reach = 0, math.NaN()
		return v
	}
	lost := 0
	for _, k := range fl.own {
		if k+fl.ownStall <= last {
			lost++
		}
	}
	v.Reach = float64(len(fl.own)-lost) / float64(len(fl.own))
	return v
}

// firedAt is the first evaluation at which RNICDown holds, +Inf for none.
// Evaluations at whole periods from the failure on, a bounded number: the
// last prober's and its own scrape are within two.
func (dt *detector) firedAt(fl *failure) float64 {
	first := math.Ceil(fl.at / dt.period)
	for e := first; e <= first+16; e++ {
		at := e * dt.period
		unreached, _ := slices.BinarySearch(fl.scrapes, math.Nextafter(at, math.Inf(1)))
		if dt.c.Rules.RNICDownFires(unreached, len(fl.scrapes), dt.ownView(fl, at)) {
			return at
		}
	}
	return math.Inf(1)
}

// quantiles sets P50, P99 and Max from the times to fire, in seconds.
func (d *Detection) quantiles(times []float64) {
	if len(times) == 0 {
		return
	}
	slices.Sort(times)
	q := func(p float64) time.Duration {
		return time.Duration(times[min(len(times)-1, int(p*float64(len(times))))] * float64(time.Second))
	}
	d.P50, d.P99, d.Max = q(0.5), q(0.99), q(1)
}
