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

	"github.com/rdmabench/rdmabench/internal/stat"
	"github.com/rdmabench/rdmabench/results"
)

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

// Criteria name a rank by what its lateness cost the run, however it
// is spread: late a little in every iteration, late by 20 ms now and
// then, or late once by a second.
//
// In each timed loop a rank's lag in an iteration is how far its entry
// (or finish) is behind the median of the other ranks', and its usual
// place is the middle of the shortest interval holding half its lags
// (unlike the median, not pulled by stalls in up to half the
// iterations). Its lateness costs the others time in two ways:
//
//   - A stall: an iteration whose lag is past the rank's usual place (or
//     past the others', when it is usually ahead of them) by more than
//     the threshold, the larger of NoiseK robust standard deviations of
//     the loop's jitter and FloorFrac of its median iteration. It costs
//     the lag beyond the usual place and the threshold: what the jitter
//     cannot explain. A clock offset moves the usual place as well, so
//     it does not matter here.
//   - A steady lag: a usual place behind the others by more than the
//     clock error bounds (the rank's own plus the others'; an offset
//     within them looks the same) and the larger of FloorFrac of an
//     iteration and SteadyK standard errors of that place. Then every
//     iteration costs its lag beyond the clock error bounds.
//
// A rank is named when what it cost, less its longest stall up to
// HiccupUs, adds up to CostFrac of the timed span. Jitter stays within
// the threshold, and a healthy rank's scheduling hiccups of a few
// milliseconds add up to a small part of CostFrac; but a busy host also
// deschedules a healthy process now and then for up to a few hundred
// milliseconds, alone more than CostFrac of a short run. Timing cannot
// tell that from a preemption, so one stall per rank is forgiven up to
// HiccupUs: a rank preempted once for a second still costs 0.7 s, and
// stalls repeated or steady add up past any one of them.
type Criteria struct {
	NoiseK    float64
	SteadyK   float64
	FloorFrac float64
	CostFrac  float64
	HiccupUs  float64
}

// Default are the criteria ncclbench uses. TestSimulated holds them to
// naming nobody in at least 99% of simulated healthy runs of 2-16 ranks
// on a busy host, and a rank stopped 20 ms every 50 ms, a rank 10% slow
// and a rank preempted once for a second in at least 95%. CostFrac 0.05
// is the upper end of the bars where both hold: at 3% and 4% healthy
// runs name a rank in up to 1% of them (at 2%, 7%), at 6% a preempted
// rank (a second, less the 0.3 s forgiven, of an 11 s span) is missed
// in most. HiccupUs 0.3 s is the longest hiccup simulated; one of 110 ms
// was the longest measured in 230 rank-seconds on 2 cores with two CPU
// burners.
var Default = Criteria{NoiseK: 6, SteadyK: 4, FloorFrac: 0.02, CostFrac: 0.05, HiccupUs: 300e3}

type acc struct {
	late    int
	iters   int
	lags    []float64
	max     float64
	cost    float64
	longest float64
	steady  bool
}

// Analyze names the stragglers of the segments. ranks names rank r of
// every segment; segments with fewer than two ranks or no iterations are
// skipped.
func Analyze(segs []Segment, ranks []results.StragglerRank, c Criteria) results.StragglerReport {
	rep, _ := analyze(segs, ranks, c)
	return rep
}

// scored is a finding and its score: its cost past the forgiven stall
// over the bar (1 names it).
type scored struct {
	results.StragglerFinding
	score float64
}

// analyze is Analyze, with each straggler's score (the tests judge runs
// at other bars by it).
func analyze(segs []Segment, ranks []results.StragglerRank, c Criteria) (results.StragglerReport, []float64) {
	n := len(ranks)
	rep := results.StragglerReport{Ranks: n, Stragglers: []results.StragglerFinding{}, CostBarPct: 100 * c.CostFrac, HiccupUs: c.HiccupUs}
	accs := [2][]acc{make([]acc, n), make([]acc, n)}
	span := 0.0
	for _, s := range segs {
		if s.wellFormed(n) {
			span += addSegment(&rep, &accs, s, c)
		}
	}
	return judge(rep, accs, ranks, span, c)
}

// addSegment adds a segment's lags behind the median, entering and
// finishing, to each rank's tallies and its noise to rep; it returns
// the segment's span.
func addSegment(rep *results.StragglerReport, accs *[2][]acc, s Segment, c Criteria) float64 {
	iters := len(s.Enter[0])
	rep.Iterations += iters
	enterLags, enterMed := lagsBehind(s.Enter)
	finishLags, finishMed := lagsBehind(s.Finish)
	iterTime := make([]float64, iters)
	for i := range iters {
		iterTime[i] = finishMed[i] - enterMed[i]
	}
	for _, e := range s.ErrUs {
		rep.ClockErrUs = max(rep.ClockErrUs, e)
	}
	floor := c.FloorFrac * stat.Median(iterTime)
	for k, lags := range [2][][]float64{enterLags, finishLags} {
		addLags(rep, accs[k], s, lags, floor, c)
	}
	return finishMed[iters-1] - enterMed[0]
}

