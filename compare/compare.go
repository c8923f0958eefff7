// Package compare sets a run against a baseline: per size (and QP count)
// the change of the headline figure and a verdict — regression,
// improvement, same or inconclusive — that holds for the whole compare at
// a stated family-wise error rate, and never calls a change smaller than
// the practical threshold a regression.
//
// The method, row by row: with repeats, the interval of the change of the
// means (Welch; one side's spread for both when only that side repeated),
// each bound at the one-sided level 1 − α/m, m the rows judged with noise
// (Bonferroni). Each kind of wrong verdict — a regression where nothing got
// worse, an improvement where nothing got better, "same" where the change
// exceeds the threshold — then happens anywhere in the compare with a
// chance of at most α. The verdicts read the interval against the
// threshold T:
//
//	regression    whole interval worse than zero, and the change worse than T
//	improvement   whole interval better than zero, and the change better than T
//	same          whole interval within ±T (two one-sided tests)
//	inconclusive  anything else: how many repeats would settle it is estimated
//
// Without repeats on either side there is no noise to judge by: the change
// against T alone, outside the family-wise rate, and the output says so.
package compare

import (
	"errors"
	"fmt"
	"math"

	"github.com/rdmabench/rdmabench/internal/version"
	"github.com/rdmabench/rdmabench/results"
)

// Metric is a headline figure compared.
type Metric string

const (
	Bandwidth Metric = "bw_avg_gbps"
	LatP50    Metric = "lat_p50_us"
	LatP99    Metric = "lat_p99_us"
)

// good is the sign of a better change: up for bandwidth, down for latency.
func (m Metric) good() float64 {
	if m == Bandwidth || m == BusBW || m == BusBWInPlace {
		return 1
	}
	return -1
}

func (m Metric) of(f results.Figures) float64 {
	switch m {
	case LatP50:
		return f.LatP50us
	case LatP99:
		return f.LatP99us
	}
	return f.BWAvgGbps
}

// Options tune the verdicts.
type Options struct {
	// Threshold is the practical threshold (0.05: 5%): a change smaller than
	// it is never a regression or an improvement, and "same" means shown
	// within it.
	Threshold float64
	// Confidence is 1 − the family-wise error rate (0.95: 5% for the whole
	// compare).
	Confidence float64
	// AllowMissing keeps sizes (or mesh directions) that the base measured
	// and the new run did not from counting as regressions.
	AllowMissing bool
	// AllowPartial compares runs that are partial (an error or Ctrl-C
	// ended them, or a size has fewer repeats than asked), with a note,
	// where Runs would refuse them (ErrPartial).
	AllowPartial bool
}

func (o Options) check() error {
	if o.Threshold <= 0 || o.Threshold >= 1 || math.IsNaN(o.Threshold) {
		return fmt.Errorf("threshold %g outside (0, 1)", o.Threshold)
	}
	if !(o.Confidence > 0 && o.Confidence < 1) {
		return fmt.Errorf("confidence %g outside (0, 1)", o.Confidence)
	}
	return nil
}

// alpha is the family-wise error rate.
func (o Options) alpha() float64 { return 1 - o.Confidence }

// DefaultOptions are a 5% threshold and a 5% family-wise error rate.
var DefaultOptions = Options{Threshold: 0.05, Confidence: 0.95}

// Row is one size's (and QP count's) change of one metric.
type Row struct {
	Size   int     `json:"size"`
	QPs    int     `json:"qps"`
	Metric Metric  `json:"metric"`
	Base   float64 `json:"base"` // the mean over the base's repeats
	New    float64 `json:"new"`
	BaseN  int     `json:"base_n"` // values behind each mean
	NewN   int     `json:"new_n"`
	// DeltaPct is (new − base) / base in percent.
	DeltaPct float64 `json:"delta_pct"`
	// CILowPct and CIHighPct bound the change in percent of the base, each
	// at the one-sided level 1 − α/m of the report; set when the verdict is
	// noise-aware.
	CILowPct   *float64 `json:"ci_low_pct,omitempty"`
	CIHighPct  *float64 `json:"ci_high_pct,omitempty"`
	NoiseAware bool     `json:"noise_aware"`
	Noise      Noise    `json:"noise"`
	Verdict    Verdict  `json:"verdict"`
	// SettleRepeats, on an inconclusive row, estimates the repeats a side
	// that would settle it; 0 there means more than MaxRepeats.
	SettleRepeats int `json:"settle_repeats,omitempty"`
}

