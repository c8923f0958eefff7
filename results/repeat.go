package results

import (
	"errors"
	"fmt"

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

// key identifies a result within a run: a size at a QP count.
type key struct{ size, qps int }

// MergeRepeats folds the runs of one --repeat into one run. Each result's
// headline figures become the means over the runs that measured it, its
// burst the highest burst, its iterations the sum and its histogram the
// merged one; Repeats keeps every run's figures so that compare can tell a
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

// mergeResults merges one size's results from several runs.
func mergeResults(rs []Result) Result {
	m := rs[len(rs)-1]
	n := float64(len(rs))
	m.Iterations, m.BWAvgGbps, m.BWBurstGbps, m.MsgRateMpps = 0, 0, 0, 0
	m.Repeats = make([]Figures, len(rs))
	var lat LatencyStats
	var hist *hdrhistogram.Histogram
	for i, r := range rs {
		m.Repeats[i] = Headline(r)
		m.Iterations += r.Iterations
		m.BWAvgGbps += r.BWAvgGbps / n
		m.MsgRateMpps += r.MsgRateMpps / n
		m.BWBurstGbps = max(m.BWBurstGbps, r.BWBurstGbps)
		m.Partial = m.Partial || r.Partial
		if r.Lat != nil {
			l := *r.Lat
			if i == 0 {
				lat.Min, lat.Max = l.Min, l.Max
			}
			lat.Min, lat.Max = min(lat.Min, l.Min), max(lat.Max, l.Max)
			lat.P50 += l.P50 / n
			lat.P90 += l.P90 / n
			lat.P99 += l.P99 / n
			lat.P99_9 += l.P99_9 / n
			lat.P99_99 += l.P99_99 / n
			lat.Mean += l.Mean / n
			lat.Stdev += l.Stdev / n
		}
		if r.Hist != nil {
			if hist == nil {
				hist = hdrhistogram.New(r.Hist.LowestTrackableValue(), r.Hist.HighestTrackableValue(), int(r.Hist.SignificantFigures()))
			}
			hist.Merge(r.Hist)
		}
	}
	if m.Lat != nil {
		m.Lat = &lat
	}
	m.Hist = hist
	return m
}
