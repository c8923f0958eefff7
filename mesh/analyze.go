package mesh

import (
	"math"
	"sort"

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

// figureKind names a direction's figure where the analysis holds one
// value of each: bandwidth, latency.
type figureKind int

const (
	bwFigure figureKind = iota
	latFigure
	numFigures
)

// perFigure holds one value for each figure, indexed by figureKind.
type perFigure[T any] [numFigures]T

func (r Rules) figures(m *results.Mesh) perFigure[figure] {
	expect := math.NaN()
	if r.ExpectBW > 0 {
		expect = -math.Log(r.ExpectBW)
	}
	return perFigure[figure]{
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

// MarkOutliers sets SlowBW and SlowLat on each measured direction that is
// worse than the better of its ranks' other pairs beyond the cut (a slow
// node's directions and a slow link's alike: they are retested), and
// records the rules, the medians and the spreads in the mesh.
func (r Rules) MarkOutliers(m *results.Mesh) { r.newAnalysis(m).markOutliers() }

// analysis is a mesh's figures and references, made once from its first
// measurements: those do not change once the rounds are over, and a
// run's analysis reads them five times (MarkOutliers, the retests'
// order, two more tries of stalled latencies, the verdict), each a sort
// of every rank's directions and a fit of the mesh.
type analysis struct {
	r    Rules
	m    *results.Mesh
	figs perFigure[figure]
	base perFigure[*refs]
}

func (r Rules) newAnalysis(m *results.Mesh) *analysis {
	a := &analysis{r: r, m: m, figs: r.figures(m)}
	for i, fig := range a.figs {
		a.base[i] = newRefs(m, fig, r.sigmas())
	}
	return a
}

// refs are copies of the references (shiftByControls sets some of their
// fields from the controls' retests), their spreads in the mesh.
func (a *analysis) refs() perFigure[*refs] {
	var rfs perFigure[*refs]
	for i, b := range a.base {
		c := *b
		rfs[i] = &c
		*a.figs[i].spread = c.sigma
	}
	return rfs
}

func (a *analysis) markOutliers() {
	r, m := a.r, a.m
	var bws, lats []float64
	for _, p := range m.Pairs {
		if p.Measured() {
			bws, lats = append(bws, p.BWGbps), append(lats, p.LatP50us)
		}
	}
	m.MedianBW, m.MedianLat = stat.Median(bws), stat.Median(lats)
	m.BWFraction, m.LatMultiple, m.Sigmas, m.ExpectBW = r.BWFraction, r.LatMultiple, r.sigmas(), r.ExpectBW
	rfs := a.refs()
	for f, fig := range a.figs {
		rf := rfs[f]
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

// unconfirmedIdle says whether p failed with nothing completed and was
// not retested: no evidence of its path. 256 ranks on 2 CPUs left clients
// without a time slice for a whole 0.3 s screen (353 healthy directions
// so, past the retest budget, each blamed as a dead path); a path that
// drops everything fails its retest alone too. Inconclusive, as an
// outlier not retested is.
func unconfirmedIdle(m *results.Mesh, p *results.MeshPair) bool {
	return p.Idle && p.Retest == nil && blamable(m, p)
}

// Analyze judges the retests against the same references (still an
// outlier, or cleared), then names the causes: the culprit ranks, the
// links (both ways, one way, failed) and the outliers left inconclusive.
// It reads only the figures in the mesh, so a saved mesh can be judged
// again.
func (r Rules) Analyze(m *results.Mesh) { r.newAnalysis(m).analyze() }

func (a *analysis) analyze() {
	r, m := a.r, a.m
	figs, rfs := a.judgeRetests()
	dirs := pairTable(m.Pairs, len(m.Ranks))
	m.Culprits = r.culprits(m, rfs, dirs)
	classify(m)
	isCulprit := culpritRanks(m)
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
		badAB, failedAB := linkBad(m, rfs, figs, dirs.get(ab), dirs.get(ba))
		badBA, failedBA := linkBad(m, rfs, figs, dirs.get(ba), dirs.get(ab))
		switch {
		case badAB && badBA:
			m.Links = append(m.Links, results.SuspectLink{A: p.From, B: p.To, Failed: failedAB && failedBA})
		case badAB && fine(dirs.get(ba)):
			m.Links = append(m.Links, results.SuspectLink{A: p.From, B: p.To, OneWay: true, Failed: failedAB})
		case badBA && fine(dirs.get(ab)):
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
		case !p.Bad() && !unconfirmedIdle(m, &p) || explained[d] || isCulprit[p.From] || isCulprit[p.To]:
		case LoneLatency(&p, dirs.get(Direction{From: p.To, To: p.From})):
			m.LoneLatency++
		default:
			m.Inconclusive = append(m.Inconclusive, d)
		}
		if _, _, _, ok := rfs[bwFigure].ref(d, false); p.Measured() && !ok {
			m.NotJudged = append(m.NotJudged, d)
		}
	}
}

// judgeRetests is Analyze's first step alone: each retest judged against
// the same references as its first measurement (SlowBW and SlowLat of
// the retests), with the figures and references the rest of it needs.
// The retests of stalled latencies need only this between their tries,
// not the culprits (three quarters of a 1000-rank mesh's analysis).
func (a *analysis) judgeRetests() (perFigure[figure], perFigure[*refs]) {
	m, figs, rfs := a.m, a.figs, a.refs()
	shiftByControls(m, figs, rfs)
	for i := range m.Pairs {
		p := &m.Pairs[i]
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
	return figs, rfs
}

// minControls is the fewest controls whose median shift is used.
const minControls = 3

// shiftByControls sets each figure's retest shift from the controls of a
// screened mesh (healthy directions retested too): the median of their
// retests' badness less their first figures'. With fewer than
// minControls measured, no shift: the retests are judged as measured.
func shiftByControls(m *results.Mesh, figs perFigure[figure], rfs perFigure[*refs]) {
	var d perFigure[[]float64]
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
		if len(d[bwFigure]) >= minControls {
			m.Screen.RetestBW = math.Exp(-rfs[bwFigure].retestShift)
		}
		if len(d[latFigure]) >= minControls {
			m.Screen.RetestLat = math.Exp(rfs[latFigure].retestShift)
		}
	}
}

// fine says whether a direction is measured and no outlier, or an outlier
// its retest cleared.
func fine(p *results.MeshPair) bool {
	return p != nil && p.Measured() && !p.Bad()
}

// linkBad says whether a direction points at its path: it failed (while
// both ranks were there; an idle failure only if its retest failed too),
// or it is worse than both ranks' other pairs
// beyond the cut, measured so again alone (or the retest failed). By
// latency only together with its reverse: a ping-pong crosses the path
// both ways, so a path slow one way slows both directions' latency, and
// one direction alone is a stall that hit it twice.
func linkBad(m *results.Mesh, rfs perFigure[*refs], figs perFigure[figure], p, rev *results.MeshPair) (bad, failed bool) {
	if p == nil {
		return false, false
	}
	if blamable(m, p) {
		confirmed := !p.Idle || p.Retest != nil
		return confirmed, confirmed
	}
	if slowAlone(m, rfs, figs, bwFigure, p) || slowAlone(m, rfs, figs, latFigure, p) && slowAlone(m, rfs, figs, latFigure, rev) {
		return true, false
	}
	return false, false
}

// slowAlone says whether direction p is worse in figure i than both its
// ranks' other pairs beyond the cut, in the rounds and again in its
// retest (or the retest failed while both ranks were there).
func slowAlone(m *results.Mesh, rfs perFigure[*refs], figs perFigure[figure], i figureKind, p *results.MeshPair) bool {
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
