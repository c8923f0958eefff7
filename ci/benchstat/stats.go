package main

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/rdmabench/rdmabench/internal/stat"
)

// The bench runs perftest and rdmabench alternately (A B A B ...), so that
// drift hits both alike, and compares them by the per-pair ratios
// rdmabench/perftest. On rxe one run's figure spreads by a fifth or more,
// and the ratios neither follow a known distribution nor come in numbers
// that would make one up: the interval is distribution-free, on the median
// of the ratios, from their order statistics. With n ratios, the k-th
// smallest and the k-th largest bound the median with probability
// 1 - 2·P(Bin(n, ½) ≤ k-1), whatever the distribution; k is the largest
// that keeps that at or above the asked confidence.

// Better says which way a figure improves.
type Better int

const (
	Higher Better = iota // bandwidth, message rate
	Lower                // latency
)

func (b Better) String() string {
	if b == Lower {
		return "lower"
	}
	return "higher"
}

// Verdict is a case's conclusion.
type Verdict int

const (
	Level  Verdict = iota // the interval holds the target (1, unless the case sets one)
	Faster                // the whole interval is on the better side of the target
	Slower                // the whole interval is on the worse side of the target
	TooFew                // too few pairs for an interval at this confidence
)

func (v Verdict) String() string {
	return [...]string{"level", "faster", "slower", "too few pairs"}[v]
}

// Case is one bench case: the tools' figures, pair by pair (NaN where a
// run gave none). Perftest is the baseline: perftest itself, or another
// that the case's name says (make bench-overhead's bare loop, one thread).
// Target is the ratio the verdict is against, 1 (level with the baseline)
// unless the case asks another: rdmabench within 1.25 times the bare
// loop's cost, T threads at 0.9·T times one thread's rate.
type Case struct {
	Name      string    `json:"name"`
	Unit      string    `json:"unit,omitempty"`
	Better    Better    `json:"-"`
	Target    float64   `json:"-"`
	Perftest  []float64 `json:"perftest"`
	Rdmabench []float64 `json:"rdmabench"`
}

// target is the case's target ratio (1 when unset).
func (c Case) target() float64 {
	if c.Target > 0 {
		return c.Target
	}
	return 1
}

// Summary is a case's statistics.
type Summary struct {
	Pairs    int     // pairs with both figures
	Lost     int     // pairs without
	Median   float64 // of the ratios rdmabench/perftest
	Lo, Hi   float64 // the interval on the median
	Coverage float64 // its exact coverage (≥ the confidence asked, unless TooFew)
	// HalfWidth is the interval's larger distance from the target, as a
	// fraction of it: "level within ±HalfWidth".
	HalfWidth float64
	Verdict   Verdict
}

// ratios are the pairs' rdmabench/perftest, sorted, and the pairs lost.
func (c Case) ratios() ([]float64, int, error) {
	if len(c.Perftest) != len(c.Rdmabench) {
		return nil, 0, fmt.Errorf("case %q: %d perftest figures, %d rdmabench", c.Name, len(c.Perftest), len(c.Rdmabench))
	}
	var r []float64
	lost := 0
	for i, p := range c.Perftest {
		b := c.Rdmabench[i]
		if !(p > 0) || !(b >= 0) || math.IsInf(p, 0) || math.IsInf(b, 0) {
			lost++
			continue
		}
		r = append(r, b/p)
	}
	sort.Float64s(r)
	return r, lost, nil
}

// binomHalfCDF is P(Bin(n, ½) ≤ k).
func binomHalfCDF(n, k int) float64 {
	if k < 0 {
		return 0
	}
	sum, term := 0.0, math.Pow(0.5, float64(n)) // C(n,0)/2^n
	for i := 0; i <= k && i <= n; i++ {
		sum += term
		term = term * float64(n-i) / float64(i+1)
	}
	return math.Min(sum, 1)
}

// medianOrder is the k (from 1) of the interval [r_(k), r_(n+1-k)] on the
// median of n values at confidence conf, and its exact coverage; k is 0
// when even [min, max] covers less than conf.
func medianOrder(n int, conf float64) (k int, coverage float64) {
	for j := n / 2; j >= 1; j-- {
		if c := 1 - 2*binomHalfCDF(n, j-1); c >= conf {
			return j, c
		}
	}
	if n == 0 {
		return 0, 0
	}
	return 0, 1 - 2*binomHalfCDF(n, 0)
}

var errNoPairs = errors.New("no pair gave both figures")

// Summarize is a case's median ratio, its interval at confidence conf and
// the verdict.
func Summarize(c Case, conf float64) (Summary, error) {
	r, lost, err := c.ratios()
	if err != nil {
		return Summary{}, err
	}
	s := Summary{Pairs: len(r), Lost: lost}
	if len(r) == 0 {
		return s, fmt.Errorf("case %q: %w", c.Name, errNoPairs)
	}
	s.Median = stat.MedianSorted(r)
	k, cov := medianOrder(len(r), conf)
	s.Coverage = cov
	if k == 0 {
		s.Lo, s.Hi, s.Verdict = r[0], r[len(r)-1], TooFew
	} else {
		s.Lo, s.Hi = r[k-1], r[len(r)-k]
		switch t := c.target(); {
		case s.Lo > t:
			s.Verdict = map[Better]Verdict{Higher: Faster, Lower: Slower}[c.Better]
		case s.Hi < t:
			s.Verdict = map[Better]Verdict{Higher: Slower, Lower: Faster}[c.Better]
		default:
			s.Verdict = Level
		}
	}
	t := c.target()
	s.HalfWidth = math.Max(t-s.Lo, s.Hi-t) / t
	return s, nil
}

// MinPairs is the fewest pairs that give an interval at confidence conf.
func MinPairs(conf float64) int {
	for n := 1; ; n++ {
		if k, _ := medianOrder(n, conf); k > 0 {
			return n
		}
	}
}
