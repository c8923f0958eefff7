package bench

import (
	"math"
	"slices"
)

// PerIter is -I 1's per-iteration report of one half of a row: each
// process's time per iteration (the slowest of its GPUs, as CUDA events
// timed them, divided by -m), the slowest process's per iteration, and
// statistics over the iterations after the first Skipped (-K).
type PerIter struct {
	Skipped int       `json:"skipped_iterations"`
	MinUs   float64   `json:"min_us"`
	MaxUs   float64   `json:"max_us"`
	AvgUs   float64   `json:"avg_us"`
	P50Us   float64   `json:"p50_us"`
	P95Us   float64   `json:"p95_us"`
	P99Us   float64   `json:"p99_us"`
	StdevUs float64   `json:"stdev_us"`
	CVPct   float64   `json:"cv_pct"` // stdev / avg, in percent
	TimesUs []float64 `json:"times_us"`
	// PerProcessUs holds a row per process (rank order); with one process
	// it is left out, as nccl-tests does.
	PerProcessUs [][]float64 `json:"per_process_max_times_us,omitempty"`
}

// NewPerIter combines the processes' rows (microseconds, one per
// iteration each) and summarizes all but the first skip iterations.
// Every row has the same length; skip is below it.
func NewPerIter(procs [][]float64, skip int) *PerIter {
	n := len(procs[0])
	p := &PerIter{Skipped: skip, TimesUs: make([]float64, n)}
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