// Summary is what a comparison of runs and one of meshes share: how the
// verdicts were reached and what they came to.
type Summary struct {
	ThresholdPct float64 `json:"threshold_pct"`
	// FamilyWisePct is the family-wise error rate in percent; Family the
	// rows it covers (the noise-aware ones), each of whose bounds is at the
	// one-sided level 1 − FamilyWisePct/100/Family.
	FamilyWisePct float64 `json:"family_wise_pct"`
	Family        int     `json:"family"`
	// Regressions counts regression rows and, unless AllowMissing, missing
	// ones: what makes the compare fail.
	Regressions  int  `json:"regressions"`
	Missing      int  `json:"missing"`
	Inconclusive int  `json:"inconclusive"`
	AllowMissing bool `json:"allow_missing,omitempty"`
	// Notes say what differs between the runs besides the figures (device,
	// peer, depths, an error that cut a run short).
	Notes []string `json:"notes,omitempty"`
}

func newSummary(o Options, notes []string) Summary {
	// Rounded: 1 − 0.95 is 0.05000000000000004 in floating point.
	return Summary{ThresholdPct: 100 * o.Threshold, FamilyWisePct: math.Round(1e9*100*o.alpha()) / 1e9, AllowMissing: o.AllowMissing, Notes: notes}
}

// tally counts a row's verdict.
func (s *Summary) tally(v Verdict) {
	switch v {
	case Regression:
		s.Regressions++
	case Missing:
		s.Missing++
		if !s.AllowMissing {
			s.Regressions++
		}
	case Inconclusive:
		s.Inconclusive++
	}
}

// Report is a whole comparison of two runs.
type Report struct {
	// Test is the verbs test, or with NCCL the collective.
	Test results.Test `json:"test"`
	// NCCL marks a comparison of two ncclbench runs: rows per size (QPs
	// 0), bus bandwidth and time.
	NCCL bool  `json:"ncclbench,omitempty"`
	Rows []Row `json:"rows"`
	Summary
	// AllowPartial is set when partial runs were compared all the same;
	// BasePartial and NewPartial say how each fell short.
	AllowPartial bool     `json:"allow_partial,omitempty"`
	BasePartial  *Partial `json:"base_partial,omitempty"`
	NewPartial   *Partial `json:"new_partial,omitempty"`
	// Version is the rdmabench that wrote the document.
	Version *version.Info `json:"version,omitempty"`
}

// ErrInvalid marks a comparison that cannot be made: other tests, a
// setting that changes what the figures mean, nothing in common.
var ErrInvalid = errors.New("invalid comparison")

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...)
}

// pending is a row whose values are known and whose verdict waits for the
// family's size.
type pending struct {
	row    int
	bv, nv []float64
}

// Runs compares cur against base. A partial run (an error or Ctrl-C ended
// it, or some size has fewer repeats than it asked for) is refused with a
// *PartialError (ErrPartial) unless o.AllowPartial.
func Runs(base, cur *results.Run, o Options) (*Report, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	notes, err := settings(base, cur)
	if err != nil {
		return nil, err
	}
	bp, np := partialOf(base), partialOf(cur)
	if (bp != nil || np != nil) && !o.AllowPartial {
		return nil, &PartialError{Base: bp, New: np}
	}
	for _, n := range []string{partialNote("base", bp), partialNote("new", np)} {
		if n != "" {
			notes = append(notes, n)
		}
	}
	rep := &Report{Test: base.Test, Summary: newSummary(o, notes), AllowPartial: o.AllowPartial, BasePartial: bp, NewPartial: np}
	metrics := []Metric{Bandwidth}
	if base.Test.IsLatency() {
		metrics = []Metric{LatP50, LatP99}
	}
	type key struct{ size, qps int }
	judged := pairRows(rep, base.Results, cur.Results, pairing[results.Result, key]{
		key:     func(r results.Result) key { return key{r.Size, r.QPs} },
		metrics: metrics,
		values:  values,
		row:     func(r results.Result, m Metric) Row { return Row{Size: r.Size, QPs: r.QPs, Metric: m} },
	})
	if len(judged) == 0 {
		return nil, invalid("the runs share no measured size and QP count: nothing to compare")
	}
	judgeRows(rep, judged, o)
	return rep, nil
}