// addLags tallies one kind of lag (entering or finishing) of a segment:
// each rank's late iterations and their cost, beyond the noise (tau) or,
// for a rank steadily behind, beyond its clocks' error.
func addLags(rep *results.StragglerReport, accs []acc, s Segment, lags [][]float64, floor float64, c Criteria) {
	n, iters := len(accs), len(s.Enter[0])
	sorted := make([][]float64, n)
	for r, row := range lags {
		sorted[r] = slices.Clone(row)
		slices.Sort(sorted[r])
	}
	sigma := jitter(sorted)
	rep.JitterUs = max(rep.JitterUs, sigma)
	tau := max(c.NoiseK*sigma, floor)
	rep.ThresholdUs = max(rep.ThresholdUs, tau)
	// The standard error of the usual place: the middle of the
	// shortest half of normal noise varies as n^-1/3 (simulated:
	// 0.43, 0.31, 0.21, 0.15 and 0.10 standard deviations for 20,
	// 70, 200, 700 and 2000 iterations), more than a median.
	se := 1.25 * sigma / math.Cbrt(float64(iters))
	for r := range n {
		clock := s.ErrUs[r] + othersBound(s.ErrUs, r)
		_, usual := shortestHalf(sorted[r])
		a := &accs[r]
		a.iters += iters
		steady := usual-clock > max(floor, c.SteadyK*se)
		a.steady = a.steady || steady
		base := max(usual, 0)
		for _, l := range lags[r] {
			late, cost := l-base > tau, 0.0
			switch {
			case steady:
				late, cost = l-clock > floor, max(0, l-clock)
			case late:
				cost = l - base - tau
			}
			if late {
				a.late++
				a.lags = append(a.lags, l)
				a.max = max(a.max, l)
			}
			a.cost += cost
			a.longest = max(a.longest, cost)
		}
	}
}

// judge scores each rank's tallies against the cost bar: the stragglers
// named, or the worst of the rest and its margin.
func judge(rep results.StragglerReport, accs [2][]acc, ranks []results.StragglerRank, span float64, c Criteria) (results.StragglerReport, []float64) {
	var named []scored
	var best *scored
	for k := range accs {
		for r, a := range accs[k] {
			if a.iters == 0 {
				continue
			}
			f := scored{StragglerFinding: results.StragglerFinding{Rank: ranks[r], Kind: results.StragglerKind(k), Late: a.late,
				Iterations: a.iters, MaxLagUs: a.max, LongestStallUs: a.longest, CostUs: a.cost, Consistent: a.steady}}
			if len(a.lags) > 0 {
				f.MedianLagUs = stat.Median(a.lags)
			}
			if span > 0 {
				f.CostPct = 100 * a.cost / span
				f.score = 100 * (a.cost - min(a.longest, c.HiccupUs)) / span / rep.CostBarPct
			}
			if f.score >= 1 {
				named = append(named, f)
			} else if best == nil || f.score > best.score || f.score == best.score && f.CostPct > best.CostPct {
				best = &f
			}
		}
	}
	slices.SortStableFunc(named, func(a, b scored) int {
		if a.Rank.Rank != b.Rank.Rank {
			return a.Rank.Rank - b.Rank.Rank
		}
		return int(a.Kind) - int(b.Kind)
	})
	scores := make([]float64, len(named))
	for i, f := range named {
		rep.Stragglers = append(rep.Stragglers, f.StragglerFinding)
		scores[i] = f.score
	}
	if len(rep.Stragglers) == 0 && best != nil {
		rep.Worst, rep.Margin = &best.StragglerFinding, best.score
	}
	return rep, scores
}

