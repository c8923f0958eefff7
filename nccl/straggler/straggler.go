// Package straggler finds the ranks that hold a collective benchmark back,
// from when each rank entered and finished every timed iteration on a
// clock aligned across processes.
//
// A late rank waits least: its own iteration time looks short, and the
// others' look long. So the analysis compares entry times (and finish
// times) across ranks, iteration by iteration, never per-rank durations.
package straggler

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Rank names an NCCL rank in the report.
type Rank struct {
	Rank   int    `json:"rank"`
	Host   string `json:"host"`
	Device int    `json:"device"`
	Pid    int    `json:"pid"`
}

func (r Rank) String() string {
	return fmt.Sprintf("rank %d (%s GPU %d, pid %d)", r.Rank, r.Host, r.Device, r.Pid)
}

// Segment is one timed loop (one half of a table row). Enter[r][i] and
// Finish[r][i] are when rank r entered and finished iteration i, in
// microseconds on the aligned clock; ErrUs[r] bounds the error of rank r's
// clock there (alignment and anchoring together).
type Segment struct {
	Label  string
	Enter  [][]float64
	Finish [][]float64
	ErrUs  []float64
}

// Kind says which end of the collective a rank is late at.
type Kind int

const (
	// LateEnter: the rank reaches the collective after the others.
	LateEnter Kind = iota
	// SlowFinish: the rank is done with it after the others.
	SlowFinish
)

func (k Kind) String() string {
	if k == SlowFinish {
		return "slow to finish"
	}
	return "late to enter"
}

// MarshalText writes the kind as its JSON name.
func (k Kind) MarshalText() ([]byte, error) {
	if k == SlowFinish {
		return []byte("slow_finish"), nil
	}
	return []byte("late_enter"), nil
}

// UnmarshalText reads MarshalText's names.
func (k *Kind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "late_enter":
		*k = LateEnter
	case "slow_finish":
		*k = SlowFinish
	default:
		return fmt.Errorf("straggler kind %q (want late_enter or slow_finish)", b)
	}
	return nil
}

// Criteria name a rank. A rank is late in an iteration when its lag behind
// the median of the other ranks exceeds the threshold: the larger of
// NoiseK robust standard deviations of the run's own jitter and
// FloorFrac of the median iteration time, plus both clock error bounds.
// It is named when late in at least ConsistentFrac of the iterations
// (and MinLate of them), or when its excess lag adds up to CostFrac of
// the timed span (a preempted process, late once by a lot). CostFrac is
// high because a healthy process on a busy host is also descheduled now
// and then, for up to a few hundred milliseconds: a short run cannot tell
// that from a preemption, so only one that held the run up for as long as
// everything else did is named.
type Criteria struct {
	NoiseK         float64
	FloorFrac      float64
	ConsistentFrac float64
	MinLate        int
	CostFrac       float64
}

// Default are the criteria ncclbench uses; the tests hold them to a
// healthy run naming nobody and a late rank being named.
var Default = Criteria{NoiseK: 6, FloorFrac: 0.1, ConsistentFrac: 0.5, MinLate: 3, CostFrac: 0.5}

// Finding is one rank named, at one end of the collective.
type Finding struct {
	Rank Rank `json:"rank"`
	Kind Kind `json:"kind"`
	// Late of Iterations were over the threshold, by MedianLagUs (median
	// of those) and at most MaxLagUs behind the median of the others.
	Late        int     `json:"late_iterations"`
	Iterations  int     `json:"iterations"`
	MedianLagUs float64 `json:"median_lag_us"`
	MaxLagUs    float64 `json:"max_lag_us"`
	// CostPct is its excess lag summed, in percent of the timed span.
	CostPct float64 `json:"cost_pct"`
	// Consistent: named for how often; otherwise for how much.
	Consistent bool `json:"consistent"`
	score      float64
}

// Report is the analysis of a whole run.
type Report struct {
	Ranks      int       `json:"ranks"`
	Iterations int       `json:"iterations"` // over every segment
	Stragglers []Finding `json:"stragglers"`
	// Worst is the rank closest to being named when none is, and Margin
	// its score: 1 names a rank, so 0.25 is four times below the bar (the
	// text's "margin 4.0x").
	Worst  *Finding `json:"closest,omitempty"`
	Margin float64  `json:"closest_score,omitempty"`
	// ThresholdUs is the largest per-iteration threshold used, JitterUs
	// the largest robust jitter, ClockErrUs the largest clock error bound.
	ThresholdUs float64 `json:"threshold_us"`
	JitterUs    float64 `json:"jitter_us"`
	ClockErrUs  float64 `json:"clock_error_us"`
}

