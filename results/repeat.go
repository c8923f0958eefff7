package results

import (
	"errors"
	"fmt"
	"math"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Headline is a result's headline figures: bandwidth and message rate for
// bandwidth tests, p50 and p99 for latency tests.
func Headline(res Result) Figures {
	f := Figures{BWAvgGbps: res.BWAvgGbps, MsgRateMpps: res.MsgRateMpps}
	if res.Lat != nil {
		f.LatP50us, f.LatP99us = res.Lat.P50, res.Lat.P99
	}
	return f
}

// RepeatsAsked is how many repeats the run asked for: RepeatAsked, or, in
// a document from before it, how many ran (a run whose last repeat failed
// part-way still tells, by the sizes that repeat did not reach); 1 without
// --repeat.
func (r *Run) RepeatsAsked() int { return max(1, r.RepeatAsked, r.Repeat) }

// RepeatsDone is how many repeats measured a result: one without
// --repeat, whose figures are the result's own.
func (res Result) RepeatsDone() int { return max(1, len(res.Repeats)) }

// key identifies a result within a run: a size at a QP count.
type key struct{ size, qps int }

// MergeRepeats folds the runs of one --repeat into one run. Each result's
// bandwidth figures become the means over the runs that measured it, its
// burst the highest burst, its iterations the sum, its histogram the merged
// one and its latency the pooled samples' (mergeResults); Repeats keeps every run's figures so that compare can tell a
// change from noise. The other details (per-QP figures, intervals,
// counters, CPU) are the last run's. The header is the first run's; the
// error and interruption, the last run's. One run is returned as it is.
func MergeRepeats(runs []*Run) (*Run, error) {
	if len(runs) == 0 {
		return nil, errors.New("no runs to merge")
	}
	if len(runs) == 1 {
		return runs[0], nil
	}
	out := *runs[0]
	last := runs[len(runs)-1]
	out.Error, out.Interrupted, out.Repeat = last.Error, last.Interrupted, len(runs)
	var order []key
	group := map[key][]Result{}
	for i, r := range runs {
		if r.Test != out.Test {
			return nil, fmt.Errorf("repeat %d ran %s, the first %s", i+1, r.Test, out.Test)
		}
		for _, res := range r.Results {
			k := key{res.Size, res.QPs}
			if _, ok := group[k]; !ok {
				order = append(order, k)
			}
			group[k] = append(group[k], res)
		}
	}
	out.Results = make([]Result, 0, len(order))
	for _, k := range order {
		out.Results = append(out.Results, mergeResults(group[k]))
	}
	return &out, nil
}

// mergeResults merges one size's results from several runs. Latency is
// pooled, as if one run had taken every sample: percentiles from the merged
// histogram (when every repeat has one; else the means of the repeats'
// percentiles, the best a histogram-less document allows), mean and
// standard deviation pooled exactly from each repeat's, min and max over
// all. The repeats' own figures stay in Repeats.
func mergeResults(rs []Result) Result {
	m := rs[len(rs)-1]
	n := float64(len(rs))
	m.Iterations, m.BWAvgGbps, m.BWBurstGbps, m.MsgRateMpps = 0, 0, 0, 0
	m.Repeats = make([]Figures, len(rs))
	var hist *hdrhistogram.Histogram
	var lats []LatencyStats
	var counts []float64
	allHists := true
	for i, r := range rs {
		m.Repeats[i] = Headline(r)
		m.Iterations += r.Iterations
		m.BWAvgGbps += r.BWAvgGbps / n
		m.MsgRateMpps += r.MsgRateMpps / n
		m.BWBurstGbps = max(m.BWBurstGbps, r.BWBurstGbps)
		m.Partial = m.Partial || r.Partial
		if r.Hist != nil {
			if hist == nil {
				hist = hdrhistogram.New(r.Hist.LowestTrackableValue(), r.Hist.HighestTrackableValue(), int(r.Hist.SignificantFigures()))
			}
			hist.Merge(r.Hist)
		}
		if r.Lat != nil {
			lats = append(lats, *r.Lat)
			c := float64(r.Iterations)
			if r.Hist != nil {
				c = float64(r.Hist.TotalCount())
			} else {
				allHists = false
			}
			counts = append(counts, c)
		}
	}
	if m.Lat != nil && len(lats) > 0 {
		pooled := poolLatency(lats, counts)
		if allHists && hist != nil {
			q := func(p float64) float64 { return float64(hist.ValueAtQuantile(p)) / 1e3 } // ns to µs
			pooled.P50, pooled.P90, pooled.P99, pooled.P99_9, pooled.P99_99 = q(50), q(90), q(99), q(99.9), q(99.99)
		}
		m.Lat = &pooled
	}
	m.Hist = hist
	return m
}

// poolLatency is the repeats' latency as one set of samples: mean and
// standard deviation exactly from each repeat's mean, deviation and sample
// count (counts; a repeat with none counts as one), min and max over all,
// percentiles the means of the repeats' (the caller replaces them from the
// pooled histogram when it has one).
func poolLatency(lats []LatencyStats, counts []float64) LatencyStats {
	var out LatencyStats
	total := 0.0
	for i, l := range lats {
		c := max(counts[i], 1)
		total += c
		out.Mean += c * l.Mean
		if i == 0 {
			out.Min, out.Max = l.Min, l.Max
		}
		out.Min, out.Max = min(out.Min, l.Min), max(out.Max, l.Max)
		k := float64(len(lats))
		out.P50 += l.P50 / k
		out.P90 += l.P90 / k
		out.P99 += l.P99 / k
		out.P99_9 += l.P99_9 / k
		out.P99_99 += l.P99_99 / k
	}
	out.Mean /= total
	if total > 1 {
		ss := 0.0
		for i, l := range lats {
			c := max(counts[i], 1)
			ss += (c-1)*l.Stdev*l.Stdev + c*(l.Mean-out.Mean)*(l.Mean-out.Mean)
		}
		out.Stdev = math.Sqrt(ss / (total - 1))
	}
	return out
}
