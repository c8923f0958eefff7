package compare

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat"

	"github.com/rdmabench/rdmabench/internal/version"
	"github.com/rdmabench/rdmabench/results"
)

// MeshRow is one direction's change of one metric between two meshes; the
// directions "(all)" are the median change over every direction (their
// Base and New are 0, BaseN and NewN the directions).
type MeshRow struct {
	From string `json:"from"` // the client's host, or its rank where hosts repeat
	To   string `json:"to"`
	Row
}

// AllDirections names the rows of the median change over every direction.
const AllDirections = "(all)"

// MeshReport is a mesh set against a baseline mesh, direction by
// direction.
type MeshReport struct {
	Rows []MeshRow `json:"rows"`
	Summary
	// Version is the rdmabench that wrote the document.
	Version *version.Info `json:"version,omitempty"`
}

// MinMeshDirections is the fewest directions, measured in both meshes,
// whose spread of the change is taken for each one's noise; fewer are
// judged by the threshold alone.
const MinMeshDirections = 30

// madDF is the degrees of freedom a spread from the median absolute
// deviation of k values is worth: (k − 1) times its asymptotic efficiency
// for normal data, 0.37. The tails at a Bonferroni level need it; k − 1
// would make the intervals too narrow.
func madDF(k int) float64 { return 0.3675 * float64(k-1) }

// madToSigma turns a median absolute deviation into the standard deviation
// of a normal distribution.
const madToSigma = 1.482602218505602

// medianSE is the standard error of a median of k normal values in units
// of σ/√k: √(π/2).
var medianSE = math.Sqrt(math.Pi / 2)

// Meshes compares each direction the base measured: write-bw and send-lat
// p50 and p99. A mesh measures each direction once, so the noise comes
// from all directions together: the robust spread (median absolute
// deviation) of the log change over the directions both measured, which
// assumes the directions' run-to-run noise alike and leaves out the few
// that really changed. Each direction's interval is its change ± that
// spread at the one-sided level 1 − α/m (m: every direction and metric
// judged, and the three medians), and the verdicts read as in Runs. The
// median change over all directions, a row of its own, catches a change
// of the whole fabric that no single direction's interval is narrow
// enough to show. Directions are matched by host names when each mesh's
// hosts are distinct (ranks may land on other nodes in another job),
// otherwise by rank. A direction the base measured and the new mesh did
// not is missing (a regression unless AllowMissing).
func Meshes(base, cur *results.Mesh, o Options) (*MeshReport, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if base.BWSize != cur.BWSize || base.LatSize != cur.LatSize {
		return nil, invalid("message sizes differ: base write-bw %d B, send-lat %d B; new %d B, %d B", base.BWSize, base.LatSize, cur.BWSize, cur.LatSize)
	}
	var notes []string
	if base.BWDurationS != cur.BWDurationS || base.LatIters != cur.LatIters {
		notes = append(notes, fmt.Sprintf("lengths differ: base write-bw %g s, send-lat %d iterations; new %g s, %d", base.BWDurationS, base.LatIters, cur.BWDurationS, cur.LatIters))
	}
	byHost := distinctHosts(base) && distinctHosts(cur)
	if !byHost {
		notes = append(notes, "directions matched by rank (a mesh has one host for several ranks)")
	}
	mm := newMeshMatch(base, cur, byHost)
	metrics := []Metric{Bandwidth, LatP50, LatP99}
	rep := &MeshReport{Summary: newSummary(o, notes)}
	both := mm.rows(rep, base, cur, metrics)
	onlyNew := mm.onlyNew
	if len(both) == 0 {
		return nil, invalid("the meshes share no measured direction: nothing to compare")
	}
	if onlyNew > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d directions measured only in the new mesh", onlyNew))
	}
	if len(both)/len(metrics) >= MinMeshDirections {
		judgeAcross(rep, both, metrics, o)
	} else {
		for _, i := range both {
			r := &rep.Rows[i].Row
			r.Verdict = judgeThreshold((r.New-r.Base)/r.Base, r.Metric.good(), o.Threshold)
		}
	}
	for _, r := range rep.Rows {
		rep.tally(r.Verdict)
	}
	return rep, nil
}

// meshMatch pairs the base mesh's directions with the new one's: each base
// rank's rank in the new mesh (-1: none), and each measured direction of
// the new mesh by its ranks, a table rather than a map of names, which at
// 1000 ranks (a million directions) costs seconds.
type meshMatch struct {
	baseNames []string
	rankIn    []int
	newAt     []int32 // 1 + the index in cur.Pairs; 0: not measured (or taken)
	nc        int
	onlyNew   int // directions measured only in the new mesh
}