// othersBound bounds the error of the median of the other ranks' clocks
// (v[q] bounds rank q's): the upper median of their bounds. Were the
// others' times equal, their median would move by no more than the
// median of their errors; close together, as in a collective, it moves
// little more. Taking the largest instead would let one rank's wide
// bound (a process descheduled while its clock was read) hide every
// steady lag of the others.
func othersBound(v []float64, r int) float64 {
	others := make([]float64, 0, len(v))
	for q, x := range v {
		if q != r {
			others = append(others, x)
		}
	}
	slices.Sort(others)
	if len(others) == 0 {
		return 0
	}
	return others[len(others)/2]
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

// lagsBehind is, per rank and iteration, how far the rank's time is behind
// the median of the other ranks' times in that iteration (with two ranks,
// the other one's), and each iteration's median time. Each iteration's
// times are sorted once: the median of the others is then read off
// around the rank's own place.
func lagsBehind(times [][]float64) (lags [][]float64, med []float64) {
	n, iters := len(times), len(times[0])
	lags = make([][]float64, n)
	for r := range lags {
		lags[r] = make([]float64, iters)
	}
	med = make([]float64, iters)
	sorted := make([]float64, n)
	m := n - 1
	for i := range iters {
		for r := range n {
			sorted[r] = times[r][i]
		}
		slices.Sort(sorted)
		med[i] = stat.MedianSorted(sorted)
		for r := range n {
			// Leaving out any one copy of the rank's time leaves the
			// same others: their j-th is sorted[j] below place p,
			// sorted[j+1] from p on.
			p, _ := slices.BinarySearch(sorted, times[r][i])
			at := func(j int) float64 {
				if j >= p {
					j++
				}
				return sorted[j]
			}
			others := at(m / 2)
			if m%2 == 0 {
				others = (at(m/2-1) + at(m/2)) / 2
			}
			lags[r][i] = times[r][i] - others
		}
	}
	return lags, med
}

// jitter is a robust standard deviation of the lags (each rank's
// sorted): per rank, the width of the shortest interval holding half its
// lags (1.349 standard deviations of normal noise), then the median over
// the ranks. A rank's usual place is not jitter. A straggler late in
// fewer than half its iterations, however late, widens its own shortest
// half and those of the others whose lags it moves (with two or three
// ranks) by the noise alone, 2.5 times at most (the iterations on time
// must hold half of all the lags, more of themselves), never by its
// stalls; with four ranks or more the median leaves its own out.
func jitter(sorted [][]float64) float64 {
	widths := make([]float64, len(sorted))
	for r, row := range sorted {
		w, _ := shortestHalf(row)
		widths[r] = w / 1.349
	}
	return stat.Median(widths)
}

// shortestHalf is the width and the middle of the shortest interval that
// holds more than half of s, sorted. The middle is where a rank's lag
// mostly is: unlike the median, a straggler late in 45% of the
// iterations does not pull it by more than the noise.
func shortestHalf(s []float64) (width, mid float64) {
	switch len(s) {
	case 0:
		return 0, 0
	case 1:
		return 0, s[0]
	}
	h := len(s)/2 + 1
	width = math.Inf(1)
	for i := 0; i+h <= len(s); i++ {
		if w := s[i+h-1] - s[i]; w < width {
			width, mid = w, (s[i]+s[i+h-1])/2
		}
	}
	return width, mid
}

// Lines is the report as '#' lines for the text table's footer.
func Lines(rep results.StragglerReport) []string {
	if rep.Ranks < 2 || rep.Iterations == 0 {
		return nil
	}
	basis := fmt.Sprintf("named at a cost of %g%% of the timed span past one stall of up to %s (a busy host's hiccup): "+
		"stalls past %s (%g x jitter %s or %g%% of an iteration), a steady lag past the clock error bounds (<= %s a rank)",
		rep.CostBarPct, us(rep.HiccupUs), us(rep.ThresholdUs), Default.NoiseK, us(rep.JitterUs), 100*Default.FloorFrac, us(rep.ClockErrUs))
	if len(rep.Stragglers) == 0 {
		line := fmt.Sprintf("# Stragglers: no straggler over %d iterations of %d ranks", rep.Iterations, rep.Ranks)
		if w := rep.Worst; w != nil {
			line += fmt.Sprintf(" (margin %.1fx: closest %s, %s in %d of %d iterations, costing %.1f%% of the timed span, the longest stall %s)",
				1/max(rep.Margin, 1e-3), w.Rank, w.Kind, w.Late, w.Iterations, w.CostPct, us(w.LongestStallUs))
		}
		return []string{line, "#   " + basis}
	}
	out := []string{fmt.Sprintf("# Stragglers: %d found over %d iterations of %d ranks (against the median of the other ranks)", len(rep.Stragglers), rep.Iterations, rep.Ranks)}
	for _, f := range rep.Stragglers {
		how := "now and then"
		if f.Consistent {
			how = "steadily"
		}
		out = append(out, fmt.Sprintf("#   %s: %s %s, costing %.1f%% of the timed span (%s): late in %d of %d iterations, by %s (median), the longest stall %s",
			f.Rank, f.Kind, how, f.CostPct, us(f.CostUs), f.Late, f.Iterations, us(f.MedianLagUs), us(f.LongestStallUs)))
	}
	return append(out, "#   "+basis)
}

// Text is Lines joined.
func Text(rep results.StragglerReport) string {
	l := Lines(rep)
	if len(l) == 0 {
		return ""
	}
	return strings.Join(l, "\n") + "\n"
}

func us(v float64) string {
	switch {
	case v >= 999.5e3:
		return sig3(v/1e6) + " s"
	case v >= 999.5:
		return sig3(v/1e3) + " ms"
	}
	return sig3(v) + " us"
}

// sig3 is v with three significant digits, never in exponent form.
func sig3(v float64) string {
	switch {
	case math.Abs(v) >= 99.95:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 9.995:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
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
