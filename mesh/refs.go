package mesh

import (
	"math"
	"sort"

	"github.com/rdmabench/rdmabench/internal/stat"
	"github.com/rdmabench/rdmabench/results"
)

// refs are one figure's first measurements by rank, for the references.
type refs struct {
	fig   figure
	byDir *dirTable[float64]
	// cls tells each pair's class: a direction is judged against pairs
	// of its own class only (issue 47).
	cls *results.PairClasses
	// byRank holds each rank's directions' badness by class, sorted.
	byRank [][results.NumPairClasses][]float64
	// mates are the other ranks on each rank's NIC.
	mates [][]int
	sigma float64 // spread of one measurement, in badness units
	// pairSD is the spread of a pair's mean about the ranks' additive
	// model, and common the part of it both directions share (pairs at
	// once on one host slowing each other round by round), which sigma,
	// from the directions' differences, cannot see. 0: too few pairs.
	pairSD, common float64
	// commonKnown: the common part was measured (a fit with pairs to
	// spare, or controls); without it, one pair's noise is not known well
	// enough to blame a rank by its typical pair alone.
	commonKnown bool
	k           float64
	// kDir is the sigmas of one direction's cut: k, or more on a large
	// mesh, so that its million directions give about 0.1 outliers by
	// noise alone, not hundreds (each a retest, or inconclusive).
	kDir float64
	// kRank is the sigmas of a rank's typical-pair cut: k, or more on a
	// large mesh, so that its ranks together make a false culprit by
	// noise in about 0.2% of meshes. Where the noise is large enough for
	// this cut to be above the practical one (a screening pass, √8 times
	// noisier), 64 ranks each tested at 3.5 sigmas blamed a healthy node
	// in 1.5% of meshes.
	kRank float64
	// retestShift is how much worse a retest is than the screening pass
	// on the same direction (a median over the controls; 0 without): the
	// retests ran alone at full length, the references beside the reverse
	// direction and short.
	retestShift float64
}

// Direction is a direction of a pair, as the analysis indexes them.
type Direction = results.Direction

func newRefs(m *results.Mesh, fig figure, k float64) *refs {
	rf := &refs{fig: fig, byDir: newDirTable[float64](len(m.Ranks)), byRank: make([][results.NumPairClasses][]float64, len(m.Ranks)), k: k}
	rf.cls = m.Classify()
	rf.mates = make([][]int, len(m.Ranks))
	byNIC := map[int][]int{}
	for r := range m.Ranks {
		byNIC[rf.cls.NIC(r)] = append(byNIC[rf.cls.NIC(r)], r)
	}
	for _, rs := range byNIC {
		for _, r := range rs {
			for _, o := range rs {
				if o != r {
					rf.mates[r] = append(rf.mates[r], o)
				}
			}
		}
	}
	for i := range m.Pairs {
		p := &m.Pairs[i]
		if y, ok := fig.badness(&p.MeshFigures); ok {
			rf.byDir.put(Direction{From: p.From, To: p.To}, y)
			rf.byRank[p.From][p.Class] = append(rf.byRank[p.From][p.Class], y)
			rf.byRank[p.To][p.Class] = append(rf.byRank[p.To][p.Class], y)
		}
	}
	for r := range rf.byRank {
		for _, v := range rf.byRank[r] {
			sort.Float64s(v)
		}
	}
	// The spread of one measurement from the two directions of each pair:
	// a slow node or link slows both alike, so their difference is the
	// noise (a one-way fault is one pair among many: the median ignores it).
	var diffs []float64
	rf.byDir.each(func(d Direction, y float64) {
		if d.From < d.To {
			if y2, ok := rf.byDir.at(Direction{From: d.To, To: d.From}); ok {
				diffs = append(diffs, math.Abs(y-y2))
			}
		}
	})
	rf.sigma = spread(diffs) / math.Sqrt2
	// What a pair's directions share: pairs at once on one host slowing
	// each other, or a busy moment of a host while the two directions ran
	// back to back (make demo's mesh, one pair at a time, had pairs at
	// twice others' bandwidth in both directions).
	rf.pairSD = rf.fitPairs(len(m.Ranks))
	rf.common = math.Sqrt(max(0, rf.pairSD*rf.pairSD-rf.sigma*rf.sigma/2))
	rf.commonKnown = rf.pairSD > 0
	// The one-sided normal quantile of 0.1/directions.
	rf.kDir = max(k, math.Sqrt2*math.Erfinv(1-2*0.1/float64(max(1, rf.byDir.count))))
	rf.kRank = max(k, math.Sqrt2*math.Erfinv(1-2*0.002/float64(max(1, len(m.Ranks)))))
	return rf
}