type acc struct {
	late  int
	iters int
	lags  []float64
	max   float64
	cost  float64
}

// Analyze names the stragglers of the segments. ranks names rank r of
// every segment; segments with fewer than two ranks or no iterations are
// skipped.
func Analyze(segs []Segment, ranks []Rank, c Criteria) Report {
	n := len(ranks)
	rep := Report{Ranks: n, Stragglers: []Finding{}}
	accs := [2][]acc{make([]acc, n), make([]acc, n)}
	span := 0.0
	for _, s := range segs {
		if !s.wellFormed(n) {
			continue
		}
		iters := len(s.Enter[0])
		rep.Iterations += iters
		iterTime := make([]float64, iters)
		for i := range iters {
			iterTime[i] = median(column(s.Finish, i)) - median(column(s.Enter, i))
		}
		first, last := median(column(s.Enter, 0)), median(column(s.Finish, iters-1))
		span += last - first
		maxErr := 0.0
		for _, e := range s.ErrUs {
			maxErr = max(maxErr, e)
		}
		rep.ClockErrUs = max(rep.ClockErrUs, maxErr)
		floor := c.FloorFrac * median(iterTime)
		for k, times := range [2][][]float64{s.Enter, s.Finish} {
			lags := lagsBehind(times)
			sigma := jitter(lags)
			rep.JitterUs = max(rep.JitterUs, sigma)
			for r := range n {
				tau := max(c.NoiseK*sigma, floor) + s.ErrUs[r] + maxErr
				rep.ThresholdUs = max(rep.ThresholdUs, tau)
				a := &accs[k][r]
				a.iters += iters
				for _, l := range lags[r] {
					if l > tau {
						a.late++
						a.lags = append(a.lags, l)
						a.max = max(a.max, l)
						a.cost += l - tau
					}
				}
			}
		}
	}
	var best *Finding
	for k := range accs {
		for r, a := range accs[k] {
			if a.iters == 0 {
				continue
			}
			f := Finding{Rank: ranks[r], Kind: Kind(k), Late: a.late, Iterations: a.iters, MaxLagUs: a.max}
			if len(a.lags) > 0 {
				f.MedianLagUs = median(a.lags)
			}
			if span > 0 {
				f.CostPct = 100 * a.cost / span
			}
			need := max(float64(c.MinLate), math.Ceil(c.ConsistentFrac*float64(a.iters)))
			often, much := float64(a.late)/need, f.CostPct/(100*c.CostFrac)
			f.Consistent = often >= 1
			f.score = max(often, much)
			if f.score >= 1 {
				rep.Stragglers = append(rep.Stragglers, f)
			} else if best == nil || f.score > best.score {
				best = &f
			}
		}
	}
	slices.SortStableFunc(rep.Stragglers, func(a, b Finding) int {
		if a.Rank.Rank != b.Rank.Rank {
			return a.Rank.Rank - b.Rank.Rank
		}
		return int(a.Kind) - int(b.Kind)
	})
	if len(rep.Stragglers) == 0 && best != nil {
		rep.Worst, rep.Margin = best, best.score
	}
	return rep
}

// wellFormed: n ranks (at least two), each with the same iterations (at
// least one) and an error bound.
func (s Segment) wellFormed(n int) bool {
	if n < 2 || len(s.Enter) != n || len(s.Finish) != n || len(s.ErrUs) != n || len(s.Enter[0]) == 0 {
		return false
	}
	for r := range n {
		if len(s.Enter[r]) != len(s.Enter[0]) || len(s.Finish[r]) != len(s.Enter[0]) {
			return false
		}
	}
	return true
}

// Named says whether the report names rank r.
func (rep Report) Named(r int) bool {
	for _, f := range rep.Stragglers {
		if f.Rank.Rank == r {
			return true
		}
	}
	return false
}

