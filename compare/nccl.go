package compare

import (
	"fmt"
	"math"

	"github.com/rdmabench/rdmabench/results"
)

// The figures of an ncclbench run compared, per message size: bus
// bandwidth and time, out-of-place and in-place.
const (
	BusBW        Metric = "busbw_gbps"
	BusBWInPlace Metric = "busbw_in_place_gbps"
	Time         Metric = "time_us"
	TimeInPlace  Metric = "time_in_place_us"
)

var ncclMetrics = []Metric{BusBW, Time, BusBWInPlace, TimeInPlace}

// ncclValues are one half's values of a metric: with -I 1 every timed
// iteration's after the -K skipped (its time, and the bus bandwidth that
// time gives), otherwise the one average; nil when the half has no
// positive figure.
func ncclValues(p results.NCCLPoint, m Metric) []float64 {
	x := p.OutOfPlace
	if m == BusBWInPlace || m == TimeInPlace {
		x = p.InPlace
	}
	bw := m == BusBW || m == BusBWInPlace
	one := x.TimeUs
	if bw {
		one = x.BusBW
	}
	if !(one > 0) || math.IsInf(one, 0) {
		return nil
	}
	if x.PerIter == nil || len(x.PerIter.TimesUs) < 2 || !(x.TimeUs > 0) {
		return []float64{one}
	}
	times := x.PerIter.TimesUs
	if k := x.PerIter.Skipped; k > 0 && k < len(times) {
		times = times[k:] // -K: left out of ncclbench's own summary too
	}
	v := make([]float64, 0, len(times))
	for _, t := range times {
		if !(t > 0) || math.IsInf(t, 0) {
			continue
		}
		if bw {
			// Bus bandwidth is the bytes moved over the time: each
			// iteration's is the average's scaled by the times.
			v = append(v, x.BusBW*x.TimeUs/t)
		} else {
			v = append(v, t)
		}
	}
	if len(v) == 0 {
		return []float64{one}
	}
	return v
}

// ncclPartial says how an ncclbench run falls short: it ended with an
// error.
func ncclPartial(r *results.NCCLRun) *Partial {
	if r.Error == "" {
		return nil
	}
	return &Partial{Error: oneLine(r.Error), RepeatsAsked: 1}
}

// NCCLRuns compares two ncclbench runs (--save, --json) size by size: bus
// bandwidth and time, out-of-place and in-place. With -I 1 on a side its
// per-iteration times are that side's values and the verdicts are judged
// as Runs judges repeats (Welch, Bonferroni over the rows, read against
// the threshold); without, the change against the threshold alone. The
// collective and the number of ranks must be the same; a run that ended
// with an error is partial (ErrPartial) unless o.AllowPartial.
func NCCLRuns(base, cur *results.NCCLRun, o Options) (*Report, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	bc, nc := base.Config, cur.Config
	switch {
	case bc.Collective != nc.Collective:
		return nil, invalid("the base ran %s and the new run %s", bc.Collective, nc.Collective)
	case bc.NRanks != nc.NRanks:
		return nil, invalid("the base ran on %d ranks and the new run on %d: bus bandwidth and time mean other things", bc.NRanks, nc.NRanks)
	}
	var notes []string
	if base.NotGPU != cur.NotGPU {
		notes = append(notes, fmt.Sprintf("one run is not a GPU measurement (not_gpu_measurement: base %v, new %v)", base.NotGPU, cur.NotGPU))
	}
	if base.NCCLVersion != cur.NCCLVersion {
		notes = append(notes, fmt.Sprintf("NCCL versions differ: base %s, new %s", base.NCCLVersion, cur.NCCLVersion))
	}
	if bc.Iters != nc.Iters || bc.AggIters != nc.AggIters || bc.Graphs != nc.Graphs {
		notes = append(notes, fmt.Sprintf("iterations differ: base -n %d -m %d -G %d, new -n %d -m %d -G %d", bc.Iters, bc.AggIters, bc.Graphs, nc.Iters, nc.AggIters, nc.Graphs))
	}
	for _, s := range []struct {
		name string
		r    *results.NCCLRun
	}{{"base", base}, {"new", cur}} {
		if s.r.OutOfBounds > 0 {
			notes = append(notes, fmt.Sprintf("the %s run has %d halves with wrong results", s.name, s.r.OutOfBounds))
		}
	}
	bp, np := ncclPartial(base), ncclPartial(cur)
	if (bp != nil || np != nil) && !o.AllowPartial {
		return nil, &PartialError{Base: bp, New: np}
	}
	for _, s := range []struct {
		name string
		p    *Partial
	}{{"base", bp}, {"new", np}} {
		if s.p != nil {
			notes = append(notes, fmt.Sprintf("the %s run ended with an error: %s", s.name, s.p.Error))
		}
	}
	rep := &Report{Test: results.Test(bc.Collective), NCCL: true, Summary: newSummary(o, notes), AllowPartial: o.AllowPartial, BasePartial: bp, NewPartial: np}
	type key struct {
		size       int
		typ, redop string
	}
	judged := pairRows(rep, base.Results, cur.Results, pairing[results.NCCLPoint, key]{
		key:     func(p results.NCCLPoint) key { return key{p.Size, p.Type, p.Redop} },
		metrics: ncclMetrics,
		values:  ncclValues,
		row:     func(p results.NCCLPoint, m Metric) Row { return Row{Size: p.Size, Metric: m} },
		once:    true,
	})
	if len(judged) == 0 {
		return nil, invalid("the runs share no measured size: nothing to compare")
	}
	judgeRows(rep, judged, o)
	return rep, nil
}

// judgeRows gives each pending row its verdict: noise-aware where a side
// has several values, at the family-wise rate over those rows; by the
// threshold alone otherwise. Then it counts the verdicts.
func judgeRows(rep *Report, judged []pending, o Options) {
	for _, p := range judged {
		if len(p.bv) >= 2 || len(p.nv) >= 2 {
			rep.Family++
		}
	}
	bounds := make([]float64, 2*rep.Family) // one allocation for every row's two bounds
	for _, p := range judged {
		r := &rep.Rows[p.row]
		if len(p.bv) >= 2 || len(p.nv) >= 2 {
			judgeNoisy(r, sideOf(p.bv), sideOf(p.nv), o, rep.Family, bounds[:2:2])
			bounds = bounds[2:]
		} else {
			r.DeltaPct = 100 * (r.New - r.Base) / r.Base
			r.Verdict = judgeThreshold((r.New-r.Base)/r.Base, r.Metric.good(), o.Threshold)
		}
	}
	for _, r := range rep.Rows {
		rep.tally(r.Verdict)
	}
}