func newMeshMatch(base, cur *results.Mesh, byHost bool) *meshMatch {
	names := func(m *results.Mesh) []string {
		v := make([]string, len(m.Ranks))
		for r := range v {
			v[r] = fmt.Sprint(r)
			if byHost {
				v[r] = m.Ranks[r].Host
			}
		}
		return v
	}
	nc := len(cur.Ranks)
	mm := &meshMatch{baseNames: names(base), rankIn: make([]int, len(base.Ranks)), newAt: make([]int32, nc*nc), nc: nc}
	curRank := make(map[string]int, nc)
	for r, n := range names(cur) {
		curRank[n] = r
	}
	for r, n := range mm.baseNames {
		if c, ok := curRank[n]; ok {
			mm.rankIn[r] = c
		} else {
			mm.rankIn[r] = -1
		}
	}
	for i, p := range cur.Pairs {
		if p.Measured() {
			if mm.newAt[p.From*nc+p.To] == 0 {
				mm.onlyNew++
			}
			mm.newAt[p.From*nc+p.To] = int32(i + 1)
		}
	}
	return mm
}

// take is the new mesh's direction for base direction b, once: a direction
// twice in the base is matched once.
func (mm *meshMatch) take(b results.MeshPair, cur *results.Mesh) (results.MeshPair, bool) {
	f, t := mm.rankIn[b.From], mm.rankIn[b.To]
	if f < 0 || t < 0 {
		return results.MeshPair{}, false
	}
	i := mm.newAt[f*mm.nc+t]
	if i == 0 {
		return results.MeshPair{}, false
	}
	mm.newAt[f*mm.nc+t] = 0
	mm.onlyNew--
	return cur.Pairs[i-1], true
}

// rows adds a row for each metric of each measured base direction (Missing
// where the new mesh lacks it) and returns the indexes of the rows
// measured on both sides.
func (mm *meshMatch) rows(rep *MeshReport, base, cur *results.Mesh, metrics []Metric) []int {
	rep.Rows = make([]MeshRow, 0, len(metrics)*len(base.Pairs)+len(metrics))
	both := make([]int, 0, len(metrics)*len(base.Pairs))
	for _, b := range base.Pairs {
		if !b.Measured() {
			continue
		}
		n, ok := mm.take(b, cur)
		for _, m := range metrics {
			row := MeshRow{From: mm.baseNames[b.From], To: mm.baseNames[b.To], Row: Row{QPs: 1, Metric: m, Base: meshFigure(b, m), BaseN: 1, Verdict: Missing}}
			if ok {
				row.New, row.NewN = meshFigure(n, m), 1
				row.DeltaPct = 100 * (row.New - row.Base) / row.Base
				both = append(both, len(rep.Rows))
			}
			rep.Rows = append(rep.Rows, row)
		}
	}
	return both
}

func meshFigure(p results.MeshPair, m Metric) float64 {
	switch m {
	case LatP50:
		return p.LatP50us
	case LatP99:
		return p.LatP99us
	}
	return p.BWGbps
}

// judgeAcross judges the rows in both, and adds the median rows, with each
// metric's spread of the log change over the directions.
func judgeAcross(rep *MeshReport, both []int, metrics []Metric, o Options) {
	rep.Family = len(both) + len(metrics)
	a := o.alpha() / float64(rep.Family)
	bounds := make([]float64, 2*rep.Family)
	bound := func(r *Row, iv interval) {
		bounds[0], bounds[1] = 100*iv.lo, 100*iv.hi
		r.CILowPct, r.CIHighPct, r.NoiseAware, r.Noise = &bounds[0], &bounds[1], true, AcrossDirections
		bounds = bounds[2:]
		r.Verdict = judge(iv, r.Metric.good(), o.Threshold)
	}
	for _, m := range metrics {
		idx := make([]int, 0, len(both)/len(metrics))
		for _, i := range both {
			if rep.Rows[i].Metric == m {
				idx = append(idx, i)
			}
		}
		logs := make([]float64, len(idx))
		for j, i := range idx {
			logs[j] = math.Log(rep.Rows[i].New / rep.Rows[i].Base)
		}
		sorted := slices.Clone(logs)
		slices.Sort(sorted)
		med := stat.Quantile(0.5, stat.Empirical, sorted, nil)
		dev := make([]float64, len(sorted))
		for j, x := range sorted {
			dev[j] = math.Abs(x - med)
		}
		slices.Sort(dev)
		// Each side's figure carries at least the resolution's spread.
		sigma := math.Max(madToSigma*stat.Quantile(0.5, stat.Empirical, dev, nil), math.Sqrt2*Resolution)
		q := studentQ(1-a, madDF(len(logs)))
		span := func(center, h float64) interval {
			return interval{change: math.Expm1(center), lo: math.Expm1(center - h), hi: math.Expm1(center + h)}
		}
		for j, i := range idx {
			bound(&rep.Rows[i].Row, span(logs[j], q*sigma))
		}
		// Base and New stay 0: the row is a change, and the medians of each
		// side's figures would cost two more sorts of a million values.
		all := MeshRow{From: AllDirections, To: AllDirections, Row: Row{QPs: 1, Metric: m, BaseN: len(idx), NewN: len(idx)}}
		all.DeltaPct = 100 * math.Expm1(med)
		bound(&all.Row, span(med, q*medianSE*sigma/math.Sqrt(float64(len(logs)))))
		rep.Rows = append(rep.Rows, all)
	}
}

func distinctHosts(m *results.Mesh) bool {
	seen := map[string]bool{}
	for _, r := range m.Ranks {
		if r.Host == "" || seen[r.Host] {
			return false
		}
		seen[r.Host] = true
	}
	return true
}
