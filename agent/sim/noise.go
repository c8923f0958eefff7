package sim

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/rdmabench/rdmabench/agent/rules"
	"github.com/rdmabench/rdmabench/internal/stat"
)

// FalseAlerts is a healthy fabric's alerts over the simulated time.
type FalseAlerts struct {
	Simulated time.Duration
	// Count is the alerts raised, by alert (a window in which the
	// condition held counts once; a latency regression is counted
	// without its for: 5m, so an upper bound).
	Count map[rules.Alert]int
	// Expected is the mean count of the loss-driven alerts, from their
	// exact tails (Count is one Poisson draw of it).
	Expected map[rules.Alert]float64
	// How close the noise came: the largest share of one prober's probes
	// held past the host-delay threshold, against the half that fires
	// (1 would fire); and the largest ratio of a pair's median RTT to the
	// least of its baseline windows (an upper bound of the rule's ratio).
	HostDelayClosest, RegressionClosest float64
}

// PerDay is alert a's count scaled to a day.
func (f FalseAlerts) PerDay(a rules.Alert) float64 {
	return float64(f.Count[a]) * float64(24*time.Hour) / float64(f.Simulated)
}

// TotalPerDay is every alert's.
func (f FalseAlerts) TotalPerDay() float64 {
	var t float64
	for _, a := range rules.FabricAlerts {
		t += f.PerDay(a)
	}
	return t
}

// FalseAlerts runs the healthy fabric for d (whole minutes).
func (c Config) FalseAlerts(d time.Duration, seed uint64) (FalseAlerts, error) {
	f, err := c.fabric(seed)
	if err != nil {
		return FalseAlerts{}, err
	}
	out := FalseAlerts{Simulated: d, Count: map[rules.Alert]int{}, Expected: map[rules.Alert]float64{}}
	rng := rand.New(rand.NewPCG(seed, 2))
	out.Expected[rules.RNICDown] = c.expectedRNICDown(f, d)
	out.Expected[rules.PathLoss] = c.expectedPathLoss(f, d)
	for _, a := range []rules.Alert{rules.RNICDown, rules.PathLoss} {
		out.Count[a] = poisson(rng, out.Expected[a])
	}
	for _, p := range c.slowAlertsByNode(f, d, seed) {
		out.Count[rules.HostDelay] += p.host
		out.Count[rules.LatencyRegression] += p.regr
		out.HostDelayClosest = max(out.HostDelayClosest, p.hostClose)
		out.RegressionClosest = max(out.RegressionClosest, p.regrClose)
	}
	return out, nil
}

// expectedRNICDown: a prober's gauge reads 0 at a scrape when the last
// LostInARow probes went unanswered within the timeout, lost or late,
// about (Loss+Late)^LostInARow of the time (it stays 0 until the next
// reply, one probe later), each prober on its own. Lateness that comes
// from the peer's stall comes to all its probers at once, and its own view
// (it reaches its peers: its replies wait in its CQ) keeps it out; here
// that view is left out (not scraped), so this is an upper bound.
func (c Config) expectedRNICDown(f *fabric, d time.Duration) float64 {
	q := math.Pow(c.Noise.Loss+c.Noise.Late, float64(c.Reach.LostInARow))
	evals := d.Seconds() / c.Rules.Period.Seconds()
	pFire := map[int]float64{} // by ToR-mesh probers
	var expected float64
	for _, n := range f.torProbers {
		if _, ok := pFire[n]; !ok {
			for m := 0; m <= n; m++ {
				if c.Rules.RNICDownFires(m, n, rules.OwnView{}) {
					pFire[n] += binomPMF(n, m, q)
				}
			}
		}
		expected += evals * pFire[n]
	}
	return expected
}

// expectedPathLoss: a window's lost probes of a pair are Binomial(probes,
// Loss); both its ends reach their others (the healthy fabric).
func (c Config) expectedPathLoss(f *fabric, d time.Duration) float64 {
	probes := int(math.Round(c.Rate * c.Rules.PathWindow.Seconds()))
	least := probes + 1
	for k := 0; k <= probes; k++ {
		if c.Rules.PathLossFires(float64(k)/float64(probes), 1, 0, false) {
			least = k
			break
		}
	}
	windows := d.Seconds() / c.Rules.PathWindow.Seconds()
	return float64(f.pairs) * windows * binomSurvival(probes, least, c.Noise.Loss)
}