// robustSD is the standard deviation of normal noise from the median
// absolute deviation of v about center.
func robustSD(v []float64, center float64) float64 {
	dev := make([]float64, len(v))
	for i, x := range v {
		dev[i] = math.Abs(x - center)
	}
	return 1.4826 * stat.Median(dev)
}

// spread estimates the standard deviation of normal noise from absolute
// differences: the root mean square of the smallest 90% (a one-way fault
// or a flap is in the largest few), scaled back to the whole normal. It
// wastes less of a small mesh's few pairs than the median of them does.
// 0 for fewer than 3.
func spread(abs []float64) float64 {
	if len(abs) < 3 {
		return 0
	}
	s := append([]float64(nil), abs...)
	sort.Float64s(s)
	keep := len(s) - (len(s)+9)/10
	var sum float64
	for _, v := range s[:keep] {
		sum += v * v
	}
	// E[X² | |X| below its 90% quantile] of a standard normal is 0.623.
	return math.Sqrt(sum / float64(keep) / 0.623)
}

// medExcept is the median of rank r's directions of the class of pair
// r-s without those with s or, r not on it, another rank of s's NIC (a
// NIC is judged against other NICs: its other processes share what it
// is, and a process against its NIC's others is no evidence), and how
// many there
// were; false when none is left (then r has no other pair of that class
// to compare s's with).
func (rf *refs) medExcept(r, s int) (float64, int, bool) {
	c := rf.cls.Of(r, s)
	vals := rf.byRank[r][c]
	if len(rf.mates[s]) > 0 && c != results.ClassSameNIC {
		rest := append([]float64(nil), vals...)
		for _, o := range append([]int{s}, rf.mates[s]...) {
			if o == r {
				continue
			}
			for _, d := range []Direction{{From: r, To: o}, {From: o, To: r}} {
				if y, ok := rf.byDir.at(d); ok {
					if i := sort.SearchFloat64s(rest, y); i < len(rest) && rest[i] == y {
						rest = append(rest[:i], rest[i+1:]...)
					}
				}
			}
		}
		if len(rest) == 0 {
			return 0, 0, false
		}
		return stat.MedianSorted(rest), len(rest), true // vals, and so rest, are sorted
	}
	var excl []int
	for _, d := range []Direction{{From: r, To: s}, {From: s, To: r}} {
		if y, ok := rf.byDir.at(d); ok {
			i := sort.SearchFloat64s(vals, y)
			if len(excl) > 0 && i <= excl[0] {
				i = excl[0] + 1 // the same value twice: the next copy
			}
			excl = append(excl, i)
		}
	}
	n := len(vals) - len(excl)
	if n <= 0 {
		return 0, 0, false
	}
	kth := func(j int) float64 {
		for _, e := range excl {
			if e <= j {
				j++
			}
		}
		return vals[j]
	}
	if n%2 == 1 {
		return kth(n / 2), n, true
	}
	return (kth(n/2-1) + kth(n/2)) / 2, n, true
}

// ref is direction d's reference: the better and the worse of its two
// ranks' other pairs of its class (or the fabric's expected figure, for a
// pair across hosts), and the cut beyond which it is an outlier (alone:
// for a retest, measured with no pair beside it). ok is false with
// nothing to compare with: neither rank has another pair of the class (a
// mesh of two ranks; a same-rail pair of a mesh of two hosts).
func (rf *refs) ref(d Direction, alone bool) (best, worse, cut float64, ok bool) {
	if c := rf.cls.Of(d.From, d.To); !math.IsNaN(rf.fig.expect) && c != results.ClassSameNIC && c != results.ClassSameHost {
		return rf.fig.expect, rf.fig.expect, rf.cut(rf.kDir, 1, 1<<30, alone), true
	}
	a, na, okA := rf.medExcept(d.From, d.To)
	b, nb, okB := rf.medExcept(d.To, d.From)
	switch {
	case okA && okB:
		return min(a, b), max(a, b), rf.cut(rf.kDir, 1, min(na, nb), alone), true
	case okA:
		return a, a, rf.cut(rf.kDir, 1, na, alone), true
	case okB:
		return b, b, rf.cut(rf.kDir, 1, nb, alone), true
	}
	return 0, 0, 0, false
}

