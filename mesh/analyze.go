package mesh

import (
	"math"
	"sort"
	"strconv"

	"github.com/rdmabench/rdmabench/internal/stat"
	"github.com/rdmabench/rdmabench/results"
)

// Rules say when a measurement is an outlier. A direction is judged
// against its ranks' other pairs of its class (results.PairClass: the same
// NIC, the same host, a rail, across rails, across hosts; not the mesh's
// median: a slow node is in 2/N of the directions, most of them on a small
// mesh) and against the
// fabric's noise: it must be below BWFraction of its reference (or above
// LatMultiple), the practical threshold, and beyond Sigmas times the
// spread of one measurement, the statistical one.
type Rules struct {
	BWFraction  float64
	LatMultiple float64
	// Sigmas is how many spreads a figure must be beyond its reference;
	// 0: DefaultRules.Sigmas.
	Sigmas float64
	// ExpectBW, when given, is the fabric's expected bandwidth in Gb/s:
	// the reference of every direction's bandwidth.
	ExpectBW float64
}

// Default rules: 10% below the reference bandwidth is a slow pair on a
// healthy fabric (pairs of one fabric agree within a few percent), twice
// the reference latency is beyond the noise of a ping-pong's median, and
// 3.5 spreads is where the simulations of mesh/noise_test.go hold the false
// blame under 1% of meshes at 3% and 10% jitter while a node at 0.7× is
// found in at least 95% of them at 5, 16 and 64 ranks (4 spreads: 93% at 5).
var DefaultRules = Rules{BWFraction: 0.9, LatMultiple: 2, Sigmas: 3.5}

// figure is bandwidth or latency as the analysis reads it: a badness
// (−log bandwidth, log latency: higher is worse, and a ratio is a
// difference) and the practical threshold in those units.
type figure struct {
	badness   func(f *results.MeshFigures) (float64, bool)
	practical float64
	expect    float64 // badness of the fabric's expected figure; NaN: none
	slow      func(f *results.MeshFigures) *bool
	spread    *float64
}

func (r Rules) figures(m *results.Mesh) [2]figure {
	expect := math.NaN()
	if r.ExpectBW > 0 {
		expect = -math.Log(r.ExpectBW)
	}
	return [2]figure{
		// Each figure needs only itself: a retest measures the part that
		// was an outlier (the first measurements have both, Measured).
		{func(f *results.MeshFigures) (float64, bool) {
			return -math.Log(f.BWGbps), f.Error == "" && f.BWGbps > 0
		}, -math.Log(r.BWFraction), expect, func(f *results.MeshFigures) *bool { return &f.SlowBW }, &m.SpreadBW},
		{func(f *results.MeshFigures) (float64, bool) {
			return math.Log(f.LatP50us), f.Error == "" && f.LatP50us > 0
		}, math.Log(r.LatMultiple), math.NaN(), func(f *results.MeshFigures) *bool { return &f.SlowLat }, &m.SpreadLat},
	}
}

func (r Rules) sigmas() float64 {
	if r.Sigmas > 0 {
		return r.Sigmas
	}
	return DefaultRules.Sigmas
}