// nodeAlerts are one node's host-delay and regression alerts over the
// simulated time, and how close the noise came to each bar.
type nodeAlerts struct {
	host, regr           int
	hostClose, regrClose float64
}

// slowAlertsByNode simulates host delay and latency regression node by
// node in parallel, each node with a generator of its own so the result
// does not depend on the schedule.
func (c Config) slowAlertsByNode(f *fabric, d time.Duration, seed uint64) []nodeAlerts {
	minutes := int(d / time.Minute)
	parts := make([]nodeAlerts, c.Nodes)
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := c.newStalls()
			for x := range next {
				r := rand.New(rand.NewPCG(seed^0x5eed, uint64(x)))
				p := &parts[x]
				p.host, p.hostClose = c.hostDelayNode(r, st, minutes, f.probers[x])
				p.regr, p.regrClose = c.regressionNode(r, st, minutes, f.torProbers[x])
			}
		}()
	}
	for x := range c.Nodes {
		next <- x
	}
	close(next)
	wg.Wait()
	return parts
}

// stalls is one host's stall process, minute by minute: the stalls' total
// length and their total past a threshold (how long a probe arriving in
// them is held past it), the sum of about StallRate×60 uniform lengths,
// drawn as a correlated pair of normals.
type stalls struct {
	perMinute       float64
	meanD, sdD      float64 // of one stall's length
	meanE, sdE, rho float64 // of its time past the threshold, and their correlation
	thr             float64
}

func (c Config) newStalls() stalls {
	n := c.Noise
	s := stalls{perMinute: n.StallRate * 60, thr: c.Rules.HostDelay.Seconds()}
	// One stall's moments, by quadrature over its uniform length.
	const steps = 2000
	lo, hi := n.StallMin.Seconds(), n.StallMax.Seconds()
	var sd, sd2, se, se2, sde float64
	for i := range steps {
		d := lo + (hi-lo)*(float64(i)+0.5)/steps
		e := max(d-s.thr, 0)
		sd, sd2, se, se2, sde = sd+d, sd2+d*d, se+e, se2+e*e, sde+d*e
	}
	sd, sd2, se, se2, sde = sd/steps, sd2/steps, se/steps, se2/steps, sde/steps
	s.meanD, s.sdD = sd, math.Sqrt(max(sd2-sd*sd, 0))
	s.meanE, s.sdE = se, math.Sqrt(max(se2-se*se, 0))
	if s.sdD > 0 && s.sdE > 0 {
		s.rho = (sde - sd*se) / (s.sdD * s.sdE)
	}
	return s
}

// minute draws one minute's stalled time and time past the threshold.
func (s stalls) minute(r *rand.Rand) (stalled, past float64) {
	n := max(0, math.Round(s.perMinute+math.Sqrt(s.perMinute)*r.NormFloat64()))
	if n == 0 {
		return 0, 0
	}
	z1 := r.NormFloat64()
	z2 := s.rho*z1 + math.Sqrt(max(1-s.rho*s.rho, 0))*r.NormFloat64()
	stalled = max(0, n*s.meanD+math.Sqrt(n)*s.sdD*z1)
	past = max(0, n*s.meanE+math.Sqrt(n)*s.sdE*z2)
	return stalled, past
}

// hostDelayNode is node x as a responder, minute by minute (the rule's
// window): each of its probers sees a share of its probes held past the
// threshold, the share of the minute x spent past it; the rule fires when
// even the least of its probers' medians is past it. Probers are drawn
// until one is not (the least decides), so a healthy minute costs one.
func (c Config) hostDelayNode(r *rand.Rand, st stalls, minutes, probers int) (alerts int, closest float64) {
	n := c.Rate * c.Rules.HostWindow.Seconds()
	for range minutes {
		_, past := st.minute(r)
		share := min(past/c.Rules.HostWindow.Seconds(), 1)
		least := time.Duration(math.MaxInt64)
		for range probers {
			held := binomNormal(r, n, share)
			median := c.Noise.Hold
			if held > n/2 { // the median probe is one held past the threshold
				median = c.Rules.HostDelay + time.Duration((held-n/2)/held*2*st.meanE*float64(time.Second))
			}
			closest = max(closest, held/(n/2))
			least = min(least, median)
			if !c.Rules.HostDelayFires(least, probers) {
				break
			}
		}
		if probers > 0 && c.Rules.HostDelayFires(least, probers) {
			alerts++
		}
	}
	return alerts, closest
}