// lagsBehind is, per rank and iteration, how far the rank's time is behind
// the median of the other ranks' times in that iteration (with two ranks,
// the other one's).
func lagsBehind(times [][]float64) [][]float64 {
	n, iters := len(times), len(times[0])
	out := make([][]float64, n)
	for r := range out {
		out[r] = make([]float64, iters)
	}
	col := make([]float64, n)
	others := make([]float64, 0, n)
	for i := range iters {
		for r := range n {
			col[r] = times[r][i]
		}
		for r := range n {
			others = others[:0]
			for q, v := range col {
				if q != r {
					others = append(others, v)
				}
			}
			out[r][i] = col[r] - median(others)
		}
	}
	return out
}

// jitter is a robust standard deviation of the lags around each rank's
// own median lag: a rank that is consistently late does not inflate it,
// and a healthy rank's steady offset (its place in the barrier's release
// order) is not jitter.
func jitter(lags [][]float64) float64 {
	var dev []float64
	for _, row := range lags {
		m := median(row)
		for _, l := range row {
			dev = append(dev, math.Abs(l-m))
		}
	}
	return 1.4826 * median(dev)
}

func column(m [][]float64, i int) []float64 {
	out := make([]float64, len(m))
	for r := range m {
		out[r] = m[r][i]
	}
	return out
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Lines is the report as '#' lines for the text table's footer.
func (rep Report) Lines() []string {
	if rep.Ranks < 2 || rep.Iterations == 0 {
		return nil
	}
	basis := fmt.Sprintf("threshold %s: %g x jitter %s or a tenth of an iteration, plus clock error <= %s",
		us(rep.ThresholdUs), Default.NoiseK, us(rep.JitterUs), us(rep.ClockErrUs))
	if len(rep.Stragglers) == 0 {
		line := fmt.Sprintf("# Stragglers: no straggler over %d iterations of %d ranks", rep.Iterations, rep.Ranks)
		if w := rep.Worst; w != nil {
			line += fmt.Sprintf(" (margin %.1fx: closest %s, %s in %d of %d iterations, %.1f%% of the timed span)",
				1/max(rep.Margin, 1e-3), w.Rank, w.Kind, w.Late, w.Iterations, w.CostPct)
		}
		return []string{line, "#   " + basis}
	}
	out := []string{fmt.Sprintf("# Stragglers: %d found over %d iterations of %d ranks (against the median of the other ranks)", len(rep.Stragglers), rep.Iterations, rep.Ranks)}
	for _, f := range rep.Stragglers {
		out = append(out, fmt.Sprintf("#   %s: %s in %d of %d iterations, by %s (median; at most %s), %.1f%% of the timed span",
			f.Rank, f.Kind, f.Late, f.Iterations, us(f.MedianLagUs), us(f.MaxLagUs), f.CostPct))
	}
	return append(out, "#   "+basis)
}

// String is Lines joined.
func (rep Report) String() string {
	l := rep.Lines()
	if len(l) == 0 {
		return ""
	}
	return strings.Join(l, "\n") + "\n"
}

func us(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2f s", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.2f ms", v/1e3)
	}
	return fmt.Sprintf("%.1f us", v)
}

// Timeline is one rank's timed loop as its CUDA events give it: when it
// entered and finished each iteration, in microseconds after (usually
// before: negative) its anchor, an event whose time on the aligned clock
// is AnchorNs within ErrNs.
type Timeline struct {
	AnchorNs int64
	ErrNs    int64
	EnterUs  []float32
	FinishUs []float32
}

// NewSegment lines up the ranks' timelines (rank order) on one clock: the
// first rank's anchor is its origin.
func NewSegment(label string, tls []Timeline) Segment {
	s := Segment{Label: label}
	if len(tls) == 0 {
		return s
	}
	origin := tls[0].AnchorNs
	for _, tl := range tls {
		base := float64(tl.AnchorNs-origin) / 1e3
		e, f := make([]float64, len(tl.EnterUs)), make([]float64, len(tl.FinishUs))
		for i, v := range tl.EnterUs {
			e[i] = base + float64(v)
		}
		for i, v := range tl.FinishUs {
			f[i] = base + float64(v)
		}
		s.Enter, s.Finish = append(s.Enter, e), append(s.Finish, f)
		s.ErrUs = append(s.ErrUs, float64(tl.ErrNs)/1e3)
	}
	return s
}
