package mesh

import (
	"math"
	"sort"
	"strconv"

	"github.com/rdmabench/rdmabench/results"
)

// Rules say when a measurement is an outlier. A direction is judged
// against its ranks' other pairs (not the mesh's median: a slow node is in
// 2/N of the directions, most of them on a small mesh) and against the
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

// median of the values; 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

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
		{func(f *results.MeshFigures) (float64, bool) {
			return -math.Log(f.BWGbps), f.Error == "" && f.BWGbps > 0 && f.LatP50us > 0
		}, -math.Log(r.BWFraction), expect, func(f *results.MeshFigures) *bool { return &f.SlowBW }, &m.SpreadBW},
		{func(f *results.MeshFigures) (float64, bool) {
			return math.Log(f.LatP50us), f.Error == "" && f.BWGbps > 0 && f.LatP50us > 0
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
	// byRank holds each rank's directions' badness, sorted.
	byRank [][]float64
	sigma  float64 // spread of one measurement, in badness units
	k      float64
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
	rf := &refs{fig: fig, byDir: map[Direction]float64{}, byRank: make([][]float64, len(m.Ranks)), k: k}
	for i := range m.Pairs {
		p := &m.Pairs[i]
		if y, ok := fig.badness(&p.MeshFigures); ok {
			rf.byDir[Direction{From: p.From, To: p.To}] = y
			rf.byRank[p.From] = append(rf.byRank[p.From], y)
			rf.byRank[p.To] = append(rf.byRank[p.To], y)
		}
	}
	for _, v := range rf.byRank {
		sort.Float64s(v)
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
	// The one-sided normal quantile of 0.1/directions.
	rf.kDir = max(k, math.Sqrt2*math.Erfinv(1-2*0.1/float64(max(1, len(rf.byDir)))))
	rf.kRank = max(k, math.Sqrt2*math.Erfinv(1-2*0.002/float64(max(1, len(m.Ranks)))))
	return rf
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

// medExcept is the median of rank r's directions without those with s, and
// how many there were; false when none is left.
func (rf *refs) medExcept(r, s int) (float64, int, bool) {
	vals := rf.byRank[r]
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
// ranks' other pairs (or the fabric's expected figure), and the cut beyond
// which it is an outlier. ok is false with nothing to compare with (a mesh
// of two ranks).
func (rf *refs) ref(d Direction) (best, worse, cut float64, ok bool) {
	if !math.IsNaN(rf.fig.expect) {
		return rf.fig.expect, rf.fig.expect, rf.cut(rf.kDir, 1, 1<<30), true
	}
	a, na, okA := rf.medExcept(d.From, d.To)
	b, nb, okB := rf.medExcept(d.To, d.From)
	switch {
	case okA && okB:
		return min(a, b), max(a, b), rf.cut(rf.kDir, 1, min(na, nb)), true
	case okA:
		return a, a, rf.cut(rf.kDir, 1, na), true
	case okB:
		return b, b, rf.cut(rf.kDir, 1, nb), true
	}
	return 0, 0, 0, false
}

// cut is the threshold of a mean of m measurements against a median of n:
// the practical threshold, or k spreads of that difference if more.
func (rf *refs) cut(k float64, m, n int) float64 {
	sd := rf.sigma * math.Sqrt(1/float64(m)+math.Pi/2/float64(n))
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
	m.MedianBW, m.MedianLat = median(bws), median(lats)
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
			best, _, cut, ok := rf.ref(Direction{From: p.From, To: p.To})
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
			best, _, cut, okRef := rfs[i].ref(Direction{From: p.From, To: p.To})
			*fig.slow(p.Retest) = ok && okRef && y-rfs[i].retestShift-best > cut
		}
	}
	m.Culprits = r.culprits(m, rfs, dirs)
	isCulprit := map[int]bool{}
	for _, c := range m.Culprits {
		isCulprit[c.Rank] = true
	}
	m.Links, m.Inconclusive = nil, nil
	explained := map[Direction]bool{}
	for i := range m.Pairs {
		p := &m.Pairs[i]
		if p.From > p.To || isCulprit[p.From] || isCulprit[p.To] {
			continue
		}
		ab, ba := Direction{From: p.From, To: p.To}, Direction{From: p.To, To: p.From}
		badAB, failedAB := linkBad(m, rfs, figs, dirs[ab])
		badBA, failedBA := linkBad(m, rfs, figs, dirs[ba])
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
	for _, p := range m.Pairs {
		d := Direction{From: p.From, To: p.To}
		if p.Bad() && !explained[d] && !isCulprit[p.From] && !isCulprit[p.To] {
			m.Inconclusive = append(m.Inconclusive, d)
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
			rfs[i].retestShift = median(d[i])
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
// beyond the cut, measured so again alone (or the retest failed).
func linkBad(m *results.Mesh, rfs [2]*refs, figs [2]figure, p *results.MeshPair) (bad, failed bool) {
	if p == nil {
		return false, false
	}
	if blamable(m, p) {
		return true, true
	}
	if p.Retest == nil || !p.Measured() {
		return false, false // not confirmed: inconclusive
	}
	d := Direction{From: p.From, To: p.To}
	for i, fig := range figs {
		y, ok := fig.badness(&p.MeshFigures)
		_, worse, cut, okRef := rfs[i].ref(d)
		if !ok || !okRef || y-worse <= cut {
			continue
		}
		// A retest that failed confirms only while both ranks are there:
		// a rank that left says nothing about the path.
		y2, ok2 := fig.badness(p.Retest)
		retestFailed := p.Retest.Error != "" && !p.Retest.Interrupted && m.Ranks[p.From].Dead == "" && m.Ranks[p.To].Dead == ""
		if retestFailed || ok2 && y2-rfs[i].retestShift-worse > cut {
			return true, false
		}
	}
	return false, false
}

// culprits are the ranks most of whose own pairs are bad: each pair judged
// against the partner's other pairs (so that a slow partner does not make
// a healthy rank look slow), or failed. A rank is a culprit when more than
// half its pairs are bad (two bad links of a rank's 19 are two links), or
// when its typical pair is beyond the cut of a median of its pairs (a node
// only somewhat slower, found by its many pairs together where each alone
// is within the noise).
func (r Rules) culprits(m *results.Mesh, rfs [2]*refs, dirs map[Direction]*results.MeshPair) []results.Culprit {
	n := len(m.Ranks)
	var out []results.Culprit
	for rk := 0; rk < n; rk++ {
		// A rank that left later is judged by what it measured before.
		c := results.Culprit{Rank: rk}
		var rho [2][]float64
		slowNode := false
		for s := 0; s < n; s++ {
			ab, ba := dirs[Direction{From: rk, To: s}], dirs[Direction{From: s, To: rk}]
			failed := (ab != nil && blamable(m, ab)) || (ba != nil && blamable(m, ba))
			if s == rk || !(failed || (ab != nil && ab.Measured()) || (ba != nil && ba.Measured())) {
				continue // not scheduled, or a rank had left
			}
			c.Pairs++
			bad := failed
			for i, rf := range rfs {
				var sum float64
				k := 0
				for _, p := range []*results.MeshPair{ab, ba} {
					if p == nil {
						continue
					}
					if y, ok := rf.byDir[Direction{From: p.From, To: p.To}]; ok {
						sum, k = sum+y, k+1
					}
				}
				ref, nref, ok := rf.medExcept(s, rk)
				if k == 0 || !ok {
					continue
				}
				v := sum/float64(k) - ref
				rho[i] = append(rho[i], v)
				if v > rf.cut(rf.k, k, nref) {
					bad = true
				}
			}
			if bad {
				c.BadPairs++
			}
			if failed {
				c.FailedPairs++
			}
		}
		for i, rf := range rfs {
			v := rho[i]
			if len(v) == 0 {
				continue
			}
			sort.Float64s(v)
			// The value more than half its pairs reach: one slow link of
			// two pairs (a mesh of 3) does not make the rank slow.
			typical := v[(len(v)-1)/2]
			if i == 0 {
				c.BWRatio = math.Exp(-typical)
			}
			// A pair's residual has the spread of a mean of two against a
			// median of the partner's others (about 2(n−2)); the typical of
			// many pairs, about 1.25/√pairs of that.
			sd := rf.sigma * math.Sqrt(0.5+math.Pi/2/float64(max(1, 2*(n-2)))) * 1.2533 / math.Sqrt(float64(len(v)))
			if len(v) >= 2 && typical > max(rf.fig.practical, rf.kRank*sd) {
				slowNode = true
			}
		}
		if slowNode || (c.BadPairs >= 2 && 2*c.BadPairs > c.Pairs) {
			if c.FailedPairs == c.Pairs {
				c.BWRatio = 0
			}
			out = append(out, c)
		}
	}
	return out
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