// regressionNode is node x as a prober of its ToR-mesh pairs, window by
// window (RegressionWindow): each pair's median network RTT, from probes
// of which the share x spent stalled were timed late (above the median),
// the rest drawn around the pair's median with Noise.Spread; its baseline
// is the median of the window medians over BaselineWindow, BaselineOffset
// ago.
func (c Config) regressionNode(r *rand.Rand, st stalls, minutes, pairs int) (alerts int, closest float64) {
	per := int(c.Rules.RegressionWindow / time.Minute)
	windows := minutes / per
	stalled := make([]float64, windows)
	for w := range stalled {
		for range per {
			s, _ := st.minute(r)
			stalled[w] += s
		}
		stalled[w] = min(stalled[w]/c.Rules.RegressionWindow.Seconds(), 0.5)
	}
	n := c.Rate * c.Rules.RegressionWindow.Seconds()
	back := int(c.Rules.BaselineOffset / c.Rules.RegressionWindow)
	span := int(c.Rules.BaselineWindow / c.Rules.RegressionWindow)
	hist := make([]float64, windows) // the pair's window medians
	base := c.Noise.RTT.Seconds()
	// What a window's stalls make of its median's quantile and spread, the
	// same for each of the node's pairs.
	qs, sds := make([]float64, windows), make([]float64, windows)
	for w, f := range stalled {
		rest := n - n*f
		q := n / 2 / rest // the median's quantile among the probes on time
		dq := n / 2 / (rest * rest)
		qs[w] = q
		// the order statistic's spread, and the spread of how many were late
		sds[w] = math.Sqrt(q*(1-q)/rest + n*f*(1-f)*dq*dq)
	}
	for range pairs {
		for w := range windows {
			qq := min(max(qs[w]+sds[w]*r.NormFloat64(), 1e-9), 1-1e-9)
			median := base * math.Exp(c.Noise.Spread*math.Sqrt2*math.Erfinv(2*qq-1))
			hist[w] = median
			if w < back+span {
				continue
			}
			past := hist[w-back-span : w-back] // BaselineWindow, BaselineOffset ago
			lowest := past[0]
			for _, v := range past[1:] {
				lowest = min(lowest, v)
			}
			closest = max(closest, median/lowest)
			if median > c.Rules.RegressionRatio*lowest { // else the baseline, no lower, cannot fire it
				if c.Rules.LatencyRegressionFires(seconds(median), seconds(stat.Median(past))) {
					alerts++
				}
			}
		}
	}
	return alerts, closest
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// binomNormal draws Binomial(n, p) by its normal approximation (n is
// hundreds), within [0, n].
func binomNormal(r *rand.Rand, n, p float64) float64 {
	return min(max(math.Round(n*p+math.Sqrt(n*p*(1-p))*r.NormFloat64()), 0), n)
}

func logChoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

func binomPMF(n, k int, p float64) float64 {
	switch {
	case p == 0:
		return b2f(k == 0)
	case p == 1:
		return b2f(k == n)
	}
	return math.Exp(logChoose(n, k) + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p))
}

// binomSurvival is P(X ≥ k) for X ~ Binomial(n, p).
func binomSurvival(n, k int, p float64) float64 {
	var s float64
	for i := max(k, 0); i <= n; i++ {
		s += binomPMF(n, i, p)
	}
	return min(s, 1)
}

// poisson draws Poisson(mean): by products for small means, by the normal
// approximation for large ones.
func poisson(r *rand.Rand, mean float64) int {
	switch {
	case mean <= 0:
		return 0
	case mean > 50:
		return int(max(0, math.Round(mean+math.Sqrt(mean)*r.NormFloat64())))
	}
	limit, k, p := math.Exp(-mean), 0, r.Float64()
	for p > limit {
		k++
		p *= r.Float64()
	}
	return k
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