// cut is the threshold of a mean of m measurements against a median of n:
// the practical threshold, or k spreads of that difference if more. The
// part of the noise the directions of a pair share does not shrink with m;
// measurements alone (retests) have none of it, only their reference.
func (rf *refs) cut(k float64, m, n int, alone bool) float64 {
	pn := math.Pi / 2 / float64(n)
	shared := 1 + pn
	if alone {
		shared = pn
	}
	sd := math.Sqrt(rf.sigma*rf.sigma*(1/float64(m)+pn) + rf.common*rf.common*shared)
	return max(rf.fig.practical, k*sd)
}

// confirmed is direction p's badness in rf's figure as the blame reads it:
// the retest's where one measured it (alone: no pair beside it to slow it
// down, the contention of the rounds gone), else the first measurement's
// where that was no outlier; false for an outlier no retest measured,
// which is inconclusive and so no evidence either way.
func (rf *refs) confirmed(p *results.MeshPair) (float64, bool) {
	if rt := p.Retest; rt != nil && rt.Error == "" {
		if y, ok := rf.fig.badness(rt); ok {
			return y - rf.retestShift, true
		}
	}
	if *rf.fig.slow(&p.MeshFigures) {
		return 0, false
	}
	return rf.fig.badness(&p.MeshFigures)
}

// pairNoise is, per figure, the spread of a pair's residual: the larger of
// what the directions' noise gives (a mean of two against a median of the
// partner's others) and the spread of the pairs about an additive model
// of the ranks (each pair's figure the mesh's plus its two ranks' own,
// fitted by median polish, so that a slow rank is in its own term and not
// in the spread). The second holds what the two directions of a pair
// share and so cannot show: pairs that ran at once on one host slowing
// each other, round by round. It needs pairs to spare beyond the ranks'
// terms (at least minSpare, a mesh of 5 ranks); with fewer, the directions'.
func pairNoise(m *results.Mesh, rfs perFigure[*refs]) perFigure[float64] {
	n := len(m.Ranks)
	var out perFigure[float64]
	for i, rf := range rfs {
		dir := rf.sigma * math.Sqrt(0.5+math.Pi/2/float64(max(1, 2*(n-2))))
		out[i] = max(math.Sqrt(dir*dir+rf.common*rf.common), rf.pairSD)
	}
	return out
}

// minSpare is the fewest pairs beyond the ranks' terms whose spread the fit
// of fitPairs trusts: 4, a mesh of 5 ranks (whose fitted spread swings, so
// that a node at 0.7x at 10% jitter is found in about 94%).
const minSpare = 4

// fitPairs is the spread of a pair's mean about the additive model of the
// ranks (see pairNoise); 0 with fewer than minSpare pairs to spare.
func (rf *refs) fitPairs(n int) float64 {
	type pm struct {
		a, b int
		c    results.PairClass
		y    float64
	}
	var pairs []pm
	rf.byDir.each(func(d Direction, y float64) {
		if d.From > d.To {
			return
		}
		if y2, ok := rf.byDir.at(Direction{From: d.To, To: d.From}); ok {
			pairs = append(pairs, pm{d.From, d.To, rf.cls.Of(d.From, d.To), (y + y2) / 2})
		}
	})
	ranks := map[int]bool{}
	classes := map[results.PairClass]bool{}
	for _, p := range pairs {
		ranks[p.a], ranks[p.b] = true, true
		classes[p.c] = true
	}
	// A term per rank and per class: pairs of different classes differ
	// in speed by their path (same host, across rails), not by noise.
	spare := len(pairs) - len(ranks) - len(classes)
	if spare < minSpare {
		return 0
	}
	u := make([]float64, n)
	var mu [results.NumPairClasses]float64
	resid := make([]float64, len(pairs))
	// Median polish settles in a few sweeps.
	for range 5 {
		var byClass [results.NumPairClasses][]float64
		for _, p := range pairs {
			byClass[p.c] = append(byClass[p.c], p.y-u[p.a]-u[p.b])
		}
		for c, v := range byClass {
			mu[c] = stat.Median(v)
		}
		byRank := make([][]float64, n)
		for _, p := range pairs {
			byRank[p.a] = append(byRank[p.a], p.y-mu[p.c]-u[p.b])
			byRank[p.b] = append(byRank[p.b], p.y-mu[p.c]-u[p.a])
		}
		for r, v := range byRank {
			if len(v) > 0 {
				u[r] = stat.Median(v)
			}
		}
	}
	for j, p := range pairs {
		resid[j] = p.y - mu[p.c] - u[p.a] - u[p.b]
	}
	// The fit takes a rank's term from its pairs: the residuals are
	// smaller than the noise by about √(spare/pairs).
	return robustSD(resid, 0) * math.Sqrt(float64(len(pairs))/float64(spare))
}