// pairing says how pairRows pairs two runs' points of type P: by key, a
// row per metric of values. once counts a key that repeats in a run once
// (ncclbench's documents repeat a size per process).
type pairing[P any, K comparable] struct {
	key     func(P) K
	metrics []Metric
	values  func(P, Metric) []float64
	row     func(P, Metric) Row
	once    bool
}

// pairRows adds a row per metric for each point of base, against new's
// point of the same key (addPair), then the rows of the points only new
// has; it returns the rows pending a verdict.
func pairRows[P any, K comparable](rep *Report, base, cur []P, pr pairing[P, K]) []pending {
	newByKey := map[K]P{}
	for _, p := range cur {
		newByKey[pr.key(p)] = p
	}
	seen := map[K]bool{}
	var judged []pending
	for _, b := range base {
		k := pr.key(b)
		if pr.once && seen[k] {
			continue
		}
		seen[k] = true
		n, ok := newByKey[k]
		for _, m := range pr.metrics {
			var nv []float64
			if ok {
				nv = pr.values(n, m)
			}
			judged = rep.addPair(pr.row(b, m), pr.values(b, m), nv, judged)
		}
	}
	for _, n := range cur {
		k := pr.key(n)
		if seen[k] {
			continue
		}
		if pr.once {
			seen[k] = true
		}
		for _, m := range pr.metrics {
			if nv := pr.values(n, m); len(nv) > 0 {
				row := pr.row(n, m)
				row.New, row.NewN, row.Verdict = mean(nv), len(nv), OnlyNew
				rep.Rows = append(rep.Rows, row)
			}
		}
	}
	return judged
}

// addPair adds the row of one metric as the base (bv) and the new run (nv)
// measured it: missing from the new run, only in the new run, or pending
// a verdict (returned in judged); nothing when neither measured it.
func (rep *Report) addPair(row Row, bv, nv []float64, judged []pending) []pending {
	row.BaseN, row.NewN, row.Verdict = len(bv), len(nv), Missing
	if len(bv) > 0 {
		row.Base = mean(bv)
	}
	if len(nv) > 0 {
		row.New = mean(nv)
	}
	switch {
	case len(bv) == 0 && len(nv) == 0:
		return judged // neither measured it: nothing to say
	case len(bv) == 0:
		row.Verdict = OnlyNew
	case len(nv) > 0:
		judged = append(judged, pending{len(rep.Rows), bv, nv})
	}
	rep.Rows = append(rep.Rows, row)
	return judged
}

// judgeNoisy sets a row's interval and verdict from both sides' values;
// bounds is where its two bounds are kept.
func judgeNoisy(r *Row, b, n side, o Options, family int, bounds []float64) {
	a := o.alpha() / float64(family)
	iv, noise := welch(b, n, a)
	r.DeltaPct = 100 * iv.change
	bounds[0], bounds[1] = 100*iv.lo, 100*iv.hi
	r.CILowPct, r.CIHighPct, r.NoiseAware, r.Noise = &bounds[0], &bounds[1], true, noise
	r.Verdict = judge(iv, r.Metric.good(), o.Threshold)
	if r.Verdict == Inconclusive && noise == BothSides {
		r.SettleRepeats = settleRepeats(b, n, iv, o.Threshold, a)
	}
}

// values are a result's figures of one metric: every repeat's, or the one;
// a figure that is not a positive number (a size that moved nothing, a
// latency result without latencies) is not a measurement.
func values(r results.Result, m Metric) []float64 {
	var v []float64
	add := func(x float64) {
		if x > 0 && !math.IsInf(x, 0) {
			v = append(v, x)
		}
	}
	if len(r.Repeats) == 0 {
		add(m.of(results.Headline(r)))
	}
	for _, f := range r.Repeats {
		add(m.of(f))
	}
	return v
}
