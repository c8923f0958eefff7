package main

import (
	"math"
	"os"
	"testing"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/rdmabench/rdmabench/agent/rules"
	"github.com/rdmabench/rdmabench/agent/sim"
)

// healthyDefault is TestTwoNodeAgent's healthy phase in make test. Its job
// on real parts is the pipeline (agents, Prometheus, the rules: nothing
// fires or pends) and the noise the simulation runs at; the false alerts a
// day are the simulation's (docs/agent.md), since no run of minutes can
// bound a rate of 1e-27 a day. Five minutes judge the loss rule over three
// minutes of whole windows after its settle window, the host rule over
// four, and send about 35 000 probes (12 pairs at 10 a second, agentsPerNode
// being two): with none lost, a bound of 8.5e-5 (95%), below the 1e-4 the
// simulation assumes, which takes 30 000 probes, more than four minutes
// of these pairs send.
// make soak runs the ten minutes of issue 39 (RDMABENCH_AGENT_HEALTHY=10m).
const healthyDefault = 5 * time.Minute

// healthyPhase is RDMABENCH_AGENT_HEALTHY or healthyDefault; never shorter
// than the loss rule's settle window and one path window, so that the
// rule has judged whole windows of settled pairs.
func healthyPhase(t testing.TB, r rules.Rules) time.Duration {
	least := r.SettleWindow + r.PathWindow
	v := os.Getenv("RDMABENCH_AGENT_HEALTHY")
	if v == "" {
		return healthyDefault
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < least {
		t.Fatalf("RDMABENCH_AGENT_HEALTHY=%q: want a duration of at least %v (the loss rule's settle window and one path window)", v, least)
	}
	return d
}

// lossUpperBound is the exact (Poisson) 95% upper bound on the loss rate
// when lost of sent probes were lost: half the chi-square quantile with
// 2(lost+1) degrees of freedom, over sent. With none lost it is the rule
// of three, 3/sent.
func lossUpperBound(lost, sent float64) float64 {
	if !(sent > 0) {
		return math.Inf(1)
	}
	return distuv.ChiSquared{K: 2 * (lost + 1)}.Quantile(0.95) / 2 / sent
}

func TestLossUpperBound(t *testing.T) {
	for _, c := range []struct {
		lost, sent, want float64
	}{
		{0, 1, 2.9957}, // the rule of three
		{1, 1, 4.7439}, // Poisson 95% upper limits (Garwood)
		{5, 1, 10.5130},
		{0, 72000, 4.161e-5},
		{0, 0, math.Inf(1)},
	} {
		got := lossUpperBound(c.lost, c.sent)
		if math.IsInf(c.want, 1) != math.IsInf(got, 1) || (!math.IsInf(got, 1) && math.Abs(got-c.want) > 1e-3*c.want) {
			t.Errorf("lossUpperBound(%v, %v) = %.6g, want %.6g", c.lost, c.sent, got, c.want)
		}
	}
	// The default phase bounds the loss below what the simulation assumes
	// even when its 30 directed pairs send only the half of their 10 probes
	// a second that the test requires (a guest waiting for a core).
	sent := 0.5 * 30 * 10 * healthyDefault.Seconds()
	if b := lossUpperBound(0, sent); b > sim.RXENoise().Loss {
		t.Errorf("healthy phase of %v: %0.f probes bound the loss at %.3g, above the simulation's %g", healthyDefault, sent, b, sim.RXENoise().Loss)
	}
}