// refs are one figure's first measurements by rank, for the references.
type refs struct {
	fig   figure
	byDir map[Direction]float64
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
	rf := &refs{fig: fig, byDir: map[Direction]float64{}, byRank: make([][results.NumPairClasses][]float64, len(m.Ranks)), k: k}
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
			rf.byDir[Direction{From: p.From, To: p.To}] = y
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
	for d, y := range rf.byDir {
		if d.From < d.To {
			if y2, ok := rf.byDir[Direction{From: d.To, To: d.From}]; ok {
				diffs = append(diffs, math.Abs(y-y2))
			}
		}
	}
	rf.sigma = spread(diffs) / math.Sqrt2
	// What a pair's directions share: pairs at once on one host slowing
	// each other, or a busy moment of a host while the two directions ran
	// back to back (make demo's mesh, one pair at a time, had pairs at
	// twice others' bandwidth in both directions).
	rf.pairSD = rf.fitPairs(len(m.Ranks))
	rf.common = math.Sqrt(max(0, rf.pairSD*rf.pairSD-rf.sigma*rf.sigma/2))
	rf.commonKnown = rf.pairSD > 0
	// The one-sided normal quantile of 0.1/directions.
	rf.kDir = max(k, math.Sqrt2*math.Erfinv(1-2*0.1/float64(max(1, len(rf.byDir)))))
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
				if y, ok := rf.byDir[d]; ok {
					if i := sort.SearchFloat64s(rest, y); i < len(rest) && rest[i] == y {
						rest = append(rest[:i], rest[i+1:]...)
					}
				}
			}
		}
		if len(rest) == 0 {
			return 0, 0, false
		}
		return stat.Median(rest), len(rest), true
	}
	var excl []int
	for _, d := range []Direction{{From: r, To: s}, {From: s, To: r}} {
		if y, ok := rf.byDir[d]; ok {
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

// MarkOutliers sets SlowBW and SlowLat on each measured direction that is
// worse than the better of its ranks' other pairs beyond the cut (a slow
// node's directions and a slow link's alike: they are retested), and
// records the rules, the medians and the spreads in the mesh.
func (r Rules) MarkOutliers(m *results.Mesh) {
	var bws, lats []float64
	for _, p := range m.Pairs {
		if p.Measured() {
			bws, lats = append(bws, p.BWGbps), append(lats, p.LatP50us)
		}
	}
	m.MedianBW, m.MedianLat = stat.Median(bws), stat.Median(lats)
	m.BWFraction, m.LatMultiple, m.Sigmas, m.ExpectBW = r.BWFraction, r.LatMultiple, r.sigmas(), r.ExpectBW
	for _, fig := range r.figures(m) {
		rf := newRefs(m, fig, r.sigmas())
		*fig.spread = rf.sigma
		for i := range m.Pairs {
			p := &m.Pairs[i]
			y, ok := fig.badness(&p.MeshFigures)
			if !ok {
				continue
			}
			best, _, cut, ok := rf.ref(Direction{From: p.From, To: p.To}, false)
			*fig.slow(&p.MeshFigures) = ok && y-best > cut
		}
	}
}

// blamable says whether a failed direction counts against its ranks or
// their path: neither rank left the mesh (a rank that left is reported so).
func blamable(m *results.Mesh, p *results.MeshPair) bool {
	if p.Retest != nil && p.Retest.Error != "" {
		if p.Retest.Interrupted {
			return false
		}
	} else if p.Interrupted {
		return false
	}
	return p.Failed() && m.Ranks[p.From].Dead == "" && m.Ranks[p.To].Dead == ""
}

// Analyze judges the retests against the same references (still an
// outlier, or cleared), then names the causes: the culprit ranks, the
// links (both ways, one way, failed) and the outliers left inconclusive.
// It reads only the figures in the mesh, so a saved mesh can be judged
// again.
func (r Rules) Analyze(m *results.Mesh) {
	figs := r.figures(m)
	var rfs [2]*refs
	for i, fig := range figs {
		rfs[i] = newRefs(m, fig, r.sigmas())
		*fig.spread = rfs[i].sigma
	}
	shiftByControls(m, figs, rfs)
	dirs := map[Direction]*results.MeshPair{}
	for i := range m.Pairs {
		p := &m.Pairs[i]
		dirs[Direction{From: p.From, To: p.To}] = p
		if p.Retest == nil {
			continue
		}
		if p.Retest.Error != "" && p.Measured() {
			// Not measured again: it stays an outlier.
			p.Retest.SlowBW, p.Retest.SlowLat = p.SlowBW, p.SlowLat
			continue
		}
		for i, fig := range figs {
			y, ok := fig.badness(p.Retest)
			best, _, cut, okRef := rfs[i].ref(Direction{From: p.From, To: p.To}, true)
			*fig.slow(p.Retest) = ok && okRef && y-rfs[i].retestShift-best > cut
		}
	}
	m.Culprits = r.culprits(m, rfs, dirs)
	classify(m)
	isCulprit := map[int]bool{}
	for _, c := range m.Culprits {
		isCulprit[c.Rank] = true
	}
	m.Links, m.Inconclusive = nil, nil
	explained := map[Direction]bool{}
	for i := range m.Pairs {
		p := &m.Pairs[i]
		// Two ranks on one NIC have no link between them: a bad pair of
		// them that no culprit explains is inconclusive.
		if p.From > p.To || isCulprit[p.From] || isCulprit[p.To] || p.Class == results.ClassSameNIC {
			continue
		}
		ab, ba := Direction{From: p.From, To: p.To}, Direction{From: p.To, To: p.From}
		badAB, failedAB := linkBad(m, rfs, figs, dirs[ab], dirs[ba])
		badBA, failedBA := linkBad(m, rfs, figs, dirs[ba], dirs[ab])
		switch {
		case badAB && badBA:
			m.Links = append(m.Links, results.SuspectLink{A: p.From, B: p.To, Failed: failedAB && failedBA})
		case badAB && fine(dirs[ba]):
			m.Links = append(m.Links, results.SuspectLink{A: p.From, B: p.To, OneWay: true, Failed: failedAB})
		case badBA && fine(dirs[ab]):
			m.Links = append(m.Links, results.SuspectLink{A: p.To, B: p.From, OneWay: true, Failed: failedBA})
		case badAB || badBA:
			m.Links = append(m.Links, results.SuspectLink{A: p.From, B: p.To, Failed: (failedAB || !badAB) && (failedBA || !badBA)})
		default:
			continue
		}
		explained[ab], explained[ba] = true, true
	}
	sort.Slice(m.Links, func(i, j int) bool {
		a, b := m.Links[i], m.Links[j]
		if min(a.A, a.B) != min(b.A, b.B) {
			return min(a.A, a.B) < min(b.A, b.B)
		}
		return max(a.A, a.B) < max(b.A, b.B)
	})
	m.NotJudged, m.LoneLatency = nil, 0
	for _, p := range m.Pairs {
		d := Direction{From: p.From, To: p.To}
		switch {
		case !p.Bad() || explained[d] || isCulprit[p.From] || isCulprit[p.To]:
		case LoneLatency(&p, dirs[Direction{From: p.To, To: p.From}]):
			m.LoneLatency++
		default:
			m.Inconclusive = append(m.Inconclusive, d)
		}
		if _, _, _, ok := rfs[0].ref(d, false); p.Measured() && !ok {
			m.NotJudged = append(m.NotJudged, d)
		}
	}
}

// minControls is the fewest controls whose median shift is used.
const minControls = 3

// shiftByControls sets each figure's retest shift from the controls of a
// screened mesh (healthy directions retested too): the median of their
// retests' badness less their first figures'. With fewer than
// minControls measured, no shift: the retests are judged as measured.
func shiftByControls(m *results.Mesh, figs [2]figure, rfs [2]*refs) {
	var d [2][]float64
	for _, p := range m.Pairs {
		if !p.Control || p.Retest == nil {
			continue
		}
		for i, fig := range figs {
			y, ok := fig.badness(&p.MeshFigures)
			y2, ok2 := fig.badness(p.Retest)
			if ok && ok2 {
				d[i] = append(d[i], y2-y)
			}
		}
	}
	for i := range figs {
		rfs[i].retestShift = 0
		if len(d[i]) >= minControls {
			rfs[i].retestShift = stat.Median(d[i])
			// A control's rounds figure less its retest differs by the
			// noise of both and by what the rounds' sharing added: the
			// common part, where the pairs' fit could not tell it.
			sd := robustSD(d[i], rfs[i].retestShift)
			rfs[i].common = max(rfs[i].common, math.Sqrt(max(0, sd*sd-2*rfs[i].sigma*rfs[i].sigma)))
			rfs[i].commonKnown = true
		}
	}
	if m.Screen != nil {
		m.Screen.RetestBW, m.Screen.RetestLat = 0, 0
		if len(d[0]) >= minControls {
			m.Screen.RetestBW = math.Exp(-rfs[0].retestShift)
		}
		if len(d[1]) >= minControls {
			m.Screen.RetestLat = math.Exp(rfs[1].retestShift)
		}
	}
}

// fine says whether a direction is measured and no outlier, or an outlier
// its retest cleared.
func fine(p *results.MeshPair) bool {
	return p != nil && p.Measured() && !p.Bad()
}

// linkBad says whether a direction points at its path: it failed (while
// both ranks were there), or it is worse than both ranks' other pairs
// beyond the cut, measured so again alone (or the retest failed). By
// latency only together with its reverse: a ping-pong crosses the path
// both ways, so a path slow one way slows both directions' latency, and
// one direction alone is a stall that hit it twice.
func linkBad(m *results.Mesh, rfs [2]*refs, figs [2]figure, p, rev *results.MeshPair) (bad, failed bool) {
	if p == nil {
		return false, false
	}
	if blamable(m, p) {
		return true, true
	}
	if slowAlone(m, rfs, figs, 0, p) || slowAlone(m, rfs, figs, 1, p) && slowAlone(m, rfs, figs, 1, rev) {
		return true, false
	}
	return false, false
}

// slowAlone says whether direction p is worse in figure i than both its
// ranks' other pairs beyond the cut, in the rounds and again in its
// retest (or the retest failed while both ranks were there).
func slowAlone(m *results.Mesh, rfs [2]*refs, figs [2]figure, i int, p *results.MeshPair) bool {
	if p == nil || p.Retest == nil || !p.Measured() {
		return false // not confirmed: inconclusive
	}
	d := Direction{From: p.From, To: p.To}
	y, ok := figs[i].badness(&p.MeshFigures)
	_, worse, cut, okRef := rfs[i].ref(d, false)
	if !ok || !okRef || y-worse <= cut {
		return false
	}
	_, _, cut, _ = rfs[i].ref(d, true)
	// A retest that failed confirms only while both ranks are there:
	// a rank that left says nothing about the path.
	y2, ok2 := figs[i].badness(p.Retest)
	retestFailed := p.Retest.Error != "" && !p.Retest.Interrupted && m.Ranks[p.From].Dead == "" && m.Ranks[p.To].Dead == ""
	return retestFailed || ok2 && y2-rfs[i].retestShift-worse > cut
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

// LoneLatency says whether direction p is slow by latency alone while its
// reverse's latency is fine: a ping-pong crosses the path both ways, so
// a path slow either way slows both directions' latency (linkBad), and
// one direction alone is a stall of its host. Such an outlier blames
// nothing and is not retested: on a large mesh stalls make thousands.
func LoneLatency(p, rev *results.MeshPair) bool {
	if p == nil || p.Error != "" || !p.SlowLat || p.SlowBW || rev == nil || !rev.Measured() {
		return false
	}
	return !rev.SlowLat || rev.Retest != nil && rev.Retest.Error == "" && !rev.Retest.SlowLat
}

// retestMeasured says whether a retest measured figure fig: it measures
// only the part that was an outlier.
func retestMeasured(fig figure, rt *results.MeshFigures) bool {
	_, ok := fig.badness(rt)
	return ok
}

// rankPair is one pair of a rank as the culprit rule reads it.
type rankPair struct {
	failed bool
	// resid is, per figure, the pair's confirmed badness (a mean over its
	// directions) less the partner's other pairs' median; n how many
	// directions and nref how many partner pairs; ok false with neither.
	resid [2]float64
	n     [2]int
	nref  [2]int
	ok    [2]bool
	// confirmed: a direction of it was an outlier in the figure and its
	// retest alone still is (or failed while both ranks were there);
	// alone: its figure is its retests' only.
	confirmed, alone [2]bool
}

// confirmedOutlier says whether direction p was an outlier in fig and its
// retest alone is one too, or failed while both ranks were there.
func confirmedOutlier(m *results.Mesh, fig figure, p *results.MeshPair) bool {
	if p == nil || !*fig.slow(&p.MeshFigures) || p.Retest == nil {
		return false
	}
	if p.Retest.Error != "" {
		return !p.Retest.Interrupted && m.Ranks[p.From].Dead == "" && m.Ranks[p.To].Dead == ""
	}
	return *fig.slow(p.Retest)
}

// rankPairs are rank rk's pairs with a partner there, measured or failed,
// but for its partners on its own NIC.
func rankPairs(m *results.Mesh, rfs [2]*refs, dirs map[Direction]*results.MeshPair, rk int) []rankPair {
	var out []rankPair
	for s := range m.Ranks {
		ab, ba := dirs[Direction{From: rk, To: s}], dirs[Direction{From: s, To: rk}]
		failed := (ab != nil && blamable(m, ab)) || (ba != nil && blamable(m, ba))
		if s == rk || !(failed || (ab != nil && ab.Measured()) || (ba != nil && ba.Measured())) {
			continue // not scheduled, or a rank had left
		}
		if rfs[0].cls.Of(rk, s) == results.ClassSameNIC {
			// Two processes of one NIC share the NIC and the host: their
			// pair tells neither apart, only the processes, whose pairs
			// differ by what the host did while each ran (make demo's
			// 0.32-0.38 Gb/s). No evidence against a rank.
			continue
		}
		rp := rankPair{failed: failed}
		for i, rf := range rfs {
			var sum float64
			k := 0
			alone := true
			for _, p := range []*results.MeshPair{ab, ba} {
				if p == nil || !p.Measured() {
					continue
				}
				if y, ok := rf.confirmed(p); ok {
					sum, k = sum+y, k+1
					alone = alone && p.Retest != nil && retestMeasured(rf.fig, p.Retest)
				}
			}
			rp.alone[i] = alone
			ref, nref, ok := rf.medExcept(s, rk)
			if k == 0 || !ok {
				continue
			}
			rp.resid[i], rp.n[i], rp.nref[i], rp.ok[i] = sum/float64(k)-ref, k, nref, true
			for _, p := range []*results.MeshPair{ab, ba} {
				rp.confirmed[i] = rp.confirmed[i] || confirmedOutlier(m, rf.fig, p)
			}
		}
		out = append(out, rp)
	}
	return out
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
func pairNoise(m *results.Mesh, rfs [2]*refs) [2]float64 {
	n := len(m.Ranks)
	var out [2]float64
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
	for d, y := range rf.byDir {
		if d.From > d.To {
			continue
		}
		if y2, ok := rf.byDir[Direction{From: d.To, To: d.From}]; ok {
			pairs = append(pairs, pm{d.From, d.To, rf.cls.Of(d.From, d.To), (y + y2) / 2})
		}
	}
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

// culprits are the ranks whose own figures say so: in a figure, the
// typical of their pairs (the value more than half of them reach, a failed
// pair the worst) is beyond the practical threshold against the partners'
// other pairs, and either most of their pairs are bad (beyond the cut
// each, or failed: two bad links of a rank's 19 are two links, not a node)
// or the typical is beyond the noise of a median of them (a node only
// somewhat slower, found by its many pairs together where each alone is
// within the noise). Each pair is read as confirmed: a direction a
// retest cleared is no evidence against the rank, one not retested none
// at all. So a rank at 1.02x its partners can never be one.
func (r Rules) culprits(m *results.Mesh, rfs [2]*refs, dirs map[Direction]*results.MeshPair) []results.Culprit {
	n := len(m.Ranks)
	all := make([][]rankPair, n)
	for rk := range n {
		all[rk] = rankPairs(m, rfs, dirs, rk)
	}
	noise := pairNoise(m, rfs)
	// rankNoise is noise for rank rk's pairs whose references are
	// medians of about nref directions: its pairs' partners have fewer
	// other pairs of a class than of the whole mesh (a same-rail pair of
	// 2 hosts x 2 NICs x 2 ranks has one), so their references are
	// noisier than pairNoise's median of 2(n-2).
	rankNoise := func(i int, rps []rankPair) float64 {
		var inv float64
		k := 0
		for _, rp := range rps {
			if rp.ok[i] && rp.nref[i] > 0 {
				inv, k = inv+1/float64(rp.nref[i]), k+1
			}
		}
		if k == 0 {
			return noise[i]
		}
		rf := rfs[i]
		dir := rf.sigma * math.Sqrt(0.5+math.Pi/2*inv/float64(k))
		return max(noise[i], math.Sqrt(dir*dir+rf.common*rf.common))
	}
	byHost := r.slowOnHosts(m, rfs, dirs, noise)
	var out []results.Culprit
	for rk := range n {
		// A rank that left later is judged by what it measured before.
		c := results.Culprit{Rank: rk, Pairs: len(all[rk])}
		var typical [2]float64
		var slow [2]bool
		var bad [2]int
		rn := [2]float64{rankNoise(0, all[rk]), rankNoise(1, all[rk])}
		for _, rp := range all[rk] {
			pairBad := rp.failed
			for i, rf := range rfs {
				// A pair is bad by what a retest alone confirmed: the
				// rounds' figures of a quiet pair are no evidence when the
				// noise they share is not known (a pair's two directions
				// measured back to back share a busy moment of the host).
				cut := rf.cut(rf.k, rp.n[i], rp.nref[i], rp.alone[i])
				if !rp.alone[i] {
					cut = max(cut, rf.k*rn[i])
				}
				slowHere := rp.ok[i] && rp.confirmed[i] && rp.resid[i] > cut
				if slowHere || rp.failed {
					bad[i]++
				}
				pairBad = pairBad || slowHere
			}
			if pairBad {
				c.BadPairs++
			}
			if rp.failed {
				c.FailedPairs++
			}
		}
		for i, rf := range rfs {
			var v, measured []float64
			for _, rp := range all[rk] {
				switch {
				case rp.failed:
					v = append(v, math.Inf(1))
				case rp.ok[i]:
					v, measured = append(v, rp.resid[i]), append(measured, rp.resid[i])
				}
			}
			if len(v) < 2 {
				continue
			}
			sort.Float64s(v)
			// The value more than half its pairs reach: one slow link of
			// two pairs (a mesh of 3) does not make the rank slow.
			typical[i] = v[(len(v)-1)/2]
			if len(measured) > 0 {
				sort.Float64s(measured)
				shown := measured[(len(measured)-1)/2]
				if i == 0 {
					c.BWRatio = math.Exp(-shown)
				} else {
					c.LatRatio = math.Exp(shown)
				}
			}
			// The typical of many pairs has about 1.25/√pairs the spread
			// of one pair's residual.
			sd := rn[i] * 1.2533 / math.Sqrt(float64(len(v)))
			most := bad[i] >= 2 && 2*bad[i] > len(v)
			slow[i] = typical[i] > rf.fig.practical && (most || rf.commonKnown && typical[i] > rf.kRank*sd)
		}
		for i := range rfs {
			if t, ok := byHost[i][rk]; ok && !slow[i] {
				// Slow as one of its host's NICs: its figure is the host's
				// pairs against the other hosts' pairs.
				slow[i] = true
				if i == 0 {
					c.BWRatio = math.Exp(-t)
				} else {
					c.LatRatio = math.Exp(t)
				}
			}
		}
		if slow[0] || slow[1] {
			c.SlowBW, c.SlowLat = slow[0], slow[1]
			if c.FailedPairs == c.Pairs {
				c.BWRatio, c.LatRatio = 0, 0
			}
			out = append(out, c)
		}
	}
	return out
}

// slowOnHosts finds, per figure, the ranks of hosts slow as a whole: a
// host with several NICs whose ranks' typical pairs (read as confirmed)
// are slower than the pairs among the other hosts, beyond the practical
// threshold and the noise, for at least two of its NICs and most of
// them. Its own ranks' pairs are no reference for it: on a mesh of two
// hosts, half the pairs touch the slow one, and a rank's partners' other
// pairs are slow too. The map holds each such rank's typical less the
// reference.
func (r Rules) slowOnHosts(m *results.Mesh, rfs [2]*refs, dirs map[Direction]*results.MeshPair, noise [2]float64) [2]map[int]float64 {
	var out [2]map[int]float64
	groups := hostGroups(m.Ranks, true)
	for i, rf := range rfs {
		out[i] = map[int]float64{}
		// Each pair's confirmed figure: the mean of its directions.
		pairY := map[Pair]float64{}
		pairC := map[Pair]results.PairClass{}
		for d, p := range dirs {
			if d.From > d.To {
				continue
			}
			var sum float64
			k := 0
			for _, q := range []*results.MeshPair{p, dirs[Direction{From: d.To, To: d.From}]} {
				if q == nil || !q.Measured() {
					continue
				}
				if y, ok := rf.confirmed(q); ok {
					sum, k = sum+y, k+1
				}
			}
			if k > 0 {
				pairY[Pair{d.From, d.To}] = sum / float64(k)
				pairC[Pair{d.From, d.To}] = p.Class
			}
		}
		for _, g := range groups {
			if len(g.nics) < 2 {
				continue
			}
			// Within each class: a host's same-host pairs against the
			// other hosts' same-host pairs, its pairs across rails
			// against theirs.
			var byClass [results.NumPairClasses][]float64
			type minePair struct {
				a, b int
				c    results.PairClass
				y    float64
			}
			var minePairs []minePair
			for p, y := range pairY {
				onA, onB := hostName(m.Ranks[p.A]) == g.host, hostName(m.Ranks[p.B]) == g.host
				switch {
				case !onA && !onB:
					byClass[pairC[p]] = append(byClass[pairC[p]], y)
				default:
					a, b := p.A, p.B
					if !onA {
						a = -1
					}
					if !onB {
						b = -1
					}
					minePairs = append(minePairs, minePair{a, b, pairC[p], y})
				}
			}
			// The others' residuals about their class's median, and mine
			// about the same, where the class has at least 3 others.
			var refC [results.NumPairClasses]float64
			var others []float64
			for c, v := range byClass {
				if len(v) < 3 {
					continue
				}
				refC[c] = stat.Median(v)
				for _, y := range v {
					others = append(others, y-refC[c])
				}
			}
			mine := map[int][]float64{}
			for _, p := range minePairs {
				if len(byClass[p.c]) < 3 {
					continue
				}
				for _, r := range []int{p.a, p.b} {
					if r >= 0 {
						mine[r] = append(mine[r], p.y-refC[p.c])
					}
				}
			}
			if len(others) < 3 {
				continue
			}
			ref := 0.0
			// The noise of a pair is what the other hosts' pairs spread by
			// (all they share included), where there are enough of them:
			// the fit of the ranks' model does not hold for a slow host,
			// whose pairs among its own NICs are slow once, not twice.
			pn := noise[i]
			if len(others) >= 6 {
				// A spread from few pairs is itself uncertain: widened as
				// a small sample's quantile is (about √(1+6/n)).
				dir := rf.sigma * math.Sqrt(0.5)
				pn = max(dir, robustSD(others, ref)) * math.Sqrt(1+6/float64(len(others)))
			}
			// The host's pairs together (each once): on a mesh of two
			// hosts only its same-host pairs have a reference of their
			// class (every pair across hosts touches it), three a NIC of
			// four, too few for one NIC's own cut. Slow as a whole when
			// their median is beyond the noise and, leaving out any one
			// of its NICs, the rest's median is still beyond the practical
			// threshold (one slow NIC of four is in half its host's pairs).
			type hostPair struct {
				a, b int
				y    float64
			}
			var hostPairs []hostPair
			var hostY []float64
			for _, p := range minePairs {
				if len(byClass[p.c]) >= 3 {
					hostPairs = append(hostPairs, hostPair{p.a, p.b, p.y - refC[p.c]})
					hostY = append(hostY, p.y-refC[p.c])
				}
			}
			hostSlow := false
			if len(hostY) >= 4 {
				// The spread of a pair from the others' pairs and the
				// host's own about their medians together: twice the
				// pairs, a tighter estimate (a host slow by one NIC has
				// its pairs at two levels, a wider one).
				hpn := pn
				if len(others) >= 6 {
					hm := stat.Median(hostY)
					pooled := append([]float64(nil), others...)
					for _, y := range hostY {
						pooled = append(pooled, y-hm)
					}
					hpn = max(rf.sigma*math.Sqrt(0.5), robustSD(pooled, 0)) * math.Sqrt(1+6/float64(len(pooled)))
				}
				sd := hpn * math.Sqrt(1.5708/float64(len(hostY))+1.5708/float64(len(others)))
				hostSlow = stat.Median(hostY)-ref > max(rf.fig.practical, (rf.kRank+0.5)*sd)
				for nic := range g.nics {
					var rest []float64
					for _, p := range hostPairs {
						if (p.a < 0 || m.Ranks[p.a].NIC() != nic) && (p.b < 0 || m.Ranks[p.b].NIC() != nic) {
							rest = append(rest, p.y)
						}
					}
					hostSlow = hostSlow && (len(rest) == 0 || stat.Median(rest)-ref > rf.fig.practical)
				}
			}
			slow := map[int]float64{}
			slowNICs := map[string]bool{}
			for _, r := range g.ranks {
				v := mine[r]
				if len(v) < 2 {
					continue
				}
				t := stat.Median(v) - ref
				sd := pn * math.Sqrt(1.5708/float64(len(v))+1.5708/float64(len(others)))
				// Half a spread more than a rank's own cut: the reference is
				// the other hosts' pairs, fewer than a rank's partners'. Or
				// beyond the practical threshold on a host slow as a whole.
				if t > max(rf.fig.practical, (rf.kRank+0.5)*sd) || hostSlow && t > rf.fig.practical {
					slow[r] = t
					slowNICs[m.Ranks[r].NIC()] = true
				}
			}
			if len(slowNICs) >= 2 && 2*len(slowNICs) > len(g.nics) {
				for r, t := range slow {
					out[i][r] = t
				}
			}
		}
	}
	return out
}

// hostGroup is one host's ranks that reported a device, and their NICs.
type hostGroup struct {
	host  string
	ranks []int
	nics  map[string]bool
}

// hostGroups groups the ranks that reported a device by host, hosts in the
// order of their first rank; live leaves out the ranks that left. A rank
// with no host name is a host of its own ("rank N").
func hostGroups(ranks []results.MeshRank, live bool) []*hostGroup {
	var out []*hostGroup
	byHost := map[string]*hostGroup{}
	for _, rk := range ranks {
		if rk.Device == "" || live && rk.Dead != "" {
			continue
		}
		h := hostName(rk)
		g := byHost[h]
		if g == nil {
			g = &hostGroup{host: h, nics: map[string]bool{}}
			byHost[h] = g
			out = append(out, g)
		}
		g.ranks = append(g.ranks, rk.Rank)
		g.nics[rk.NIC()] = true
	}
	return out
}

// hostName is a rank's host, or "rank N" where it has no name.
func hostName(rk results.MeshRank) string {
	if rk.Host != "" {
		return rk.Host
	}
	return "rank " + strconv.Itoa(rk.Rank)
}

// classify tells each culprit's kind and names the hosts blamed: a host
// more than one of whose NICs are culprits is the host (its CPU, memory,
// PCIe or software), a culprit on a host whose other NICs are fine is its
// NIC, and one that is its host's only NIC is the node (either). Ranks
// without a host name are each their own host.
func classify(m *results.Mesh) {
	m.Hosts = nil
	groups := hostGroups(m.Ranks, false)
	byHost := map[string]*hostGroup{}
	culpritNICs := map[string]map[string]bool{}
	for _, g := range groups {
		byHost[g.host], culpritNICs[g.host] = g, map[string]bool{}
	}
	for _, c := range m.Culprits {
		if h := hostName(m.Ranks[c.Rank]); culpritNICs[h] != nil {
			culpritNICs[h][m.Ranks[c.Rank].NIC()] = true
		}
	}
	for i := range m.Culprits {
		c := &m.Culprits[i]
		h := hostName(m.Ranks[c.Rank])
		switch {
		case len(culpritNICs[h]) > 1:
			c.Kind = results.CulpritHost
		case byHost[h] != nil && len(byHost[h].nics) > 1:
			c.Kind = results.CulpritNIC
		default:
			c.Kind = results.CulpritNode
		}
	}
	for _, g := range groups {
		if len(culpritNICs[g.host]) < 2 {
			continue
		}
		sh := results.SuspectHost{Host: g.host, NICs: len(culpritNICs[g.host]), Total: len(g.nics)}
		roots, numas := map[string]bool{}, map[int]bool{}
		for _, c := range m.Culprits {
			rk := m.Ranks[c.Rank]
			if hostName(rk) != g.host {
				continue
			}
			sh.Ranks = append(sh.Ranks, c.Rank)
			roots[rk.PCIRoot] = true
			if rk.NUMANode != nil {
				numas[*rk.NUMANode] = true
			} else {
				numas[-1] = true
			}
		}
		if len(roots) == 1 {
			sh.PCIRoot = m.Ranks[sh.Ranks[0]].PCIRoot
		}
		if len(numas) == 1 && !numas[-1] {
			sh.NUMANode = m.Ranks[sh.Ranks[0]].NUMANode
		}
		m.Hosts = append(m.Hosts, sh)
	}
}

// fact is one inventory fact the ranks should share.
type fact struct {
	name  string
	value func(results.MeshRank) string
}

var facts = []fact{
	{"firmware", func(r results.MeshRank) string { return r.FWVer }},
	{"rate", func(r results.MeshRank) string { return strconv.FormatFloat(r.RateGbps, 'f', -1, 64) + " Gb/s" }},
	{"active MTU", func(r results.MeshRank) string { return strconv.Itoa(r.ActiveMTU) }},
	{"GID index", func(r results.MeshRank) string {
		if r.GIDIndex < 0 {
			return "LID"
		}
		return strconv.Itoa(r.GIDIndex)
	}},
	{"link layer", func(r results.MeshRank) string { return string(r.LinkLayer) }},
}

// Mismatches lists the facts on which ranks differ: the value most ranks
// have (ties: the one the lowest rank has) and the ranks that differ.
// Ranks that never reported their port are left out.
func Mismatches(ranks []results.MeshRank) []results.Mismatch {
	var out []results.Mismatch
	for _, f := range facts {
		count := map[string]int{}
		var order []string
		for _, r := range ranks {
			if r.Device == "" {
				continue
			}
			v := f.value(r)
			if count[v] == 0 {
				order = append(order, v)
			}
			count[v]++
		}
		if len(order) < 2 {
			continue
		}
		major := order[0]
		for _, v := range order[1:] {
			if count[v] > count[major] {
				major = v
			}
		}
		m := results.Mismatch{Fact: f.name, Majority: major}
		for _, r := range ranks {
			if v := f.value(r); r.Device != "" && v != major {
				m.Odd = append(m.Odd, results.RankValue{Rank: r.Rank, Value: v})
			}
		}
		out = append(out, m)
	}
	return out
}
