package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestMedianOrder(t *testing.T) {
	for _, tc := range []struct {
		n    int
		conf float64
		k    int
		cov  float64
	}{
		{9, 0.95, 2, 1 - 2*10.0/512}, // [r(2), r(8)]
		{5, 0.95, 0, 1 - 2*1.0/32},   // even [min, max] covers 93.75%
		{6, 0.95, 1, 1 - 2*1.0/64},   // [min, max]
		{13, 1 - 0.05/14, 2, 1 - 2*14.0/8192},
		{21, 0.95, 6, 1 - 2*binomHalfCDF(21, 5)},
	} {
		k, cov := medianOrder(tc.n, tc.conf)
		if k != tc.k || math.Abs(cov-tc.cov) > 1e-12 {
			t.Errorf("n %d conf %g: k %d coverage %.6f, want %d %.6f", tc.n, tc.conf, k, cov, tc.k, tc.cov)
		}
	}
	if n := MinPairs(1 - 0.05/14); n != 10 {
		t.Errorf("MinPairs for 14 cases at 95%%: %d, want 10", n)
	}
}

// rxeFigure is one run's figure as rxe gives them: two levels (a run sits
// at one or the other, as write_lat's 15 and 27 µs), each with noise.
func rxeFigure(rng *rand.Rand, level, spread float64) float64 {
	if rng.IntN(3) == 0 {
		level *= 1.6
	}
	return level * math.Exp(spread*rng.NormFloat64())
}

// The interval covers the true median ratio at least as often as it says,
// for skewed and two-level figures: it assumes no distribution.
func TestCoverageBySimulation(t *testing.T) {
	const trials = 4000
	rng := rand.New(rand.NewPCG(1, 0))
	for _, n := range []int{9, 13, 21} {
		// The true median of the ratio of two independent two-level draws
		// with the same law is 1 by symmetry.
		covered := 0
		var cov float64
		for range trials {
			c := Case{Name: "aa", Better: Higher}
			for range n {
				c.Perftest = append(c.Perftest, rxeFigure(rng, 30, 0.2))
				c.Rdmabench = append(c.Rdmabench, rxeFigure(rng, 30, 0.2))
			}
			s, err := Summarize(c, 0.95)
			if err != nil {
				t.Fatal(err)
			}
			cov = s.Coverage
			if s.Lo <= 1 && 1 <= s.Hi {
				covered++
			}
		}
		rate := float64(covered) / trials
		if limit := cov - 3*math.Sqrt(cov*(1-cov)/trials); rate < limit {
			t.Errorf("n %d: covered 1 in %.2f%% of %d, want ≥ %.2f%% (%.2f%% stated)", n, 100*rate, trials, 100*limit, 100*cov)
		}
		t.Logf("n %d: the 95%% interval (exact %.2f%%) covered the true median in %.2f%% of %d", n, 100*cov, 100*rate, trials)
	}
}

// benchCases is a bench of the real case list's shape: 12 cases of pairs
// pairs and 2 of latPairs (bench.sh's 14), the tools equal except where
// gap says (rdmabench's figure times gap).
func benchCases(rng *rand.Rand, pairs, latPairs int, figure func(*rand.Rand) float64, gap func(i int) float64) []Case {
	var cs []Case
	for i := range 14 {
		n, better := pairs, Higher
		if i >= 12 {
			n, better = latPairs, Lower
		}
		c := Case{Name: fmt.Sprintf("case %d", i), Better: better}
		for range n {
			c.Perftest = append(c.Perftest, figure(rng))
			c.Rdmabench = append(c.Rdmabench, gap(i)*figure(rng))
		}
		cs = append(cs, c)
	}
	return cs
}

// BENCH_AA=1 (perftest against itself) must come out level in every case:
// by simulation, a whole bench of 14 cases says faster or slower anywhere
// in at most 5% of benches.
func TestAALevelFamilyWise(t *testing.T) {
	const trials = 2000
	rng := rand.New(rand.NewPCG(2, 0))
	bad := 0
	for range trials {
		rep, err := newReport(benchCases(rng, 13, 21, func(rng *rand.Rand) float64 { return rxeFigure(rng, 30, 0.2) }, func(int) float64 { return 1 }), 0.95)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range rep.sums {
			if s.Verdict != Level {
				bad++
				break
			}
		}
	}
	rate := float64(bad) / trials
	if limit := 0.05 + 3*math.Sqrt(0.05*0.95/trials); rate > limit {
		t.Errorf("AA benches with a case not level: %.2f%% of %d, want ≤ 5%% (%.2f%% with the simulation's error)", 100*rate, trials, 100*limit)
	}
	t.Logf("AA, 14 cases, 13/21 pairs, two-level figures with 20%% spread: %.2f%% of %d benches not level everywhere", 100*rate, trials)
}

// lognormal is a run's figure with 10% spread and one level.
func lognormal(rng *rand.Rand) float64 { return 30 * math.Exp(0.1*rng.NormFloat64()) }

// A real gap is found: rdmabench 25% slower in one bandwidth case, and 25%
// faster in one latency case (lower is better), under 10% spread. (rxe's
// two levels hide such a gap more often: its benches need more pairs.)
func TestGapFound(t *testing.T) {
	const trials = 1000
	rng := rand.New(rand.NewPCG(3, 0))
	slowerFound, fasterFound, falseVerdicts := 0, 0, 0
	for range trials {
		rep, err := newReport(benchCases(rng, 13, 21, lognormal, func(i int) float64 {
			switch i {
			case 3:
				return 0.75
			case 13:
				return 0.75
			}
			return 1
		}), 0.95)
		if err != nil {
			t.Fatal(err)
		}
		if rep.sums[3].Verdict == Slower {
			slowerFound++
		}
		if rep.sums[13].Verdict == Faster {
			fasterFound++
		}
		for i, s := range rep.sums {
			if i != 3 && i != 13 && s.Verdict != Level {
				falseVerdicts++
				break
			}
		}
	}
	if r := float64(falseVerdicts) / trials; r > 0.05+3*math.Sqrt(0.05*0.95/trials) {
		t.Errorf("cases without a gap not level in %.1f%% of benches, want ≤ 5%%", 100*r)
	}
	if r := float64(slowerFound) / trials; r < 0.9 {
		t.Errorf("a 25%% bandwidth gap at 10%% spread found slower in %.1f%% of benches, want ≥ 90%%", 100*r)
	}
	if r := float64(fasterFound) / trials; r < 0.95 {
		t.Errorf("a 25%% lower latency at 10%% spread found faster in %.1f%% of benches, want ≥ 95%%", 100*r)
	}
	t.Logf("25%% gaps at 10%% spread: bandwidth (13 pairs) slower in %.1f%%, latency (21 pairs) faster in %.1f%% of %d benches", 100*float64(slowerFound)/trials, 100*float64(fasterFound)/trials, trials)
}
