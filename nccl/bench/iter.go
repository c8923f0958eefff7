package bench

import (
	"math"
	"slices"

	"github.com/rdmabench/rdmabench/results"
)

// NewPerIter is -I 1's report of one half of a row: it combines the
// processes' rows (microseconds, one per iteration each) and summarizes
// all but the first skip iterations. Every row has the same length; skip
// is below it.
func NewPerIter(procs [][]float64, skip int) *results.NCCLPerIter {
	n := len(procs[0])
	p := &results.NCCLPerIter{Skipped: skip, TimesUs: make([]float64, n)}
	for i := range n {
		for _, row := range procs {
			p.TimesUs[i] = max(p.TimesUs[i], row[i])
		}
	}
	if len(procs) > 1 {
		p.PerProcessUs = procs
	}
	s := slices.Clone(p.TimesUs[skip:])
	slices.Sort(s)
	m := len(s)
	// The percentile's index rounds up, as nccl-tests' percentileIndex.
	pct := func(q int) float64 { return s[min(m-1, (m*q+99)/100-1)] }
	p.MinUs, p.MaxUs, p.P50Us, p.P95Us, p.P99Us = s[0], s[m-1], s[m/2], pct(95), pct(99)
	var sum float64
	for _, v := range s {
		sum += v
	}
	p.AvgUs = sum / float64(m)
	var v2 float64
	for _, v := range s {
		v2 += (v - p.AvgUs) * (v - p.AvgUs)
	}
	p.StdevUs = math.Sqrt(v2 / float64(m)) // over the population, as nccl-tests
	if p.AvgUs > 0 {
		p.CVPct = p.StdevUs / p.AvgUs * 100
	}
	return p
}
